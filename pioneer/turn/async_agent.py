"""The async twin of the runner: :class:`AsyncAgent` and its :class:`AsyncTurn`.

An :class:`AsyncAgent` takes :class:`~pioneer.turn.Agent`'s arguments and drives a sync
:class:`~pioneer.turn.Agent` of its own (:attr:`AsyncAgent.sync_agent`); each
:class:`AsyncTurn` drives a sync :class:`~pioneer.turn.Turn`. The turn's work is the sync
runner's code, called on the agent's worker threads, so the two give the same bodies and
the same records and whatever the sync runner learns reaches the async one. What that work
waits on the network for is awaited on the event loop instead (through a
:class:`~pioneer.history.loop.LoopBridge`): the PostgreSQL store's round trips on psycopg's
async pool (:class:`~pioneer.history.async_postgres.AsyncPostgresStore`, the store a URL or
the settings open) and the summarizer's request on an async HTTP client
(:class:`~pioneer.history.summarizer.AsyncOpenAIChatSummarizer`). The SQLite store's calls
(the disk, SQLite's file lock) run on the worker threads. No call of a turn blocks the loop.

A turn's methods are coroutines and run one at a time, in the order they are awaited; a
call whose awaiting task is cancelled still completes on its worker (the turn stays
consistent), and the next call waits for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..history.loop import LoopBridge
from ..history.open import open_store
from ..history.sql_store import SqlStore
from ..history.store import DatabaseStore
from ..history.summarizer import (
    AsyncOpenAIChatSummarizer,
    AsyncSummarizer,
    SummaryRequest,
    summarizer_from_settings,
)
from ..settings import PioneerSettings
from .agent import Agent

if TYPE_CHECKING:
    from ..audit.record import RoundRecord
    from ..audit.store import TurnRecords
    from ..history.budget import HistoryDecision
    from ..providers import ContextOverflow
    from .agent import ProviderName, ThreadMode
    from .turn import FinishedTurn, Step, Turn

__all__ = ["WORKERS", "AsyncAgent", "AsyncTurn"]

#: Worker threads of one AsyncAgent: how many turn calls run at once (the others wait on
#: the loop, holding no thread).
WORKERS = 32

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
S = TypeVar("S")


def _arguments_of(
    source: Callable[Concatenate[Any, P], Any],
) -> Callable[[Callable[Concatenate[S, ...], R]], Callable[Concatenate[S, P], R]]:
    """Give the decorated method ``source``'s arguments (for type checkers and
    ``inspect.signature``): the async twin takes exactly what the sync one takes."""

    def apply(target: Callable[Concatenate[S, ...], R]) -> Callable[Concatenate[S, P], R]:
        own = inspect.signature(target).return_annotation
        target.__signature__ = inspect.signature(source).replace(  # type: ignore[attr-defined]
            return_annotation=own)
        return target

    return apply


class _BridgedSummarizer:
    """An async summarizer as the sync budgeter calls one: awaited on the agent's loop."""

    def __init__(self, summarizer: AsyncSummarizer, bridge: LoopBridge) -> None:
        self.summarizer = summarizer
        self._bridge = bridge

    def summarize(self, request: SummaryRequest) -> str:
        return self._bridge.run(self.summarizer.summarize(request))


class _SyncAgent(Agent):
    """The sync agent an :class:`AsyncAgent` drives: a store opened from a URL or the
    settings is the PostgreSQL store on psycopg's async pool."""

    def __init__(self, *args: Any, bridge: LoopBridge, **kwargs: Any) -> None:
        self._bridge = bridge
        super().__init__(*args, **kwargs)

    def _open_store(self, target: PioneerSettings | str | os.PathLike[str]) -> DatabaseStore:
        def postgres(url: str, **options: Any) -> SqlStore:
            from ..history.async_postgres import AsyncPostgresStore  # the postgres extra

            return AsyncPostgresStore(url, bridge=self._bridge, **options)

        return open_store(target, settings=self.settings, postgres=postgres,
                          counter=self._history_counter())


class AsyncAgent:
    """:class:`~pioneer.turn.Agent` for asyncio: the same arguments, turns whose methods
    are coroutines, and nothing that blocks the event loop (see the module doc).

    ``agent.turn(...)`` makes a turn and reads nothing (use it as ``async with
    agent.turn(...) as turn:``); ``async with AsyncAgent(...) as agent:`` or
    :meth:`aclose` closes it. Constructing one does what ``Agent(...)`` does (loads the
    profiles, opens and migrates the store): do it at start-up, before the loop serves
    requests. An AsyncAgent serves the one event loop it is first used on."""

    @_arguments_of(Agent.__init__)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._bridge = LoopBridge()
        summarizer = kwargs.get("summarizer")
        if summarizer is not None and inspect.iscoroutinefunction(
                getattr(summarizer, "summarize", None)):
            kwargs["summarizer"] = _BridgedSummarizer(summarizer, self._bridge)
        #: The sync agent whose code runs the turns (its settings, store, records, ...).
        self.sync_agent: Agent = _SyncAgent(*args, bridge=self._bridge, **kwargs)
        if summarizer is None:
            configured = summarizer_from_settings(self.sync_agent.settings)
            if configured is not None:
                self.sync_agent.summarizer = _BridgedSummarizer(
                    AsyncOpenAIChatSummarizer.like(configured), self._bridge)
        self._executor: ThreadPoolExecutor | None = None

    @property
    def settings(self) -> PioneerSettings:
        """The agent's settings."""
        return self.sync_agent.settings

    @property
    def provider(self) -> ProviderName:
        """The provider the turns' bodies are built for, unless a call names another."""
        return self.sync_agent.provider

    @property
    def model(self) -> str:
        """The model the bodies name."""
        return self.sync_agent.model

    @property
    def records(self) -> TurnRecords:
        """The turns' records (its methods block: call them through :meth:`run`)."""
        return self.sync_agent.records

    @property
    def store(self) -> DatabaseStore:
        """The agent's store (its methods block: call them from a worker thread)."""
        return self.sync_agent.store

    def _submit(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """``call`` on a worker thread, in the caller's context (its spans, say)."""
        loop = self._bridge.bind()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="pioneer-async")
        context = contextvars.copy_context()
        return loop.run_in_executor(self._executor,
                                    functools.partial(context.run, call, *args, **kwargs))

    async def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """The result of the sync ``call`` run on one of the agent's worker threads (where
        it may use the store and the summarizer); for what the turns do not cover."""
        return await asyncio.shield(self._submit(call, *args, **kwargs))

    @_arguments_of(Agent.turn)
    def turn(self, *args: Any, **kwargs: Any) -> AsyncTurn:
        """A new turn (the arguments of :meth:`Agent.turn`); nothing is read yet."""
        return AsyncTurn(self, self.sync_agent.turn(*args, **kwargs))

    async def reload(self) -> None:
        """:meth:`Agent.reload`: read the profiles and templates again (on a worker; with
        ``locked``, a changed profile is a :class:`LockError` and the agent keeps its
        compiler)."""
        await self.run(self.sync_agent.reload)

    async def aclose(self) -> None:
        """Stop indexing and recording; close a store opened here (its pool on the loop)."""
        await self.run(self.sync_agent.close)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncTurn:
    """One turn of a thread, as coroutines; made by :meth:`AsyncAgent.turn`. Each method is
    the sync :class:`~pioneer.turn.Turn`'s of the same name (:attr:`sync_turn`)."""

    def __init__(self, agent: AsyncAgent, turn: Turn) -> None:
        self.agent = agent
        #: The sync turn whose code this one runs.
        self.sync_turn = turn
        self._lock = asyncio.Lock()

    @property
    def thread_id(self) -> str:
        return self.sync_turn.thread_id

    @property
    def turn_id(self) -> str:
        return self.sync_turn.turn_id

    @property
    def user_text(self) -> str:
        return self.sync_turn.user_text

    @property
    def mode(self) -> ThreadMode:
        return self.sync_turn.mode

    @property
    def rounds(self) -> tuple[RoundRecord, ...]:
        """The rounds recorded so far (each with its cache plan; usage once received)."""
        return self.sync_turn.rounds

    @property
    def history(self) -> HistoryDecision | None:
        """The history decision of the turn (None before the first body)."""
        return self.sync_turn.history

    async def _run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` on a worker, after the turn's earlier calls; a cancelled caller leaves
        it running, and the turn's next call waits for it."""
        await self._lock.acquire()
        try:
            future = self.agent._submit(call, *args, **kwargs)
        except BaseException:
            self._lock.release()
            raise
        future.add_done_callback(lambda _: self._lock.release())
        return await asyncio.shield(future)

    async def next_body(self, provider: ProviderName | None = None, *,
                        continue_generation: bool = False) -> dict[str, Any]:
        """:meth:`Turn.next_body` (the first call loads the history and runs the hooks)."""
        return await self._run(self.sync_turn.next_body, provider,
                               continue_generation=continue_generation)

    async def receive(self, response: Any) -> Step:
        """:meth:`Turn.receive`: read the provider's reply (its JSON or SDK object)."""
        return await self._run(self.sync_turn.receive, response)

    async def receive_error(self, error: object) -> ContextOverflow | None:
        """:meth:`Turn.receive_error`: what the provider answered instead of a reply (a
        context-length error calibrates, and the next body is built to fit)."""
        return await self._run(self.sync_turn.receive_error, error)

    async def add_tool_result(self, call_id: str, content: str, *,
                              is_error: bool = False) -> None:
        """:meth:`Turn.add_tool_result` (no I/O: it runs on the loop, in order)."""
        async with self._lock:
            self.sync_turn.add_tool_result(call_id, content, is_error=is_error)

    async def finish(self, *, assistant_text: str | None = None) -> FinishedTurn:
        """:meth:`Turn.finish`: store the turn and its record, run the post-turn hooks."""
        return await self._run(self.sync_turn.finish, assistant_text=assistant_text)

    async def close(self) -> None:
        """:meth:`Turn.close`: end the turn without an answer (kept as abandoned when it
        sent a body, with a ``ResourceWarning``)."""
        await self._run(self.sync_turn.close)

    async def __aenter__(self) -> AsyncTurn:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: object) -> None:
        await self._run(self.sync_turn.__exit__, kind, error, traceback)
