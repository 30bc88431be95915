"""Writers that wait: eight SQLite writer processes; a peer frozen in the middle of its
write (SIGSTOP) on either store; one thread's writers filling a PostgreSQL pool; a
statement too slow for its limit. Every wait ends, with a store error that says why,
and nothing written is lost.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from stores import Server

from pioneer import PioneerSettings, StoreError
from pioneer.episodic import EpisodicIndex
from pioneer.history import SqliteStore
from pioneer.history.open import open_store
from pioneer.history.postgres_store import (
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_STATEMENT_TIMEOUT,
    PostgresStore,
)

FORK = multiprocessing.get_context("fork")
#: How long a test waits for something that happens at once when the code is right.
PATIENCE = 60.0

# A peer that stops itself (SIGSTOP) inside the transaction of its first turn, holding
# the thread: the store's write lock on SQLite, the thread's row on PostgreSQL.
_FROZEN_PEER = """
import os, signal, sys
from pioneer.history.open import open_store
from pioneer.history.postgres_store import PostgresStore
target, idle = sys.argv[1], float(sys.argv[2])
store = (PostgresStore(target, idle_in_transaction_timeout=idle) if "://" in target
         else open_store(target))
frozen = []

def hold(tx, event):
    if not frozen:
        frozen.append(True)
        print("holding", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)

store.subscribe(hold)
store.add_turn("locked", user_text="peer", assistant_text="frozen", turn_id="peer-turn")
print("written", flush=True)
store.close()
"""


def _until(what: str, check: Callable[[], bool]) -> None:
    """Wait for ``check`` (it holds at once when the code is right)."""
    deadline = time.monotonic() + PATIENCE
    while not check():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)


class Peer:
    """The frozen peer, started and stopped in its transaction."""

    def __init__(self, target: str | Path, idle: float = PATIENCE * 2) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _FROZEN_PEER, str(target), str(idle)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "holding\n"
        _, status = os.waitpid(self.process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)

    def resume(self) -> str:
        """Let it go on; its exit code and what it printed after (its errors too, when
        it failed)."""
        os.kill(self.process.pid, signal.SIGCONT)
        out, err = self.process.communicate(timeout=PATIENCE)
        code = self.process.returncode
        return f"{code} {out}" + (err if code else "")

    def kill(self) -> None:
        self.process.kill()
        self.process.communicate(timeout=PATIENCE)


@pytest.fixture
def pg_url(pg_server: Server) -> Iterator[str]:
    schema, url = pg_server.new_schema()
    with open_store(url) as store:
        store.ensure_thread("locked")
        store.ensure_thread("free")
    yield url
    pg_server.drop_schema(schema)


def _lock_waiters(server: Server) -> int:
    """Sessions of the test database waiting for a lock on a thread's row."""
    with psycopg.connect(server.database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE '%FOR NO KEY UPDATE%'").fetchone()
    assert row is not None
    return int(row[0])


# -- PostgreSQL ---------------------------------------------------------------------


def test_a_write_behind_a_frozen_peer_fails_at_the_lock_timeout(pg_url: str) -> None:
    peer = Peer(pg_url)
    try:
        settings = PioneerSettings(store_url=pg_url, postgres_lock_timeout=0.5)
        with open_store(settings) as store:
            with pytest.raises(StoreError) as raised:
                store.add_turn("locked", user_text="mine", assistant_text="waits")
            assert str(raised.value) == (
                f"{store.where}: a row this write needs: another writer held it for more "
                "than the 0.5 s lock timeout (postgres_lock_timeout)")
            # Every other thread is served meanwhile.
            store.add_turn("free", user_text="other", assistant_text="tenant")
            assert [e.user_text for e in store.get_history_window("free").entries] == ["other"]
            peer.kill()  # the server rolls its transaction back and frees the row
            store.add_turn("locked", user_text="mine", assistant_text="after")
            assert [e.user_text for e in store.get_history_window("locked").entries] == [
                "mine"]
    finally:
        if peer.process.poll() is None:
            peer.kill()


def test_the_server_ends_a_peer_frozen_in_its_transaction_and_the_writers_go_on(
    pg_url: str,
) -> None:
    peer = Peer(pg_url, idle=0.5)
    with open_store(PioneerSettings(store_url=pg_url, postgres_lock_timeout=PATIENCE)) as store:
        store.add_turn("locked", user_text="mine", assistant_text="first", turn_id="mine")
        # The peer's session was ended: woken, it writes its turn again, after ours.
        assert peer.resume() == "0 written\n"
        assert [e.turn_id for e in store.get_history_window("locked").entries] == [
            "mine", "peer-turn"]


def test_one_threads_writers_leave_the_pool_to_the_other_threads(
    pg_url: str, pg_server: Server,
) -> None:
    peer = Peer(pg_url)
    errors: list[BaseException] = []
    try:
        with PostgresStore(pg_url, pool_size=4, connect_timeout=1,
                           lock_timeout=PATIENCE) as store:

            def write(n: int) -> None:
                try:
                    store.add_turn("locked", user_text=f"writer {n}", assistant_text="ok",
                                   turn_id=f"w{n}")
                except BaseException as error:  # reported below
                    errors.append(error)

            writers = [threading.Thread(target=write, args=(n,)) for n in range(8)]
            for writer in writers:
                writer.start()
            _until("a writer to wait for the row", lambda: _lock_waiters(pg_server) >= 1)
            store.add_turn("free", user_text="other", assistant_text="tenant")
            assert [e.user_text for e in store.get_history_window("free").entries] == ["other"]
            assert _lock_waiters(pg_server) == 1  # the others queue in the process
            peer.kill()
            for writer in writers:
                writer.join(PATIENCE)
            assert errors == []
            entries = store.get_history_window("locked").entries
        assert sorted(e.turn_id for e in entries) == sorted(f"w{n}" for n in range(8))
    finally:
        if peer.process.poll() is None:
            peer.kill()


def test_the_time_limits_are_the_settings_and_a_slow_statement_is_stopped(
    pg_url: str,
) -> None:
    defaults = PioneerSettings()
    assert (defaults.postgres_lock_timeout, defaults.postgres_statement_timeout,
            defaults.postgres_idle_in_transaction_timeout) == (
        DEFAULT_LOCK_TIMEOUT, DEFAULT_STATEMENT_TIMEOUT, DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT)

    def shown(store: Any) -> tuple[str, ...]:
        return store.read(lambda tx: tuple(
            tx.execute(f"SHOW {name}").fetchone()[0] for name in (
                "lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")))

    with open_store(pg_url) as store:
        assert shown(store) == ("10s", "30s", "5s")
    settings = PioneerSettings(store_url=pg_url, postgres_lock_timeout=2.5,
                               postgres_statement_timeout=0.3,
                               postgres_idle_in_transaction_timeout=7)
    with open_store(settings) as store:
        assert shown(store) == ("2500ms", "300ms", "7s")

        def limited(tx: Any) -> str:
            with tx.time_limit(5000):
                tx.execute("SELECT 1")
            return str(tx.execute("SHOW statement_timeout").fetchone()[0])

        assert store.read(limited) == "300ms"  # a query's own limit ends with it
        with pytest.raises(StoreError) as raised:
            store.read(lambda tx: tx.execute("SELECT pg_sleep(5)").fetchone())
        assert str(raised.value) == (
            f"{store.where}: canceling statement due to statement timeout")


# -- SQLite -------------------------------------------------------------------------

WRITERS, TURNS = 8, 25


def _write(path: Path, process: int, start: Any, queue: Any) -> None:
    try:
        with open_store(path) as store, EpisodicIndex(store):
            store.ensure_thread(f"own-{process}")
            start.wait()
            for n in range(TURNS):
                store.add_turn(f"own-{process}", user_text=f"user {process} {n}",
                               assistant_text=f"reply {process} {n} " + "words " * 50,
                               turn_id=f"p{process}-own-{n}")
                store.add_turn("shared", user_text=f"shared {process} {n}",
                               assistant_text="ok", turn_id=f"p{process}-shared-{n}")
        queue.put((process, None))
    except BaseException as error:  # reported by the test
        queue.put((process, repr(error)))


def test_eight_writer_processes_lose_nothing_and_keep_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "pioneer.db"
    with open_store(path) as store:
        store.ensure_thread("shared")
    start, queue = FORK.Barrier(WRITERS), FORK.Queue()
    processes = [FORK.Process(target=_write, args=(path, p, start, queue))
                 for p in range(WRITERS)]
    for process in processes:
        process.start()
    results = sorted(queue.get(timeout=PATIENCE * 3) for _ in processes)
    for process in processes:
        process.join(PATIENCE)
    assert results == [(p, None) for p in range(WRITERS)]
    with open_store(path, read_only=True) as store, EpisodicIndex(store) as index:
        shared = store.get_thread_conversation_history("shared", limit=10_000)
        assert sorted(e.turn_id for e in shared) == sorted(
            f"p{p}-shared-{n}" for p in range(WRITERS) for n in range(TURNS))
        for p in range(WRITERS):
            mine = [e.turn_id for e in shared if e.turn_id.startswith(f"p{p}-")]
            assert mine == [f"p{p}-shared-{n}" for n in range(TURNS)]  # in commit order
            own = store.get_thread_conversation_history(f"own-{p}", limit=10_000)
            assert [e.assistant_text for e in own] == [
                f"reply {p} {n} " + "words " * 50 for n in range(TURNS)]
            assert {s.turn_id for s in index.snippets(f"own-{p}")} == {e.turn_id for e in own}
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO episodic_fts(episodic_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_a_write_behind_a_frozen_sqlite_writer_fails_at_the_busy_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pioneer.db"
    with SqliteStore(path) as store:
        store.ensure_thread("locked")
        store.add_turn("locked", user_text="before", assistant_text="the peer")
    peer = Peer(path)
    try:
        with SqliteStore(path, busy_timeout=0.5) as store:
            with pytest.raises(StoreError) as raised:
                store.add_turn("locked", user_text="mine", assistant_text="waits")
            assert str(raised.value) == (
                f"{path}: database is locked: another writer held it for more than the "
                "0.5 s busy timeout")
            # Readers are not held up by the writer.
            assert [e.user_text for e in store.get_history_window("locked").entries] == [
                "before"]
            assert peer.resume() == "0 written\n"
            store.add_turn("locked", user_text="mine", assistant_text="after")
            assert [e.user_text for e in store.get_history_window("locked").entries] == [
                "before", "peer", "mine"]
    finally:
        if peer.process.poll() is None:
            peer.kill()


def _in_the_file(path: Path) -> int:
    """Turns in the database file itself, not counting the WAL (``immutable``); before
    the first checkpoint even the tables are only in the WAL."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])
    except sqlite3.OperationalError:  # no such table
        return 0
    finally:
        conn.close()


def test_turns_reach_the_database_files_through_one_checkpoint_thread(tmp_path: Path) -> None:
    # A commit checkpoints only past 10,000 WAL pages; the process's one thread does it
    # every 32 commits to a store, for all of them.
    paths = [tmp_path / f"home-{n}.db" for n in range(3)]
    stores = [SqliteStore(path) for path in paths]
    try:
        for store in stores:
            store.ensure_thread("t")
            for n in range(40):
                store.add_turn("t", user_text=f"u{n}", assistant_text=f"a{n}")
        for path in paths:
            _until(f"the checkpoint of {path.name}", lambda path=path: _in_the_file(path) >= 31)
        assert len([thread for thread in threading.enumerate()
                    if thread.name == "pioneer checkpoints"]) == 1
    finally:
        for store in stores:
            store.close()
