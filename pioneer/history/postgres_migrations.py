"""Schema migrations of the PostgreSQL conversation store: an ordered list of SQL steps.

The same tables as the SQLite store (:mod:`.migrations`), in PostgreSQL's types: turn
positions from an identity column, the episodic index as a ``tsvector`` column of each
snippet under a GIN index (instead of an FTS5 table). The version lives in the one-row
table ``pioneer_schema`` of the schema the connection creates in (the first of its
``search_path``), so several stores can share a database in separate schemas. Steps run
forward only, all in one transaction that first takes a transaction-scoped advisory lock,
so nodes starting at once apply each step exactly once; a newer schema is refused, and a
store opened read-only runs no step and needs exactly the latest version.
"""

from __future__ import annotations

from .migrations import ABANDONED_TURNS, Migration

__all__ = ["ESCAPE_OLD_TEXT", "MIGRATIONS", "MIGRATION_LOCK"]

#: Key of the advisory lock held while migrating (any 64-bit number, fixed).
MIGRATION_LOCK = 0x70696F6E656572  # "pioneer"

#: The tables of the store before its text was escaped (version 10). Their text was
#: written as it was given, so a U+0001 in it would read back as the start of an escape
#: pair (:func:`~pioneer.history.postgres_store.restore_text`).
_UNESCAPED_TABLES = ("threads", "turns", "artifact_refs", "turn_records", "turn_rounds",
                     "episodic_snippets", "episodic_task_summaries", "token_calibration",
                     "abandoned_turns")

#: Every U+0001 in every text column of those tables written as its escape pair, U+0001
#: U+0002 (no old row holds NUL: PostgreSQL refused it). An id is a key other tables
#: refer to, so the foreign keys between the tables are dropped while the ids change and
#: made again after (which checks every row against them once).
ESCAPE_OLD_TEXT = """DO $migration$
DECLARE
    tables TEXT[] := ARRAY['""" + "', '".join(_UNESCAPED_TABLES) + """'];
    keys TEXT[] := ARRAY[]::TEXT[];
    found RECORD;
BEGIN
    FOR found IN
        SELECT format('ALTER TABLE %I DROP CONSTRAINT %I', rel.relname, con.conname) AS drop,
               format('ALTER TABLE %I ADD CONSTRAINT %I %s', rel.relname, con.conname,
                      pg_get_constraintdef(con.oid)) AS make
        FROM pg_constraint con JOIN pg_class rel ON rel.oid = con.conrelid
            JOIN pg_namespace space ON space.oid = rel.relnamespace
        WHERE con.contype = 'f' AND space.nspname = current_schema()
            AND rel.relname = ANY (tables)
        ORDER BY rel.relname, con.conname
    LOOP
        keys := keys || found.make;
        EXECUTE found.drop;
    END LOOP;
    FOR found IN
        SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND data_type = 'text'
            AND table_name = ANY (tables)
        ORDER BY table_name, ordinal_position
    LOOP
        EXECUTE format('UPDATE %I SET %I = replace(%I, chr(1), chr(1) || chr(2)) '
                       'WHERE strpos(%I, chr(1)) > 0', found.table_name, found.column_name,
                       found.column_name, found.column_name);
    END LOOP;
    FOR found IN SELECT unnest(keys) AS make LOOP
        EXECUTE found.make;
    END LOOP;
END
$migration$"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "threads, turns, artifact refs, turn records, episodic index (tsvector + GIN)",
        (
            """CREATE TABLE threads (
                thread_id TEXT PRIMARY KEY,
                model TEXT,
                created_at TEXT NOT NULL,
                summary TEXT,
                summary_tokens INTEGER,
                summary_turn_count INTEGER NOT NULL DEFAULT 0,
                summary_through_seq BIGINT,
                summary_through_turn_id TEXT
            )""",
            """CREATE TABLE turns (
                seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
            "CREATE INDEX turns_by_thread ON turns (thread_id, seq) INCLUDE (turn_id)",
            """CREATE TABLE artifact_refs (
                turn_id TEXT NOT NULL REFERENCES turns(turn_id),
                side TEXT NOT NULL CHECK (side IN ('user', 'assistant')),
                position INTEGER NOT NULL,
                artifact_id TEXT NOT NULL,
                version_id TEXT,
                display_name TEXT NOT NULL,
                kind TEXT NOT NULL,
                mime_type TEXT,
                size_bytes BIGINT,
                sha256 TEXT,
                role TEXT,
                message_id TEXT,
                turn_item_id TEXT,
                PRIMARY KEY (turn_id, side, position)
            )""",
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
            """CREATE TABLE episodic_snippets (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                thread_id TEXT NOT NULL,
                turn_id TEXT NOT NULL,
                item_id TEXT NOT NULL,
                chunk_id TEXT NOT NULL,
                role TEXT NOT NULL CHECK (role IN
                    ('user', 'assistant', 'task_summary', 'generated_summary')),
                seq BIGINT NOT NULL,
                text TEXT NOT NULL,
                search TSVECTOR NOT NULL,
                UNIQUE (turn_id, item_id, chunk_id)
            )""",
            "CREATE INDEX episodic_by_thread ON episodic_snippets (thread_id, role, seq)",
            "CREATE INDEX episodic_search ON episodic_snippets USING GIN (search)",
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
        2,
        "turn records: the token usage the provider reported for each round",
        ("ALTER TABLE turn_rounds ADD COLUMN usage TEXT",),
    ),
    Migration(
        3,
        "cache-aware history: the truncation cut on the thread; a cache plan per round",
        (
            # The first turn truncation keeps: turns before it are no longer sent, so the
            # turns after it stay a stable prefix until the kept turns fill the budget.
            "ALTER TABLE threads ADD COLUMN cut_seq BIGINT",
            "ALTER TABLE threads ADD COLUMN cut_turn_id TEXT",
            "ALTER TABLE turn_rounds ADD COLUMN cache TEXT",
        ),
    ),
    Migration(
        4,
        "turn records: the execution security snapshot of each turn",
        ("ALTER TABLE turn_records ADD COLUMN security TEXT",),
    ),
    Migration(
        5,
        "turn records: the turn's tool catalog; the reply read back for each round",
        (
            "ALTER TABLE turn_records ADD COLUMN tools TEXT",
            "ALTER TABLE turn_rounds ADD COLUMN reply TEXT",
        ),
    ),
    Migration(
        6,
        "turn records: the title of each section of a round",
        ("ALTER TABLE turn_rounds ADD COLUMN section_titles TEXT",),
    ),
    Migration(
        7,
        "token calibration: the provider's tokens per local token, one row per provider "
        "and model",
        (
            """CREATE TABLE token_calibration (
                provider TEXT NOT NULL,
                model TEXT NOT NULL,
                ratio DOUBLE PRECISION NOT NULL,
                overhead BIGINT NOT NULL,
                samples BIGINT NOT NULL,
                margin DOUBLE PRECISION NOT NULL,
                recent TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (provider, model)
            )""",
        ),
    ),
    Migration(
        8,
        "tool rounds: a turn's tool calls and results, kept when history_tool_rounds is keep",
        ("ALTER TABLE turns ADD COLUMN tool_rounds TEXT",),
    ),
    Migration(
        9,
        "turn records: how each round's request fits the context window",
        ("ALTER TABLE turn_rounds ADD COLUMN context_window TEXT",),
    ),
    Migration(
        10,
        "abandoned turns: the record of a turn dropped without finish(), kept out of history",
        (ABANDONED_TURNS,),
    ),
    Migration(
        11,
        "escaped text: each U+0001 already stored becomes its escape pair, so every old "
        "row reads back as it was written",
        (ESCAPE_OLD_TEXT,),
    ),
)
