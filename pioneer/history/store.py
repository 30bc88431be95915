"""The conversation store protocol: threads, turns, summaries and per-turn manifests.

:class:`CrudStore` is what the budgeter and the CLI need from a store. The SQLite store
(:mod:`pioneer.history.sqlite_store`) is the embedded implementation and the PostgreSQL
store (:mod:`pioneer.history.postgres_store`) the one for several nodes; a gateway with
its own database implements the same methods. Writes compute token counts before they
commit, so a reader never counts old text again.

:class:`DatabaseStore` is what the packages that keep their own tables in the store's
database build on (the episodic index, the turn records): a store knows nothing of them.
They run their SQL through :meth:`DatabaseStore.read` and :meth:`DatabaseStore.write`
(a :class:`StoreTransaction` each), and subscribe a :data:`WriteHook` that the store
calls inside the transaction of every write it makes itself (:class:`TurnWritten`,
:class:`SummaryWritten`): what a hook writes commits with the turn or not at all.
docs/stores.md describes the protocol and the retry rules.

The truncation cut (cache-aware history, docs/history.md) is what a store keeps per
thread next to the summary: :meth:`CrudStore.set_history_cut` stores the first turn
the history still sends (truncation or the turn-count window made it), and
:meth:`CrudStore.get_history_window` returns it as ``HistoryWindow.cut``, in the same
snapshot as the summary and the turns from the cut on. Like a summary's coverage a cut
never moves backwards. A store implements it with one nullable
pair of columns on its thread row (``cut_seq``, ``cut_turn_id`` in the SQL stores).

The token calibration (:mod:`pioneer.history.calibration`, docs/history.md) is one row
per provider and model, shared by every thread:
:meth:`CrudStore.get_token_calibration` reads it and
:meth:`CrudStore.update_token_calibration` changes it in one transaction that holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from ..compile.manifest import PromptManifest
from ..errors import InputError, Problem, StoreError
from .artifacts import ArtifactRef
from .models import (
    HistoryCut,
    HistoryEntry,
    HistoryMessage,
    HistoryWindow,
    ThreadRecord,
    ThreadSummary,
    TokenCalibration,
)

__all__ = [
    "MAX_ID_CHARS",
    "MAX_TURNS",
    "CalibrationUpdate",
    "CrudStore",
    "Cursor",
    "DatabaseStore",
    "Dialect",
    "StoreEvent",
    "StoreTimeout",
    "StoreTransaction",
    "SummaryWritten",
    "TurnWritten",
    "WriteHook",
    "check_id",
]

T = TypeVar("T")

#: The SQL dialect of a store's database.
Dialect = Literal["sqlite", "postgresql"]

#: Turns one request's history carries at most (the turn-count window).
MAX_TURNS = 200

#: The next calibration of a (provider, model) from the stored one (``None``: no row yet).
CalibrationUpdate = Callable[[TokenCalibration | None], TokenCalibration]

#: The longest thread, turn or item id a store takes, in characters. Two ids of the
#: widest characters (4 bytes each in UTF-8) and a position fit one row of a PostgreSQL
#: b-tree index (at most 2,704 bytes), which the turns' index by thread holds.
MAX_ID_CHARS = 256


def check_id(value: str | None, what: str) -> None:
    """Refuse ``value`` (a thread, turn or item id; ``None`` passes) when it is longer than
    :data:`MAX_ID_CHARS`, with an :class:`~pioneer.errors.InputError` naming ``what``:
    before any query, so the database never sees it."""
    if value is not None and len(value) > MAX_ID_CHARS:
        raise InputError(Problem(
            f"an id is at most {MAX_ID_CHARS} characters (got {len(value)}: "
            f"{value[:40]!r}...)", path=what))


class CrudStore(Protocol):
    """Threads, their turns, their summary and each turn's prompt manifest."""

    def ensure_thread(self, thread_id: str, *, model: str | None = None) -> ThreadRecord:
        """Create the thread when missing (setting ``model`` when given); return it."""
        ...

    def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None`` when it does not exist."""
        ...

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
        ``tool_rounds`` (assistant messages with tool calls and the tool results, in
        order) are sent with it on later turns, between the user message and the reply."""
        ...

    def get_thread_conversation_history(
        self,
        thread_id: str,
        limit: int = MAX_TURNS,
        *,
        after_seq: int = 0,
        exclude_turn_id: str | None = None,
    ) -> tuple[HistoryEntry, ...]:
        """The newest ``limit`` turns after ``after_seq``, oldest first."""
        ...

    def get_thread_summary(self, thread_id: str) -> ThreadSummary | None:
        """The stored summary, or ``None``."""
        ...

    def set_thread_summary(
        self, thread_id: str, summary: str, *, through_turn_id: str
    ) -> ThreadSummary:
        """Store a summary covering every turn up to and including ``through_turn_id``.

        A summary never moves coverage backwards: when a summary covering later turns
        is already stored (a concurrent writer won), that one is kept and returned.
        """
        ...

    def get_history_window(
        self, thread_id: str, limit: int = MAX_TURNS, *, exclude_turn_id: str | None = None
    ) -> HistoryWindow:
        """Summary, the stored cut and the newest ``limit`` turns after the summary's
        coverage from the cut on, as one snapshot.

        ``HistoryWindow.cut`` is what :meth:`set_history_cut` stored, or ``None``; no turn
        before it is loaded.
        """
        ...

    def set_history_cut(self, thread_id: str, *, first_turn_id: str) -> HistoryCut:
        """Store that the history sends the thread's turns from ``first_turn_id`` on.

        A cut never moves backwards: when a cut at a later turn is already stored (a
        concurrent writer won), that one is kept and returned. The turn must be in the
        thread (a :class:`~pioneer.errors.StoreError` otherwise).
        """
        ...

    def update_turn_prompt_manifest(
        self, turn_id: str, manifest: str | PromptManifest
    ) -> None:
        """Attach the prompt manifest (JSON text or model) that compiled a turn."""
        ...

    def get_turn_prompt_manifest(self, turn_id: str) -> str | None:
        """The manifest JSON stored for a turn, or ``None``."""
        ...

    def get_token_calibration(self, provider: str, model: str) -> TokenCalibration | None:
        """The stored token calibration of ``provider`` and ``model``, or ``None``."""
        ...

    def update_token_calibration(
        self, provider: str, model: str, update: CalibrationUpdate
    ) -> TokenCalibration:
        """Store ``update(stored)`` as the calibration of ``provider`` and ``model``.

        Read, ``update`` and write are one transaction that holds the row, so of several
        writers (threads, processes, nodes) each sees the others' samples and none is
        lost; ``update`` may run again when the connection is lost, so it must be a pure
        function of its argument.
        """
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


class Cursor(Protocol):
    """The result of one statement: its rows and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class StoreTransaction(Protocol):
    """One open transaction of a store's database.

    Statements use ``?`` placeholders on every dialect (the PostgreSQL store translates
    them), so SQL that both databases accept is written once.
    """

    @property
    def dialect(self) -> Dialect:
        """Which database this is, for the statements that differ."""
        ...

    @property
    def where(self) -> str:
        """The store's name in messages: its path, or its URL without a password."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each parameter row."""
        ...

    def time_limit(self, milliseconds: int | None) -> AbstractContextManager[None]:
        """Stop the statements run inside after ``milliseconds`` (None: no limit), as
        :class:`~pioneer.errors.StoreTimeout`."""
        ...


@dataclass(frozen=True, slots=True)
class TurnWritten:
    """A turn was written (``entry`` as stored, with its position)."""

    entry: HistoryEntry


@dataclass(frozen=True, slots=True)
class SummaryWritten:
    """A thread's summary was stored (it replaced an older one, if any)."""

    thread_id: str
    summary: ThreadSummary


StoreEvent = TurnWritten | SummaryWritten

#: Called inside the write transaction of each event; raising rolls the write back.
WriteHook = Callable[[StoreTransaction, StoreEvent], None]


class DatabaseStore(CrudStore, Protocol):
    """A :class:`CrudStore` on a SQL database that other packages can extend."""

    @property
    def dialect(self) -> Dialect:
        """Which database the store writes."""
        ...

    @property
    def where(self) -> str:
        """The store's name in messages."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether the store was opened for reading only."""
        ...

    def read(self, work: Callable[[StoreTransaction], T]) -> T:
        """``work`` in one read-only snapshot; it may run again if the connection is lost."""
        ...

    def write(self, work: Callable[[StoreTransaction], T]) -> T:
        """``work`` in one write transaction; it runs again (from the start, on a fresh
        connection) when the connection was lost, so it must be safe to repeat."""
        ...

    def subscribe(self, hook: WriteHook) -> Callable[[], None]:
        """Call ``hook`` in the transaction of every turn and summary written from now on;
        returns the function that unsubscribes it."""
        ...


class StoreTimeout(StoreError):
    """A statement ran past its transaction's time limit (``StoreTransaction.time_limit``)."""
