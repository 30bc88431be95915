"""``pioneer check``: validate profiles and their templates, listing every problem."""

from __future__ import annotations

import argparse
from typing import TextIO

from ._common import add_compiler_options, make_compiler

NAME = "check"
HELP = "validate profiles and templates (every problem listed)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``check``."""
    parser.add_argument("profiles", nargs="*", metavar="PROFILE",
                        help="profiles to check (default: every profile on the search path)")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load each profile; print problems to stderr and exit 1 when there are any."""
    compiler = make_compiler(args, count_tokens=False)
    names = args.profiles or sorted(compiler.available_profiles())
    errors = compiler.check(names)
    for error in errors:
        print(error.render(), file=err)
    if errors:
        return 1
    print(f"ok: {len(names)} profile{'s' if len(names) != 1 else ''} ({', '.join(names)})", file=out)
    return 0
