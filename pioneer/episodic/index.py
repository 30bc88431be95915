"""The episodic index: ranked search over a thread's past snippets, in the store's database.

Takes a conversation store (:class:`~pioneer.history.store.DatabaseStore`: SQLite, or
PostgreSQL) or the path of an SQLite file, and a thread; returns ranked
:class:`~pioneer.sections.ThreadSnippet` candidates with their scoped artifact refs,
ready for the Thread Context renderer. An index subscribes to its store's write hooks
(:func:`.writer.write_hook`), so from then on every turn and summary the store writes is
indexed in the same transaction; this module adds task summaries, re-indexing
(idempotent: a thread's snippets are rebuilt from its stored turns, summary and task
summaries, and chunking is deterministic, so every provenance id comes back the same) and
search. A process that writes turns through a store without an index attached leaves
them unindexed until :meth:`EpisodicIndex.reindex_thread`.

A search runs the user's text as quoted terms (:func:`~._terms.fts_query` on SQLite FTS5,
:func:`~._terms.ts_query` on PostgreSQL) against the thread's snippets, keeps those the
request's history does not already carry (:class:`Retained`), and orders them by score
(higher is better; the newer turn first on a tie). Every count a score uses is the
thread's own, so a thread's results never depend on the other threads in the store, nor
does the time a search takes: on SQLite the score is BM25 computed here over the thread's
snippets, read from the thread's rowid range of the FTS5 index (:mod:`.writer`); on
PostgreSQL ``ts_rank`` weighed by the terms' rarity in the thread. The same recall
threshold applies to both (:mod:`.recall`, docs/stores.md). A query
can be given a time limit, after which the database itself stops it, so a query abandoned
by its hook's deadline does not keep working in the background.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import StoreError
from ..history.artifacts import ArtifactRef
from ..history.budget import HistoryDecision
from ..history.sql_store import check_row
from ..history.sqlite_store import SqliteStore
from ..history.store import (
    MAX_TURNS,
    DatabaseStore,
    StoreTimeout,
    StoreTransaction,
    check_id,
)
from ..sections._thread_context import ThreadSnippet, snippet_artifacts
from ..text import utf8_text
from ._terms import TS_CONFIG, fts_query, query_terms, query_words, ts_operands, ts_query
from .chunks import CONTEXTS, Snippet, task_summary_snippets, turn_snippets
from .writer import (
    delete_snippets,
    index_thread_summary,
    index_turn,
    insert_snippets,
    slot_rowids,
    write_hook,
)

__all__ = ["MAX_CANDIDATES", "SMALL_INDEX", "EpisodicIndex", "Retained", "SearchResult"]

#: Candidates one search returns at most (docs/recall.md, "The recall hook").
MAX_CANDIDATES = 40
#: A thread of fewer snippets is too small for BM25 to tell a rare word from an everyday
#: one: the fewest snippets among which a word found in one snippet of four (what the
#: recall floor of 1.0 stands for) turns up at most once less than one time in twenty.
SMALL_INDEX = next(n for n in range(2, 100) if 0.75 ** n + n * 0.25 * 0.75 ** (n - 1) <= 0.05)
_REF_KINDS = ("text", "text", "text", "text?", "text?", "int?", "text?", "text?", "text?",
              "text?")
_REF_COLUMNS = (
    "artifact_id, display_name, kind, version_id, mime_type, size_bytes, sha256, role, "
    "message_id, turn_item_id"
)
_SNIPPET_COLUMNS = "thread_id, turn_id, item_id, chunk_id, role, seq, text"
_SNIPPET_KINDS = ("text", "text", "text", "text", "text", "int", "text")
_HIT_COLUMNS = "turn_id, item_id, chunk_id, role, text"
# SQLite: BM25 over the thread's own snippets, computed here rather than by FTS5's bm25(),
# which counts each term's snippets over the whole index, every thread's, and so costs
# time that grows with the store. A thread's snippets have the rowids of its slot
# (writer.py), so each query below reads only the thread's part of a term's doclist.
K1, B = 1.2, 0.75  # BM25's term-frequency saturation and length normalisation, as FTS5's
_THREAD_SLOT = "SELECT slot FROM episodic_threads WHERE thread_id = ?"
_THREAD_SIZE = ("SELECT count(*), COALESCE(avg(length(text)), 1) FROM episodic_fts "
                "WHERE rowid BETWEEN ? AND ?")
_TERM_COUNT = ("SELECT count(*) FROM episodic_fts "
               "WHERE episodic_fts MATCH ? AND rowid BETWEEN ? AND ?")
_TERM_ROWS = "SELECT rowid FROM episodic_fts WHERE episodic_fts MATCH ? AND rowid BETWEEN ? AND ?"
# How often the term occurs in each snippet holding it: highlight() puts one marker
# character before each occurrence, so the text grows by one character per occurrence
# (whatever the text itself holds); the length is the snippet's, for BM25's normalisation.
_TERM_FREQUENCIES = (
    "SELECT rowid, length(highlight(episodic_fts, 0, char(1), '')) - length(text), "
    "length(text) FROM episodic_fts WHERE episodic_fts MATCH ? AND rowid BETWEEN ? AND ?"
)
# The candidates, scored above, passed as a JSON object {rowid: score}; ordered here so
# that what the history already carries is left out before the limit applies.
_SEARCH_SQLITE = """
SELECT s.turn_id, s.item_id, s.chunk_id, s.role, s.text, s.id
FROM json_each(?) AS j JOIN episodic_snippets AS s ON s.id = CAST(j.key AS INTEGER)
WHERE NOT (s.role IN ('user', 'assistant')
           AND s.turn_id IN (SELECT value FROM json_each(?)))
  AND NOT (? AND s.role = 'generated_summary')
ORDER BY j.value DESC, s.seq DESC, s.id DESC
LIMIT ?
"""
# PostgreSQL: candidates match any term. ts_rank knows no term rarity, so the score weighs
# each term's ts_rank by the term's inverse document frequency in the thread, BM25's own
# ln((N - n + 0.5) / (n + 0.5)), and divides by ts_rank's value for one occurrence of one
# term; ts_rank's length normalisation, scaled to the thread's average snippet, stands in
# for BM25's. A snippet of average length with one uncommon word once scores about that
# word's idf, as on SQLite, and the same threshold applies (recall.py, docs/stores.md).
_TS_RANK_ONE = 0.0607927  # ts_rank of a single occurrence against a one-term query
_COUNTS_POSTGRESQL = ("SELECT count(*), COALESCE(avg(length(search)), 1)::float8{terms} "
                      "FROM episodic_snippets WHERE thread_id = ?")
_SEARCH_POSTGRESQL = f"""
SELECT s.turn_id, s.item_id, s.chunk_id, s.role, s.text,
       ({{score}})::float8 / {_TS_RANK_ONE} AS score, {{shared}}
FROM episodic_snippets AS s
WHERE s.search @@ to_tsquery('{TS_CONFIG}', ?) AND s.thread_id = ?
  AND NOT (s.role IN ('user', 'assistant') AND s.turn_id = ANY(CAST(? AS TEXT[])))
  AND NOT (? AND s.role = 'generated_summary')
ORDER BY score DESC, s.seq DESC, s.id DESC
LIMIT ?
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
    """One search: the FTS5 query it ran (``None``: nothing searchable) and the hits.

    ``small_index`` is whether the scores were counted over fewer than
    :data:`SMALL_INDEX` snippets, and then ``shared[i]`` is how many of the query's terms
    candidate ``i`` holds (empty otherwise: nothing reads it); ``words`` is how many words
    the message has (:func:`~._terms.query_words`). The recall threshold reads all three
    (docs/recall.md, "The recall hook").
    """

    query: str | None
    candidates: tuple[ThreadSnippet, ...]
    shared: tuple[int, ...] = ()
    words: int = 0
    small_index: bool = False


class EpisodicIndex:
    """Search and maintenance of the episodic index in a conversation store's database.

    Given a store, the index subscribes to its writes (until :meth:`close`) and leaves
    the store open; given a path, it opens (and closes) an :class:`SqliteStore` of its
    own. ``create=False`` never creates a missing file; ``read_only=True`` opens the
    file read-only (and then writes nothing: search only).
    """

    def __init__(
        self, store: DatabaseStore | str | os.PathLike[str], *, create: bool = True,
        read_only: bool = False, busy_timeout: float = 30.0,
    ) -> None:
        if isinstance(store, str | os.PathLike):
            self._store: DatabaseStore = SqliteStore(store, create=create, read_only=read_only,
                                                     busy_timeout=busy_timeout)
            self._owned = True
        else:
            self._store, self._owned = store, False
        self._unsubscribe = None if self._store.read_only else self._store.subscribe(write_hook)
        self._closed = False

    @property
    def store(self) -> DatabaseStore:
        """The store whose database holds the index."""
        return self._store

    @property
    def path(self) -> str:
        """The store's name in messages (a path, or a URL without its password)."""
        return self._store.where

    @property
    def dialect(self) -> str:
        """``sqlite`` (FTS5, BM25 scores) or ``postgresql`` (tsvector, weighed ts_rank)."""
        return self._store.dialect

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: the episodic index is closed")

    def close(self) -> None:
        """Stop indexing the store's writes; close the store when the index opened it."""
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._owned:
            self._store.close()

    def __enter__(self) -> EpisodicIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- search ------------------------------------------------------------------

    def query_for(self, text: str) -> str | None:
        """The query a search for ``text`` runs in this index's database."""
        text = utf8_text(text)
        return ts_query(text) if self.dialect == "postgresql" else fts_query(text)

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

        ``timeout_ms`` stops the query inside the database once it has run that long,
        as a :class:`StoreError`.
        """
        check_id(thread_id, "thread_id")
        self._check_open()
        query = self.query_for(text)
        if query is None or limit <= 0:
            return SearchResult(query, ())
        retained = retained or Retained()
        excluded = sorted(retained.turn_ids)

        def work(tx: StoreTransaction) -> tuple[list[Any], bool,
                                                dict[tuple[str, str], list[ArtifactRef]]]:
            with tx.time_limit(timeout_ms):
                if tx.dialect == "postgresql":
                    sql, params, small = _postgres_search(
                        tx, text, query, thread_id, excluded, retained.summary, limit)
                    rows = tx.execute(sql, params).fetchall()
                else:
                    rows, small = _sqlite_search(tx, text, thread_id, excluded,
                                                 retained.summary, limit)
            for row in rows:
                check_row(row[:5], _HIT_COLUMNS, ("text",) * 5, where=self.path,
                          what=f"episodic snippet of turn {row[0]!r}")
            return rows, small, _refs(tx, sorted({str(row[0]) for row in rows}), self.path)

        try:
            rows, small, refs = self._store.read(work)
        except StoreTimeout:
            raise StoreError(
                f"{self.path}: episodic search stopped at its {timeout_ms} ms time limit"
            ) from None
        candidates = tuple(
            ThreadSnippet(
                thread_id=thread_id, turn_id=turn_id, item_id=item_id, chunk_id=chunk_id,
                role=role,
                context=CONTEXTS[role], score=float(score), text=text_,
                artifacts=snippet_artifacts(role, item_id, refs.get((turn_id, "user"), ()),
                                            refs.get((turn_id, "assistant"), ())),
            )
            for turn_id, item_id, chunk_id, role, text_, score, _ in rows
        )
        return SearchResult(query, candidates,
                            tuple(int(row[6]) for row in rows) if small else (),
                            query_words(utf8_text(text)), small)

    def default_retained(self, thread_id: str, limit: int = MAX_TURNS) -> Retained:
        """What a ``keep`` history pass would send: the summary and the turns after it.

        The recall hook uses this when the turn brings no :class:`HistoryDecision`.
        """
        check_id(thread_id, "thread_id")
        self._check_open()

        def work(tx: StoreTransaction) -> Retained:
            row = tx.execute(
                "SELECT summary IS NOT NULL, COALESCE(summary_through_seq, 0) FROM threads "
                "WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if row is None:
                return Retained()
            ids = tx.execute(
                "SELECT turn_id FROM turns WHERE thread_id = ? AND seq > ? "
                "ORDER BY seq DESC LIMIT ?", (thread_id, row[1], limit)
            ).fetchall()
            return Retained(frozenset(turn_id for (turn_id,) in ids), bool(row[0]))

        return self._store.read(work)

    # -- maintenance -------------------------------------------------------------

    def thread_exists(self, thread_id: str) -> bool:
        """Whether the store has this thread."""
        check_id(thread_id, "thread_id")
        self._check_open()
        return self._store.get_thread(thread_id) is not None

    def unindexed_turns(self, thread_id: str) -> int:
        """How many of the thread's turns have text to index and no snippet: turns written
        through a store with no index attached, which :meth:`reindex_thread` fills in."""
        check_id(thread_id, "thread_id")
        self._check_open()

        def work(tx: StoreTransaction) -> int:
            rows = tx.execute(
                "SELECT t.turn_id, t.seq, t.user_item_id, t.user_text, t.assistant_item_id, "
                "t.assistant_text FROM turns AS t WHERE t.thread_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM episodic_snippets AS s WHERE s.turn_id = t.turn_id "
                "AND s.role IN ('user', 'assistant'))", (thread_id,)
            ).fetchall()
            return sum(1 for turn_id, seq, user_item, user, reply_item, reply in rows
                       if turn_snippets(thread_id, str(turn_id), int(seq),
                                        user_item_id=user_item, user_text=user,
                                        assistant_item_id=reply_item, assistant_text=reply))

        return self._store.read(work)

    def snippets(self, thread_id: str) -> tuple[Snippet, ...]:
        """Every indexed snippet of a thread, in store order."""
        check_id(thread_id, "thread_id")
        self._check_open()

        def work(tx: StoreTransaction) -> tuple[Snippet, ...]:
            rows = tx.execute(
                f"SELECT {_SNIPPET_COLUMNS} FROM episodic_snippets WHERE thread_id = ? "
                "ORDER BY seq, id", (thread_id,)
            ).fetchall()
            for row in rows:
                check_row(row, _SNIPPET_COLUMNS, _SNIPPET_KINDS, where=self.path,
                          what=f"episodic snippet of turn {row[1]!r}")
            return tuple(Snippet(*row) for row in rows)

        return self._store.read(work)

    def add_task_summary(
        self, thread_id: str, turn_id: str, item_id: str, text: str
    ) -> tuple[Snippet, ...]:
        """Store and index the summary of a task run during ``turn_id`` (replacing it)."""
        for what, value in (("thread_id", thread_id), ("turn_id", turn_id),
                            ("item_id", item_id)):
            check_id(value, what)
        self._check_open()
        text = utf8_text(text)
        if not text.strip():
            raise StoreError(f"{self.path}: a task summary must not be empty")
        if not item_id.strip():
            raise StoreError(f"{self.path}: a task summary needs an item id")

        def work(tx: StoreTransaction) -> tuple[Snippet, ...]:
            row = tx.execute("SELECT seq FROM turns WHERE turn_id = ? AND thread_id = ?",
                             (turn_id, thread_id)).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: turn {turn_id!r} is not in thread {thread_id!r}")
            tx.execute(
                "INSERT INTO episodic_task_summaries (thread_id, turn_id, item_id, text) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (turn_id, item_id) DO UPDATE SET "
                "text = excluded.text", (thread_id, turn_id, item_id, text),
            )
            delete_snippets(tx, "turn_id = ? AND item_id = ? AND role = 'task_summary'",
                            (turn_id, item_id))
            snippets = task_summary_snippets(thread_id, turn_id, item_id, int(row[0]), text)
            insert_snippets(tx, snippets)
            return tuple(snippets)

        return self._store.write(work)

    def reindex_thread(
        self, thread_id: str, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Rebuild a thread's snippets from what is stored; return how many it has.

        Idempotent: running it again, or after the snippets were written turn by turn,
        gives the same snippets with the same provenance ids. ``progress(done, total)``
        is called after each turn (a terminal's progress bar).
        """
        check_id(thread_id, "thread_id")
        self._check_open()

        def work(tx: StoreTransaction) -> int:
            thread = tx.execute(
                "SELECT summary, summary_through_seq, summary_through_turn_id FROM threads "
                "WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if thread is None:
                raise StoreError(f"{self.path}: thread {thread_id!r} does not exist")
            delete_snippets(tx, "thread_id = ?", (thread_id,))
            count = 0
            turns = tx.execute(
                "SELECT turn_id, seq, user_item_id, user_text, assistant_item_id, "
                "assistant_text FROM turns WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
            for done, (turn_id, seq, user_item, user_text, reply_item, reply) in enumerate(
                turns, start=1
            ):
                count += index_turn(tx, thread_id, turn_id, seq, user_item_id=user_item,
                                    user_text=user_text, assistant_item_id=reply_item,
                                    assistant_text=reply)
                if progress is not None:
                    progress(done, len(turns))
            summary, through_seq, through_turn = thread
            if summary is not None:
                count += index_thread_summary(tx, thread_id, through_turn, through_seq,
                                              summary)
            tasks = tx.execute(
                "SELECT k.turn_id, k.item_id, t.seq, k.text FROM episodic_task_summaries AS k "
                "JOIN turns AS t ON t.turn_id = k.turn_id WHERE k.thread_id = ? "
                "ORDER BY t.seq, k.item_id", (thread_id,)
            ).fetchall()
            for turn_id, item_id, seq, text in tasks:
                count += insert_snippets(
                    tx, task_summary_snippets(thread_id, turn_id, item_id, seq, text)
                )
            return count

        return self._store.write(work)

    def reindex_all(self) -> dict[str, int]:
        """Rebuild every thread's snippets (for a store written before the index existed)."""
        self._check_open()
        threads = self._store.read(lambda tx: [
            t for (t,) in tx.execute("SELECT thread_id FROM threads ORDER BY 1").fetchall()])
        return {thread_id: self.reindex_thread(thread_id) for thread_id in threads}


def _sqlite_search(tx: StoreTransaction, text: str, thread_id: str, excluded: list[str],
                   summary: bool, limit: int) -> tuple[list[tuple[Any, ...]], bool]:
    """The thread's best ``limit`` hits, scored by BM25 over the thread's own snippets
    (FTS5's formula, with the snippet's length in characters), and whether the thread
    has fewer than :data:`SMALL_INDEX` snippets."""
    slot = tx.execute(_THREAD_SLOT, (thread_id,)).fetchone()
    if slot is None:
        return [], True
    first, last = slot_rowids(int(slot[0]))
    total, average = tx.execute(_THREAD_SIZE, (first, last)).fetchone()
    total, average = int(total), max(1.0, float(average))
    scores: dict[int, float] = {}
    shared: dict[int, int] = {}
    for term in query_terms(utf8_text(text)):
        found = int(tx.execute(_TERM_COUNT, (term, first, last)).fetchone()[0])
        if not found:
            continue
        weight = idf(total, found)
        if weight > 0:
            for rowid, occurs, length in tx.execute(_TERM_FREQUENCIES, (term, first, last)):
                occurs = max(1, int(occurs))
                scores[rowid] = scores.get(rowid, 0.0) + weight * occurs * (K1 + 1) / (
                    occurs + K1 * (1 - B + B * int(length) / average))
                shared[rowid] = shared.get(rowid, 0) + 1
        else:  # a term in half the thread or more: its snippets are candidates, scoring 0
            for (rowid,) in tx.execute(_TERM_ROWS, (term, first, last)):
                scores.setdefault(rowid, 0.0)
                shared[rowid] = shared.get(rowid, 0) + 1
    if not scores:
        return [], total < SMALL_INDEX
    hits = tx.execute(_SEARCH_SQLITE, (json.dumps(scores), json.dumps(excluded),
                                       int(summary), limit)).fetchall()
    return [(*hit[:5], scores[hit[5]], shared[hit[5]]) for hit in hits], total < SMALL_INDEX


def _postgres_search(tx: StoreTransaction, text: str, query: str, thread_id: str,
                     excluded: list[str], summary: bool,
                     limit: int) -> tuple[str, tuple[object, ...], bool]:
    """The search statement and its parameters, with each term weighed by how rare it is
    in the thread (counted in one pass over the thread's snippets), and whether the
    thread has fewer than :data:`SMALL_INDEX` snippets."""
    operands = ts_operands(utf8_text(text))
    counts = tx.execute(
        _COUNTS_POSTGRESQL.format(terms="".join(
            f", count(*) FILTER (WHERE search @@ to_tsquery('{TS_CONFIG}', ?))"
            for _ in operands)),
        (*operands, thread_id),
    ).fetchone()
    total, average = int(counts[0]), max(1.0, float(counts[1]))
    weighed: list[object] = []
    for operand, found in zip(operands, counts[2:], strict=True):
        weight = idf(total, int(found))
        if weight > 0:
            weighed.extend((weight, operand))
    score = " + ".join(
        f"? * ts_rank(s.search, to_tsquery('{TS_CONFIG}', ?), 1)" for _ in weighed[::2]) or "0"
    # ts_rank's normalisation 1 divides by 1 + ln(lexemes of the snippet); multiplying by
    # the same for the thread's average snippet keeps an average snippet's score as is.
    score = f"({score}) * {1 + math.log(average)!r}"
    small = total < SMALL_INDEX
    shared = operands if small else []  # only a small thread's rule reads them (recall.py)
    return (_SEARCH_POSTGRESQL.format(score=score, shared=" + ".join(
                f"(s.search @@ to_tsquery('{TS_CONFIG}', ?))::int" for _ in shared) or "0"),
            (*weighed, *shared, query, thread_id, excluded, summary, limit), small)


def idf(snippets: int, matching: int) -> float:
    """BM25's inverse document frequency of a term found in ``matching`` of ``snippets``
    (0 when it is in half of them or more)."""
    return max(0.0, math.log((snippets - matching + 0.5) / (matching + 0.5)))


def _refs(
    tx: StoreTransaction, turn_ids: Sequence[str], where: str
) -> dict[tuple[str, str], list[ArtifactRef]]:
    refs: dict[tuple[str, str], list[ArtifactRef]] = {}
    if not turn_ids:
        return refs
    marks = ", ".join("?" * len(turn_ids))
    for turn_id, side, *fields in tx.execute(
        f"SELECT turn_id, side, {_REF_COLUMNS} FROM artifact_refs "
        f"WHERE turn_id IN ({marks}) ORDER BY turn_id, side, position",
        turn_ids,
    ):
        check_row(fields, _REF_COLUMNS, _REF_KINDS, where=where,
                  what=f"artifact ref of turn {turn_id!r}")
        refs.setdefault((turn_id, side), []).append(ArtifactRef(*fields))
    return refs
