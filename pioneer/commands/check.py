"""``pioneer check``: validate profiles and their templates, listing every problem.

Every profile is loaded and each of its sections rendered against a representative input
(:meth:`~pioneer.compile.compiler.PromptCompiler.trial`), so what a compile would find
is found here; every problem of every profile is listed, then one footer
``error: N problems``. Warnings (a derived profile that changes a base section's title
without saying so) never fail the check. ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ..compile.inputs import PromptCompileInput, load_compile_input
from ..errors import Problem, counted, report_lines
from ..review.gate import gate_profiles
from ._common import add_compiler_options, make_compiler

NAME = "check"
HELP = "validate profiles and templates (every problem listed)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``check``."""
    parser.add_argument("profiles", nargs="*", metavar="PROFILE",
                        help="profiles to check (default: every profile on the search path)")
    parser.add_argument("--max-tokens", type=int, metavar="N",
                        help="budget gate: fail when a compiled prompt has more cl100k tokens")
    parser.add_argument("--input", metavar="FILE",
                        help="compile input for the budget gate (default: an empty turn; "
                        "- reads standard input)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON (problems, warnings, token counts)")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Load each profile; print problems to stderr and exit 1 when there are any."""
    compiler = make_compiler(args, count_tokens=False)
    names = args.profiles or sorted(compiler.available_profiles())
    problems: list[tuple[str, Problem]] = []
    warnings: list[tuple[str, Problem]] = []
    for name in names:
        errors = compiler.check([name])
        problems += [(name, problem) for error in errors for problem in error.problems]
        if not errors:  # a base's warning is said once, not again for each profile on it
            warnings += [(name, problem) for problem in compiler.load_profile(name).warnings
                         if problem not in {seen for _, seen in warnings}]
    gated = []
    if not problems:
        turn = load_compile_input(args.input) if args.input else PromptCompileInput()
        if turn.workspace_root is None:
            turn = turn.model_copy(update={"workspace_root": compiler.settings.home})
        gated = gate_profiles(compiler, names, turn, max_tokens=args.max_tokens,
                              every=args.input is not None)
        problems = [(result.profile, problem) for result in gated for problem in result.problems]
    if args.json:
        out.write(json.dumps(_document(names, problems, warnings, gated), indent=2,
                             ensure_ascii=False) + "\n")
    else:
        for result in gated:
            print(result.summary(), file=out)
        for _, problem in warnings:
            print(f"warning: {problem.render()}", file=err)
        for line in report_lines([problem for _, problem in problems]):
            print(line, file=err)
    if problems:
        failing = len({profile for profile, _ in problems})
        why = ": token budgets exceeded" if gated else ""
        if not args.json:
            print(f"error: {counted(len(problems), 'problem')} in "
                  f"{counted(failing, 'profile')}{why}", file=err)
        return 1
    if not args.json:
        print(f"ok: {counted(len(names), 'profile')} ({', '.join(names)})", file=out)
    return 0


def _problem_json(profile: str, problem: Problem) -> dict[str, Any]:
    return {"profile": profile, "file": problem.file, "line": problem.line,
            "column": problem.column, "path": problem.path, "message": problem.message,
            "context": problem.context}


def _document(names: list[str], problems: list[tuple[str, Problem]],
              warnings: list[tuple[str, Problem]], gated: list[Any]) -> dict[str, Any]:
    return {
        "ok": not problems,
        "profiles": names,
        "problems": [_problem_json(profile, problem) for profile, problem in problems],
        "warnings": [_problem_json(profile, problem) for profile, problem in warnings],
        "tokens": [{"profile": r.profile, "stable": r.stable_tokens, "dynamic": r.dynamic_tokens,
                    "limit": r.limit} for r in gated],
    }
