"""Running a callable with a deadline: the one way pioneer waits for code it cannot stop.

A deadline hook and a summarizer call both run code pioneer does not control, which
may never return. :class:`Running` starts such a callable on a daemon thread and
:meth:`Running.wait` gives up on it once its deadline (counted from the start) has
passed. Python cannot stop a thread, so a late callable is *abandoned*: the thread goes
on until the callable returns, then hands its result to a queue nobody reads and ends.
Nothing else runs on that thread: the caller's own work on the result (validating a
hook's contributions, storing a summary) happens on the waiting thread, and only for a
result that came in time. So an abandoned call never runs pioneer code after its
deadline, and a process that exits while one is still running does not have pioneer
code torn down mid-way on it (docs/failure-behaviour.md, "Hooks").

Failures: whatever the callable raises is handed back in :class:`Outcome` as a value,
except :data:`PASSES_THROUGH` (``KeyboardInterrupt``, ``SystemExit``), which is raised
again in the waiting thread when it came in time. ``GeneratorExit``,
``asyncio.CancelledError`` and any other ``BaseException`` are failures like any
exception.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["PASSES_THROUGH", "Outcome", "Running", "call", "run_with_deadline"]

T = TypeVar("T")

#: The only exceptions a callable may raise through the caller: the user stopping the
#: process. Everything else is a failure the caller handles by its own policy.
PASSES_THROUGH: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit)


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What became of a call: its value, the failure it raised, or that it was late."""

    value: T | None = None
    error: BaseException | None = None
    #: The deadline passed first; the call was abandoned and its result will be dropped.
    late: bool = False

    @property
    def ok(self) -> bool:
        """The call returned in time."""
        return not self.late and self.error is None


def _settle(result: tuple[T | None, BaseException | None]) -> Outcome[T]:
    value, error = result
    if isinstance(error, PASSES_THROUGH):
        raise error
    return Outcome(value=value, error=error)


def call(function: Callable[[], T]) -> Outcome[T]:
    """Call ``function`` on this thread, with the failure rules of :class:`Running`."""
    try:
        return Outcome(value=function())
    except BaseException as error:  # the rule is in PASSES_THROUGH
        return _settle((None, error))


class Running(Generic[T]):
    """``function`` running on its own daemon thread, started now.

    Daemon, so an abandoned call never keeps the process alive at exit.
    """

    def __init__(self, function: Callable[[], T], deadline: float, *, name: str) -> None:
        self.deadline = deadline
        self.started = time.monotonic()
        # A C-level queue: handing the result over runs no Python code on the thread.
        self._box: queue.SimpleQueue[tuple[T | None, BaseException | None]] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=_work, args=(function, self._box), name=name,
                         daemon=True).start()

    def wait(self) -> Outcome[T]:
        """The outcome, waiting no longer than what is left of the deadline."""
        remaining = max(0.0, self.deadline - (time.monotonic() - self.started))
        try:
            result = self._box.get(timeout=remaining)
        except queue.Empty:
            return Outcome(late=True)
        return _settle(result)


def _work(
    function: Callable[[], T], box: queue.SimpleQueue[tuple[T | None, BaseException | None]]
) -> None:
    # The whole life of the thread: the call, then one put. Keep it that way.
    try:
        result: tuple[T | None, BaseException | None] = (function(), None)
    except BaseException as error:  # handed to the waiting thread
        result = (None, error)
    box.put(result)


def run_with_deadline(
    function: Callable[[], T], deadline: float | None, *, name: str
) -> Outcome[T]:
    """``function`` given ``deadline`` seconds on a thread of its own (``None``: called
    here, with no limit)."""
    if deadline is None:
        return call(function)
    return Running(function, deadline, name=name).wait()
