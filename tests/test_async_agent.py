"""The async twin: the sync runner's turns as coroutines, with nothing blocking the loop.

* The same turns through :class:`pioneer.Agent` and :class:`pioneer.AsyncAgent` (every
  provider, tool rounds, an error result) give byte-identical bodies, equal records and
  equal stored turns.
* Turns of several threads at once, on SQLite and on PostgreSQL, with the summarizer the
  settings configure (a real HTTP server on 127.0.0.1): every store unit of work, pause
  and deadline wait runs off the loop's thread, the PostgreSQL round trips go through
  psycopg's async connections and never its sync ones, and the summary comes over the
  async HTTP client, never the sync one.
* The async summarizer is the sync one's request and reply: the same body and headers,
  errors, refusals and time limit.
* The arguments are Agent's; misuse is an error, never a hang.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
import pytest
from conftest import StoreTarget
from test_history_summarizer import REQUEST, ChatServer, completion

import pioneer.hooks.deadline
from pioneer import Agent, AsyncAgent, AsyncTurn, PioneerSettings, StoreError, Turn
from pioneer.history import HistoryLimits
from pioneer.history.async_postgres import AsyncPostgresStore
from pioneer.history.loop import LoopBridge, LoopBridgeError
from pioneer.history.models import HistoryEntry
from pioneer.history.sql_store import SqlStore
from pioneer.history.summarizer import (
    AsyncOpenAIChatSummarizer,
    OpenAIChatSummarizer,
    SummarizerError,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = ChatServer()
    yield chat
    chat.close()


# -- the same turns, sync and async ------------------------------------------------------


def _reply(provider: str, model: str, turn: Turn, number: int, calls: list[Any]) -> Any:
    plan = turn.rounds[-1].cache
    assert plan is not None
    return agent_loop.response(provider, model, "" if calls else f"Answer {number}.", calls,
                               agent_loop.usage(provider, plan, 12))


def _sync_turn(agent: Agent, provider: str, number: int) -> tuple[list[str], Any]:
    bodies: list[str] = []
    with agent.turn("thread", f"Question {number}", turn_id=f"turn-{number}") as turn:
        for calls in agent_loop.script(number):
            bodies.append(json.dumps(turn.next_body()))
            step = turn.receive(_reply(provider, agent.model, turn, number, calls))
            for call in step.runnable:
                turn.add_tool_result(call.id, f"result of {call.name}",
                                     is_error=call.name == "read_file")
            if step.done:
                break
        finished = turn.finish()
    return bodies, finished


async def _async_turn(agent: AsyncAgent, provider: str, number: int) -> tuple[list[str], Any]:
    bodies: list[str] = []
    async with agent.turn("thread", f"Question {number}", turn_id=f"turn-{number}") as turn:
        for calls in agent_loop.script(number):
            bodies.append(json.dumps(await turn.next_body()))
            step = await turn.receive(_reply(provider, agent.sync_agent.model,
                                             turn.sync_turn, number, calls))
            for call in step.runnable:
                await turn.add_tool_result(call.id, f"result of {call.name}",
                                           is_error=call.name == "read_file")
            if step.done:
                break
        finished = await turn.finish()
    return bodies, finished


def _kept(entry: HistoryEntry) -> HistoryEntry:
    """``entry`` without its item ids (random for each store)."""
    return replace(entry, user_item_id=None, assistant_item_id=None)


@pytest.mark.parametrize("provider", agent_loop.PROVIDER_CHOICES)
def test_the_same_turns_give_the_same_bodies_and_records(provider: str, tmp_path: Path) -> None:
    model = agent_loop.MODELS[provider]
    home = tmp_path / "home"
    agent_loop.ensure_runtime_home(home)

    def options() -> dict[str, Any]:
        return {"provider": provider, "model": model, "hooks": agent_loop.hooks(),
                "tools": [agent_loop.READ_FILE], "compile_input": {"workspace_root": home}}

    async def both() -> None:
        with Agent(tmp_path / "sync.db", **options()) as sync:
            async with AsyncAgent(tmp_path / "async.db", **options()) as asynchronous:
                for number in range(1, 5):  # tool rounds, hidden tools, an error result
                    sync_bodies, sync_finished = await asyncio.to_thread(
                        _sync_turn, sync, provider, number)
                    bodies, finished = await _async_turn(asynchronous, provider, number)
                    assert bodies == sync_bodies
                    assert finished.record == sync_finished.record
                    assert _kept(finished.entry) == _kept(sync_finished.entry)
                    assert finished.diagnostics == sync_finished.diagnostics
                history = await asynchronous.run(
                    asynchronous.store.get_thread_conversation_history, "thread", 10)
                assert [_kept(e) for e in history] == [
                    _kept(e) for e in sync.store.get_thread_conversation_history("thread", 10)]

    asyncio.run(both())


def test_a_failed_round_shows_in_the_next_body(tmp_path: Path) -> None:
    """The bodies compared above include a Retry Instruction (the error result)."""
    async def run() -> list[str]:
        async with AsyncAgent(tmp_path / "a.db", provider="anthropic",
                              model=agent_loop.MODELS["anthropic"], hooks=agent_loop.hooks(),
                              tools=[agent_loop.READ_FILE],
                              compile_input={"workspace_root": tmp_path}) as agent:
            return (await _async_turn(agent, "anthropic", 1))[0]

    bodies = asyncio.run(run())
    assert ["Retry Instruction" in body for body in bodies] == [False, True, False]


# -- nothing blocks the loop -------------------------------------------------------------


class LoopWatch:
    """Sync entry points patched to note where they were called from."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread: int | None = None
        self.on_loop: list[str] = []  # blocking calls made on the loop's thread
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._monkeypatch = monkeypatch

    def blocking(self, owner: Any, name: str, *, never: bool = False) -> None:
        """``owner.name`` must not run on the loop's thread (``never``: not at all)."""
        original = getattr(owner, name)
        watch = self

        def watched(*args: Any, **kwargs: Any) -> Any:
            watch.note(name, never=never)
            return original(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, watched)

    def counted(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)
        watch = self

        async def watched(*args: Any, **kwargs: Any) -> Any:
            watch.note(name, blocking=False)
            return await original(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, watched)

    def note(self, name: str, *, never: bool = False, blocking: bool = True) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1
            if blocking and (never or threading.get_ident() == self.loop_thread):
                self.on_loop.append(name)


async def _thread_turns(agent: AsyncAgent, thread: str, turns: int) -> None:
    for number in range(turns):
        async with agent.turn(thread, f"Question {number} of {thread} " + "words " * 40) as turn:
            await turn.next_body()
            await asyncio.sleep(0)  # the model call
            plan = turn.rounds[-1].cache
            assert plan is not None
            await turn.receive(agent_loop.response(
                "openai-chat", "gpt-5.1", f"Answer {number} " + "text " * 40, [],
                agent_loop.usage("openai-chat", plan, 10)))
            await turn.finish()


def test_no_blocking_call_runs_on_the_loop(store_target: StoreTarget, server: ChatServer,
                                           tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    settings = PioneerSettings(home=tmp_path / "home", summary_base_url=server.base_url,
                               summary_model="summary-model")
    agent = AsyncAgent(store_target.target, settings=settings, provider="openai-chat",
                       model="gpt-5.1", limits=HistoryLimits.from_tokens(300, 0))
    watch = LoopWatch(monkeypatch)
    watch.blocking(SqlStore, "_run")
    watch.blocking(time, "sleep")
    watch.blocking(pioneer.hooks.deadline.Running, "wait")
    watch.blocking(OpenAIChatSummarizer, "_post", never=True)  # the sync HTTP client
    watch.blocking(psycopg.Connection, "execute", never=True)  # the sync driver
    watch.blocking(psycopg_pool.ConnectionPool, "getconn", never=True)
    watch.counted(psycopg.AsyncConnection, "execute")

    async def run() -> None:
        watch.loop_thread = threading.get_ident()
        async with agent:
            await asyncio.gather(*(_thread_turns(agent, f"thread-{n}", 4) for n in range(5)))

    asyncio.run(run())
    assert watch.on_loop == []
    assert watch.counts["_run"] > 20 and watch.counts["wait"] >= 1
    assert server.requests and all(r[2]["model"] == "summary-model" for r in server.requests)
    if store_target.dialect == "postgresql":
        assert watch.counts["execute"] > 20  # the async connections' execute


def test_a_store_call_on_the_loop_thread_is_an_error_not_a_hang(pg_server: Any,
                                                                 tmp_path: Path) -> None:
    schema, url = pg_server.new_schema()
    try:
        async def run() -> None:
            async with AsyncAgent(url, provider="anthropic", model="claude-sonnet-4-5",
                                  compile_input={"workspace_root": tmp_path}) as agent:
                await agent.run(agent.store.ensure_thread, "t")  # a worker: fine
                with pytest.raises(LoopBridgeError, match="the event loop's own thread"):
                    agent.store.get_thread("t")

        asyncio.run(asyncio.wait_for(run(), 60))
    finally:
        pg_server.drop_schema(schema)


def test_an_open_async_pool_connects_nothing_behind_its_callers_back(pg_server: Any) -> None:
    # The sync store's twin (test_store_text.py): the async pool opens on the loop at the
    # first unit of work, and that unit of work is served once the pool has its session.
    # A pool still connecting when it handed out its first session grew a second one for
    # a lone caller, connected on the loop while the caller went on, and drew that
    # session's lifetime jitter from the process's ``random`` at a moment nobody chose.
    schema, url = pg_server.new_schema()
    try:
        async def run() -> None:
            bridge = LoopBridge()
            bridge.bind()
            store = AsyncPostgresStore(url, bridge=bridge)
            reader = AsyncPostgresStore(url, bridge=bridge, cache_bytes=0)
            try:
                await asyncio.to_thread(store.ensure_thread, "t")  # opens the store's pool
                await asyncio.to_thread(reader.get_thread, "t")  # and the reader's
                state = random.getstate()
                for n in range(5):
                    await asyncio.to_thread(store.add_turn, "t", user_text=f"u{n}",
                                            assistant_text="a")
                    history = await asyncio.to_thread(
                        reader.get_thread_conversation_history, "t")
                    assert len(history) == n + 1
                moved = random.getstate() != state
                assert not moved
                for opened in (store, reader):
                    stats = opened._apool.get_stats()
                    assert (stats["pool_size"], stats["connections_num"]) == (1, 1)
            finally:
                await asyncio.to_thread(store.close)
                await asyncio.to_thread(reader.close)

        asyncio.run(asyncio.wait_for(run(), 60))
    finally:
        pg_server.drop_schema(schema)


def test_an_async_pool_that_cannot_connect_is_a_store_error_and_the_next_call_retries(
    pg_server: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sessions of the pool are refused (the store's own direct connection, made first,
    # was not): the first unit of work waits for the pool's first session as the sync
    # store's constructor does, then is a StoreError. The pool closed itself and cannot be
    # opened again; the next unit of work opens a new one.
    schema, url = pg_server.new_schema()
    connect = psycopg.AsyncConnection.connect

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise psycopg.OperationalError("refused by the test")

    try:
        async def run() -> None:
            bridge = LoopBridge()
            bridge.bind()
            store = AsyncPostgresStore(url, bridge=bridge, connect_timeout=0.1)
            try:
                monkeypatch.setattr(psycopg.AsyncConnection, "connect", refused)
                with pytest.raises(StoreError) as raised:
                    await asyncio.to_thread(store.ensure_thread, "t")
                assert str(raised.value).endswith(": no connection to the server within 1 s")
                monkeypatch.setattr(psycopg.AsyncConnection, "connect", connect)
                record = await asyncio.to_thread(store.ensure_thread, "t")
                assert record.thread_id == "t"
            finally:
                await asyncio.to_thread(store.close)

        asyncio.run(asyncio.wait_for(run(), 60))
    finally:
        pg_server.drop_schema(schema)


def test_one_agent_serves_one_loop(tmp_path: Path) -> None:
    agent = AsyncAgent(tmp_path / "a.db", provider="anthropic", model="claude-sonnet-4-5",
                       compile_input={"workspace_root": tmp_path})

    async def first() -> None:
        await agent.run(agent.store.ensure_thread, "t")

    async def second() -> None:
        with pytest.raises(LoopBridgeError, match="one AsyncAgent per event loop"):
            await agent.run(agent.store.ensure_thread, "t")

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(first())
        asyncio.run(second())
        loop.run_until_complete(agent.aclose())
    finally:
        loop.close()


def test_a_cancelled_call_completes_and_the_next_waits_for_it(tmp_path: Path) -> None:
    async def run() -> None:
        async with AsyncAgent(tmp_path / "a.db", provider="openai-chat", model="gpt-5.1",
                              compile_input={"workspace_root": tmp_path}) as agent:
            turn = agent.turn("t", "Hello")
            task = asyncio.create_task(turn.next_body())
            await asyncio.sleep(0)
            task.cancel()
            body = await turn.next_body()  # the same round again, after the first
            assert len(turn.rounds) == 1 and body["messages"][-1]["content"] == "Hello"
            plan = turn.rounds[-1].cache
            assert plan is not None
            await turn.receive(agent_loop.response("openai-chat", "gpt-5.1", "Hi.", [],
                                                   agent_loop.usage("openai-chat", plan, 3)))
            finished = await turn.finish()
            assert finished.entry.assistant_text == "Hi."

    asyncio.run(run())


def test_a_turn_left_unfinished_is_kept_as_abandoned(store_target: StoreTarget,
                                                     tmp_path: Path) -> None:
    """Left in its block, closed, or dropped: the sync runner's lifecycle, through the twin
    (the dropped turn's record stored by the agent's writer thread, on the loop's pool)."""
    async def run() -> list[Any]:
        async with AsyncAgent(store_target.target, provider="openai-chat", model="gpt-5.1",
                              compile_input={"workspace_root": tmp_path}) as agent:
            async with agent.turn("a", "Left", turn_id="left") as turn:
                await turn.next_body()
            closed = agent.turn("b", "Closed", turn_id="closed")
            await closed.next_body()
            await closed.close()
            dropped = agent.turn("c", "Dropped", turn_id="dropped")
            await dropped.next_body()
            del dropped
            gc.collect()
            await agent.run(agent.sync_agent._writer.drain)
            return [await agent.run(agent.sync_agent.records.get, turn_id)
                    for turn_id in ("left", "closed", "dropped")]

    with pytest.warns(ResourceWarning) as warned:
        records = asyncio.run(run())
    assert len(warned) == 3
    assert [r.abandoned for r in records] == [
        "left its with block without finish()", "closed without finish()",
        "dropped without finish() or close() (garbage-collected)"]
    assert all(len(r.rounds) == 1 for r in records)


# -- the arguments are Agent's -----------------------------------------------------------


@pytest.mark.parametrize(("twin", "original"), [
    (AsyncAgent.__init__, Agent.__init__), (AsyncAgent.turn, Agent.turn),
    (AsyncTurn.next_body, Turn.next_body), (AsyncTurn.receive, Turn.receive),
    (AsyncTurn.add_tool_result, Turn.add_tool_result), (AsyncTurn.finish, Turn.finish),
    (AsyncTurn.receive_error, Turn.receive_error), (AsyncTurn.close, Turn.close),
])
def test_the_twin_takes_the_same_arguments(twin: Callable[..., Any],
                                           original: Callable[..., Any]) -> None:
    assert list(inspect.signature(twin).parameters.values()) == \
        list(inspect.signature(original).parameters.values())


@pytest.mark.parametrize(("twin", "original"), [(AsyncAgent, Agent), (AsyncTurn, Turn)])
def test_every_method_has_its_twin(twin: type, original: type) -> None:
    """A method added to the sync runner fails here until the async one has it too."""
    def public(kind: type) -> set[str]:
        return {name for name, value in inspect.getmembers(kind)
                if not name.startswith("_") and (callable(value) or isinstance(value, property))}

    missing = public(original) - public(twin)
    # Agent's own helpers for its turns, and its closing (aclose here).
    assert missing <= {"budgeter", "registry", "model_rules", "close"}
    for name in public(original) & public(twin):
        method = getattr(twin, name)
        if callable(method) and name != "turn":
            assert inspect.iscoroutinefunction(method), name


def test_wrong_arguments_are_the_agents_errors(tmp_path: Path) -> None:
    from pioneer import InputError

    with pytest.raises(InputError, match="Agent → provider"):
        AsyncAgent(tmp_path / "a.db", provider="nobody", model="m")  # type: ignore[arg-type]
    agent = AsyncAgent(tmp_path / "a.db", provider="anthropic", model="claude-sonnet-4-5",
                       compile_input={"workspace_root": tmp_path})
    with pytest.raises(InputError, match=r"Agent\.turn → user_text"):
        agent.turn("t", 5)  # type: ignore[arg-type]
    asyncio.run(agent.aclose())


# -- the async summarizer is the sync one's request and reply ----------------------------


def _both(server: ChatServer, **options: Any) -> list[Callable[[], str]]:
    sync = OpenAIChatSummarizer(server.base_url, **options)
    return [lambda: sync.summarize(REQUEST),
            lambda: asyncio.run(AsyncOpenAIChatSummarizer(server.base_url, **options)
                                .summarize(REQUEST)),
            lambda: asyncio.run(AsyncOpenAIChatSummarizer.like(sync).summarize(REQUEST))]


def test_the_async_summarizer_posts_what_the_sync_one_posts(
        server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_TEST_SUMMARY_KEY", "sekret")
    for summarize in _both(server, api_key_env="PIONEER_TEST_SUMMARY_KEY", allow_http=True):
        assert summarize() == "A short summary."
    (path, headers, body), *others = server.requests
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sekret"
    assert body == {"model": "thread-model", "temperature": 0.3, "max_tokens": 120,
                    "messages": [{"role": "user", "content": REQUEST.prompt()}]}
    assert [(p, h["Authorization"], b) for p, h, b in others] == [(path, "Bearer sekret",
                                                                   body)] * 2


@pytest.mark.parametrize(("status", "reply", "message"), [
    (503, b"overloaded", "HTTP 503: overloaded"),
    (200, b"<html>not json</html>", "not a chat-completions reply"),
    (200, json.dumps(completion(42)).encode(), "reply content is neither text nor a list"),
    (200, b" " * (4 << 20) + b"{}", "reply larger than 4194304 bytes"),
], ids=["http-error", "not-json", "odd-content", "too-large"])
def test_the_async_summarizer_fails_as_the_sync_one(server: ChatServer, status: int,
                                                    reply: bytes, message: str) -> None:
    server.status, server.reply = status, reply
    errors = []
    for summarize in _both(server):
        with pytest.raises(SummarizerError) as raised:
            summarize()
        errors.append(str(raised.value))
    assert errors[0].startswith(f"{server.base_url}/chat/completions: {message}")
    assert errors == [errors[0]] * 3


def test_the_async_summarizer_refuses_a_key_over_http_and_redirects(
        server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_TEST_SUMMARY_KEY", "sekret")
    summarizer = AsyncOpenAIChatSummarizer(server.base_url, api_key_env="PIONEER_TEST_SUMMARY_KEY")
    with pytest.raises(SummarizerError, match="not sent over plain http"):
        asyncio.run(summarizer.summarize(REQUEST))
    assert server.requests == []
    server.status, server.reply = 302, b""
    with pytest.raises(SummarizerError, match="HTTP 302 redirect refused"):
        asyncio.run(AsyncOpenAIChatSummarizer(server.base_url).summarize(REQUEST))


def test_the_async_summarizer_times_out(server: ChatServer) -> None:
    server.stall = True
    with pytest.raises(SummarizerError) as raised:
        asyncio.run(AsyncOpenAIChatSummarizer(server.base_url, timeout=0.2).summarize(REQUEST))
    assert str(raised.value) == f"{server.base_url}/chat/completions: timed out after 0.2s"
