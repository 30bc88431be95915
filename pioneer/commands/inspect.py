"""``pioneer inspect``: one row per section (kept, truncated or omitted, and why), or the
context map of the whole request (``--html``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..compile.compiler import PromptCompiler
from ..compile.inputs import PromptCompileInput, load_compile_input
from ..errors import UsageError
from ..review.inspect import inspect_prompt, render_json, render_table
from ..terminal import painter
from ._common import add_compiler_options, make_compiler
from ._provider import PROVIDER_NAMES

NAME = "inspect"
HELP = "show each section's stability, chars, tokens, source and why it was cut or omitted"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``inspect``."""
    parser.add_argument("--profile", help="profile name or path (default: the input's, else full)")
    parser.add_argument("--input", type=Path, metavar="FILE",
                        help="compile input (JSON or TOML; - reads standard input)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON instead of a table (with --html: the map's data)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write the context map of the whole request as one HTML page")
    parser.add_argument("--provider", choices=list(PROVIDER_NAMES), default="anthropic",
                        help="provider API the map lays the request out for (default anthropic)")
    parser.add_argument("--model", help="model name for the map (default: the messages file's)")
    parser.add_argument("--messages", type=Path, metavar="FILE",
                        help="conversation and tools for the map, as for compile --messages")
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
    if args.html is not None:
        return _context_map(args, compiler, compile_input, out, err)
    if args.messages is not None or args.model:
        raise UsageError("--model and --messages need --html")
    inspection = inspect_prompt(compiler, compile_input)
    text = render_json(inspection) if args.json else render_table(inspection, painter(out))
    out.write(text + "\n")
    return 0


def _context_map(args: argparse.Namespace, compiler: PromptCompiler,
                 compile_input: PromptCompileInput, out: TextIO, err: TextIO) -> int:
    from ..providers.request import ChatRequest, load_chat_request
    from ..review import context_map

    fields: dict[str, object] = {"compiled_prompt": None}
    if args.model:
        fields["model"] = args.model
    if args.messages is not None:
        request = load_chat_request(args.messages, **fields)
    else:
        request = ChatRequest(model=args.model or "unspecified")
    # The messages are read first: the refs they carry count towards the Artifact
    # References policy, as they do for the request compile --provider prints.
    payload = compiler.compile(compile_input,
                               history=(message.content for message in request.messages))
    request = request.model_copy(update={"compiled_prompt": payload})
    settings = compiler.settings
    cmap = context_map.map_request(
        compiler, request, args.provider, profile=compile_input.profile,
        budget=(settings.max_context_tokens, settings.response_reserve_tokens))
    context_map.write_page(args.html, cmap)
    if args.json:
        out.write(context_map.render_json(cmap))
    totals = cmap.totals()
    read = (cmap.plan or totals["by_cache"])["read"]
    print(f"wrote {args.html}: {len(cmap.blocks)} blocks, {totals['tokens']} tokens "
          f"({read} expected from cache)", file=err)
    return 0
