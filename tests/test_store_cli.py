"""``pioneer history``, ``recall`` and ``explain`` on a ``postgresql://`` URL: the same
thread written to SQLite and to PostgreSQL reads back the same, whichever way the store
is named (``--db``, ``PIONEER_STORE_URL``, ``store_url`` in pioneer.toml)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from stores import Server, make_store, with_database
from support import RECALL_TURNS, add_recall_turns, run_cli

from pioneer import PromptCompileInput, PromptCompiler, StoreError
from pioneer.audit import TurnRecord, TurnRecords
from pioneer.episodic import EpisodicIndex
from pioneer.providers import ChatMessage, ChatRequest, build_request_body
from pioneer.turn import TurnAudit

GOLDENS = Path(__file__).parent / "goldens" / "episodic"
def _record(home: Path) -> TurnRecord:
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home,
                                                          profile="minimal"))
    request = ChatRequest(model="m", compiled_prompt=payload,
                          messages=[ChatMessage.user(RECALL_TURNS[-1][0])])
    audit = TurnAudit("turn-7", "demo", "chat")
    audit.add_round(payload.manifest, request, "anthropic",
                    build_request_body("anthropic", request))
    return audit.record()


def _write(target: str | Path, record: TurnRecord) -> None:
    with make_store(target) as store, EpisodicIndex(store), TurnRecords(store) as records:
        store.ensure_thread("demo", model="demo-model")
        with records.expecting(record):  # written with turn-7, in its transaction
            add_recall_turns(store)
        store.set_thread_summary("demo", "They talked about the gateway's latency.",
                                 through_turn_id="turn-1")


@pytest.fixture
def stores(tmp_path: Path, pg_server: Server,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """The same thread in an SQLite file and in a PostgreSQL schema."""
    monkeypatch.chdir(tmp_path)
    for name in ("PIONEER_STORE_URL", "PIONEER_STORE_PATH", "PIONEER_CONFIG",
                 "PIONEER_MAX_CONTEXT_TOKENS", "PIONEER_RESPONSE_RESERVE_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    record = _record(home)
    path = tmp_path / "pioneer.db"
    schema, url = pg_server.new_schema()
    for target in (path, url):
        _write(target, record)
    yield path, url
    pg_server.drop_schema(schema)


COMMANDS: dict[str, tuple[str, ...]] = {
    "history": ("history", "demo"),
    "history-json": ("history", "demo", "--json"),
    "history-truncate": ("history", "demo", "--max-context-tokens", "150",
                         "--reserve-tokens", "40"),
    "explain": ("explain", "turn-7"),
    "explain-json": ("explain", "turn-7", "--json"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_reads_postgresql_as_it_reads_sqlite(stores: tuple[Path, str],
                                                       command: str) -> None:
    path, url = stores
    on_sqlite = run_cli(*COMMANDS[command], "--db", str(path))
    on_postgres = run_cli(*COMMANDS[command], "--db", url)
    assert on_sqlite[0] == 0
    assert on_postgres == on_sqlite


def test_recall_on_postgresql_finds_the_golden_hits(stores: tuple[Path, str],
                                                    golden: Callable[[Path, str], None]) -> None:
    path, url = stores
    query = ("recall", "demo", "gateway latency chart", "--json")
    code, out, err = run_cli(*query, "--db", url)
    assert (code, err) == (0, "")
    on_postgres = json.loads(out)
    on_sqlite = json.loads(run_cli(*query, "--db", str(path))[1])
    kept = [hit["source_id"] for hit in on_postgres["hits"] if hit["kept"]]
    # The same hits; the order of the two that tie on PostgreSQL (ts_rank does not weigh
    # snippet length) is the newer snippet first.
    assert sorted(kept) == sorted(hit["source_id"] for hit in on_sqlite["hits"] if hit["kept"])
    assert kept == ["thread:demo/turn-1/a1/c0", "thread:demo/turn-1/summary/c0",
                    "thread:demo/turn-1/u1/c0"]
    code, text, _ = run_cli("recall", "demo", "gateway latency chart", "--all", "--db", url)
    assert code == 0
    golden(GOLDENS / "cli-recall-postgresql.txt", text)


def test_the_store_url_comes_from_the_environment_or_a_named_pioneer_toml(
    stores: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path, url = stores
    expected = run_cli("history", "demo", "--db", url)
    monkeypatch.setenv("PIONEER_STORE_URL", url)
    assert run_cli("history", "demo") == expected
    monkeypatch.delenv("PIONEER_STORE_URL")
    (tmp_path / "pioneer.toml").write_text(f"store_url = {json.dumps(url)}\n"
                                           f"store_path = {json.dumps(str(path))}\n")
    named = ("--config", "pioneer.toml")
    assert run_cli("history", "demo", *named) == expected  # the URL wins over the path
    assert run_cli("history", "demo", *named, "--db", str(path))[0] == 0  # --db wins
    monkeypatch.setenv("PIONEER_CONFIG", "pioneer.toml")
    assert run_cli("history", "demo") == expected
    monkeypatch.delenv("PIONEER_CONFIG")
    # Found by the search alone, the file may not choose the store (it may have come
    # with a repository someone else wrote).
    code, out, err = run_cli("history", "demo")
    assert (code, out) == (1, "")
    assert err.startswith("pioneer.toml:1: store_url: a pioneer.toml found in the working "
                          "folder or a parent may not set this")


def test_a_store_url_that_is_not_postgresql_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIONEER_STORE_URL", "mysql://db/x")
    code, out, err = run_cli("history", "demo")
    assert (code, out) == (1, "")
    assert "store_url" in err and "expected a postgresql:// URL" in err


def test_a_read_command_creates_nothing_in_an_empty_schema(pg_server: Server) -> None:
    schema, url = pg_server.new_schema()
    try:
        for argv in (("history", "demo"), ("recall", "demo", "gateway"), ("explain", "t")):
            code, out, err = run_cli(*argv, "--db", url)
            assert (code, out) == (1, "")
            assert err.endswith(": not a pioneer conversation store (no pioneer_schema "
                                "table)\nerror: 1 problem\n")
        with make_store(url, read_only=False) as store:  # a writing open creates it
            assert store.get_thread("demo") is None
    finally:
        pg_server.drop_schema(schema)


def test_a_database_that_does_not_exist_is_a_located_error(pg_server: Server) -> None:
    url = with_database(pg_server.url, "pg_pioneer_no_such_database")
    code, out, err = run_cli("history", "demo", "--db", url)
    assert (code, out) == (1, "")
    assert err.startswith(f"{url}: connection failed: ")
    assert err.endswith('database "pg_pioneer_no_such_database" does not exist\n'
                        "error: 1 problem\n")


def test_a_password_is_not_printed(pg_server: Server) -> None:
    url = "postgresql://someone:secret@127.0.0.1:1/nothing"
    code, out, err = run_cli("history", "demo", "--db", url)
    assert (code, out) == (1, "")
    assert "secret" not in err
    assert err.startswith("postgresql://someone:***@127.0.0.1:1/nothing: ")


def test_history_summarize_stores_and_indexes_the_summary_on_postgresql(
    stores: tuple[Path, str], tmp_path: Path
) -> None:
    from test_history_summarizer import ChatServer

    path, url = stores
    server = ChatServer()
    try:
        outputs = []
        for target in (str(path), url):
            outputs.append(run_cli("history", "demo", "--db", target, "--home", str(tmp_path),
                                   "--max-context-tokens", "120", "--reserve-tokens", "0",
                                   "--summarize", "--summary-url", server.base_url))
    finally:
        server.close()
    assert outputs[0][0] == 0
    assert outputs[1] == outputs[0]
    with make_store(url, read_only=True) as store, EpisodicIndex(store) as index:
        summary = store.get_thread_summary("demo")
        assert summary is not None and summary.text == "A short summary."
        assert summary.through_turn_id == "turn-7"
        assert [s.text for s in index.snippets("demo") if s.role == "generated_summary"] == [
            "A short summary."]


@pytest.mark.parametrize(("version", "message"), [
    (99, "schema version 99 is newer than this pioneer supports ({latest}); upgrade pioneer"),
    (-1, "not a pioneer conversation store (schema version -1)"),
])
def test_a_postgresql_schema_of_an_unknown_version_is_refused(
    pg_server: Server, version: int, message: str
) -> None:
    from pioneer.history.postgres_migrations import MIGRATIONS

    schema, url = pg_server.new_schema()
    try:
        with make_store(url) as store:
            store.ensure_thread("demo")
        pg_server.execute(schema, f"UPDATE pioneer_schema SET version = {version}")
        expected = f"{url}: {message.format(latest=len(MIGRATIONS))}"
        code, out, err = run_cli("history", "demo", "--db", url)
        assert (code, out, err) == (1, "", expected + "\nerror: 1 problem\n")
        with pytest.raises(StoreError) as raised:
            make_store(url)  # a writing open refuses it too
        assert str(raised.value) == expected
    finally:
        pg_server.drop_schema(schema)


def test_an_older_postgresql_schema_is_refused_by_a_read_and_migrated_by_a_write(
    pg_server: Server,
) -> None:
    from pioneer.history.postgres_migrations import MIGRATIONS
    from pioneer.history.postgres_store import PostgresStore

    schema, url = pg_server.new_schema()
    try:
        with PostgresStore(url, migrations=MIGRATIONS[:2]) as store:
            store.ensure_thread("demo")
        assert run_cli("history", "demo", "--db", url) == (
            1, "", f"{url}: schema version 2 is older than this pioneer's ({len(MIGRATIONS)}); "
                   "a read command does not upgrade it (open it once for writing)\n"
                   "error: 1 problem\n")
        with make_store(url) as store:  # a writing open runs the missing steps
            store.add_turn("demo", user_text="after the upgrade", assistant_text="kept",
                           turn_id="turn-0")
        code, out, err = run_cli("history", "demo", "--db", url)
        assert (code, err) == (0, "")
        assert "after the upgrade" in out
    finally:
        pg_server.drop_schema(schema)


def test_postgresql_migration_steps_must_be_numbered_in_order(pg_server: Server) -> None:
    from pioneer.history.postgres_migrations import MIGRATIONS
    from pioneer.history.postgres_store import PostgresStore

    schema, url = pg_server.new_schema()
    try:
        with pytest.raises(StoreError) as raised:
            PostgresStore(url, migrations=MIGRATIONS[1:])
        assert str(raised.value) == (
            "migration steps must be numbered 1, 2, 3…; step 1 has version 2")
        assert run_cli("history", "demo", "--db", url)[2] == (  # nothing was created
            f"{url}: not a pioneer conversation store (no pioneer_schema table)\n"
            "error: 1 problem\n")
    finally:
        pg_server.drop_schema(schema)
