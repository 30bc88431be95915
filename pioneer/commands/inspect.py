"""``pioneer inspect``: one row per section (kept, truncated or omitted, and why)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..compile.inputs import PromptCompileInput, load_compile_input
from ..review.inspect import inspect_prompt, render_json, render_table
from ..terminal import painter
from ._common import add_compiler_options, make_compiler

NAME = "inspect"
HELP = "show each section's stability, chars, tokens, source and why it was cut or omitted"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``inspect``."""
    parser.add_argument("--profile", help="profile name or path (default: the input's, else full)")
    parser.add_argument("--input", type=Path, metavar="FILE", help="compile input (JSON or TOML)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Compile without touching the runtime home, then explain every section."""
    compiler = make_compiler(args)
    compile_input = load_compile_input(args.input) if args.input else PromptCompileInput()
    updates: dict[str, object] = {}
    if args.profile:
        updates["profile"] = args.profile
    if compile_input.workspace_root is None:
        updates["workspace_root"] = compiler.settings.home
    compile_input = compile_input.model_copy(update=updates)
    inspection = inspect_prompt(compiler, compile_input)
    text = render_json(inspection) if args.json else render_table(inspection, painter(out))
    out.write(text + "\n")
    return 0
