"""``pioneer diff``: compare two manifests (or payloads) and say whether the cache breaks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..errors import UsageError
from ..review.diff import diff_manifests, read_manifest, render_json, render_text

NAME = "diff"
HELP = "compare two manifests or payloads: changed sections and whether the prompt cache breaks"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``diff``."""
    parser.add_argument("a", type=Path, metavar="A.json",
                        help="the earlier manifest or payload (- reads standard input)")
    parser.add_argument("b", type=Path, metavar="B.json",
                        help="the later manifest or payload (- reads standard input)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--fail-on-cache-break", action="store_true",
                        help="exit 1 when the stable prefix changed (for CI)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the differences; exit 1 only for a cache break under --fail-on-cache-break."""
    if str(args.a) == str(args.b) == "-":
        raise UsageError("only one of A.json and B.json can be - (standard input)")
    diff = diff_manifests(read_manifest(args.a), read_manifest(args.b))
    names = tuple("<stdin>" if str(path) == "-" else str(path) for path in (args.a, args.b))
    text = render_json(diff) if args.json else render_text(diff, (names[0], names[1]))
    out.write(text + "\n")
    return 1 if args.fail_on_cache_break and diff.stable_changed else 0
