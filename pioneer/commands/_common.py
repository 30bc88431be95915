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
    from ..compile.inputs import InputText, PromptCompileInput
    from ..history.sql_store import SqlStore

__all__ = [
    "add_compiler_options",
    "add_config_option",
    "add_store_options",
    "add_var_option",
    "make_compiler",
    "make_settings",
    "open_command_store",
    "store_path",
    "with_vars",
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


def add_var_option(parser: argparse.ArgumentParser) -> None:
    """--var NAME=VALUE, repeatable."""
    parser.add_argument(
        "--var", action="append", default=[], metavar="NAME=VALUE",
        help="the value of an input the profile declares, read as its declared type "
        "(repeatable; wins over the input file's inputs)")


def with_vars(compiler: PromptCompiler, compile_input: PromptCompileInput,
              pairs: list[str], source: InputText | None = None, *,
              allow_missing: bool = False) -> PromptCompileInput:
    """``compile_input`` with each ``--var NAME=VALUE`` in its ``inputs``, every input
    checked against the declarations of its profile; each problem is located at its
    ``--var`` or at its line of the input file ``source``. With ``allow_missing``, an
    input without a default may be left out (the budget gate gives it an example)."""
    from ..compile.declared import inputs_error, not_declared, parse_var, resolve_inputs
    from ..errors import Problem, format_path

    if not pairs and not compile_input.inputs:
        return compile_input  # only a missing input can be wrong: the compile says so
    profile = compiler.load_profile(compile_input.profile).spec
    values = dict(compile_input.inputs)
    from_var: set[str] = set()
    failed: set[str] = set()  # the paths of the inputs whose --var was not read
    problems: list[Problem] = []
    for pair in pairs:
        name, equals, text = pair.partition("=")
        spec = profile.inputs.get(name)
        if not equals or not name:
            problems.append(Problem(f'expected NAME=VALUE, got "{pair}"', path="--var"))
        elif spec is None:
            problems.append(Problem(not_declared(name, profile.inputs, profile.name),
                                    path=f"--var {name}"))
        else:
            from_var.add(name)
            try:
                values[name] = parse_var(spec, name, text)
            except ValueError as error:
                problems.append(Problem(str(error), path=f"--var {name}"))
                values.pop(name, None)
                failed.add(format_path(["inputs", name]))

    if allow_missing:
        failed |= {format_path(["inputs", name]) for name, spec in profile.inputs.items()
                   if name not in values and spec.default is None}

    def locate(name: str | None) -> tuple[str | None, int | None, str]:
        if name in from_var:
            return None, None, f"--var {name}"
        path = format_path(["inputs", name] if name is not None else ["inputs"])
        if source is None:
            return None, None, path
        return source.file, source.line(["inputs", name]) if name is not None else None, path

    problems += [problem for problem in resolve_inputs(profile.inputs, values,
                                                       profile=profile.name, locate=locate)[1]
                 if problem.path not in failed]
    if problems:
        raise inputs_error(problems, profile.name)
    return compile_input.model_copy(update={"inputs": values})
