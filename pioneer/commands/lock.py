"""``pioneer lock``: pin profiles and their templates by fingerprint in a TOML lock file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..errors import counted
from ..review.lock import (
    DEFAULT_LOCK_FILE,
    LockFile,
    lock_key,
    locked_profile,
    read_lock,
    write_lock,
)
from ._common import add_compiler_options, make_compiler

NAME = "lock"
HELP = "pin profiles and their templates by fingerprint in a TOML lock file"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``lock``."""
    parser.add_argument("--profile", action="append", metavar="NAME",
                        help="profile to lock (repeatable; default: every profile on the "
                        "search path, replacing the whole lock)")
    parser.add_argument("--lock", type=Path, default=Path(DEFAULT_LOCK_FILE), metavar="FILE",
                        help=f"lock file (default: ./{DEFAULT_LOCK_FILE})")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load each profile, then write (or update) the lock file."""
    compiler = make_compiler(args, count_tokens=False)
    names: list[str] = args.profile or sorted(compiler.available_profiles())
    previous = read_lock(args.lock).profiles if args.lock.exists() else {}  # never clobber
    kept = previous if args.profile else {}  # a full lock drops profiles that are gone
    errors = compiler.check(names)
    for error in errors:
        print(error.render(), file=err)
    if errors:
        return 1
    locked = {lock_key(name): locked_profile(compiler.load_profile(name)) for name in names}
    write_lock(args.lock, LockFile(version=1, profiles={**kept, **locked}))
    for key, entry in locked.items():
        files, templates = counted(len(entry.files), "profile file"), counted(
            len(entry.templates), "template"
        )
        print(f"locked {key}: fingerprint {entry.fingerprint[:12]} ({files}, {templates})",
              file=out)
    print(f"wrote {args.lock}", file=out)
    return 0
