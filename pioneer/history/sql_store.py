"""What the SQLite and PostgreSQL stores share: the conversation SQL and its rules.

:class:`SqlStore` implements :class:`~pioneer.history.store.CrudStore` and
:class:`~pioneer.history.store.DatabaseStore` over two methods a subclass supplies: one
transaction of its database (:meth:`SqlStore._transaction`, mapping the driver's errors
to :class:`StoreError`, a lost connection to :class:`ConnectionLost`) and closing. The
statements use ``?`` placeholders and SQL both databases accept; where a database needs
its own (locking a thread row), the subclass says so.

The rules every store keeps (docs/stores.md):

* a turn's position (``seq``) comes from the database, taken while the thread's row is
  held by the writing transaction, so within a thread positions follow commit order;
* a summary's coverage only moves forward: the update is conditional on the stored
  coverage, so of two nodes summarising at once the one covering more wins;
* a unit of work that lost its connection runs again from the start on a fresh one,
  a few times; a turn whose commit may have happened is recognised by its id and
  content on the retry instead of being written twice;
* every value read back is checked against its column's type, so a damaged row is a
  :class:`StoreError` naming the row and column, never a crash further on.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..caches import CacheStats, LruCache
from ..compile.manifest import PromptManifest
from ..errors import StoreError
from ..text import utf8_text
from ..tokens import TokenCounter, default_counter, message_tokens
from ._cache import TurnCache
from ._tool_rounds import check_tool_rounds, dump_tool_rounds, load_tool_rounds
from .artifacts import ArtifactRef, Side, render_message
from .calibration import KINDS
from .models import (
    HistoryCut,
    HistoryEntry,
    HistoryMessage,
    HistoryWindow,
    ThreadRecord,
    ThreadSummary,
    TokenCalibration,
    summary_message_text,
)
from .store import (
    MAX_TURNS,
    CalibrationUpdate,
    Dialect,
    StoreEvent,
    StoreTransaction,
    SummaryWritten,
    TurnWritten,
    WriteHook,
    check_id,
)

__all__ = ["ConnectionLost", "SqlStore", "check_row"]

T = TypeVar("T")

_TURN_COLUMNS = (
    "seq, turn_id, thread_id, user_item_id, assistant_item_id, user_text, assistant_text, "
    "user_tokens, assistant_tokens, tool_rounds"
)
_REF_COLUMNS = (
    "artifact_id, display_name, kind, version_id, mime_type, size_bytes, sha256, role, "
    "message_id, turn_item_id"
)
_SUMMARY_COLUMNS = (
    "summary, summary_tokens, summary_turn_count, summary_through_seq, summary_through_turn_id"
)
_BATCH = 500  # turn ids per IN (...) query, well under either database's parameter limit

# Column kinds of what is read back: "int", "text", with "?" when NULL is allowed.
_TURN_KINDS = ("int", "text", "text", "text?", "text?", "text?", "text?", "int", "int",
               "text?")
_REF_KINDS = ("text", "text", "text", "text?", "text?", "int?", "text?", "text?", "text?",
              "text?")
_THREAD_KINDS = ("text", "text?", "text")
_SUMMARY_KINDS = ("text", "int", "int", "int", "text")
_CUT_COLUMNS = "cut_seq, cut_turn_id"
_CUT_KINDS = ("int", "text")
_CALIBRATION_COLUMNS = "ratio, overhead, samples, margin, recent, updated_at"
_CALIBRATION_KINDS = ("real", "int", "int", "real", "text", "text")
_EXPECTED = {"int": "an integer", "text": "text", "real": "a number"}
# A history window in one statement, a consistent snapshot by itself: the thread's row,
# with the id of each of its newest turns after the summary's coverage and the cut, oldest
# first (one row with no turn id when there is none; no row when there is no thread).
_WINDOW = f"""
WITH th AS (
    SELECT thread_id, model, created_at, {_SUMMARY_COLUMNS}, {_CUT_COLUMNS},
           CASE WHEN summary IS NULL THEN 0 ELSE summary_through_seq END AS summarised,
           COALESCE(cut_seq - 1, 0) AS before_cut
    FROM threads WHERE thread_id = ?
), recent AS (
    SELECT turn_id, seq FROM turns
    WHERE thread_id = ?
      AND seq > (SELECT CASE WHEN summarised > before_cut THEN summarised ELSE before_cut END
                 FROM th)
      AND (CAST(? AS TEXT) IS NULL OR turn_id <> ?)
    ORDER BY seq DESC LIMIT ?
)
SELECT th.thread_id, th.model, th.created_at, th.summary, th.summary_tokens,
       th.summary_turn_count, th.summary_through_seq, th.summary_through_turn_id,
       th.cut_seq, th.cut_turn_id, recent.turn_id
FROM th LEFT JOIN recent ON 1 = 1
ORDER BY recent.seq
"""


class ConnectionLost(StoreError):
    """The database connection broke during a unit of work (the server went away, or
    ended this session): the work did not commit, or its commit is unknown."""


def _kind_name(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray | memoryview):
        return "a blob"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a real number"
    if isinstance(value, str):
        return "text"
    return type(value).__name__


def check_row(row: Sequence[Any], columns: str, kinds: Sequence[str], *, where: str,
              what: str) -> None:
    """Raise a :class:`StoreError` naming ``what`` and the column when a value of ``row``
    is not of its column's kind ("int", "real", "text", "?" suffix: NULL allowed)."""
    names = [name.strip() for name in columns.split(",")]
    for name, kind, value in zip(names, kinds, row, strict=True):
        optional = kind.endswith("?")
        base = kind.rstrip("?")
        if value is None and optional:
            continue
        if base == "text":
            ok = isinstance(value, str)
        else:
            number = (int, float) if base == "real" else int
            ok = isinstance(value, number) and not isinstance(value, bool)
        if not ok:
            expected = _EXPECTED[base] + (" or NULL" if optional else "")
            raise StoreError(f"{where}: {what}: column {name} holds {_kind_name(value)}, "
                             f"expected {expected}")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class SqlStore:
    """Threads, turns, summaries and manifests in a SQL database (see the module doc)."""

    #: Runs of a unit of work that keeps losing its connection before it is a StoreError.
    ATTEMPTS = 4
    #: Seconds before the first retry; doubled for each further one.
    RETRY_DELAY = 0.25

    def __init__(self, *, dialect: Dialect, where: str, counter: TokenCounter | None,
                 cache_bytes: int, read_only: bool) -> None:
        self._dialect: Dialect = dialect
        self._where = where
        self._counter = counter or default_counter()
        self._cache = TurnCache(cache_bytes)
        self._read_only = read_only
        self._hooks: list[WriteHook] = []
        self._hooks_lock = threading.Lock()

    def cache_stats(self) -> list[CacheStats]:
        """The store's caches: its turns (``history_turns``) and the token counter's
        counts (``token_counts``, shared by everything that uses the same counter)."""
        stats = [self._cache.cache.stats()]
        counter_cache = getattr(self._counter, "cache", None)
        if isinstance(counter_cache, LruCache):
            stats.append(counter_cache.stats())
        return stats

    # -- what a subclass supplies --------------------------------------------------

    def _transaction(self, write: bool) -> AbstractContextManager[StoreTransaction]:
        raise NotImplementedError

    def _statement(self) -> AbstractContextManager[StoreTransaction]:
        """Where :meth:`_read_statement`'s one statement runs: a read transaction, unless
        the database can run a lone statement more cheaply outside one."""
        return self._transaction(False)

    def _lock_thread(self, tx: StoreTransaction, thread_id: str) -> bool:
        """Hold the thread's row for the rest of ``tx``; whether the thread exists."""
        return tx.execute("SELECT 1 FROM threads WHERE thread_id = ?",
                          (thread_id,)).fetchone() is not None

    def _thread_gate(self, thread_id: str) -> AbstractContextManager[None]:
        """Held around a write that holds ``thread_id``'s row: where the writes of one
        thread from this process queue (the PostgreSQL store's; none on SQLite, whose
        writers all queue on the store's one write lock)."""
        return nullcontext()

    def _write_thread(self, thread_id: str, work: Callable[[StoreTransaction], T]) -> T:
        """:meth:`write` of ``work``, which holds ``thread_id``'s row, through its gate."""
        with self._thread_gate(thread_id):
            return self.write(work)

    def _recover(self) -> None:
        """After a lost connection, before the retry: drop other dead connections."""

    def close(self) -> None:
        """Release connections and files."""
        raise NotImplementedError

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the extension surface -----------------------------------------------------

    @property
    def dialect(self) -> Dialect:
        """Which database the store writes."""
        return self._dialect

    @property
    def where(self) -> str:
        """The store's name in messages."""
        return self._where

    @property
    def read_only(self) -> bool:
        """Whether the store was opened for reading only."""
        return self._read_only

    def read(self, work: Callable[[StoreTransaction], T]) -> T:
        """``work`` in one read-only snapshot; it may run again if the connection is lost."""
        return self._run(work, write=False)

    def write(self, work: Callable[[StoreTransaction], T]) -> T:
        """``work`` in one write transaction, run again from the start on a fresh
        connection when the connection was lost (so it must be safe to repeat)."""
        if self._read_only:
            raise StoreError(f"{self._where}: the store was opened read-only")
        return self._run(work, write=True)

    def subscribe(self, hook: WriteHook) -> Callable[[], None]:
        """Call ``hook`` in the transaction of every turn and summary written from now on."""
        with self._hooks_lock:
            self._hooks.append(hook)

        def unsubscribe() -> None:
            with self._hooks_lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return unsubscribe

    def _emit(self, tx: StoreTransaction, event: StoreEvent) -> None:
        with self._hooks_lock:
            hooks = list(self._hooks)
        for hook in hooks:
            hook(tx, event)

    def _read_statement(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of one statement, which reads a consistent snapshot by itself."""
        return self._run(lambda tx: tx.execute(sql, params).fetchall(), write=False,
                         statement=True)

    def _run(self, work: Callable[[StoreTransaction], T], *, write: bool,
             statement: bool = False) -> T:
        delay = self.RETRY_DELAY
        for attempt in range(1, self.ATTEMPTS + 1):
            try:
                with self._statement() if statement else self._transaction(write) as tx:
                    return work(tx)
            except ConnectionLost as lost:
                if attempt == self.ATTEMPTS:
                    raise StoreError(f"{lost} (gave up after {attempt} attempts)") from None
                self._recover()
                if attempt > 1:  # the first retry at once: a pooled connection had died
                    time.sleep(delay)
                    delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    # -- threads -------------------------------------------------------------------

    def ensure_thread(self, thread_id: str, *, model: str | None = None) -> ThreadRecord:
        """Create the thread when missing (setting ``model`` when given); return it."""
        check_id(thread_id, "thread_id")
        if not thread_id.strip():
            raise StoreError("thread id must not be blank")

        def work(tx: StoreTransaction) -> ThreadRecord | None:
            tx.execute(
                "INSERT INTO threads (thread_id, model, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_id) DO NOTHING",
                (thread_id, model, _now()),
            )
            if model is not None:
                tx.execute("UPDATE threads SET model = ? WHERE thread_id = ?",
                           (model, thread_id))
            return self._thread(tx, thread_id)

        record = self._write_thread(thread_id, work)
        assert record is not None
        return record

    def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None`` when it does not exist."""
        check_id(thread_id, "thread_id")
        return self.read(lambda tx: self._thread(tx, thread_id))

    def _thread(self, tx: StoreTransaction, thread_id: str) -> ThreadRecord | None:
        columns = "thread_id, model, created_at"
        row = tx.execute(f"SELECT {columns} FROM threads WHERE thread_id = ?",
                         (thread_id,)).fetchone()
        if row is None:
            return None
        check_row(row, columns, _THREAD_KINDS, where=self._where, what=f"thread {thread_id!r}")
        return ThreadRecord(*row)

    # -- turns ---------------------------------------------------------------------

    def _message_tokens(self, text: str | None, refs: Sequence[ArtifactRef], side: Side) -> int:
        rendered = render_message(text, refs, side)
        return 0 if rendered is None else message_tokens(self._counter, rendered)

    def add_turn(
        self,
        thread_id: str,
        *,
        user_text: str | None,
        assistant_text: str | None,
        user_artifacts: Sequence[ArtifactRef] = (),
        assistant_artifacts: Sequence[ArtifactRef] = (),
        turn_id: str | None = None,
        user_item_id: str | None = None,
        assistant_item_id: str | None = None,
        tool_rounds: Sequence[HistoryMessage] = (),
    ) -> HistoryEntry:
        """Write one completed turn (ids generated when not given) in one transaction;
        ``tool_rounds`` are its tool calls and results, sent with it on later turns."""
        for what, value in (("thread_id", thread_id), ("turn_id", turn_id),
                            ("user_item_id", user_item_id),
                            ("assistant_item_id", assistant_item_id)):
            check_id(value, what)
        turn_id = turn_id or uuid.uuid4().hex
        user_text = None if user_text is None else utf8_text(user_text)
        assistant_text = None if assistant_text is None else utf8_text(assistant_text)
        if user_item_id is None and (user_text is not None or user_artifacts):
            user_item_id = uuid.uuid4().hex
        if assistant_item_id is None and (assistant_text is not None or assistant_artifacts):
            assistant_item_id = uuid.uuid4().hex
        # Counted outside the transaction so the thread is held only for the insert.
        user_tokens = self._message_tokens(user_text, user_artifacts, "user")
        assistant_tokens = self._message_tokens(assistant_text, assistant_artifacts, "assistant")
        user_refs, assistant_refs = tuple(user_artifacts), tuple(assistant_artifacts)
        rounds = tuple(tool_rounds)
        check_tool_rounds(rounds, where=f"{self._where}: turn {turn_id!r}")
        rounds_json, round_tokens = dump_tool_rounds(rounds, self._counter)

        def entry(seq: int) -> HistoryEntry:
            return HistoryEntry(
                seq=seq, turn_id=turn_id, thread_id=thread_id, user_item_id=user_item_id,
                assistant_item_id=assistant_item_id, user_text=user_text,
                assistant_text=assistant_text, user_tokens=user_tokens,
                assistant_tokens=assistant_tokens, user_artifacts=user_refs,
                assistant_artifacts=assistant_refs, tool_rounds=rounds,
                tool_round_tokens=round_tokens,
            )

        runs = 0

        def work(tx: StoreTransaction) -> HistoryEntry:
            nonlocal runs
            runs += 1
            if not self._lock_thread(tx, thread_id):
                raise StoreError(f"{self._where}: thread {thread_id!r} does not exist")
            existing = tx.execute("SELECT seq FROM turns WHERE turn_id = ?",
                                  (turn_id,)).fetchone()
            if existing is not None:
                # On a retry, the first run's commit may have gone through before the
                # connection broke: the same turn, stored whole, is that run's result.
                if runs > 1:
                    stored = self._load(tx, [turn_id]).get(turn_id)
                    if stored is not None and stored == entry(stored.seq):
                        return stored
                raise StoreError(f"{self._where}: turn {turn_id!r} already exists")
            # The tool_rounds column is named only when there are rounds: a turn that keeps
            # none is written as before the column existed.
            extra, values = (", tool_rounds", (rounds_json,)) if rounds_json else ("", ())
            (seq,) = tx.execute(
                "INSERT INTO turns (turn_id, thread_id, user_item_id, user_text, "
                "user_tokens, assistant_item_id, assistant_text, assistant_tokens, "
                f"created_at{extra}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?{', ?' * len(values)}) "
                "RETURNING seq",
                (turn_id, thread_id, user_item_id, user_text, user_tokens,
                 assistant_item_id, assistant_text, assistant_tokens, _now(), *values),
            ).fetchone()
            rows = [
                (turn_id, side, position, ref.artifact_id, ref.display_name, ref.kind,
                 ref.version_id, ref.mime_type, ref.size_bytes, ref.sha256, ref.role,
                 ref.message_id, ref.turn_item_id)
                for side, refs in (("user", user_refs), ("assistant", assistant_refs))
                for position, ref in enumerate(refs)
            ]
            if rows:
                tx.executemany(
                    f"INSERT INTO artifact_refs (turn_id, side, position, {_REF_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows,
                )
            written = entry(int(seq))
            self._emit(tx, TurnWritten(written))
            return written

        written = self._write_thread(thread_id, work)
        self._cache.put_many({turn_id: written})
        return written

    def get_thread_conversation_history(
        self,
        thread_id: str,
        limit: int = MAX_TURNS,
        *,
        after_seq: int = 0,
        exclude_turn_id: str | None = None,
    ) -> tuple[HistoryEntry, ...]:
        """The newest ``limit`` turns after ``after_seq``, oldest first."""
        check_id(thread_id, "thread_id")
        check_id(exclude_turn_id, "exclude_turn_id")
        return self.read(lambda tx: self._entries(tx, thread_id, limit, after_seq,
                                                  exclude_turn_id))

    def _entries(self, tx: StoreTransaction, thread_id: str, limit: int, after_seq: int,
                 exclude_turn_id: str | None) -> tuple[HistoryEntry, ...]:
        rows = tx.execute(
            "SELECT turn_id FROM turns WHERE thread_id = ? AND seq > ? "
            "AND (CAST(? AS TEXT) IS NULL OR turn_id <> ?) ORDER BY seq DESC LIMIT ?",
            (thread_id, after_seq, exclude_turn_id, exclude_turn_id, max(0, limit)),
        ).fetchall()
        ids = [turn_id for (turn_id,) in rows]
        ids.reverse()
        found = self._cache.get_many(ids)
        missing = [turn_id for turn_id in ids if turn_id not in found]
        for start in range(0, len(missing), _BATCH):
            loaded = self._load(tx, missing[start:start + _BATCH])
            self._cache.put_many(loaded)
            found.update(loaded)
        lost = [turn_id for turn_id in ids if turn_id not in found]
        if lost:
            raise StoreError(f"{self._where}: turn {lost[0]!r} vanished while it was read")
        return tuple(found[turn_id] for turn_id in ids)

    def _load(self, tx: StoreTransaction, turn_ids: Sequence[str]) -> dict[str, HistoryEntry]:
        marks = ", ".join("?" * len(turn_ids))
        refs: dict[tuple[str, str], list[ArtifactRef]] = {}
        for row in tx.execute(
            f"SELECT turn_id, side, {_REF_COLUMNS} FROM artifact_refs "
            f"WHERE turn_id IN ({marks}) ORDER BY turn_id, side, position",
            turn_ids,
        ):
            turn_id, side, *fields = row
            check_row(fields, _REF_COLUMNS, _REF_KINDS, where=self._where,
                      what=f"artifact ref of turn {turn_id!r}")
            refs.setdefault((turn_id, side), []).append(ArtifactRef(*fields))
        loaded: dict[str, HistoryEntry] = {}
        for row in tx.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE turn_id IN ({marks})",
                              turn_ids):
            check_row(row, _TURN_COLUMNS, _TURN_KINDS, where=self._where,
                      what=f"turn {row[1]!r}")
            (seq, turn_id, thread, user_item, assistant_item, user_text, assistant_text,
             user_tokens, assistant_tokens, rounds_json) = row
            rounds, round_tokens = load_tool_rounds(
                rounds_json, where=f"{self._where}: turn {turn_id!r}")
            loaded[turn_id] = HistoryEntry(
                seq=seq, turn_id=turn_id, thread_id=thread, user_item_id=user_item,
                assistant_item_id=assistant_item, user_text=user_text,
                assistant_text=assistant_text, user_tokens=user_tokens,
                assistant_tokens=assistant_tokens,
                user_artifacts=tuple(refs.get((turn_id, "user"), ())),
                assistant_artifacts=tuple(refs.get((turn_id, "assistant"), ())),
                tool_rounds=rounds, tool_round_tokens=round_tokens,
            )
        return loaded

    # -- summary -------------------------------------------------------------------

    def _summary_of(self, row: Sequence[Any], thread_id: str) -> ThreadSummary | None:
        if row[0] is None:
            return None
        check_row(row, _SUMMARY_COLUMNS, _SUMMARY_KINDS, where=self._where,
                  what=f"summary of thread {thread_id!r}")
        return ThreadSummary(*row)

    def _summary(self, tx: StoreTransaction, thread_id: str) -> ThreadSummary | None:
        row = tx.execute(f"SELECT {_SUMMARY_COLUMNS} FROM threads WHERE thread_id = ?",
                         (thread_id,)).fetchone()
        return None if row is None else self._summary_of(row, thread_id)

    def get_thread_summary(self, thread_id: str) -> ThreadSummary | None:
        """The stored summary, or ``None``."""
        check_id(thread_id, "thread_id")
        return self.read(lambda tx: self._summary(tx, thread_id))

    def set_thread_summary(
        self, thread_id: str, summary: str, *, through_turn_id: str
    ) -> ThreadSummary:
        """Store a summary covering every turn up to and including ``through_turn_id``.

        Coverage never moves backwards: if a summary covering later turns is already
        stored (a concurrent writer won), that one is kept and returned.
        """
        check_id(thread_id, "thread_id")
        check_id(through_turn_id, "through_turn_id")
        text = utf8_text(summary.strip())
        if not text:
            raise StoreError(f"{self._where}: a thread summary must not be empty")
        tokens = message_tokens(self._counter, summary_message_text(text))

        def work(tx: StoreTransaction) -> ThreadSummary:
            row = tx.execute("SELECT seq FROM turns WHERE turn_id = ? AND thread_id = ?",
                             (through_turn_id, thread_id)).fetchone()
            if row is None:
                raise StoreError(
                    f"{self._where}: turn {through_turn_id!r} is not in thread {thread_id!r}"
                )
            seq = int(row[0])
            (count,) = tx.execute(
                "SELECT COUNT(*) FROM turns WHERE thread_id = ? AND seq <= ?", (thread_id, seq)
            ).fetchone()
            # Conditional on the stored coverage: of two writers racing, the one covering
            # more turns wins, whichever commits first.
            changed = tx.execute(
                "UPDATE threads SET summary = ?, summary_tokens = ?, summary_turn_count = ?, "
                "summary_through_seq = ?, summary_through_turn_id = ? "
                "WHERE thread_id = ? AND COALESCE(summary_through_seq, 0) <= ?",
                (text, tokens, int(count), seq, through_turn_id, thread_id, seq),
            ).rowcount
            if changed == 0:
                current = self._summary(tx, thread_id)
                assert current is not None
                return current
            stored = ThreadSummary(text, tokens, int(count), seq, through_turn_id)
            self._emit(tx, SummaryWritten(thread_id, stored))
            return stored

        return self._write_thread(thread_id, work)

    def get_history_window(
        self, thread_id: str, limit: int = MAX_TURNS, *, exclude_turn_id: str | None = None
    ) -> HistoryWindow:
        """Summary, the stored cut and the newest ``limit`` turns after the summary's
        coverage from the cut on, read as one consistent snapshot.

        Reading from the cut keeps a pass as short as the history it sends, whatever
        ``limit`` is: turns before the cut are never loaded again.
        """
        check_id(thread_id, "thread_id")
        check_id(exclude_turn_id, "exclude_turn_id")

        if self._dialect == "postgresql":
            # The warm path: one statement (the thread's row and the window's turn ids),
            # one round trip, and every turn from the cache. (On SQLite, which has no
            # round trips, the two plain queries below cost less than this one.)
            rows = self._read_statement(_WINDOW, (thread_id, thread_id, exclude_turn_id,
                                                  exclude_turn_id, max(0, limit)))
            if not rows:
                raise StoreError(f"{self._where}: thread {thread_id!r} does not exist")
            thread, summary, cut = self._thread_of(rows[0][:10], thread_id)
            ids = [row[10] for row in rows if row[10] is not None]
            found = self._cache.get_many(ids)
            if len(found) == len(ids):
                return HistoryWindow(thread, summary, tuple(found[i] for i in ids), cut)

        def work(tx: StoreTransaction) -> HistoryWindow:
            row = tx.execute(
                f"SELECT thread_id, model, created_at, {_SUMMARY_COLUMNS}, {_CUT_COLUMNS} "
                "FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                raise StoreError(f"{self._where}: thread {thread_id!r} does not exist")
            thread, summary, cut = self._thread_of(row, thread_id)
            after = max(summary.through_seq if summary else 0,
                        cut.first_seq - 1 if cut else 0)
            entries = self._entries(tx, thread_id, limit, after, exclude_turn_id)
            return HistoryWindow(thread, summary, entries, cut)

        return self.read(work)

    def _thread_of(self, row: Sequence[Any], thread_id: str
                   ) -> tuple[ThreadRecord, ThreadSummary | None, HistoryCut | None]:
        """A thread's record, summary and cut from its row (``_WINDOW``'s first ten)."""
        check_row(row[:3], "thread_id, model, created_at", _THREAD_KINDS,
                  where=self._where, what=f"thread {thread_id!r}")
        return (ThreadRecord(*row[:3]), self._summary_of(row[3:8], thread_id),
                self._cut_of(row[8:10], thread_id))

    # -- the truncation cut --------------------------------------------------------

    def _cut_of(self, row: Sequence[Any], thread_id: str) -> HistoryCut | None:
        if row[0] is None:
            return None
        check_row(row, _CUT_COLUMNS, _CUT_KINDS, where=self._where,
                  what=f"history cut of thread {thread_id!r}")
        return HistoryCut(int(row[0]), str(row[1]))

    def set_history_cut(self, thread_id: str, *, first_turn_id: str) -> HistoryCut:
        """Store that truncation sends the thread's turns from ``first_turn_id`` on.

        A cut never moves backwards: of two writers racing, the later cut wins, whichever
        commits first.
        """
        check_id(thread_id, "thread_id")
        check_id(first_turn_id, "first_turn_id")

        def work(tx: StoreTransaction) -> HistoryCut:
            row = tx.execute("SELECT seq FROM turns WHERE turn_id = ? AND thread_id = ?",
                             (first_turn_id, thread_id)).fetchone()
            if row is None:
                raise StoreError(
                    f"{self._where}: turn {first_turn_id!r} is not in thread {thread_id!r}"
                )
            seq = int(row[0])
            changed = tx.execute(
                "UPDATE threads SET cut_seq = ?, cut_turn_id = ? "
                "WHERE thread_id = ? AND COALESCE(cut_seq, 0) <= ?",
                (seq, first_turn_id, thread_id, seq),
            ).rowcount
            if changed == 0:
                current = tx.execute(f"SELECT {_CUT_COLUMNS} FROM threads WHERE thread_id = ?",
                                     (thread_id,)).fetchone()
                cut = self._cut_of(current, thread_id)
                assert cut is not None
                return cut
            return HistoryCut(seq, first_turn_id)

        return self._write_thread(thread_id, work)

    # -- manifests -----------------------------------------------------------------

    def update_turn_prompt_manifest(self, turn_id: str, manifest: str | PromptManifest) -> None:
        """Attach the prompt manifest (JSON text or model) that compiled a turn."""
        check_id(turn_id, "turn_id")
        if isinstance(manifest, PromptManifest):
            text = manifest.to_json(indent=None)
        else:
            try:
                parsed = json.loads(manifest)
            except ValueError as error:
                raise StoreError(
                    f"prompt manifest for turn {turn_id!r}: not JSON: {error}"
                ) from None
            if not isinstance(parsed, dict):
                raise StoreError(f"prompt manifest for turn {turn_id!r}: expected a JSON object")
            text = manifest

        def work(tx: StoreTransaction) -> None:
            changed = tx.execute("UPDATE turns SET prompt_manifest = ? WHERE turn_id = ?",
                                 (text, turn_id)).rowcount
            if changed == 0:
                raise StoreError(f"{self._where}: turn {turn_id!r} does not exist")

        self.write(work)

    def get_turn_prompt_manifest(self, turn_id: str) -> str | None:
        """The manifest JSON stored for a turn, or ``None``."""
        check_id(turn_id, "turn_id")

        def work(tx: StoreTransaction) -> str | None:
            row = tx.execute("SELECT prompt_manifest FROM turns WHERE turn_id = ?",
                             (turn_id,)).fetchone()
            if row is None:
                return None
            check_row(row, "prompt_manifest", ("text?",), where=self._where,
                      what=f"turn {turn_id!r}")
            return row[0]  # type: ignore[no-any-return]

        return self.read(work)


    # -- token calibration ---------------------------------------------------------

    def _calibration(self, tx: StoreTransaction, provider: str, model: str, *,
                     lock: bool = False) -> TokenCalibration | None:
        # FOR UPDATE holds the row on PostgreSQL; an SQLite write already holds the file.
        held = " FOR UPDATE" if lock and tx.dialect == "postgresql" else ""
        row = tx.execute(f"SELECT {_CALIBRATION_COLUMNS} FROM token_calibration "
                         f"WHERE provider = ? AND model = ?{held}", (provider, model)).fetchone()
        if row is None:
            return None
        what = f"token calibration of {provider!r} {model!r}"
        check_row(row, _CALIBRATION_COLUMNS, _CALIBRATION_KINDS, where=self._where, what=what)
        ratio, overhead, samples, margin, recent, updated_at = row
        return TokenCalibration(provider, model, float(ratio), int(overhead), int(samples),
                                float(margin), _samples(recent, where=self._where, what=what),
                                updated_at)

    def get_token_calibration(self, provider: str, model: str) -> TokenCalibration | None:
        """The stored token calibration of ``provider`` and ``model``, or ``None``."""
        return self.read(lambda tx: self._calibration(tx, provider, model))

    def update_token_calibration(
        self, provider: str, model: str, update: CalibrationUpdate
    ) -> TokenCalibration:
        """Store ``update(stored)`` in one transaction that holds the row (the insert of a
        missing row waits for a concurrent one, so no writer's sample is lost)."""

        def work(tx: StoreTransaction) -> TokenCalibration:
            now = _now()
            tx.execute(
                "INSERT INTO token_calibration (provider, model, ratio, overhead, samples, "
                "margin, recent, updated_at) VALUES (?, ?, 1.0, 0, 0, 1.0, '[]', ?) "
                "ON CONFLICT (provider, model) DO NOTHING",
                (provider, model, now),
            )
            stored = self._calibration(tx, provider, model, lock=True)
            new = update(stored if stored is not None and stored.samples > 0 else None)
            recent = json.dumps([list(sample) for sample in new.recent], separators=(",", ":"))
            tx.execute(
                "UPDATE token_calibration SET ratio = ?, overhead = ?, samples = ?, "
                "margin = ?, recent = ?, updated_at = ? WHERE provider = ? AND model = ?",
                (float(new.ratio), int(new.overhead), int(new.samples), float(new.margin),
                 recent, now, provider, model),
            )
            return TokenCalibration(provider, model, float(new.ratio), int(new.overhead),
                                    int(new.samples), float(new.margin), new.recent, now)

        return self.write(work)


def _samples(text: str, *, where: str, what: str) -> tuple[tuple[int, ...], ...]:
    """The ``recent`` column: a JSON list of samples, each a list of integers: [local,
    reported] (the row's first shape, still read) or [local, reported, then the local
    count of each kind of text] (pioneer.history.calibration.KINDS)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, list) and all(
        isinstance(sample, list) and len(sample) in (2, 2 + len(KINDS))
        and all(isinstance(n, int) and not isinstance(n, bool) for n in sample)
        for sample in data
    ):
        return tuple(tuple(sample) for sample in data)
    raise StoreError(f"{where}: {what}: column recent holds {text[:80]!r}, expected a JSON "
                     f"list of [local, reported] or [local, reported, {len(KINDS)} counts by "
                     "kind] lists of integers")
