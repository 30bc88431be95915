"""Writing snippets: the episodic index's side of a store write, inside its transaction.

Each function takes an open SQLite connection that is already inside a write
transaction (the conversation store's, or the index's own when it re-indexes), so a turn
is never stored without its snippets nor indexed without being stored. A snippet is one
row of ``episodic_snippets`` (its provenance and text) plus one row of the FTS5 table
``episodic_fts`` under the same rowid, holding the text's :func:`search_form`. Every
writer first removes what it is about to replace, so writing the same source twice
leaves one copy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from .chunks import Snippet, summary_snippets, turn_snippets
from .terms import search_form

__all__ = ["delete_snippets", "index_thread_summary", "index_turn", "insert_snippets"]


def insert_snippets(conn: sqlite3.Connection, snippets: Iterable[Snippet]) -> int:
    """Add snippets and their search text; return how many were written."""
    count = 0
    for snippet in snippets:
        cursor = conn.execute(
            "INSERT INTO episodic_snippets (thread_id, turn_id, item_id, chunk_id, role, seq, "
            "text) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (snippet.thread_id, snippet.turn_id, snippet.item_id, snippet.chunk_id,
             snippet.role, snippet.seq, snippet.text),
        )
        conn.execute("INSERT INTO episodic_fts (rowid, text) VALUES (?, ?)",
                     (cursor.lastrowid, search_form(snippet.text)))
        count += 1
    return count


def delete_snippets(conn: sqlite3.Connection, where: str, params: tuple[object, ...]) -> None:
    """Remove the snippets matching ``where`` (SQL over ``episodic_snippets``)."""
    conn.execute(
        f"DELETE FROM episodic_fts WHERE rowid IN (SELECT id FROM episodic_snippets "
        f"WHERE {where})",
        params,
    )
    conn.execute(f"DELETE FROM episodic_snippets WHERE {where}", params)


def index_turn(
    conn: sqlite3.Connection, thread_id: str, turn_id: str, seq: int, *,
    user_item_id: str | None, user_text: str | None,
    assistant_item_id: str | None, assistant_text: str | None,
) -> int:
    """(Re)index a completed turn's user message and reply."""
    delete_snippets(conn, "turn_id = ? AND role IN ('user', 'assistant')", (turn_id,))
    return insert_snippets(conn, turn_snippets(
        thread_id, turn_id, seq, user_item_id=user_item_id, user_text=user_text,
        assistant_item_id=assistant_item_id, assistant_text=assistant_text,
    ))


def index_thread_summary(
    conn: sqlite3.Connection, thread_id: str, through_turn_id: str, seq: int, text: str
) -> int:
    """Index a thread's compaction summary, replacing the one it supersedes.

    Only the current summary is indexed: each new one is written over the whole history
    it covers, the previous summary included.
    """
    delete_snippets(conn, "thread_id = ? AND role = 'generated_summary'", (thread_id,))
    return insert_snippets(conn, summary_snippets(thread_id, through_turn_id, seq, text))
