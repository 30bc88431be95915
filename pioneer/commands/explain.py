"""``pioneer explain``: walk the debugging path of a stored turn, from its record."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..audit.explain import explain_turn, render_json, render_text
from ..audit.store import TurnRecords
from ..errors import InputError, Problem
from ._common import add_store_options, open_command_store

NAME = "explain"
HELP = ("explain a stored turn: mode, history, manifest, skills, memory, tools per round, "
        "permissions, provider mapping")


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``explain``."""
    parser.add_argument("turn", metavar="TURN", help="turn id")
    add_store_options(parser)
    parser.add_argument("--json", action="store_true", help="print the steps as JSON")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Open the store read-only (never creating it), read the turn's record, print each
    step."""
    with open_command_store(args) as store:
        record = TurnRecords(store).get(args.turn)
        where = store.where
    if record is None:
        raise InputError(Problem(f"turn {args.turn!r} has no stored record (a turn is "
                                 "recorded when its agent loop saves a TurnRecord)",
                                 file=where))
    explanation = explain_turn(record)
    out.write(render_json(explanation) if args.json else render_text(explanation))
    return 0
