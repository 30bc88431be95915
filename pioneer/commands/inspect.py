"""``pioneer inspect``: one row per section (kept, truncated or omitted, and why), with
``--messages`` / ``--tools`` the rest of the request and the window by category, or the
context map of the whole request (``--html``, kept up to date with ``--watch``)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..compile.inputs import PromptCompileInput, read_compile_input
from ..documents import read_document
from ..errors import InputError, PioneerError, Problem, UsageError
from ..review.inspect import inspect_prompt, render_json, render_table
from ..review.terminal import painter
from ._common import add_compiler_options, add_var_option, make_compiler, with_vars
from ._provider import PROVIDER_NAMES

if TYPE_CHECKING:
    from ..compile.compiler import PromptCompiler
    from ..compile.manifest import CompiledPromptPayload
    from ..providers.request import ChatRequest
    from ..review.context_map import ContextMap
    from ..review.watch import Watched
    from ..settings import PioneerSettings

NAME = "inspect"
HELP = "show each section's stability, chars, tokens, source and why it was cut or omitted"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``inspect``."""
    parser.add_argument("--profile", help="profile name or path (default: the input's, else full)")
    parser.add_argument("--input", type=Path, metavar="FILE",
                        help="compile input (JSON or TOML; - reads standard input)")
    add_var_option(parser)
    parser.add_argument("--json", action="store_true",
                        help="print JSON instead of a table (with --html: the map's data)")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write the context map of the whole request as one HTML page")
    parser.add_argument("--watch", action="store_true",
                        help="with --html: rewrite the page whenever a profile, template, "
                        "identity file or input changes; the page reloads itself (Ctrl-C stops)")
    parser.add_argument("--provider", choices=list(PROVIDER_NAMES), default=PROVIDER_NAMES[0],
                        help="provider API the request is laid out for (default anthropic)")
    parser.add_argument("--model", help="model name (default: the messages file's)")
    parser.add_argument("--messages", type=Path, metavar="FILE",
                        help="conversation (and tools) of the request, as for compile --messages")
    parser.add_argument("--tools", type=Path, metavar="FILE",
                        help="tool definitions of the request as JSON (a list, as the tools "
                        "of a messages file); replaces the messages file's tools")
    add_compiler_options(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Compile without touching the runtime home, then explain every section."""
    if args.watch:
        return _watch(args, err)
    request = _request(args)
    compiler, compile_input = _setup(args)
    if args.html is not None:
        return _context_map(args, compiler, compile_input, request, out, err)
    if request is None:
        inspection = inspect_prompt(compiler, compile_input)
        text = render_json(inspection) if args.json else render_table(inspection, painter(out))
        out.write(text + "\n")
        return 0
    from ..review import context_map

    payload = _compile(compiler, compile_input, request)
    inspection = inspect_prompt(compiler, compile_input, payload=payload)
    cmap = _map(args, compiler, request, payload, compile_input.profile)
    if args.json:
        data = json.loads(render_json(inspection))
        data["request"] = context_map.as_data(cmap)
        out.write(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(render_table(inspection, painter(out)) + "\n\n"
                  + context_map.render_text(cmap, sections=False))
    return 0


def _setup(args: argparse.Namespace) -> tuple[PromptCompiler, PromptCompileInput]:
    compiler = make_compiler(args)
    compile_input, source = (read_compile_input(args.input) if args.input
                             else (PromptCompileInput(), None))
    updates: dict[str, object] = {}
    if args.profile:
        updates["profile"] = args.profile
    if compile_input.workspace_root is None:
        updates["workspace_root"] = compiler.settings.home
    return compiler, with_vars(compiler, compile_input.model_copy(update=updates), args.var,
                               source)


def _request(args: argparse.Namespace) -> ChatRequest | None:
    """The request around the prompt: ``--messages`` and ``--tools`` (with ``--model``),
    without the compiled prompt; None for the plain section table."""
    if args.messages is None and args.tools is None and args.html is None:
        if args.model:
            raise UsageError("--model needs --messages, --tools or --html")
        return None
    from ..providers.request import ChatRequest, parse_chat_request

    fields: dict[str, Any] = {}
    name = None
    if args.messages is not None:
        data, name = read_document(args.messages, "messages", "json")
        if isinstance(data, list):
            data = {"messages": data}
        if not isinstance(data, dict):
            raise InputError(Problem("expected a JSON object or a list of messages", file=name))
        fields.update(data)
    if args.tools is not None:
        tools, tools_name = read_document(args.tools, "tools", "json")
        if isinstance(tools, dict) and set(tools) == {"tools"}:
            tools = tools["tools"]
        if not isinstance(tools, list):
            raise InputError(Problem("expected a JSON list of tool definitions",
                                     file=tools_name))
        fields["tools"] = parse_chat_request({"model": "-", "tools": tools},
                                             file=tools_name).tools
    if args.model:
        fields["model"] = args.model
    if "model" not in fields:
        if name is not None:
            raise UsageError(f'--messages needs --model: {name} sets no "model"')
        if args.tools is not None:
            raise UsageError("--tools needs --model")
        from ..review.context_map import NO_MODEL

        fields["model"] = NO_MODEL
    return parse_chat_request({**fields, "compiled_prompt": None}, file=name) \
        if name is not None else ChatRequest(**fields)


def _compile(compiler: PromptCompiler, compile_input: PromptCompileInput,
             request: ChatRequest) -> CompiledPromptPayload:
    # The messages are read first: the refs they carry count towards the Artifact
    # References policy, as they do for the request compile --provider prints.
    return compiler.compile(compile_input,
                            history=(message.content for message in request.messages))


def _map(args: argparse.Namespace, compiler: PromptCompiler, request: ChatRequest,
         payload: CompiledPromptPayload, profile: str) -> ContextMap:
    from ..providers.models import load_model_table, model_table, using_model_table
    from ..review import context_map

    settings = compiler.settings
    # The window and the cache rules are the model table's, the deployment's rows over it.
    table = load_model_table(settings.model_path) if settings.model_path else model_table()
    with using_model_table(table):
        return context_map.map_request(
            compiler, request.model_copy(update={"compiled_prompt": payload}), args.provider,
            profile=profile,
            budget=(settings.max_context_tokens, _reserve(request, settings, args.provider)))


def _reserve(request: ChatRequest, settings: PioneerSettings, provider: str) -> int:
    """The reply's reserve: the request's max_tokens, else response_reserve_tokens."""
    from ..providers.window import reply_reserve

    return reply_reserve(request.sampling, settings.response_reserve_tokens, provider).tokens


def _context_map(args: argparse.Namespace, compiler: PromptCompiler,
                 compile_input: PromptCompileInput, request: ChatRequest | None,
                 out: TextIO, err: TextIO) -> int:
    from ..review import context_map, map_page

    assert request is not None
    cmap = _map(args, compiler, request, _compile(compiler, compile_input, request),
                compile_input.profile)
    map_page.write_page(args.html, map_page.render_html(cmap))
    if args.json:
        out.write(context_map.render_json(cmap))
    print(_wrote(args.html, cmap), file=err)
    return 0


def _wrote(path: Path, cmap: ContextMap) -> str:
    totals = cmap.totals()
    return (f"wrote {path}: {len(cmap.blocks)} blocks, {totals['tokens']} tokens "
            f"({totals['by_cache']['read']} expected from cache)")


# -- the live preview ------------------------------------------------------------------


def _watch(args: argparse.Namespace, err: TextIO) -> int:
    """Write the page, then again after every change of what it was drawn from, until
    Ctrl-C (or SIGTERM); a compile that fails shows its error on the page meanwhile."""
    if args.html is None:
        raise UsageError("--watch needs --html")
    if args.json:
        raise UsageError("--watch writes the page only: leave out --json")
    if "-" in {str(args.input), str(args.messages), str(args.tools)}:
        raise UsageError("--watch cannot watch standard input: name the file")
    from ..review.watch import snapshot, snapshot_since, wait_for_change

    for path in (args.input, args.messages, args.tools, args.config):
        if path is not None:
            _refuse_special(Path(path))
    # Ctrl-C and SIGTERM raise a flag, read between polls and page builds: an exception
    # raised wherever the signal lands could be swallowed (inside a callback the
    # interpreter runs for a finalizer, say), and the watch would go on. While a page is
    # built they also raise KeyboardInterrupt, so a long render or an open() that blocks
    # ends at once; if that is swallowed, the flag still ends the watch after the build.
    stop: list[int] = []
    building = [False]

    def request_stop(signum: int, frame: object) -> None:
        stop.append(signum)
        if building[0]:
            building[0] = False
            raise KeyboardInterrupt

    previous = {number: signal.signal(number, request_stop)
                for number in (signal.SIGINT, signal.SIGTERM)}
    watched: Watched | None = None

    def build() -> Watched | None:
        building[0] = True
        try:
            return _live_page(args, err, watched)
        except KeyboardInterrupt:
            if not stop:  # not ours: a KeyboardInterrupt from elsewhere
                raise
            args.html.with_name(f".{args.html.name}.partial").unlink(missing_ok=True)
            return None
        finally:
            building[0] = False

    try:
        started = time.time_ns()
        watched = build()
        if watched is not None and not stop:
            print(f"watching {len(snapshot(watched))} files (Ctrl-C stops)", file=err)
        while watched is not None and not stop:
            # What changed once the page began to be built counts as a change: an edit
            # made while it was drawn is drawn next, never missed.
            changed = wait_for_change(watched, snapshot_since(watched, started),
                                      stopped=lambda: bool(stop))
            if changed is None:
                break
            started = time.time_ns()
            watched = build()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    print(f"stopped watching; {args.html} keeps the last page", file=err)
    return 0


def _refuse_special(path: Path) -> None:
    """Refuse a named input that is not a regular file (a FIFO, a device, a socket): it
    would block the watch in ``open()`` or never settle. Judged by ``stat``, never
    opened; a missing file is left to the page (it may appear later)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode):
        return
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
            "a folder" if stat.S_ISDIR(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise UsageError(f"--watch reads regular files only: {path} is {kind}; write what it "
                     "carries to a file and watch that")


def _live_page(args: argparse.Namespace, err: TextIO, last: Watched | None) -> Watched:
    """Write the page (or, when the prompt does not compile, the error) and say what it
    was drawn from."""
    from ..review import map_page
    from ..review.watch import Watched, watched_for

    inputs = [p for p in (args.input, args.messages, args.tools, args.config) if p]
    html = args.html
    ignored = [html, html.with_name(f".{html.name}.partial")]
    watched = Watched(frozenset(inputs), ignored=frozenset(ignored))
    compiler = None
    try:
        request = _request(args)
        compiler, compile_input = _setup(args)
        assert request is not None
        payload = _compile(compiler, compile_input, request)
        cmap = _map(args, compiler, request, payload, compile_input.profile)
        page = map_page.render_html(cmap, live=True)
        watched |= watched_for(
            compiler, profile=compiler.load_profile(compile_input.profile),
            manifest=payload.manifest, workspace=compile_input.workspace_root,
            files=[*_config(), *compiler.settings.model_path])
        message = _wrote(html, cmap)
    except UsageError:
        raise
    except PioneerError as error:
        text = _report(error)
        page = map_page.render_error_page("pioneer inspect", text)
        if compiler is not None:
            watched |= watched_for(compiler, files=[*_config(), *compiler.settings.model_path])
        if last is not None:  # a profile that no longer loads still names its files
            watched |= last
        message = f"{text}\nwrote {html}: the error, until the files compile again"
    map_page.write_page(html, page)
    print(message, file=err, flush=True)
    return watched


def _config() -> list[Path]:
    from ..settings import find_config

    found = find_config()
    return [found] if found is not None else []


def _report(error: PioneerError) -> str:
    lines = [problem.render() for problem in error.problems]
    return "\n".join([*lines, error.summary] if error.summary else lines)
