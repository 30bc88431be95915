"""``pioneer init``: create the runtime home and seed SOUL.md and IDENTITY.md."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..compile.bootstrap import ensure_runtime_home
from ._common import add_config_option, make_settings

NAME = "init"
HELP = "create the runtime home and seed SOUL.md and IDENTITY.md (never overwrites)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``init``."""
    parser.add_argument("--home", help="runtime home (default: $PIONEER_HOME or ~/.pioneer)")
    add_config_option(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Seed the home and say what was created and what was already there."""
    settings = make_settings(args)
    result = ensure_runtime_home(settings.home)
    for path in result.created:
        print(f"created  {path}", file=out)
    for path in result.existing:
        print(f"kept     {path} (already exists)", file=out)
    return 0
