"""Running a callable with a deadline: the one way pioneer waits for code it cannot stop.

A deadline hook and a summarizer call both run code pioneer does not control, which
may never return. :class:`Running` hands such a callable to the process's one pool of
worker threads and :meth:`Running.wait` gives up on it once its deadline (counted from
the hand-over) has passed. The pool starts its first worker when the first call comes,
runs at most :data:`WORKERS` calls at once, and its workers wait for the next call
instead of ending, so a turn with a thousand deadline hooks starts no thread of its own.

Python cannot stop a thread, so a late callable is *abandoned*: a call still queued when
its deadline passes never starts, and one already running goes on until it returns, its
result dropped. A worker running an abandoned call is *stuck*: it stops counting against
:data:`WORKERS`, so the pool starts a fresh worker in its place and later turns are not
held up by it, for at most :data:`SPARE` stuck workers at a time (the bound on leaked
threads: ``WORKERS + SPARE``). A stuck worker whose call does return takes its place in
the pool again, or ends when the pool is full. Past :data:`SPARE` stuck workers the pool
runs with the workers it has left; a call that finds none free in time is late like any
other, so a turn is still never held past its deadlines (docs/hooks-and-sections.md,
"Deadlines and the worker pool").

Nothing but the call runs on a worker for a call: the caller's own work on the result
(validating a hook's contributions, storing a summary) happens on the waiting thread, and
only for a result that came in time. So an abandoned call never has pioneer code run on
its result after its deadline, and the workers are daemon threads, so a process that exits
while one is still running is not held up (docs/failure-behaviour.md, "Hooks").

Failures: whatever the callable raises is handed back in :class:`Outcome` as a value,
except :data:`PASSES_THROUGH` (``KeyboardInterrupt``, ``SystemExit``), which is raised
again in the waiting thread when it came in time. ``GeneratorExit``,
``asyncio.CancelledError`` and any other ``BaseException`` are failures like any
exception.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

__all__ = ["PASSES_THROUGH", "SPARE", "WORKERS", "Outcome", "Running", "call", "pool_threads",
           "run_with_deadline"]

T = TypeVar("T")

#: The only exceptions a callable may raise through the caller: the user stopping the
#: process. Everything else is a failure the caller handles by its own policy.
PASSES_THROUGH: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit)

#: How many deadline calls the process runs at once (its pool's size). Read whenever the
#: pool considers a new worker, so a program may set ``pioneer.hooks.deadline.WORKERS`` before
#: its first turn (docs/hooks-and-sections.md, "Deadlines and the worker pool").
WORKERS = 32
#: How many stuck workers (running a call abandoned at its deadline) the pool replaces at
#: a time: the most threads the pool ever holds is ``WORKERS + SPARE``.
SPARE = 32


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


# A job's states, changed only under the pool's lock: waiting for a worker, running,
# its result handed over, dropped before it started, abandoned while running (its worker
# replaced), abandoned with no spare left (its worker keeps its place).
_QUEUED, _RUNNING, _DONE, _DROPPED, _ABANDONED, _OVERRUN = range(6)


class _Job:
    """One call handed to the pool, and the box its result comes back in."""

    __slots__ = ("box", "function", "name", "state")

    def __init__(self, function: Callable[[], object], name: str) -> None:
        self.function = function
        self.name = name
        self.state = _QUEUED
        # A C-level queue: handing the result over runs no Python code of the waiter's.
        self.box: queue.SimpleQueue[tuple[object, BaseException | None]] = queue.SimpleQueue()


class _Pool:
    """The process's deadline workers: started lazily, at most :data:`WORKERS` counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._workers = 0  # counted against WORKERS: idle or running a job in time
        self._idle = 0  # of those, waiting for a job
        self._queued = 0  # jobs handed over and not yet taken by a worker
        self._stuck = 0  # running an abandoned job, replaced, not counted
        self._started = 0  # for thread names

    def submit(self, job: _Job) -> None:
        with self._lock:
            self._queued += 1
            name = self._another()
        self._jobs.put(job)
        self._start(name)

    def abandon(self, job: _Job) -> bool:
        """Give up on ``job`` at its deadline; False when its result is in after all."""
        name = None
        with self._lock:
            if job.state == _DONE:
                return False
            if job.state == _QUEUED:
                job.state = _DROPPED  # never started: the worker that takes it skips it
            elif self._stuck < SPARE:  # running: its worker is replaced
                job.state = _ABANDONED
                self._stuck += 1
                self._workers -= 1
                name = self._another()
            else:  # no spare left: the worker keeps its place, the pool runs one short
                job.state = _OVERRUN
        self._start(name)
        return True

    def _another(self) -> str | None:
        """A new worker's name when the queued jobs outnumber the idle workers and the
        pool has room (counted now, under the lock), else None."""
        if self._queued <= self._idle or self._workers >= WORKERS:
            return None
        self._workers += 1
        self._started += 1
        return f"pioneer-deadline-{self._started}"

    def _start(self, name: str | None) -> None:
        if name is not None:
            threading.Thread(target=self._work, args=(name,), name=name, daemon=True).start()

    def _work(self, name: str) -> None:
        # A worker's life: take a job, run it, hand its result over, again.
        me = threading.current_thread()
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
                if job.state == _DROPPED:
                    continue
                job.state = _RUNNING
            me.name = job.name
            try:
                result: tuple[object, BaseException | None] = (job.function(), None)
            except BaseException as error:  # handed to the waiting thread
                result = (None, error)
            me.name = name
            with self._lock:
                if job.state == _RUNNING:
                    job.state = _DONE
                    job.box.put(result)
                    continue
                del result  # abandoned: nobody reads it
                if job.state == _OVERRUN:
                    continue  # it kept its place in the pool
                self._stuck -= 1
                if self._workers >= WORKERS:
                    return  # replaced meanwhile, and the pool is full
                self._workers += 1

    def threads(self) -> tuple[int, int]:
        """(workers counted against WORKERS, stuck workers) now."""
        with self._lock:
            return self._workers, self._stuck


_POOL = _Pool()


def _forked() -> None:
    # A forked child has none of its parent's workers (only the forking thread goes on),
    # so it starts with an empty pool of its own rather than counting threads it lacks.
    global _POOL
    _POOL = _Pool()


os.register_at_fork(after_in_child=_forked)


def pool_threads() -> tuple[int, int]:
    """How many threads the deadline pool holds now: (workers, stuck workers)."""
    return _POOL.threads()


class Running(Generic[T]):
    """``function`` handed to the deadline pool now; its deadline counts from here."""

    def __init__(self, function: Callable[[], T], deadline: float, *, name: str) -> None:
        self.deadline = deadline
        self.started = time.monotonic()
        self._job = _Job(function, name)
        _POOL.submit(self._job)

    def wait(self) -> Outcome[T]:
        """The outcome, waiting no longer than what is left of the deadline."""
        remaining = max(0.0, self.deadline - (time.monotonic() - self.started))
        try:
            result = self._job.box.get(timeout=remaining)
        except queue.Empty:
            if _POOL.abandon(self._job):
                return Outcome(late=True)
            result = self._job.box.get()  # it finished as the deadline passed
        return _settle(cast("tuple[T | None, BaseException | None]", result))


def run_with_deadline(
    function: Callable[[], T], deadline: float | None, *, name: str
) -> Outcome[T]:
    """``function`` given ``deadline`` seconds on the deadline pool (``None``: called
    here, with no limit)."""
    if deadline is None:
        return call(function)
    return Running(function, deadline, name=name).wait()
