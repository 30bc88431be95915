"""``pioneer explain``: walk the debugging path of a stored turn, from its record."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..audit.explain import explain_turn, render_json, render_text
from ..errors import InputError, Problem
from ..history.sqlite_store import SqliteStore
from ._common import add_store_options, store_path

NAME = "explain"
HELP = ("explain a stored turn: mode, history, manifest, skills, memory, tools per round, "
        "permissions, provider mapping")


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``explain``."""
    parser.add_argument("turn", metavar="TURN", help="turn id")
    add_store_options(parser)
    parser.add_argument("--json", action="store_true", help="print the steps as JSON")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Open the store (never creating it), read the turn's record, print each step."""
    path = store_path(args)
    with SqliteStore(path, create=False) as store:
        record = store.get_turn_record(args.turn)
    if record is None:
        raise InputError(Problem(f"turn {args.turn!r} has no stored record (a turn is "
                                 "recorded when its agent loop saves a TurnRecord)",
                                 file=str(path)))
    explanation = explain_turn(record)
    out.write(render_json(explanation) if args.json else render_text(explanation))
    return 0
