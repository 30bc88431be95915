"""``pioneer check``: validate profiles and their templates, listing every problem."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..compile.inputs import PromptCompileInput, load_compile_input
from ..errors import counted
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
    parser.add_argument("--input", type=Path, metavar="FILE",
                        help="compile input for the budget gate (default: an empty turn)")
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
    turn = load_compile_input(args.input) if args.input else PromptCompileInput()
    if turn.workspace_root is None:
        turn = turn.model_copy(update={"workspace_root": compiler.settings.home})
    gated = gate_profiles(compiler, names, turn, max_tokens=args.max_tokens,
                          every=args.input is not None)
    for result in gated:
        print(result.summary(), file=out)
        for problem in result.problems:
            print(problem.render(), file=err)
    over = sum(len(result.problems) for result in gated)
    if over:
        print(f"error: {counted(over, 'token budget')} exceeded", file=err)
        return 1
    print(f"ok: {counted(len(names), 'profile')} ({', '.join(names)})", file=out)
    return 0
