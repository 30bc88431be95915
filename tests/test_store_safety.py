"""A read command never changes a database, refuses one it does not know, and reports a
damaged row as a located store error (exit 1), never an internal error.

Every command that reads a store (history, recall, explain) is run on each bad file; the
file's bytes, its journal mode and the folder's listing are compared before and after.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from stores import Server
from support import run_cli, sqlite_exec

from pioneer import PromptCompileInput, PromptCompiler, StoreError
from pioneer.audit import TurnRecords
from pioneer.episodic import EpisodicIndex
from pioneer.history import (
    MIGRATIONS,
    ArtifactRef,
    HistoryBudgeter,
    HistoryLimits,
    SqliteStore,
)
from pioneer.history.open import open_store
from pioneer.providers import ChatMessage, ChatRequest, build_request_body
from pioneer.turn import TurnAudit

READ_COMMANDS = {
    "history": ("history", "t1"),
    "recall": ("recall", "t1", "billing"),
    "explain": ("explain", "turn-1"),
}


_sql = sqlite_exec


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def _snapshot(path: Path) -> tuple[bytes, list[str]]:
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def _pioneer_db(path: Path) -> Path:
    with SqliteStore(path) as store, EpisodicIndex(store):
        store.ensure_thread("t1")
        store.add_turn("t1", user_text="the billing export", assistant_text="done",
                       turn_id="turn-1")
    return path


@pytest.fixture(autouse=True)
def _no_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("PIONEER_STORE_URL", "PIONEER_STORE_PATH", "PIONEER_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def _foreign(tmp_path: Path) -> Path:
    path = tmp_path / "foreign.db"
    _sql(path, "CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('mine')")
    return path


def _negative(tmp_path: Path) -> Path:
    path = _pioneer_db(tmp_path / "neg.db")
    _sql(path, "PRAGMA journal_mode = DELETE", "PRAGMA user_version = -1")
    return path


def _older(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    with SqliteStore(path, migrations=MIGRATIONS[:2]) as store:
        store.ensure_thread("t1")
    _sql(path, "PRAGMA journal_mode = DELETE")
    return path


def _newer(tmp_path: Path) -> Path:
    path = _pioneer_db(tmp_path / "new.db")
    _sql(path, "PRAGMA journal_mode = DELETE", f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    return path


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.db"
    _sql(path, "PRAGMA user_version = 0")
    path.write_bytes(b"")
    return path


BAD_FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "foreign": (_foreign, "not a pioneer conversation store (no schema version)"),
    "negative-version": (_negative, "not a pioneer conversation store (schema version -1)"),
    "older-version": (_older, f"schema version 2 is older than this pioneer's "
                              f"({len(MIGRATIONS)}); a read command does not upgrade it "
                              "(open it once for writing, e.g. with SqliteStore(path))"),
    "newer-version": (_newer, f"schema version {len(MIGRATIONS) + 1} is newer than this "
                              f"pioneer supports ({len(MIGRATIONS)}); upgrade pioneer"),
    "empty-file": (_empty, "not a pioneer conversation store (no schema version)"),
}


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_read_command_refuses_a_database_it_does_not_know_and_changes_nothing(
    tmp_path: Path, kind: str, command: str
) -> None:
    make, message = BAD_FILES[kind]
    path = make(tmp_path)
    before, mode = _snapshot(path), _journal_mode(path)
    code, out, err = run_cli(*READ_COMMANDS[command], "--db", str(path))
    assert (code, out) == (1, "")
    assert err == f"{path}: {message}\nerror: 1 problem\n"
    assert _snapshot(path) == before  # same bytes, no -wal or -shm file beside it
    assert _journal_mode(path) == mode


@pytest.mark.parametrize("name", [":memory:", ""])
def test_a_private_sqlite_database_is_refused_with_its_reason(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each of the store's connections would open an empty database of its own, so a turn
    # written on one would be missing on the next: refused before any is opened.
    monkeypatch.chdir(tmp_path)
    shown = name or "(empty path)"
    for opening in (lambda: SqliteStore(name), lambda: open_store(name),
                    lambda: EpisodicIndex(name)):
        with pytest.raises(StoreError, match=rf"^{re.escape(shown)}: a conversation store "
                           "needs a file; SQLite gives this name a private database"):
            opening()
    assert list(tmp_path.iterdir()) == []
    assert run_cli("history", "demo", "--db", ":memory:") == (
        1, "", ":memory:: a conversation store needs a file; SQLite gives this name a "
        "private database of one connection, and the store uses several\nerror: 1 problem\n")


def test_a_negative_version_is_never_migrated(tmp_path: Path) -> None:
    path = _negative(tmp_path)
    before = _snapshot(path)
    with pytest.raises(StoreError) as raised:
        SqliteStore(path)  # a writing open refuses it too, before touching the journal
    assert str(raised.value) == f"{path}: not a pioneer conversation store (schema version -1)"
    assert _snapshot(path) == before


def test_a_writing_open_adds_no_table_to_a_foreign_database(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    before = _snapshot(path)
    with pytest.raises(StoreError) as raised:
        SqliteStore(path)
    assert str(raised.value) == (f"{path}: not a pioneer conversation store (it has tables but "
                                 "no schema version); refusing to add tables to it")
    assert _snapshot(path) == before
    assert _journal_mode(path) == "delete"


def test_a_version_whose_tables_are_missing_is_refused(tmp_path: Path) -> None:
    path = _pioneer_db(tmp_path / "dropped.db")
    _sql(path, "DROP TABLE turn_rounds")
    code, _out, err = run_cli("history", "t1", "--db", str(path))
    assert code == 1
    assert err == (f"{path}: not a pioneer conversation store (schema version "
                   f"{len(MIGRATIONS)} but no table 'turn_rounds')\nerror: 1 problem\n")


@pytest.mark.parametrize("command", sorted(READ_COMMANDS))
def test_a_read_command_leaves_a_store_it_reads_byte_for_byte(tmp_path: Path,
                                                              command: str) -> None:
    path = _pioneer_db(tmp_path / "pioneer.db")
    _sql(path, "PRAGMA wal_checkpoint(TRUNCATE)")
    for extra in ("pioneer.db-wal", "pioneer.db-shm"):
        (tmp_path / extra).unlink(missing_ok=True)
    before = _snapshot(path)
    run_cli(*READ_COMMANDS[command], "--db", str(path))
    assert _snapshot(path)[0] == before[0]


def test_a_read_only_store_refuses_writes(tmp_path: Path) -> None:
    path = _pioneer_db(tmp_path / "pioneer.db")
    with SqliteStore(path, read_only=True) as store:
        assert store.get_thread("t1") is not None
        with pytest.raises(StoreError) as raised:
            store.add_turn("t1", user_text="x", assistant_text=None)
    assert str(raised.value) == f"{path}: the store was opened read-only"


# -- rows of the wrong type -------------------------------------------------------------

DAMAGE = {
    "text user_tokens": (
        "UPDATE turns SET user_tokens = 'many' WHERE turn_id = 'turn-1'",
        "turn 'turn-1': column user_tokens holds text, expected an integer"),
    "blob user_text": (
        "UPDATE turns SET user_text = x'00ff' WHERE turn_id = 'turn-1'",
        "turn 'turn-1': column user_text holds a blob, expected text or NULL"),
    "real assistant_tokens": (
        "UPDATE turns SET assistant_tokens = 2.5 WHERE turn_id = 'turn-1'",
        "turn 'turn-1': column assistant_tokens holds a real number, expected an integer"),
    "NULL summary_tokens": (
        "UPDATE threads SET summary_tokens = NULL",
        "summary of thread 't1': column summary_tokens holds NULL, expected an integer"),
    "blob summary": (
        "UPDATE threads SET summary = x'01'",
        "summary of thread 't1': column summary holds a blob, expected text"),
    "blob model": (  # a number would become text: the column has TEXT affinity
        "UPDATE threads SET model = x'07'",
        "thread 't1': column model holds a blob, expected text or NULL"),
    "text artifact size": (
        "UPDATE artifact_refs SET size_bytes = 'big'",
        "artifact ref of turn 'turn-1': column size_bytes holds text, expected an integer "
        "or NULL"),
}


def _summarised_db(path: Path) -> Path:
    with SqliteStore(path) as store, EpisodicIndex(store):
        store.ensure_thread("t1", model="m")
        store.add_turn("t1", user_text="the billing export", assistant_text="done",
                       turn_id="turn-1",
                       user_artifacts=[ArtifactRef("a1", "plan.md", "document", size_bytes=9)])
        store.add_turn("t1", user_text="more billing", assistant_text="ok", turn_id="turn-2")
        store.set_thread_summary("t1", "billing talk", through_turn_id="turn-1")
    return path


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_row_of_the_wrong_type_is_a_located_store_error(tmp_path: Path, damage: str) -> None:
    statement, message = DAMAGE[damage]
    path = _summarised_db(tmp_path / "pioneer.db")
    _sql(path, statement)
    if "turn" in message:  # the summary covers turn-1: the window must read it again
        _sql(path, "UPDATE threads SET summary_through_seq = 0")
    code, out, err = run_cli("history", "t1", "--db", str(path))
    assert (code, out) == (1, "")
    assert err == f"{path}: {message}\nerror: 1 problem\n"
    with SqliteStore(path) as store, pytest.raises(StoreError) as raised:
        HistoryBudgeter(store, HistoryLimits.from_tokens(10_000, 0)).build("t1")
    assert str(raised.value) == f"{path}: {message}"


@pytest.mark.parametrize(("statement", "message"), [
    ("UPDATE episodic_snippets SET text = x'00ff' WHERE role = 'user' AND turn_id = 'turn-1'",
     "episodic snippet of turn 'turn-1': column text holds a blob, expected text"),
    ("UPDATE artifact_refs SET display_name = NULL",
     "artifact ref of turn 'turn-1': column display_name holds NULL, expected text"),
])
def test_recall_reports_a_damaged_row(tmp_path: Path, statement: str, message: str) -> None:
    path = _summarised_db(tmp_path / "pioneer.db")
    if "NULL" in message:  # the NOT NULL constraint is SQLite's; only a rebuilt table drops it
        _sql(path, "PRAGMA writable_schema = ON",
             "UPDATE sqlite_master SET sql = replace(sql, 'display_name TEXT NOT NULL', "
             "'display_name TEXT') WHERE name = 'artifact_refs'",
             "PRAGMA writable_schema = OFF")
    _sql(path, statement)
    code, out, err = run_cli("recall", "t1", "billing export", "--db", str(path))
    assert (code, out) == (1, "")
    assert err == f"{path}: {message}\nerror: 1 problem\n"


def test_explain_reports_a_damaged_record_row(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home,
                                                          profile="minimal"))
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    audit = TurnAudit("turn-1", "t1", "chat")
    audit.add_round(payload.manifest, request, "openai-chat",
                    build_request_body("openai-chat", request))
    path = _pioneer_db(tmp_path / "pioneer.db")
    with SqliteStore(path) as store:
        TurnRecords(store).save(audit.record())
    _sql(path, "UPDATE turn_rounds SET manifest = x'7b7d'")
    code, out, err = run_cli("explain", "turn-1", "--db", str(path))
    assert (code, out) == (1, "")
    assert err == (f"{path}: the record of turn 'turn-1': column manifest holds a "
                   "blob, expected text\nerror: 1 problem\n")


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("UPDATE turn_rounds SET usage = '" + "[" * 100_000 + "]" * 100_000 + "'",
         "not JSON (lists or objects nested too deeply to read)"),
        ("UPDATE turn_rounds SET calls = '[" + '{"a":' * 50_000 + "1" + "}" * 50_000 + "]'",
         "not JSON (lists or objects nested too deeply to read)"),
        ("UPDATE turn_records SET history = '" + "[" * 900 + "]" * 900 + "'",
         "history: Input should be a valid dictionary or instance of HistorySnapshot"),
        ("UPDATE turn_rounds SET usage = '{\"input_tokens\": " + "9" * 5000 + "}'",
         "not JSON (a number too long to read)"),
    ],
    ids=["deep-list", "deep-object", "deep-but-readable", "5000-digits"],
)
def test_explain_reports_a_record_of_hostile_json(tmp_path: Path, statement: str,
                                                  problem: str) -> None:
    """A record row someone else wrote, holding JSON nested past what the parser reads
    (or a number Python will not read), is a located error, never an internal one."""
    home = tmp_path / "home"
    home.mkdir()
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home,
                                                          profile="minimal"))
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    audit = TurnAudit("turn-1", "t1", "chat")
    audit.add_round(payload.manifest, request, "openai-chat",
                    build_request_body("openai-chat", request))
    path = _pioneer_db(tmp_path / "pioneer.db")
    with SqliteStore(path) as store:
        TurnRecords(store).save(audit.record())
    _sql(path, statement)
    for command in (("explain", "turn-1"), ("explain", "turn-1", "--html", "map.html")):
        code, out, err = run_cli(*command, "--db", str(path))
        assert (code, out) == (1, "")
        assert err == (f"{path}: the record of turn 'turn-1' is unreadable: {problem}\n"
                       "error: 1 problem\n")


@pytest.mark.parametrize(("statement", "problem"), [
    ("UPDATE turn_rounds SET usage = '" + "[" * 100_000 + "]" * 100_000 + "'",
     "not JSON (lists or objects nested too deeply to read)"),
    ("UPDATE turn_rounds SET usage = '{\"input_tokens\": " + "9" * 5000 + "}'",
     "not JSON (a number too long to read)"),
], ids=["deep-list", "5000-digits"])
def test_explain_reports_a_postgresql_record_of_hostile_json(
        tmp_path: Path, pg_server: Server, statement: str, problem: str) -> None:
    """The same rows on the PostgreSQL store (its columns are text, so they hold them)."""
    home = tmp_path / "home"
    home.mkdir()
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home,
                                                          profile="minimal"))
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    audit = TurnAudit("turn-1", "t1", "chat")
    audit.add_round(payload.manifest, request, "openai-chat",
                    build_request_body("openai-chat", request))
    schema, url = pg_server.new_schema()
    try:
        with open_store(url) as store:
            store.ensure_thread("t1")
            store.add_turn("t1", user_text="the billing export", assistant_text="done",
                           turn_id="turn-1")
            TurnRecords(store).save(audit.record())
        pg_server.execute(schema, statement)
        for command in (("explain", "turn-1"), ("explain", "turn-1", "--html", "map.html")):
            code, out, err = run_cli(*command, "--db", url)
            assert (code, out) == (1, "")
            assert err == (f"{url}: the record of turn 'turn-1' is unreadable: {problem}\n"
                           "error: 1 problem\n")
    finally:
        pg_server.drop_schema(schema)
