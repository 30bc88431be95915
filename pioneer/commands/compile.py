"""``pioneer compile``: compile one prompt and print it (text, payload JSON or manifest)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..compile.bootstrap import ensure_runtime_home
from ..compile.inputs import PromptCompileInput, read_compile_input
from ._common import add_compiler_options, add_var_option, make_compiler, with_vars
from ._provider import add_provider_options, provider_output, provider_request

NAME = "compile"
HELP = "compile a prompt and print it"
#: :data:`pioneer.review.lock.DEFAULT_LOCK_FILE`, written out so that only ``--locked`` imports the
#: lock module (a test keeps the two equal).
DEFAULT_LOCK_FILE = "pioneer.lock"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``compile``."""
    parser.add_argument("--profile", help="profile name or path (default: the input's, else full)")
    parser.add_argument(
        "--input", type=Path, metavar="FILE",
        help="compile input as JSON or TOML (see schemas/compile_input.schema.json); "
        "- reads standard input",
    )
    add_var_option(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the whole payload as JSON")
    output.add_argument("--manifest", action="store_true", help="print the manifest as JSON")
    add_provider_options(parser, output)
    parser.add_argument(
        "--runtime-block", action="store_true",
        help="put the runtime block (local date and time, cut to the clock_granularity "
        "setting, and the OS) in extra_system, before any extra_system of the input",
    )
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", action="store_true",
                       help="do not print the compile's warnings on stderr")
    noise.add_argument("-v", "--verbose", action="store_true",
                       help="also print the compile's info diagnostics (a missing optional "
                       "USER.md) on stderr")
    parser.add_argument("--locked", action="store_true",
                        help="refuse to compile when the profile's sources differ from the lock")
    parser.add_argument("--lock", type=Path, default=Path(DEFAULT_LOCK_FILE), metavar="FILE",
                        help=f"lock file for --locked (default: ./{DEFAULT_LOCK_FILE})")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Ensure the runtime home like a gateway start, compile, print."""
    text_only = not (args.json or args.manifest)
    compiler = make_compiler(args, count_tokens=not text_only)
    compile_input, source = (read_compile_input(args.input) if args.input
                             else (PromptCompileInput(), None))
    updates: dict[str, object] = {}
    if args.profile:
        updates["profile"] = args.profile
    if compile_input.workspace_root is None:
        ensure_runtime_home(compiler.settings.home)
        updates["workspace_root"] = compiler.settings.home
    if args.runtime_block:
        from ..sections.runtime import runtime_block

        updates["extra_system"] = "\n\n".join(
            text for text in (runtime_block(compiler), compile_input.extra_system) if text
        )
    if updates:
        compile_input = PromptCompileInput.model_validate(
            {**compile_input.model_dump(exclude_unset=True), **updates}
        )
    compile_input = with_vars(compiler, compile_input, args.var, source)
    if args.locked:
        from ..review.lock import check_lock

        check_lock(compile_input.profile, compiler.load_profile(compile_input.profile), args.lock)
    request = provider_request(args)
    payload = compiler.compile(compile_input, history=None if request is None else (
        message.content for message in request.messages))
    body = provider_output(args, request, payload, compiler.settings)
    if body is not None:
        out.write(body)
    elif args.json:
        out.write(payload.to_json() + "\n")
    elif args.manifest:
        out.write(payload.manifest.to_json() + "\n")
    else:
        out.write(payload.full_system_text + "\n")
    if not args.quiet:  # after the output: a failure above is not mixed with warnings
        for diagnostic in payload.manifest.diagnostics:
            if diagnostic.level == "warning" or args.verbose:
                print(f"{diagnostic.level}: {diagnostic.message} [{diagnostic.code}]", file=err)
    return 0
