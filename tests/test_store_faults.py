"""The PostgreSQL store under faults: sessions ended by the server, a commit whose outcome
is unknown, a window read cut in half, and the server restarted between two turns.

Each fault ends in a retry that completes the work exactly once, or in a StoreError with
nothing half-written. The restart runs on a throw-away cluster of this test module (its
own folder and port), so the machine's shared server is never restarted; the other
faults end the sessions of this test's own database only. (The writer killed mid-write
is in test_concurrency.py, on both stores.)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from stores import Server

from pioneer import StoreError
from pioneer.episodic import EpisodicIndex
from pioneer.history import HistoryBudgeter, HistoryLimits
from pioneer.history.postgres_store import PostgresStore
from pioneer.history.sql_store import ConnectionLost, SqlStore
from pioneer.history.store import StoreEvent, StoreTransaction

BIN = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def pg(pg_server: Server) -> Iterator[tuple[Server, str]]:
    schema, url = pg_server.new_schema()
    yield pg_server, url
    pg_server.drop_schema(schema)


def _fill(store: SqlStore, count: int, prefix: str = "turn") -> None:
    store.ensure_thread("t1")
    for n in range(count):
        store.add_turn("t1", user_text=f"question {n} about billing", assistant_text=f"reply {n}",
                       turn_id=f"{prefix}-{n}")


def _ids(store: SqlStore) -> list[str]:
    return [e.turn_id for e in store.get_thread_conversation_history("t1", limit=1000)]


def test_sessions_ended_between_two_turns_are_replaced(pg: tuple[Server, str]) -> None:
    server, url = pg
    with PostgresStore(url) as store:
        _fill(store, 3)
        assert server.terminate() >= 1  # every pooled session of the store is gone
        store.add_turn("t1", user_text="after", assistant_text="ok", turn_id="after")
        assert _ids(store) == ["turn-0", "turn-1", "turn-2", "after"]


def test_a_session_ended_inside_a_write_is_retried_once_and_written_once(
    pg: tuple[Server, str]
) -> None:
    server, url = pg
    ended: list[int] = []

    def end_it(tx: StoreTransaction, event: StoreEvent) -> None:
        if not ended:  # the first run only: the server ends the session mid-transaction
            ended.append(server.terminate())
            tx.execute("SELECT 1")

    with PostgresStore(url) as store, EpisodicIndex(store) as index:
        _fill(store, 2)
        store.subscribe(end_it)
        entry = store.add_turn("t1", user_text="the invoice run", assistant_text="done",
                               turn_id="mid")
        assert ended and ended[0] >= 1
        assert _ids(store) == ["turn-0", "turn-1", "mid"]
        assert entry == store.get_thread_conversation_history("t1")[-1]
        mine = [s.source_id for s in index.snippets("t1") if s.turn_id == "mid"]
        assert mine == [f"thread:t1/mid/{entry.user_item_id}/c0",
                        f"thread:t1/mid/{entry.assistant_item_id}/c0"]  # indexed once


def test_a_write_the_server_keeps_ending_is_a_store_error_with_nothing_written(
    pg: tuple[Server, str]
) -> None:
    server, url = pg

    def always(tx: StoreTransaction, event: StoreEvent) -> None:
        server.terminate()
        tx.execute("SELECT 1")

    with PostgresStore(url) as store:
        _fill(store, 1)
        store.subscribe(always)
        with pytest.raises(StoreError) as raised:
            store.add_turn("t1", user_text="never", assistant_text="stored", turn_id="lost")
        assert str(raised.value).startswith(f"{store.where}: ")
        assert str(raised.value).endswith("(gave up after 4 attempts)")
        assert "terminat" in str(raised.value)
    with PostgresStore(url) as fresh:
        assert _ids(fresh) == ["turn-0"]
        assert fresh.get_thread_summary("t1") is None


class _CommitLost(PostgresStore):
    """A store whose first commit goes through but whose connection is then reported
    lost, as when the server's answer to COMMIT never arrives."""

    lose = 1

    def _transaction(self, write: bool) -> AbstractContextManager[StoreTransaction]:
        inner = super()._transaction(write)

        @contextmanager
        def wrapped() -> Iterator[StoreTransaction]:
            with inner as tx:
                yield tx
            if write and self.lose:
                self.lose -= 1
                raise ConnectionLost(f"{self.where}: connection lost during COMMIT")

        return wrapped()


def test_a_turn_whose_commit_was_not_acknowledged_is_not_written_twice(
    pg: tuple[Server, str]
) -> None:
    _server, url = pg
    with _CommitLost(url) as store:
        store.lose = 0
        _fill(store, 1)
        store.lose = 1
        entry = store.add_turn("t1", user_text="once", assistant_text="only", turn_id="once")
        assert store.lose == 0  # the loss happened, and the retry recognised the turn
        assert _ids(store) == ["turn-0", "once"]
        assert entry == store.get_thread_conversation_history("t1")[-1]
        store.lose = 1
        with pytest.raises(StoreError, match="turn 'once' already exists"):
            # A different turn under the same id is still refused after a lost commit.
            store.add_turn("t1", user_text="other", assistant_text="text", turn_id="once")


def test_a_window_read_cut_in_half_is_read_again_whole(pg: tuple[Server, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    server, url = pg
    with PostgresStore(url) as store, PostgresStore(url) as writer:
        # Written by the other store: this one's turn cache is empty, so its window is read
        # in a transaction (summary, then turns), not in the one statement of a warm read.
        _fill(writer, 6)
        writer.set_thread_summary("t1", "through turn 2", through_turn_id="turn-2")
        original = SqlStore._entries
        calls: list[int] = []

        def cut(self: SqlStore, tx: StoreTransaction, *args: Any) -> Any:
            calls.append(1)
            if len(calls) == 1:
                # Between the summary and the turns: another node summarises further,
                # then the server ends this session.
                writer.set_thread_summary("t1", "through turn 4", through_turn_id="turn-4")
                server.terminate()
            return original(self, tx, *args)

        monkeypatch.setattr(SqlStore, "_entries", cut)
        decision = HistoryBudgeter(store, HistoryLimits.from_tokens(10_000, 0)).build("t1")
    assert len(calls) == 2  # read again from the start, on a fresh session
    # One snapshot: the later summary with exactly the turns it does not cover.
    assert decision.messages[0].content.endswith("through turn 4")
    assert decision.turn_ids == ("turn-5",)


# -- a server restarted between two turns (a private throw-away cluster) ----------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """A PostgreSQL cluster in a temporary folder, on its own port and socket folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@/postgres?host={folder}&port={self.port}"
        self.as_owner: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: the cluster belongs to postgres
            shutil.chown(folder, "postgres")
            # runuser lives in /usr/sbin, which a minimal PATH may leave out
            runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
            self.as_owner = [runuser or "runuser", "-u", "postgres", "--"]
        self._run(BIN / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8", "--locale=C.UTF-8")

    def _run(self, *argv: object) -> None:
        subprocess.run([*self.as_owner, *map(str, argv)], check=True, capture_output=True,
                       timeout=60)

    def _ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses='' -c fsync=off"
        self._run(BIN / "pg_ctl", "-D", self.data, "-w", "-l", self.folder / "log",
                  "-o", options, *extra, action)

    def start(self) -> None:
        self._ctl("start")

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def stop(self) -> None:
        self._ctl("stop", "-m", "fast")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if not (BIN / "initdb").is_file():
        pytest.fail(f"no PostgreSQL server binaries in {BIN} (install postgresql-15)")
    # Not under pytest's temporary folder: as root, that one is closed to the postgres user.
    folder = Path(tempfile.mkdtemp(prefix="pioneer-cluster-"))
    try:
        own = Cluster(folder)
        own.start()
        yield own
        own.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_server_restarted_between_two_turns(cluster: Cluster) -> None:
    with PostgresStore(cluster.url, connect_timeout=1) as store:
        _fill(store, 2, prefix="before")
        cluster.restart()
        store.add_turn("t1", user_text="after the restart", assistant_text="ok",
                       turn_id="after")
        assert _ids(store)[-3:] == ["before-0", "before-1", "after"]


def test_a_server_that_stays_down_is_a_store_error_and_the_store_recovers(
    cluster: Cluster,
) -> None:
    with PostgresStore(cluster.url, connect_timeout=0.5) as store:
        _fill(store, 1, prefix="up")
        cluster.stop()
        try:
            started = time.monotonic()
            with pytest.raises(StoreError) as raised:
                store.add_turn("t1", user_text="while down", assistant_text="x", turn_id="down")
            assert str(raised.value).endswith("(gave up after 4 attempts)")
            assert time.monotonic() - started < 30
        finally:
            cluster.start()
        store.add_turn("t1", user_text="back", assistant_text="ok", turn_id="back")
        ids = _ids(store)
    assert "down" not in ids and ids[-2:] == ["up-0", "back"]
