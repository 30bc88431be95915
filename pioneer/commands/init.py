"""``pioneer init``: create the runtime home and seed SOUL.md and IDENTITY.md."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..compile.bootstrap import ensure_runtime_home
from ._common import add_config_option, make_settings

NAME = "init"
HELP = "create the runtime home and seed SOUL.md and IDENTITY.md (never overwrites)"
#: The identity file the built-in profiles read but ``init`` never writes: it is the
#: user's to write, and a compile without it is complete.
OPTIONAL_FILE = "USER.md"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``init``."""
    parser.add_argument("--home", help="runtime home (default: $PIONEER_HOME or ~/.pioneer)")
    add_config_option(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Seed the home; say what was created, what was already there, and where the
    optional USER.md goes."""
    settings = make_settings(args)
    result = ensure_runtime_home(settings.home)
    print(f"runtime home {settings.home}", file=out)
    for path in result.created:
        print(f"created  {path}", file=out)
    for path in result.existing:
        print(f"kept     {path} (already exists)", file=out)
    optional = settings.home / OPTIONAL_FILE
    if optional.exists() or optional.is_symlink():
        print(f"kept     {optional} (optional, already exists)", file=out)
    else:
        print(f"optional {optional} (not created: write about the user there, for the "
              "User Persona section; compiles work without it)", file=out)
    return 0
