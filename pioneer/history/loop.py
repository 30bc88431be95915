"""Waiting on an event loop from a worker thread: how the async twin shares the sync code.

:class:`~pioneer.turn.AsyncAgent` runs the same turn code as :class:`~pioneer.turn.Agent`
(docs/agent.md, "The async twin: `AsyncAgent`"), on worker threads, so the event loop is never
blocked by it. What that code waits on the network for runs on the loop itself: the
PostgreSQL store's statements on psycopg's async pool
(:class:`~pioneer.history.async_postgres.AsyncPostgresStore`) and the summarizer's request on
an async HTTP client. :class:`LoopBridge` is the one place the two meet: sync code on a
worker thread hands a coroutine to the loop the bridge is bound to and waits for its result
(the loop goes on with other turns meanwhile); exceptions come back as they were raised.

Called on the loop's own thread, the bridge would wait for the loop it is blocking, so that
is an error, never a hang.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..errors import PioneerError

__all__ = ["LoopBridge", "LoopBridgeError"]

T = TypeVar("T")


class LoopBridgeError(PioneerError, RuntimeError):
    """Sync code asked the event loop for work where it cannot get it (on the loop's own
    thread, with no loop bound yet, or after the loop closed)."""


class LoopBridge:
    """Runs coroutines on one event loop for code on other threads (see the module doc)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the bridge is bound to (None until the first :meth:`bind`)."""
        return self._loop

    def bind(self) -> asyncio.AbstractEventLoop:
        """Bind the bridge to the running loop (the first call), or check that the running
        loop is the one it is bound to: an agent serves one event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                self._loop, self._thread = loop, threading.get_ident()
            elif self._loop is not loop:
                raise LoopBridgeError(
                    "this AsyncAgent serves the event loop it was first used on; make one "
                    "AsyncAgent per event loop")
        return loop

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the bound loop's thread."""
        return self._thread == threading.get_ident()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The result of ``coro``, run on the bound loop; the calling thread waits."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            coro.close()
            raise LoopBridgeError("the AsyncAgent's event loop is not running (use the agent "
                                  "from inside its loop, and aclose() it before the loop ends)")
        if self.on_loop_thread():
            coro.close()
            raise LoopBridgeError("a blocking call reached the event loop's own thread; an "
                                  "AsyncAgent's sync work runs on its worker threads")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
