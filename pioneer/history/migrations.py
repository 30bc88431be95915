"""Schema migrations of the SQLite conversation store: an ordered list of SQL steps.

The database keeps its schema version in ``PRAGMA user_version``. Opening a store
applies, in one write transaction, every step whose version is above the stored one,
then records the new version; a database newer than this code is refused rather than
guessed at, and so is a database this code did not make: a negative version, or
version 0 on a file that already has tables (:func:`check_known`). A store opened
read-only runs no step: it needs exactly the latest version. The tables of the packages
that extend the store (episodic index, turn records) are part of the store's schema and
are added by appending a step here, never by editing an applied one.

What does not depend on the dialect serves the PostgreSQL store's steps as well
(:mod:`.postgres_migrations`): the step type, the tables steps create, the check that
steps are numbered in order and the checks of a recorded version.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import StoreError

__all__ = [
    "ABANDONED_TURNS",
    "MIGRATIONS",
    "Migration",
    "check_known",
    "check_order",
    "check_version",
    "configure_connection",
    "migrate",
    "schema_version",
    "tables_of",
]


@dataclass(frozen=True, slots=True)
class Migration:
    """One forward step: the version it produces and its statements, run in order."""

    version: int
    description: str
    statements: tuple[str, ...]


#: Turns that sent a body and were dropped without ``finish()`` (or lost a conflict with
#: another turn of their thread): each attempt's whole :class:`~pioneer.audit.TurnRecord`
#: as JSON, with the user's text and the last reply's text (NULL: no reply yet). Not a
#: ``turns`` row, so no history window ever carries one. The same text on both dialects.
ABANDONED_TURNS = """CREATE TABLE abandoned_turns (
                turn_id TEXT NOT NULL,
                attempt INTEGER NOT NULL CHECK (attempt >= 1),
                thread_id TEXT NOT NULL REFERENCES threads(thread_id),
                user_text TEXT NOT NULL,
                assistant_text TEXT,
                reason TEXT NOT NULL,
                record TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (turn_id, attempt)
            )"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "threads, turns with stored token counts, artifact refs",
        (
            """CREATE TABLE threads (
                thread_id TEXT PRIMARY KEY,
                model TEXT,
                created_at TEXT NOT NULL,
                summary TEXT,
                summary_tokens INTEGER,
                summary_turn_count INTEGER NOT NULL DEFAULT 0,
                summary_through_seq INTEGER,
                summary_through_turn_id TEXT
            )""",
            """CREATE TABLE turns (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                turn_id TEXT NOT NULL UNIQUE,
                thread_id TEXT NOT NULL REFERENCES threads(thread_id),
                user_item_id TEXT,
                user_text TEXT,
                user_tokens INTEGER NOT NULL,
                assistant_item_id TEXT,
                assistant_text TEXT,
                assistant_tokens INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                prompt_manifest TEXT
            )""",
            "CREATE INDEX turns_by_thread ON turns(thread_id, seq, turn_id)",
            """CREATE TABLE artifact_refs (
                turn_id TEXT NOT NULL REFERENCES turns(turn_id),
                side TEXT NOT NULL CHECK (side IN ('user', 'assistant')),
                position INTEGER NOT NULL,
                artifact_id TEXT NOT NULL,
                version_id TEXT,
                display_name TEXT NOT NULL,
                kind TEXT NOT NULL,
                mime_type TEXT,
                size_bytes INTEGER,
                sha256 TEXT,
                role TEXT,
                message_id TEXT,
                turn_item_id TEXT,
                PRIMARY KEY (turn_id, side, position)
            )""",
        ),
    ),
    Migration(
        2,
        "turn records: mode, history decision, permissions, skills; one row per provider round",
        (
            """CREATE TABLE turn_records (
                turn_id TEXT PRIMARY KEY REFERENCES turns(turn_id),
                thread_id TEXT NOT NULL REFERENCES threads(thread_id),
                mode TEXT NOT NULL CHECK (mode IN ('chat', 'agent')),
                history TEXT,
                permissions TEXT,
                skills TEXT,
                created_at TEXT NOT NULL
            )""",
            """CREATE TABLE turn_rounds (
                turn_id TEXT NOT NULL REFERENCES turn_records(turn_id),
                round INTEGER NOT NULL CHECK (round >= 1),
                manifest TEXT NOT NULL,
                visible_tools TEXT NOT NULL,
                hidden_domains TEXT NOT NULL,
                provider TEXT NOT NULL,
                calls TEXT NOT NULL,
                PRIMARY KEY (turn_id, round)
            )""",
        ),
    ),
    Migration(
        3,
        "episodic index: snippets of completed turns, their FTS5 index, task summaries",
        (
            # The snippet rows carry provenance; the FTS5 table holds only the search
            # form of each snippet's text, under the same rowid (pioneer.episodic).
            """CREATE TABLE episodic_snippets (
                id INTEGER PRIMARY KEY,
                thread_id TEXT NOT NULL,
                turn_id TEXT NOT NULL,
                item_id TEXT NOT NULL,
                chunk_id TEXT NOT NULL,
                role TEXT NOT NULL CHECK (role IN
                    ('user', 'assistant', 'task_summary', 'generated_summary')),
                seq INTEGER NOT NULL,
                text TEXT NOT NULL,
                UNIQUE (turn_id, item_id, chunk_id)
            )""",
            "CREATE INDEX episodic_by_thread ON episodic_snippets(thread_id, role, seq)",
            """CREATE VIRTUAL TABLE episodic_fts USING fts5(
                text, tokenize = 'porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TABLE episodic_task_summaries (
                thread_id TEXT NOT NULL,
                turn_id TEXT NOT NULL REFERENCES turns(turn_id),
                item_id TEXT NOT NULL,
                text TEXT NOT NULL,
                PRIMARY KEY (turn_id, item_id)
            )""",
        ),
    ),
    Migration(
        4,
        "turn records: the token usage the provider reported for each round",
        ("ALTER TABLE turn_rounds ADD COLUMN usage TEXT",),
    ),
    Migration(
        5,
        "cache-aware history: the truncation cut on the thread; a cache plan per round",
        (
            # The first turn truncation keeps: turns before it are no longer sent, so the
            # turns after it stay a stable prefix until the kept turns fill the budget.
            "ALTER TABLE threads ADD COLUMN cut_seq INTEGER",
            "ALTER TABLE threads ADD COLUMN cut_turn_id TEXT",
            "ALTER TABLE turn_rounds ADD COLUMN cache TEXT",
        ),
    ),
    Migration(
        6,
        "turn records: the execution security snapshot of each turn",
        ("ALTER TABLE turn_records ADD COLUMN security TEXT",),
    ),
    Migration(
        7,
        "turn records: the turn's tool catalog; the reply read back for each round",
        (
            "ALTER TABLE turn_records ADD COLUMN tools TEXT",
            "ALTER TABLE turn_rounds ADD COLUMN reply TEXT",
        ),
    ),
    Migration(
        8,
        "turn records: the title of each section of a round",
        ("ALTER TABLE turn_rounds ADD COLUMN section_titles TEXT",),
    ),
    Migration(
        9,
        "episodic index: a rowid range per thread, so a search reads only its thread's rows",
        (
            # Each thread gets a slot, and its snippets the rowids slot * 2**32 + 1
            # upwards (pioneer.episodic.writer). Existing snippets are renumbered in their
            # order and the FTS5 rows rewritten under the new rowids; 'optimize' then
            # merges the index into one segment, which the rowid range reads fastest.
            """CREATE TABLE episodic_threads (
                slot INTEGER PRIMARY KEY,
                thread_id TEXT NOT NULL UNIQUE
            )""",
            "INSERT INTO episodic_threads (thread_id) SELECT thread_id FROM episodic_snippets "
            "GROUP BY thread_id ORDER BY min(id)",
            """CREATE TEMP TABLE episodic_renumbered AS
                SELECT s.id AS old_id, f.text AS search_text,
                       (t.slot << 32) + row_number() OVER (
                           PARTITION BY s.thread_id ORDER BY s.id) AS new_id
                FROM episodic_snippets AS s
                JOIN episodic_threads AS t ON t.thread_id = s.thread_id
                JOIN episodic_fts AS f ON f.rowid = s.id""",
            "CREATE UNIQUE INDEX temp.episodic_renumbered_old ON episodic_renumbered (old_id)",
            "UPDATE episodic_snippets SET id = (SELECT new_id FROM temp.episodic_renumbered "
            "WHERE old_id = episodic_snippets.id)",
            "DELETE FROM episodic_fts",
            "INSERT INTO episodic_fts (rowid, text) SELECT new_id, search_text "
            "FROM temp.episodic_renumbered ORDER BY new_id",
            "DROP TABLE temp.episodic_renumbered",
            "INSERT INTO episodic_fts (episodic_fts) VALUES ('optimize')",
        ),
    ),
    Migration(
        10,
        "token calibration: the provider's tokens per local token, one row per provider "
        "and model",
        (
            # pioneer.history.calibration: the fitted ratio, overhead and margin, the
            # number of samples ever taken and the recent ones (JSON) the next fit uses.
            """CREATE TABLE token_calibration (
                provider TEXT NOT NULL,
                model TEXT NOT NULL,
                ratio REAL NOT NULL,
                overhead INTEGER NOT NULL,
                samples INTEGER NOT NULL,
                margin REAL NOT NULL,
                recent TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (provider, model)
            )""",
        ),
    ),
    Migration(
        11,
        "tool rounds: a turn's tool calls and results, kept when history_tool_rounds is keep",
        ("ALTER TABLE turns ADD COLUMN tool_rounds TEXT",),
    ),
    Migration(
        12,
        "turn records: how each round's request fits the context window",
        ("ALTER TABLE turn_rounds ADD COLUMN context_window TEXT",),
    ),
    Migration(
        13,
        "abandoned turns: the record of a turn dropped without finish(), kept out of history",
        (ABANDONED_TURNS,),
    ),
)


def schema_version(conn: sqlite3.Connection) -> int:
    """The version recorded in the database (0 for a new file)."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def tables_of(steps: Sequence[Migration]) -> frozenset[str]:
    """The tables the steps create."""
    found = re.compile(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(\w+)", re.IGNORECASE)
    return frozenset(name for step in steps for statement in step.statements
                     for name in found.findall(statement))


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(name) for (name,) in rows}


def check_known(conn: sqlite3.Connection, steps: Sequence[Migration] = MIGRATIONS, *,
                where: str = "", upgrade: bool = False) -> int:
    """Refuse a database this code does not know; return its schema version.

    Known means: a version between 1 and the latest with every table of the steps up to
    it, or (when ``upgrade``, for a store that may migrate) version 0 with no table at
    all, i.e. a new file. Read-only opens pass ``upgrade=False`` and need the latest.
    """
    name = where or "database"
    version = schema_version(conn)
    tables = _tables(conn)
    if version == 0:
        if not upgrade:
            raise StoreError(f"{name}: not a pioneer conversation store (no schema version)")
        if tables:
            raise StoreError(f"{name}: not a pioneer conversation store (it has tables but "
                             "no schema version); refusing to add tables to it")
        return version
    check_version(version, steps, where=name, upgrade=upgrade, has_table=tables.__contains__,
                  reopen="open it once for writing, e.g. with SqliteStore(path)")
    return version


def check_version(version: int, steps: Sequence[Migration], *, where: str, upgrade: bool,
                  has_table: Callable[[str], bool], reopen: str) -> None:
    """Refuse a store whose recorded ``version`` (either dialect's) this code does not know.

    That is a version above the last of ``steps``, below 1, one whose steps' tables are
    not all there (``has_table`` answers for one name), or, unless ``upgrade``, one below
    the last step; ``reopen`` is how to open the store for writing, for that message.
    """
    latest = len(steps)
    if version > latest:
        raise StoreError(f"{where}: schema version {version} is newer than this pioneer "
                         f"supports ({latest}); upgrade pioneer")
    if version < 1:
        raise StoreError(f"{where}: not a pioneer conversation store (schema version "
                         f"{version})")
    missing = next((table for table in sorted(tables_of(steps[:version]))
                    if not has_table(table)), None)
    if missing is not None:
        raise StoreError(f"{where}: not a pioneer conversation store (schema version "
                         f"{version} but no table {missing!r})")
    if version < latest and not upgrade:
        raise StoreError(f"{where}: schema version {version} is older than this pioneer's "
                         f"({latest}); a read command does not upgrade it ({reopen})")


def check_order(steps: Sequence[Migration]) -> None:
    """Refuse steps that are not numbered 1, 2, 3 and so on."""
    for expected, step in enumerate(steps, start=1):
        if step.version != expected:
            raise StoreError(
                f"migration steps must be numbered 1, 2, 3…; step {expected} "
                f"has version {step.version}"
            )


def migrate(
    conn: sqlite3.Connection, steps: Sequence[Migration] = MIGRATIONS, *, where: str = ""
) -> int:
    """Bring the database up to the last step; return the version it started at.

    ``conn`` must be in autocommit mode (``isolation_level=None``): each migration run
    is one explicit ``BEGIN IMMEDIATE`` transaction, so two processes opening the same
    new file at once apply the steps exactly once.
    """
    check_order(steps)
    latest = len(steps)
    started = schema_version(conn)
    if started == latest:
        return started
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Checked again under the write lock: another process may have migrated meanwhile.
        current = check_known(conn, steps, where=where, upgrade=True)
        for step in steps[current:]:
            for statement in step.statements:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step.version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return started


def configure_connection(conn: sqlite3.Connection) -> None:
    """Foreign keys on, ``synchronous = NORMAL`` and the WAL journal, for every connection
    to a store file (the store's own and the episodic index's)."""
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    # Switching to WAL needs a moment of exclusive access; two processes creating
    # the same file at once can see SQLITE_BUSY here without the busy handler.
    for attempt in range(50):
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError:
            if attempt == 49:
                raise
            time.sleep(0.02)
