"""``pioneer explain``: walk the debugging path of a stored turn, from its record, or draw
its context map (``--html``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..audit.explain import explain_turn, render_json, render_text
from ..audit.store import TurnRecords
from ..errors import InputError, Problem, counted
from ._common import add_store_options, make_settings, open_command_store

NAME = "explain"
HELP = ("explain a stored turn: mode, history, manifest, skills, memory, tools per round, "
        "permissions, provider mapping")


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``explain``."""
    parser.add_argument("turn", metavar="TURN", help="turn id")
    add_store_options(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the steps as JSON (with --html: the map's data)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write the turn's context map, with one row per provider round, "
                        "as one HTML page")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Open the store read-only (never creating it), read the turn's record, print each
    step (or write its context map)."""
    settings = make_settings(args)
    with open_command_store(args, settings) as store:
        record = TurnRecords(store).get(args.turn)
        where = store.where
    if record is None:
        raise InputError(Problem(f"turn {args.turn!r} has no stored record (a turn is "
                                 "recorded when its agent loop saves a TurnRecord)",
                                 file=where))
    if args.html is not None:
        from ..providers.models import load_model_table, model_table, using_model_table
        from ..review import context_map, map_page

        table = load_model_table(settings.model_path) if settings.model_path else model_table()
        with using_model_table(table):  # the window of the turn's model
            cmap = context_map.map_turn(
                record, budget=(settings.max_context_tokens, settings.response_reserve_tokens))
        map_page.write_page(args.html, map_page.render_html(cmap))
        if args.json:
            out.write(context_map.render_json(cmap))
        print(f"wrote {args.html}: {counted(len(cmap.blocks), 'block')}, "
              f"{counted(len(cmap.rounds), 'provider round')}", file=err)
        return 0
    explanation = explain_turn(record)
    out.write(render_json(explanation) if args.json else render_text(explanation))
    return 0
