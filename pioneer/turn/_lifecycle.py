"""What keeps a turn from being lost: abandoned turns, one open turn per thread, conflicts.

A turn that sent a body and is dropped without ``finish()`` (closed, left in its ``with``
block, or garbage-collected) is kept as an *abandoned* turn: its record, with the reason,
in the store's ``abandoned_turns`` table (:meth:`~pioneer.audit.TurnRecords.abandon`),
which ``pioneer explain`` reads and no history window does. A ``ResourceWarning`` says so.

A garbage-collected turn is stored by its finalizer, which may run anywhere: in the
middle of a store call of the same thread, or at interpreter exit. So the finalizer only
hands the record to its agent's :class:`AbandonedWriter` (a ``SimpleQueue``, safe to put
to from a finalizer) and never raises; the writer stores it from a thread of its own, or
in the calling thread when the interpreter is shutting down (no thread can be relied on
then), and :meth:`Agent.close` waits for it.

Across processes and nodes, :class:`ThreadGuard` checks, in the transaction that stores a
finished turn (after the store has locked the thread row), that no other turn of the
thread was stored since the turn loaded its window; otherwise the transaction fails with
:class:`~pioneer.errors.ThreadConflictError`.
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Problem, ThreadConflictError
from ..history.store import DatabaseStore, StoreEvent, StoreTransaction, TurnWritten

if TYPE_CHECKING:
    from ..audit.record import TurnRecord
    from ..audit.store import TurnRecords

__all__ = ["Abandoned", "AbandonedWriter", "ThreadGuard", "warn_abandoned"]


@dataclass(frozen=True, slots=True)
class Abandoned:
    """A record waiting to be kept as abandoned, with the user text of its turn."""

    record: TurnRecord
    user_text: str
    #: The last reply's text (None: the last body got no reply).
    assistant_text: str | None


def warn_abandoned(record: TurnRecord, *, stacklevel: int = 3) -> None:
    """The ``ResourceWarning`` of a turn kept as abandoned."""
    warnings.warn(
        f"turn {record.turn_id!r} of thread {record.thread_id!r} was not finished "
        f"({record.abandoned}): kept as an abandoned turn with its "
        f"{len(record.rounds)} round(s), outside the thread's history "
        f"(pioneer explain {record.turn_id}); call finish() or close() on every turn",
        ResourceWarning, stacklevel=stacklevel)


class AbandonedWriter:
    """Stores the records of garbage-collected turns, off the thread that dropped them."""

    def __init__(self, records: TurnRecords) -> None:
        self._records = records
        self._queue: queue.SimpleQueue[Abandoned] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Records that could not be stored, with the error (kept for :meth:`drain`).
        self.failed: list[tuple[Abandoned, BaseException]] = []

    def put(self, item: Abandoned) -> None:
        """Queue ``item`` and see it stored; never raises (called from finalizers)."""
        try:
            self._queue.put(item)
            if not threading.main_thread().is_alive():
                self.drain()  # interpreter exit: no thread would outlive this call
                return
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="pioneer-abandoned-turns")
                    self._thread.start()
        except BaseException:
            pass

    def drain(self) -> None:
        """Store every queued record now (in this thread), after the writer's own."""
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._store_queued()

    def _run(self) -> None:
        while True:
            self._store_queued()
            with self._lock:
                if self._queue.empty():
                    self._thread = None
                    return

    def _store_queued(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            try:
                self._records.abandon(item.record, user_text=item.user_text,
                                      assistant_text=item.assistant_text)
            except BaseException as error:
                self.failed.append((item, error))


class ThreadGuard:
    """Fails the store's write of a finished turn when another turn of its thread was
    stored after the turn loaded its window (a write hook, like the turn records')."""

    def __init__(self, store: DatabaseStore) -> None:
        self._expected: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()
        self._unsubscribe = None if store.read_only else store.subscribe(self._on_write)

    def close(self) -> None:
        """Stop checking the store's writes."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    @contextmanager
    def expecting(self, turn_id: str, *, seen_seq: int, user_text: str) -> Iterator[None]:
        """Inside the block, the store's write of ``turn_id`` fails with
        :class:`ThreadConflictError` when its thread has a turn after position
        ``seen_seq`` (the newest turn the window was loaded with; 0: none)."""
        with self._lock:
            self._expected[turn_id] = (seen_seq, user_text)
        try:
            yield
        finally:
            with self._lock:
                self._expected.pop(turn_id, None)

    def _on_write(self, tx: StoreTransaction, event: StoreEvent) -> None:
        if not isinstance(event, TurnWritten):
            return
        entry = event.entry
        with self._lock:
            expected = self._expected.get(entry.turn_id)
        if expected is None:
            return
        seen_seq, user_text = expected
        # The store locked the thread row before inserting: these are committed turns.
        rows = tx.execute("SELECT turn_id FROM turns WHERE thread_id = ? AND seq > ? "
                          "AND seq < ? ORDER BY seq", (entry.thread_id, seen_seq,
                                                       entry.seq)).fetchall()
        if not rows:
            return
        conflicting = [str(row[0]) for row in rows]
        raise ThreadConflictError(
            Problem(f"turn {entry.turn_id!r} was not stored: {len(conflicting)} other "
                    f"turn(s) of thread {entry.thread_id!r} ({', '.join(conflicting)}) were "
                    "stored after it loaded its history; its rounds are kept as an "
                    "abandoned turn, run it again as a new turn "
                    "(agent.turn(error.thread_id, error.user_text))",
                    file=tx.where),
            thread_id=entry.thread_id, turn_id=entry.turn_id, user_text=user_text,
            assistant_text=entry.assistant_text, conflicting=conflicting)
