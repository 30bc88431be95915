"""``pioneer check``: validate profiles and their templates, listing every problem.

Every profile is loaded and each of its sections rendered against a representative input
(:meth:`~pioneer.compile.compiler.PromptCompiler.check`), so what a compile would find
is found here; every problem of every profile is listed, then one footer
``error: N problems``. Warnings (a derived profile that changes a base section's title
without saying so) never fail the check.

A profile named by its path is checked with the ``pioneer.toml`` found from its own folder
upwards (unless ``--config`` or ``PIONEER_CONFIG`` names one), so
``pioneer check /repo/profiles/bot.toml`` reads ``/repo/pioneer.toml`` from anywhere.
``--format`` says how the result is printed: ``text`` (the default), ``json`` (one
object: problems, warnings, token counts) or ``github``
(a workflow command per problem, which a GitHub Actions job shows as an annotation of
the pull request's file and line: docs/cli.md, "pioneer check in CI").
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..compile.inputs import PromptCompileInput, read_compile_input
from ..compile.profile import is_profile_path
from ..errors import MAX_SHOWN, Problem, counted, report_lines
from ..settings import find_config
from ._common import add_compiler_options, add_var_option, make_compiler, with_vars

if TYPE_CHECKING:
    from ..compile.compiler import PromptCompiler
    from ..review.gate import GateResult

NAME = "check"
HELP = "validate profiles and templates (every problem listed)"
FORMATS = ("text", "json", "github")


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``check``."""
    parser.add_argument("profiles", nargs="*", metavar="PROFILE",
                        help="profiles to check, by name or path (default: every profile on "
                        "the search path)")
    parser.add_argument("--max-tokens", type=int, metavar="N",
                        help="budget gate: fail when a compiled prompt has more cl100k tokens")
    parser.add_argument("--input", metavar="FILE",
                        help="compile input for the budget gate (default: an empty turn; "
                        "- reads standard input)")
    add_var_option(parser)
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json (problems, warnings, token counts) or "
                        "github (an annotation per problem, for GitHub Actions)")
    parser.add_argument("--json", action="store_true",
                        help="deprecated: use --format json (removed in the next release)")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load each profile; print the problems and exit 1 when there are any."""
    form = args.format
    if args.json:  # the one spelling is --format json; --json stays for one release
        print("warning: check --json is deprecated and goes in the next release; "
              "use --format json", file=err)
        form = "json"
    checked = _compilers(args)
    names = [name for _, name in checked]
    problems: list[tuple[str, Problem]] = []
    warnings: list[tuple[str, Problem]] = []
    for compiler, name in checked:
        errors = compiler.check([name])
        problems += [(name, problem) for error in errors for problem in error.problems]
        if not errors:  # a base's warning is said once, not again for each profile on it
            warnings += [(name, problem) for problem in compiler.warnings(name)
                         if problem not in {seen for _, seen in warnings}]
    gated: list[GateResult] = []
    if not problems:
        from ..review.gate import gate_profiles  # the compile and the token counter

        turn, source = (read_compile_input(args.input) if args.input
                        else (PromptCompileInput(), None))
        for compiler, name in checked:
            given = turn if turn.workspace_root is not None else turn.model_copy(
                update={"workspace_root": compiler.settings.home})
            given = with_vars(compiler, given.model_copy(update={"profile": name}), args.var,
                              source, allow_missing=True)
            gated += gate_profiles(compiler, [name], given, max_tokens=args.max_tokens,
                                   every=args.input is not None)
        problems = [(result.profile, problem) for result in gated for problem in result.problems]
    if form == "json":
        out.write(json.dumps(_document(names, problems, warnings, gated), indent=2,
                             ensure_ascii=False) + "\n")
    else:
        for result in gated:
            print(result.summary(), file=out)
        if form == "github":
            _annotate(out, warnings, problems)
        else:
            for _, problem in warnings:
                print(f"warning: {problem.render()}", file=err)
            for line in report_lines([problem for _, problem in problems]):
                print(line, file=err)
    if problems:
        failing = len({profile for profile, _ in problems})
        why = ": token budgets exceeded" if gated else ""
        if form != "json":
            print(f"error: {counted(len(problems), 'problem')} in "
                  f"{counted(failing, 'profile')}{why}", file=err)
        return 1
    if form != "json":
        print(f"ok: {counted(len(names), 'profile')} ({', '.join(names)})", file=out)
    return 0


def _compilers(args: argparse.Namespace) -> list[tuple[PromptCompiler, str]]:
    """Each profile to check with the compiler to check it with: a profile given by its
    path gets the deployment file found from its own folder upwards, the others the one
    found from the working folder (one compiler for each file found)."""
    by_config: dict[Path | None, PromptCompiler] = {}

    def compiler_for(folder: Path | None) -> PromptCompiler:
        found = find_config(folder)
        if found is not None:
            found = found.resolve()
        if found not in by_config:
            by_config[found] = make_compiler(args, count_tokens=False, discover_from=folder)
        return by_config[found]

    if not args.profiles:
        compiler = compiler_for(None)
        return [(compiler, name) for name in sorted(compiler.available_profiles())]
    return [(compiler_for(Path(name).parent if is_profile_path(name) else None), name)
            for name in args.profiles]


def _problem_json(profile: str, problem: Problem) -> dict[str, Any]:
    return {"profile": profile, "file": problem.file, "line": problem.line,
            "column": problem.column, "path": problem.path, "message": problem.message,
            "context": problem.context}


def _document(names: list[str], problems: list[tuple[str, Problem]],
              warnings: list[tuple[str, Problem]], gated: list[GateResult]) -> dict[str, Any]:
    return {
        "ok": not problems,
        "profiles": names,
        "problems": [_problem_json(profile, problem) for profile, problem in problems],
        "warnings": [_problem_json(profile, problem) for profile, problem in warnings],
        "tokens": [{"profile": r.profile, "stable": r.stable_tokens, "dynamic": r.dynamic_tokens,
                    "limit": r.limit, "assumed_inputs": dict(r.assumed)} for r in gated],
    }


# -- GitHub Actions workflow commands (docs/cli.md, "pioneer check in CI") --------------


def _annotate(out: TextIO, warnings: list[tuple[str, Problem]],
              problems: list[tuple[str, Problem]]) -> None:
    """One ``::warning`` or ``::error`` command a line, the first MAX_SHOWN problems."""
    for _, problem in warnings:
        print(annotation("warning", problem), file=out)
    for _, problem in problems[:MAX_SHOWN]:
        print(annotation("error", problem), file=out)
    if len(problems) > MAX_SHOWN:
        more = counted(len(problems) - MAX_SHOWN, "more problem")
        print(annotation("error", Problem(f"and {more}")), file=out)


def annotation(level: str, problem: Problem) -> str:
    """``::error file=F,line=L,col=C::message``: the problem as a workflow command. The
    file is relative to the working folder (the repository's root, in a job) when it is
    inside it; the message holds the JSON path and the context, as the text output."""
    properties = []
    if problem.file:
        properties.append(f"file={_property(_relative(problem.file))}")
        if problem.line is not None:
            properties.append(f"line={problem.line}")
            if problem.column is not None:
                properties.append(f"col={problem.column}")
    message = f"{problem.path}: {problem.message}" if problem.path else problem.message
    if problem.context:
        message += f"\n{problem.context}"
    return f"::{level} {','.join(properties)}::{_data(message)}" if properties else \
        f"::{level}::{_data(message)}"


def _relative(file: str) -> str:
    path = Path(file)
    if not path.is_absolute():
        return file
    relative = os.path.relpath(path)
    return file if relative.startswith("..") else Path(relative).as_posix()


def _data(text: str) -> str:
    """A command's message: ``%``, carriage return and newline percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A command's property value: as the message, and ``:`` and ``,`` too."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")
