"""Writing snippets: the episodic index's side of a store write, inside its transaction.

Each function takes a :class:`~pioneer.history.store.StoreTransaction` that is already a
write (the conversation store's, when :class:`~.index.EpisodicIndex` is subscribed to its
write hooks, or the index's own when it re-indexes), so a turn is never stored without
its snippets nor indexed without being stored. A snippet is one row of
``episodic_snippets`` (its provenance and text) plus its search form: on SQLite one row
of the FTS5 table ``episodic_fts`` under the same rowid; on PostgreSQL a ``tsvector``
column of the same row, under a GIN index. Every writer first removes what it is about to
replace, so writing the same source twice leaves one copy.

On SQLite each thread has a slot (``episodic_threads``, numbered from 1 as threads are
first indexed), and its snippets take the rowids ``slot * 2**32 + 1`` upwards, in the
order they are written: a thread's rows are one range of every term's doclist, which a
search reads alone (``rowid BETWEEN``), whatever else the index holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import StoreError
from ..history.store import StoreEvent, StoreTransaction, SummaryWritten, TurnWritten
from ._terms import TS_CONFIG, search_form, ts_search_form
from .chunks import Snippet, summary_snippets, turn_snippets

__all__ = [
    "delete_snippets",
    "index_thread_summary",
    "index_turn",
    "insert_snippets",
    "slot_rowids",
    "write_hook",
]

#: Bits of a snippet's rowid numbering it within its thread's slot (SQLite).
SLOT_BITS = 32
_LAST_SLOT = (1 << (63 - SLOT_BITS)) - 1


def slot_rowids(slot: int) -> tuple[int, int]:
    """The first and last rowid of a thread slot's snippets."""
    first = slot << SLOT_BITS
    return first, first + (1 << SLOT_BITS) - 1


def _next_rowid(tx: StoreTransaction, thread_id: str) -> int:
    """The rowid after the thread's last snippet, giving the thread a slot if it has none."""
    tx.execute("INSERT INTO episodic_threads (thread_id) VALUES (?) "
               "ON CONFLICT (thread_id) DO NOTHING", (thread_id,))
    (slot,) = tx.execute("SELECT slot FROM episodic_threads WHERE thread_id = ?",
                         (thread_id,)).fetchone()
    if slot > _LAST_SLOT:
        raise StoreError(f"the episodic index has no slot left for thread {thread_id!r}")
    first, last = slot_rowids(int(slot))
    (latest,) = tx.execute("SELECT max(id) FROM episodic_snippets WHERE id BETWEEN ? AND ?",
                           (first, last)).fetchone()
    rowid = first + 1 if latest is None else int(latest) + 1
    if rowid > last:
        raise StoreError(f"thread {thread_id!r} has more episodic snippets than its slot holds")
    return rowid


def insert_snippets(tx: StoreTransaction, snippets: Iterable[Snippet]) -> int:
    """Add snippets and their search text; return how many were written.

    On PostgreSQL the rows go in one ``executemany``, which psycopg sends as one pipeline:
    a turn's write holds its thread's row, and one round trip per snippet would hold it
    that much longer for every writer queued behind.
    """
    if tx.dialect == "postgresql":
        rows = [(snippet.thread_id, snippet.turn_id, snippet.item_id, snippet.chunk_id,
                 snippet.role, snippet.seq, snippet.text, ts_search_form(snippet.text))
                for snippet in snippets]
        if rows:
            tx.executemany(
                "INSERT INTO episodic_snippets (thread_id, turn_id, item_id, chunk_id, role, "
                f"seq, text, search) VALUES (?, ?, ?, ?, ?, ?, ?, to_tsvector('{TS_CONFIG}', ?))",
                rows,
            )
        return len(rows)
    count = 0
    rowids: dict[str, int] = {}
    for snippet in snippets:
        rowid = rowids.get(snippet.thread_id) or _next_rowid(tx, snippet.thread_id)
        rowids[snippet.thread_id] = rowid + 1
        tx.execute(
            "INSERT INTO episodic_snippets (id, thread_id, turn_id, item_id, chunk_id, role, "
            "seq, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (rowid, snippet.thread_id, snippet.turn_id, snippet.item_id, snippet.chunk_id,
             snippet.role, snippet.seq, snippet.text),
        )
        tx.execute("INSERT INTO episodic_fts (rowid, text) VALUES (?, ?)",
                   (rowid, search_form(snippet.text)))
        count += 1
    return count


def delete_snippets(tx: StoreTransaction, where: str, params: tuple[object, ...]) -> None:
    """Remove the snippets matching ``where`` (SQL over ``episodic_snippets``)."""
    if tx.dialect == "sqlite":
        tx.execute(
            f"DELETE FROM episodic_fts WHERE rowid IN (SELECT id FROM episodic_snippets "
            f"WHERE {where})",
            params,
        )
    tx.execute(f"DELETE FROM episodic_snippets WHERE {where}", params)


def index_turn(
    tx: StoreTransaction, thread_id: str, turn_id: str, seq: int, *,
    user_item_id: str | None, user_text: str | None,
    assistant_item_id: str | None, assistant_text: str | None,
) -> int:
    """(Re)index a completed turn's user message and reply."""
    delete_snippets(tx, "turn_id = ? AND role IN ('user', 'assistant')", (turn_id,))
    return insert_snippets(tx, turn_snippets(
        thread_id, turn_id, seq, user_item_id=user_item_id, user_text=user_text,
        assistant_item_id=assistant_item_id, assistant_text=assistant_text,
    ))


def index_thread_summary(
    tx: StoreTransaction, thread_id: str, through_turn_id: str, seq: int, text: str
) -> int:
    """Index a thread's compaction summary, replacing the one it supersedes.

    Only the current summary is indexed: each new one is written over the whole history
    it covers, the previous summary included.
    """
    delete_snippets(tx, "thread_id = ? AND role = 'generated_summary'", (thread_id,))
    return insert_snippets(tx, summary_snippets(thread_id, through_turn_id, seq, text))


def write_hook(tx: StoreTransaction, event: StoreEvent) -> None:
    """The store write hook: index each written turn and summary in its transaction."""
    if isinstance(event, TurnWritten):
        entry = event.entry
        index_turn(tx, entry.thread_id, entry.turn_id, entry.seq,
                   user_item_id=entry.user_item_id, user_text=entry.user_text,
                   assistant_item_id=entry.assistant_item_id,
                   assistant_text=entry.assistant_text)
    elif isinstance(event, SummaryWritten):
        summary = event.summary
        index_thread_summary(tx, event.thread_id, summary.through_turn_id, summary.through_seq,
                             summary.text)
