"""The episodic index: BM25 search over a thread's past snippets, in the store's database.

Takes the conversation store's SQLite file (the tables come from migration 3) and a
thread; returns ranked :class:`~pioneer.sections.ThreadSnippet` candidates with their
scoped artifact refs, ready for the Thread Context renderer. Snippets are written when a
turn or a summary is stored (:mod:`.writer`, called by
:class:`~pioneer.history.SqliteStore`); this module adds task summaries, re-indexing
(idempotent: a thread's snippets are rebuilt from its stored turns, summary and task
summaries, and chunking is deterministic, so every provenance id comes back the same) and
search.

A search runs the :func:`~.terms.fts_query` of the user's text against the FTS5 table,
keeps the thread's snippets that the request's history does not already carry
(:class:`Retained`), and orders them by score, ``-bm25()`` (higher is better; the
newer turn first on a tie). Connections are pooled rather than kept per thread, because
the recall hook runs on a fresh thread every turn; a query can be given a time limit,
after which SQLite itself stops it, so a query abandoned by its hook's deadline does not
keep working in the background.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError
from ..history.budget import HistoryDecision
from ..history.migrations import configure_connection, migrate
from ..history.store import MAX_TURNS
from ..sections.artifacts import ArtifactRef
from ..sections.thread_context import ThreadSnippet, snippet_artifacts
from ..text import utf8_text
from .chunks import CONTEXTS, Snippet, task_summary_snippets
from .terms import fts_query
from .writer import delete_snippets, index_thread_summary, index_turn, insert_snippets

__all__ = ["MAX_CANDIDATES", "EpisodicIndex", "Retained", "SearchResult"]

#: Candidates one search returns at most (REFERENCE §9.2).
MAX_CANDIDATES = 40
# SQLite VM steps between two checks of a query's time limit.
_PROGRESS_STEPS = 1000
_REF_COLUMNS = (
    "artifact_id, display_name, kind, version_id, mime_type, size_bytes, sha256, role, "
    "message_id, turn_item_id"
)
_SEARCH = """
SELECT s.turn_id, s.item_id, s.chunk_id, s.role, s.text, -bm25(episodic_fts) AS score
FROM episodic_fts JOIN episodic_snippets AS s ON s.id = episodic_fts.rowid
WHERE episodic_fts MATCH ?1 AND s.thread_id = ?2
  AND NOT (s.role IN ('user', 'assistant')
           AND s.turn_id IN (SELECT value FROM json_each(?3)))
  AND NOT (?4 AND s.role = 'generated_summary')
ORDER BY score DESC, s.seq DESC, s.id DESC
LIMIT ?5
"""


@dataclass(frozen=True, slots=True)
class Retained:
    """What the request's history already carries, so recall leaves it out.

    The user and assistant snippets of ``turn_ids`` are skipped, and the compaction
    summary too when ``summary`` is set. Task summaries are never in the history, so
    they are always searched.
    """

    turn_ids: frozenset[str] = frozenset()
    summary: bool = False

    @classmethod
    def from_decision(cls, decision: HistoryDecision) -> Retained:
        """The turns and summary a history budgeting pass decided to send."""
        return cls(frozenset(decision.turn_ids), decision.summary_sent)


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One search: the FTS5 query it ran (``None``: nothing searchable) and the hits."""

    query: str | None
    candidates: tuple[ThreadSnippet, ...]


class EpisodicIndex:
    """Search and maintenance of the episodic index in a conversation store file."""

    def __init__(
        self, path: str | Path, *, create: bool = True, busy_timeout: float = 30.0
    ) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"{self.path}: no conversation store at this path")
        self._busy_timeout = busy_timeout
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        with self._connection() as conn:
            migrate(conn, where=str(self.path))

    # -- connections -------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                               check_same_thread=False)
        configure_connection(conn)
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A pooled connection, turning SQLite errors into :class:`StoreError`."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path}: the episodic index is closed")
            conn = self._idle.pop() if self._idle else None
        try:
            if conn is None:
                conn = self._open()
            yield conn
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: {error}") from None
        finally:
            if conn is not None:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                with self._lock:
                    if self._closed:
                        conn.close()
                    else:
                        self._idle.append(conn)

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute(begin)
            yield conn
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close the pooled connections (one in use closes when it is handed back)."""
        with self._lock:
            self._closed = True
            for conn in self._idle:
                conn.close()
            self._idle.clear()

    def __enter__(self) -> EpisodicIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- search ------------------------------------------------------------------

    def search(
        self,
        thread_id: str,
        text: str,
        *,
        retained: Retained | None = None,
        limit: int = MAX_CANDIDATES,
        timeout_ms: int | None = None,
    ) -> SearchResult:
        """The thread's best snippets for ``text``, at most ``limit``, best first.

        ``timeout_ms`` stops the query inside SQLite once it has run that long, as a
        :class:`StoreError`.
        """
        query = fts_query(utf8_text(text))
        if query is None or limit <= 0:
            return SearchResult(query, ())
        retained = retained or Retained()
        excluded = json.dumps(sorted(retained.turn_ids))
        with self._transaction("BEGIN") as conn, _time_limit(conn, timeout_ms, self.path):
            rows = conn.execute(
                _SEARCH, (query, thread_id, excluded, int(retained.summary), limit)
            ).fetchall()
            refs = _refs(conn, sorted({row[0] for row in rows}))
        candidates = tuple(
            ThreadSnippet(
                turn_id=turn_id, item_id=item_id, chunk_id=chunk_id, role=role,
                context=CONTEXTS[role], score=float(score), text=text_,
                artifacts=snippet_artifacts(role, item_id, refs.get((turn_id, "user"), ()),
                                            refs.get((turn_id, "assistant"), ())),
            )
            for turn_id, item_id, chunk_id, role, text_, score in rows
        )
        return SearchResult(query, candidates)

    def default_retained(self, thread_id: str, limit: int = MAX_TURNS) -> Retained:
        """What a ``keep`` history pass would send: the summary and the turns after it.

        The recall hook uses this when the turn brings no :class:`HistoryDecision`.
        """
        with self._transaction("BEGIN") as conn:
            row = conn.execute(
                "SELECT summary IS NOT NULL, COALESCE(summary_through_seq, 0) FROM threads "
                "WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if row is None:
                return Retained()
            ids = conn.execute(
                "SELECT turn_id FROM turns WHERE thread_id = ? AND seq > ? "
                "ORDER BY seq DESC LIMIT ?", (thread_id, row[1], limit)
            ).fetchall()
        return Retained(frozenset(turn_id for (turn_id,) in ids), bool(row[0]))

    # -- maintenance -------------------------------------------------------------

    def thread_exists(self, thread_id: str) -> bool:
        """Whether the store has this thread."""
        with self._connection() as conn:
            row = conn.execute("SELECT 1 FROM threads WHERE thread_id = ?",
                               (thread_id,)).fetchone()
        return row is not None

    def snippets(self, thread_id: str) -> tuple[Snippet, ...]:
        """Every indexed snippet of a thread, in store order."""
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT thread_id, turn_id, item_id, chunk_id, role, seq, text "
                "FROM episodic_snippets WHERE thread_id = ? ORDER BY seq, id", (thread_id,)
            ).fetchall()
        return tuple(Snippet(*row) for row in rows)

    def add_task_summary(
        self, thread_id: str, turn_id: str, item_id: str, text: str
    ) -> tuple[Snippet, ...]:
        """Store and index the summary of a task run during ``turn_id`` (replacing it)."""
        text = utf8_text(text)
        if not text.strip():
            raise StoreError(f"{self.path}: a task summary must not be empty")
        if not item_id.strip():
            raise StoreError(f"{self.path}: a task summary needs an item id")
        with self._transaction("BEGIN IMMEDIATE") as conn:
            row = conn.execute("SELECT seq FROM turns WHERE turn_id = ? AND thread_id = ?",
                               (turn_id, thread_id)).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: turn {turn_id!r} is not in thread {thread_id!r}")
            conn.execute(
                "INSERT INTO episodic_task_summaries (thread_id, turn_id, item_id, text) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(turn_id, item_id) DO UPDATE SET "
                "text = excluded.text", (thread_id, turn_id, item_id, text),
            )
            delete_snippets(conn, "turn_id = ? AND item_id = ? AND role = 'task_summary'",
                            (turn_id, item_id))
            snippets = task_summary_snippets(thread_id, turn_id, item_id, int(row[0]), text)
            insert_snippets(conn, snippets)
        return tuple(snippets)

    def reindex_thread(self, thread_id: str) -> int:
        """Rebuild a thread's snippets from what is stored; return how many it has.

        Idempotent: running it again, or after the snippets were written turn by turn,
        gives the same snippets with the same provenance ids.
        """
        with self._transaction("BEGIN IMMEDIATE") as conn:
            thread = conn.execute(
                "SELECT summary, summary_through_seq, summary_through_turn_id FROM threads "
                "WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if thread is None:
                raise StoreError(f"{self.path}: thread {thread_id!r} does not exist")
            delete_snippets(conn, "thread_id = ?", (thread_id,))
            count = 0
            turns = conn.execute(
                "SELECT turn_id, seq, user_item_id, user_text, assistant_item_id, "
                "assistant_text FROM turns WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
            for turn_id, seq, user_item, user_text, reply_item, reply in turns:
                count += index_turn(conn, thread_id, turn_id, seq, user_item_id=user_item,
                                    user_text=user_text, assistant_item_id=reply_item,
                                    assistant_text=reply)
            summary, through_seq, through_turn = thread
            if summary is not None:
                count += index_thread_summary(conn, thread_id, through_turn, through_seq,
                                              summary)
            tasks = conn.execute(
                "SELECT k.turn_id, k.item_id, t.seq, k.text FROM episodic_task_summaries AS k "
                "JOIN turns AS t ON t.turn_id = k.turn_id WHERE k.thread_id = ? "
                "ORDER BY t.seq, k.item_id", (thread_id,)
            ).fetchall()
            for turn_id, item_id, seq, text in tasks:
                count += insert_snippets(
                    conn, task_summary_snippets(thread_id, turn_id, item_id, seq, text)
                )
        return count

    def reindex_all(self) -> dict[str, int]:
        """Rebuild every thread's snippets (for a store written before the index existed)."""
        with self._connection() as conn:
            threads = [t for (t,) in conn.execute("SELECT thread_id FROM threads ORDER BY 1")]
        return {thread_id: self.reindex_thread(thread_id) for thread_id in threads}


def _refs(
    conn: sqlite3.Connection, turn_ids: Sequence[str]
) -> dict[tuple[str, str], list[ArtifactRef]]:
    refs: dict[tuple[str, str], list[ArtifactRef]] = {}
    if not turn_ids:
        return refs
    marks = ", ".join("?" * len(turn_ids))
    for turn_id, side, *fields in conn.execute(
        f"SELECT turn_id, side, {_REF_COLUMNS} FROM artifact_refs "
        f"WHERE turn_id IN ({marks}) ORDER BY turn_id, side, position",
        turn_ids,
    ):
        refs.setdefault((turn_id, side), []).append(ArtifactRef(*fields))
    return refs


@contextmanager
def _time_limit(conn: sqlite3.Connection, timeout_ms: int | None, path: Path) -> Iterator[None]:
    if timeout_ms is None:
        yield
        return
    stop = time.monotonic() + timeout_ms / 1000
    conn.set_progress_handler(lambda: int(time.monotonic() >= stop), _PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError as error:
        if "interrupted" not in str(error):
            raise
        raise StoreError(
            f"{path}: episodic search stopped at its {timeout_ms} ms time limit"
        ) from None
    finally:
        conn.set_progress_handler(None, 0)
