"""``pioneer diff``: compare two manifests (or payloads) and say whether the cache breaks;
``--text`` shows how each changed section's text changed (two payloads)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..errors import UsageError
from ..review.diff import diff_manifests, read_compiled, render_json, render_text, text_diffs
from ..review.terminal import painter

NAME = "diff"
HELP = "compare two manifests or payloads: changed sections and whether the prompt cache breaks"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``diff``."""
    parser.add_argument("a", type=Path, metavar="A.json",
                        help="the earlier manifest or payload (- reads standard input)")
    parser.add_argument("b", type=Path, metavar="B.json",
                        help="the later manifest or payload (- reads standard input)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--text", action="store_true",
                        help="also show a unified diff of each changed section's text (both "
                        "files must be payloads: compile --json)")
    parser.add_argument("--fail-on-cache-break", action="store_true",
                        help="exit 1 when the stable prefix changed (for CI)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the differences; exit 1 only for a cache break under --fail-on-cache-break."""
    if str(args.a) == str(args.b) == "-":
        raise UsageError("only one of A.json and B.json can be - (standard input)")
    a, b = read_compiled(args.a), read_compiled(args.b)
    diff = diff_manifests(a.manifest, b.manifest)
    texts = text_diffs(diff, a, b) if args.text else None
    text = render_json(diff, texts) if args.json else render_text(
        diff, (a.name, b.name), texts, painter(out))
    out.write(text + "\n")
    return 1 if args.fail_on_cache_break and diff.stable_changed else 0
