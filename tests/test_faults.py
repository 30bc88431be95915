"""Hooks and summarizers under fault: the turn still compiles, with the right diagnostic
or fallback, within a bounded time.

A hook that hangs past its deadline, raises or returns garbage is handled by its failure
policy; a summarizer that times out (outright, or by dripping bytes), answers with an
error status, an empty, malformed or oversized reply, or never returns at all makes the
budgeter fall back to the newest turns that fit.
"""

from __future__ import annotations

import asyncio
import json
import operator
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import compile_round, run_cli, within

from pioneer import HookError, HookRegistry, PioneerError, PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import DynamicSectionInput, RuntimeSectionInput
from pioneer.history import (
    HistoryBudgeter,
    HistoryLimits,
    OpenAIChatSummarizer,
    SqliteStore,
    SummarizerError,
    SummaryRequest,
)
from pioneer.history.summarizer import MAX_REPLY_BYTES
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext
from pioneer.settings import PioneerSettings

PHASE = "turn.pre_prompt_compile"
#: Generous: a fault costs a deadline of tens of milliseconds; only a hang comes near this.
BOUNDED = 10.0



@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown, so abandoned hook and summarizer threads finish."""
    event = threading.Event()
    yield event
    event.set()


def contribution(content: str, section_id: str = "acme.notes") -> PromptSectionContribution:
    return PromptSectionContribution(contribution_id=f"{section_id}.c", section_id=section_id,
                                     domain="acme", content=content)


def _garbage() -> dict[str, Callable[[HookContext], Any]]:
    def generator_that_raises(context: HookContext) -> Any:
        yield contribution("first")
        raise RuntimeError("half way")

    def mutates_its_input(context: HookContext) -> Any:
        context.compile_input.extra_system = "changed"  # type: ignore[misc]

    return {
        "a dict": lambda context: {"content": "x"},
        "a number": lambda context: 42,
        "bytes": lambda context: b"text",
        "a list of strings": lambda context: ["text"],
        "a generator that raises": generator_that_raises,
        "content None (validation skipped)": lambda context: (
            PromptSectionContribution.model_construct(
                contribution_id="c", domain="d", section_id="acme.x", content=None)),
        "a built-in id (validation skipped)": lambda context: (
            PromptSectionContribution.model_construct(
                contribution_id="c", domain="d", section_id="identity_base", content="x")),
        "an id with a space (validation skipped)": lambda context: (
            PromptSectionContribution.model_construct(
                contribution_id="c", domain="d", section_id="a b", content="x")),
        "a write to its frozen input": mutates_its_input,
    }


GARBAGE = _garbage()


@pytest.mark.parametrize("name", sorted(GARBAGE))
@pytest.mark.parametrize("deadline_ms", [None, 500], ids=["blocking", "deadline"])
def test_a_best_effort_hook_returning_garbage_is_a_diagnostic(
    compiler: PromptCompiler, home: Path, name: str, deadline_ms: int | None
) -> None:
    registry = HookRegistry()
    registry.hook("acme.bad", phase=PHASE, deadline_ms=deadline_ms,
                  failure="best_effort")(GARBAGE[name])
    registry.hook("acme.good", phase=PHASE)(lambda context: contribution("still here",
                                                                          "acme.good"))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert "## Dynamic: acme.good\nstill here" in payload.dynamic_system_text
    failed = [d for d in payload.manifest.diagnostics if d.code == "hook_best_effort_failed"]
    assert len(failed) == 1 and failed[0].message.startswith(
        f"hook `acme.bad` at {PHASE} failed: ")
    assert failed[0].hook_source == "acme.bad"


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_a_fail_closed_hook_returning_garbage_stops_the_turn(
    compiler: PromptCompiler, home: Path, name: str
) -> None:
    registry = HookRegistry()
    registry.hook("acme.bad", phase=PHASE)(GARBAGE[name])
    with pytest.raises(HookError) as info:
        compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert str(info.value).startswith(f"{PHASE} → acme.bad.{PHASE}: hook \"acme.bad\" failed: ")


@pytest.mark.parametrize("error", [RuntimeError("boom"), PioneerError("store is down"),
                                   RecursionError(), MemoryError()],
                         ids=["runtime-error", "pioneer-error", "recursion", "memory"])
def test_a_best_effort_hook_that_raises_is_a_diagnostic(
    compiler: PromptCompiler, home: Path, error: Exception
) -> None:
    def raises(context: HookContext) -> None:
        raise error

    registry = HookRegistry()
    registry.hook("acme.raises", phase=PHASE, failure="best_effort")(raises)
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert [d.code for d in payload.manifest.diagnostics][-1] == "hook_best_effort_failed"
    assert payload.manifest.hook_sources[-1].contribution_kind == "runtime_failure"


class Unusual(BaseException):
    """A hook's own BaseException subclass."""


@pytest.mark.parametrize("error", [GeneratorExit(), asyncio.CancelledError(), Unusual("odd")],
                         ids=["generator-exit", "cancelled", "own-base-exception"])
@pytest.mark.parametrize("deadline_ms", [None, 500], ids=["blocking", "deadline"])
def test_a_best_effort_hook_raising_a_base_exception_is_a_diagnostic(
    compiler: PromptCompiler, home: Path, error: BaseException, deadline_ms: int | None
) -> None:
    def raises(context: HookContext) -> None:
        raise error

    registry = HookRegistry()
    registry.hook("acme.raises", phase=PHASE, deadline_ms=deadline_ms,
                  failure="best_effort")(raises)
    registry.hook("acme.good", phase=PHASE)(lambda context: contribution("still here",
                                                                          "acme.good"))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert "still here" in payload.dynamic_system_text
    shown = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    assert [(d.code, d.message) for d in payload.manifest.diagnostics][-1] == (
        "hook_best_effort_failed",
        f"hook `acme.raises` at {PHASE} failed: {shown}; the turn went on without it")


@pytest.mark.parametrize("error", [GeneratorExit(), asyncio.CancelledError(), Unusual()],
                         ids=["generator-exit", "cancelled", "own-base-exception"])
def test_a_fail_closed_hook_raising_a_base_exception_stops_the_turn_cleanly(
    compiler: PromptCompiler, home: Path, error: BaseException
) -> None:
    def raises(context: HookContext) -> None:
        raise error

    registry = HookRegistry()
    registry.hook("acme.raises", phase=PHASE)(raises)
    with pytest.raises(HookError) as info:
        compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert str(info.value) == (f"{PHASE} → acme.raises.{PHASE}: hook \"acme.raises\" failed: "
                               f"{type(error).__name__} (fail-closed, the turn stops)")


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("deadline_ms", [None, 500], ids=["blocking", "deadline"])
def test_only_interrupt_and_exit_pass_through_a_best_effort_hook(
    compiler: PromptCompiler, home: Path, error: type[BaseException], deadline_ms: int | None
) -> None:
    def raises(context: HookContext) -> None:
        raise error

    registry = HookRegistry()
    registry.hook("acme.raises", phase=PHASE, deadline_ms=deadline_ms,
                  failure="best_effort")(raises)
    with pytest.raises(error):
        compile_round(compiler, PromptCompileInput(workspace_root=home), registry)


@pytest.mark.parametrize("write", [
    lambda i: i.runtime_sections.append(RuntimeSectionInput(id="acme.junk", content="junk")),
    lambda i: i.runtime_sections.clear(),
    lambda i: i.dynamic_sections.append(DynamicSectionInput(id="acme.junk", content="junk")),
    lambda i: operator.setitem(i.runtime_sections, 0, None),
], ids=["append", "clear", "append-dynamic", "replace"])
@pytest.mark.parametrize("deadline_ms", [None, 500], ids=["blocking", "deadline"])
def test_a_hook_cannot_change_the_callers_input(
    compiler: PromptCompiler, home: Path, write: Callable[[Any], None], deadline_ms: int | None
) -> None:
    given = PromptCompileInput(workspace_root=home, runtime_sections=[
        RuntimeSectionInput(id="acme.kept", content="Kept.")])
    before = given.model_dump()
    fresh = compile_round(compiler, given)
    seen: list[int] = []

    def writes(context: HookContext) -> None:
        seen.append(len(context.compile_input.runtime_sections))  # reading works
        write(context.compile_input)

    registry = HookRegistry()
    registry.hook("acme.writes", phase=PHASE, deadline_ms=deadline_ms,
                  failure="best_effort")(writes)
    payload = compile_round(compiler, given, registry)
    assert seen == [1]
    assert given.model_dump() == before
    message = payload.manifest.diagnostics[-1].message
    assert message.startswith(f"hook `acme.writes` at {PHASE} failed: ")
    assert message.endswith("; the turn went on without it")
    assert "is read-only (a view of the caller's input)" in message or (
        "does not support item assignment" in message)
    assert compile_round(compiler, given).full_system_text == fresh.full_system_text


class Recording(PromptSectionContribution):
    """A contribution that notes the thread its fields are read on (the runtime's
    re-validation reads them)."""

    def __iter__(self) -> Any:
        READ_ON.append(threading.current_thread().name)
        return super().__iter__()


READ_ON: list[str] = []


def test_nothing_of_a_late_hook_runs_on_its_thread_after_the_deadline(
    compiler: PromptCompiler, home: Path
) -> None:
    READ_ON.clear()
    returned = threading.Event()
    late = [Recording.model_construct(contribution_id="c", section_id="acme.late",
                                      domain="acme", content="late") for _ in range(3)]

    def slow(context: HookContext) -> Any:
        threading.Event().wait(0.15)
        returned.set()
        return late

    registry = HookRegistry()
    registry.hook("acme.slow", phase=PHASE, deadline_ms=30, failure="best_effort")(slow)
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert "missed its 30 ms deadline" in payload.manifest.diagnostics[-1].message
    assert returned.wait(BOUNDED)
    threading.Event().wait(0.1)  # time for anything that would still run after the return
    assert READ_ON == []
    # In time, the same contributions are validated on the caller's thread.
    registry = HookRegistry()
    registry.hook("acme.quick", phase=PHASE, deadline_ms=5000,
                  failure="best_effort")(lambda context: late)
    compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert set(READ_ON) == {threading.current_thread().name}


# The process exits right after a turn whose best-effort hook is still running and then
# returns a flood of contributions: an abandoned hook must not take the process down. The
# hook is let go only once the turn has given up on it, so it is late however loaded the
# machine is, and it returns its flood while the process exits.
EXIT_AFTER_LATE_HOOK = """
import sys, threading
from pathlib import Path
from pioneer import HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.hooks.models import PromptSectionContribution
one = PromptSectionContribution(contribution_id="a.c", section_id="acme.notes",
                                domain="acme", content="x")
registry = HookRegistry()
turn_done = threading.Event()

@registry.hook("acme.late", phase="turn.pre_prompt_context", deadline_ms=50,
               failure="best_effort")
def late(context):
    turn_done.wait()
    return [one] * 300_000

compiler = PromptCompiler()
given = PromptCompileInput(workspace_root=Path(sys.argv[1]))
payload = compiler.compile(registry.run_hooks(compiler, given).round_input(given))
turn_done.set()
print(payload.manifest.diagnostics[-1].code)
"""


def test_the_process_exits_cleanly_right_after_a_late_hook(home: Path) -> None:
    for _ in range(4):
        done = subprocess.run([sys.executable, "-c", EXIT_AFTER_LATE_HOOK, str(home)],
                              capture_output=True, text=True, timeout=120, check=False)
        assert (done.returncode, done.stdout, done.stderr) == (
            0, "hook_best_effort_failed\n", "")


def test_hooks_that_hang_in_every_phase_cost_only_their_deadlines(
    compiler: PromptCompiler, home: Path, release: threading.Event
) -> None:
    registry = HookRegistry()
    for phase in ("turn.pre_prompt_context", "turn.post_preflight_prompt_context", PHASE):
        for n in range(3):
            registry.hook(f"acme.hang.{phase}.{n}", phase=phase, deadline_ms=40,
                          failure="best_effort")(lambda context: release.wait())
    registry.hook("acme.good", phase=PHASE)(lambda context: contribution("on time",
                                                                          "acme.good"))
    payload = within(BOUNDED, lambda: compile_round(
        compiler, PromptCompileInput(workspace_root=home), registry))
    assert not release.is_set()  # they are all still hanging
    assert "on time" in payload.dynamic_system_text
    missed = [d.message for d in payload.manifest.diagnostics
              if d.code == "hook_best_effort_failed"]
    assert len(missed) == 9 and all("missed its 40 ms deadline" in m for m in missed)


def test_a_fail_closed_hook_that_hangs_stops_the_turn_in_bounded_time(
    compiler: PromptCompiler, home: Path, release: threading.Event
) -> None:
    registry = HookRegistry()
    registry.hook("acme.hang", phase=PHASE, deadline_ms=40)(lambda context: release.wait())
    with pytest.raises(HookError, match="missed its 40 ms deadline"):
        within(BOUNDED, lambda: compile_round(
            compiler, PromptCompileInput(workspace_root=home), registry))


def test_a_hook_flooding_the_pool_is_cut_to_the_pool(compiler: PromptCompiler,
                                                     home: Path) -> None:
    registry = HookRegistry()
    registry.hook("acme.flood", phase=PHASE, failure="best_effort")(lambda context: [
        contribution("y" * 50_000, f"acme.flood{n}") for n in range(100)])
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    flooded = [s for s in payload.sections if s.id.startswith("acme.flood")]
    assert len(flooded) <= 16
    assert sum(len(s.text) for s in flooded) <= 24_000 + 16 * len("## Dynamic: acme.flood99\n")
    assert {d.code for d in payload.manifest.diagnostics} >= {
        "dynamic_section_truncated", "dynamic_section_omitted"}


# -- summarizers -----------------------------------------------------------------


class FaultyServer:
    """A chat-completions endpoint on 127.0.0.1 that misbehaves as told."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.status = 200
        self.body = b""
        self.stop = threading.Event()
        self.location = ""
        #: (path, headers) of every request received.
        self.seen: list[tuple[str, dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                server.seen.append((self.path, dict(self.headers)))
                if server.mode == "stall":
                    server.stop.wait(30)
                    return
                if server.mode == "drip-headers":  # a header line every 0.1 s, never done
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    for n in range(1000):
                        if server.stop.wait(0.1):
                            return
                        self.wfile.write(f"X-Drip-{n}: x\r\n".encode())
                        self.wfile.flush()
                    return
                if server.mode == "redirect":
                    self.send_response(server.status)
                    self.send_header("Location", server.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                if server.mode == "drip":  # one byte at a time, well inside the timeout
                    for byte in server.body:
                        if server.stop.wait(0.05):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return
                self.wfile.write(server.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    def reply(self, content: Any, status: int = 200, mode: str = "ok") -> None:
        self.status, self.mode = status, mode
        self.body = json.dumps({"choices": [{"message": {"role": "assistant",
                                                         "content": content}}]}).encode()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FaultyServer]:
    faulty = FaultyServer()
    yield faulty
    faulty.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "history.db") as opened:
        opened.ensure_thread("t", model="m")
        for n in range(6):
            opened.add_turn("t", user_text=f"question {n}", assistant_text=f"answer {n}")
        yield opened




def _fallback(store: SqliteStore, summarizer: Any, **kwargs: Any) -> str:
    """Budget thread ``t`` over its threshold; the reason of the truncation fallback."""
    budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(60, 0), summarizer=summarizer,
                               **kwargs)
    decision = within(BOUNDED, lambda: budgeter.build("t"))
    assert decision.mode == "truncate"
    assert decision.messages[-1].content == "answer 5" and decision.sent_tokens <= 60
    assert store.get_thread_summary("t") is None
    return decision.reason.split("; ")[1]


@pytest.mark.parametrize(("status", "content", "reason"), [
    (500, "server error", "HTTP 500"),
    (429, "slow down", "HTTP 429"),
    (200, "", "summarizer returned an empty reply"),
    (200, None, "summarizer returned an empty reply"),
    (200, "word " * 5000, "summary of 5009 tokens does not fit the budget of 60"),
])
def test_an_http_summarizer_failure_falls_back(server: FaultyServer, store: SqliteStore,
                                               status: int, content: Any, reason: str) -> None:
    server.reply(content, status)
    assert reason in _fallback(store, OpenAIChatSummarizer(server.base_url, timeout=2))


def test_a_reply_that_is_not_json_falls_back(server: FaultyServer, store: SqliteStore) -> None:
    server.reply("x")
    server.body = b"<html>gateway</html>"
    assert _fallback(store, OpenAIChatSummarizer(server.base_url, timeout=2)) == (
        f"summarizer failed: {server.base_url}/chat/completions: not a chat-completions reply")


def test_a_stalled_server_times_out(server: FaultyServer, store: SqliteStore) -> None:
    server.reply("never sent", mode="stall")
    assert _fallback(store, OpenAIChatSummarizer(server.base_url, timeout=0.2)) == (
        f"summarizer failed: {server.base_url}/chat/completions: timed out after 0.2s")


def test_a_server_dripping_bytes_times_out(server: FaultyServer) -> None:
    # Every byte arrives well within the socket timeout; only the overall deadline ends
    # it (the whole reply would take 200 bytes x 0.05 s = 10 s).
    server.reply("z" * 150, mode="drip")
    summarizer = OpenAIChatSummarizer(server.base_url, timeout=0.3)
    with pytest.raises(SummarizerError, match=r"timed out after 0\.3s"):
        within(5, lambda: summarizer.summarize(SummaryRequest("m", 10, None, ())))


def test_an_oversized_reply_body_is_refused(server: FaultyServer) -> None:
    server.reply("big " * (MAX_REPLY_BYTES // 4))
    with pytest.raises(SummarizerError) as info:
        OpenAIChatSummarizer(server.base_url, timeout=5).summarize(
            SummaryRequest("m", 10, None, ()))
    assert str(info.value) == (
        f"{server.base_url}/chat/completions: reply larger than {MAX_REPLY_BYTES} bytes")


@pytest.fixture
def other() -> Iterator[FaultyServer]:
    """A second origin, where a redirect would take the request (and its key)."""
    faulty = FaultyServer()
    faulty.reply("Collected.")
    yield faulty
    faulty.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_key_goes_nowhere_else(
    server: FaultyServer, other: FaultyServer, store: SqliteStore,
    monkeypatch: pytest.MonkeyPatch, status: int,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-key")
    server.mode, server.status = "redirect", status
    server.location = f"{other.base_url}/collect"
    summarizer = OpenAIChatSummarizer(server.base_url, timeout=2, allow_http=True)
    with pytest.raises(SummarizerError) as info:
        summarizer.summarize(SummaryRequest("m", 10, None, ()))
    assert str(info.value) == (
        f"{server.base_url}/chat/completions: HTTP {status} redirect refused "
        "(redirects are not followed)")
    assert _fallback(store, summarizer).startswith(f"summarizer failed: {server.base_url}")
    assert other.seen == []  # the other origin never heard of the request or the key
    assert [headers["Authorization"] for _, headers in server.seen] == [
        "Bearer sk-secret-key"] * 2


def test_a_server_dripping_header_lines_times_out(server: FaultyServer) -> None:
    # Each line arrives well within the socket timeout, and the headers never end.
    server.mode = "drip-headers"
    summarizer = OpenAIChatSummarizer(server.base_url, timeout=0.3)
    with pytest.raises(SummarizerError) as info:
        within(5, lambda: summarizer.summarize(SummaryRequest("m", 10, None, ())))
    assert str(info.value) == f"{server.base_url}/chat/completions: timed out after 0.3s"


def test_history_summarize_keeps_the_summary_timeout(
    server: FaultyServer, store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command builds its own budgeter: the timeout holds there too.
    server.mode = "drip-headers"
    monkeypatch.setenv("PIONEER_SUMMARY_TIMEOUT", "0.3")
    code, out, err = within(5, lambda: run_cli(
        "history", "t", "--db", str(store.path), "--home", str(tmp_path),
        "--max-context-tokens", "60", "--reserve-tokens", "0",
        "--summarize", "--summary-url", server.base_url))
    assert (code, err) == (0, "")
    (decision,) = [line for line in out.splitlines() if line.startswith("decision")]
    assert re.search(r"; (summarizer gave no reply within 0\.3 s|summarizer failed: "
                     + re.escape(server.base_url) + r"/chat/completions: timed out after "
                     r"0\.3s); the kept turns reached the budget of 60: cut to the "
                     r"low-water mark of 36, keeping the newest", decision), decision


class Hanging:
    """A summarizer that never returns (until the test ends)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def summarize(self, request: SummaryRequest) -> str:
        self.release.wait()
        return "too late"


def test_a_summarizer_that_never_returns_misses_its_deadline(
    store: SqliteStore, release: threading.Event
) -> None:
    assert _fallback(store, Hanging(release), summary_deadline=0.1) == (
        "summarizer gave no reply within 0.1 s")


def test_the_settings_budgeter_has_the_summary_timeout_as_deadline(
    store: SqliteStore, release: threading.Event
) -> None:
    settings = PioneerSettings(summary_timeout=0.1, max_context_tokens=60,
                               response_reserve_tokens=0)
    budgeter = HistoryBudgeter.from_settings(store, settings, summarizer=Hanging(release))
    assert budgeter.summary_deadline == 0.1
    assert within(BOUNDED, lambda: budgeter.build("t")).mode == "truncate"


def test_the_turn_compiles_while_its_summarizer_and_a_hook_fail(
    compiler: PromptCompiler, home: Path, store: SqliteStore, release: threading.Event
) -> None:
    registry = HookRegistry()
    registry.hook("acme.hang", phase=PHASE, deadline_ms=40,
                  failure="best_effort")(lambda context: release.wait())
    budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(60, 0),
                               summarizer=Hanging(release), summary_deadline=0.1)
    decision, payload = within(BOUNDED, lambda: (
        budgeter.build("t"),
        compile_round(compiler, PromptCompileInput(workspace_root=home), registry)))
    assert decision.mode == "truncate" and decision.messages
    assert payload.stable_system_text.startswith("## Identity\n")
    assert payload.manifest.diagnostics[-1].code == "hook_best_effort_failed"
