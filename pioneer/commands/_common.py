"""Options and helpers shared by several subcommands.

The compiler and the history stage are imported by the helpers that use them, so a
command that needs one of them (``compile`` the compiler, ``history`` the store) does
not import the other at start-up.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..settings import PioneerSettings

if TYPE_CHECKING:
    from ..compile.compiler import PromptCompiler
    from ..history.sql_store import SqlStore

__all__ = [
    "add_compiler_options",
    "add_config_option",
    "add_store_options",
    "make_compiler",
    "make_settings",
    "open_command_store",
    "store_path",
]


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """--config FILE."""
    parser.add_argument(
        "--config", type=Path, metavar="FILE",
        help="deployment file (default: the first pioneer.toml in the working folder or a "
        "parent, or the file $PIONEER_CONFIG names)",
    )


def add_compiler_options(parser: argparse.ArgumentParser) -> None:
    """--home, --profile-path, --template-path and --config."""
    add_config_option(parser)
    parser.add_argument(
        "--home", type=Path, help="runtime home (default: $PIONEER_HOME or ~/.pioneer)"
    )
    parser.add_argument(
        "--profile-path",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="deployment profile folder (repeatable, searched first)",
    )
    parser.add_argument(
        "--template-path",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="deployment template folder (repeatable, searched first)",
    )


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """--db, --home and --config, for the commands that read a conversation store."""
    add_config_option(parser)
    parser.add_argument("--db", metavar="PATH|URL",
                        help="conversation store: an SQLite file or a postgresql:// URL "
                        "(default: store_url, else store_path or <home>/pioneer.db)")
    parser.add_argument("--home", type=Path,
                        help="runtime home (default: $PIONEER_HOME or ~/.pioneer)")


def store_path(args: argparse.Namespace,
               settings: PioneerSettings | None = None) -> str | os.PathLike[str]:
    """The store a command reads: ``--db``, else the settings' store URL or database."""
    from ..history.open import configured_store, is_store_url

    if args.db:
        return args.db if is_store_url(args.db) else Path(args.db)
    settings = settings or make_settings(args)
    return configured_store(settings)


def open_command_store(args: argparse.Namespace, settings: PioneerSettings | None = None, *,
                       write: bool = False) -> SqlStore:
    """The command's store: read-only unless the command writes (it never creates one);
    a PostgreSQL store has the settings' time limits."""
    from ..history.open import is_store_url, open_store

    target = store_path(args, settings)
    if settings is None and is_store_url(target):
        settings = make_settings(args)
    return open_store(target, read_only=not write, create=False, settings=settings)


def make_settings(args: argparse.Namespace, *,
                  discover_from: Path | None = None) -> PioneerSettings:
    """Settings from the environment and pioneer.toml (discovered from ``discover_from``,
    default the working folder), overridden by the command line."""
    overrides: dict[str, Any] = {}
    if getattr(args, "home", None) is not None:
        overrides["home"] = args.home
    if getattr(args, "profile_path", None):
        overrides["profile_path"] = args.profile_path
    if getattr(args, "template_path", None):
        overrides["template_path"] = args.template_path
    return PioneerSettings.load(getattr(args, "config", None), discover_from=discover_from,
                                **overrides)


def make_compiler(args: argparse.Namespace, *, count_tokens: bool = True,
                  discover_from: Path | None = None) -> PromptCompiler:
    """A compiler configured from the command line (``discover_from``: the folder the
    search for a ``pioneer.toml`` starts in, default the working folder)."""
    from ..compile.compiler import PromptCompiler

    return PromptCompiler(make_settings(args, discover_from=discover_from),
                          count_tokens=count_tokens)
