"""Writers that wait: eight SQLite writer processes; a peer frozen in the middle of its
write (SIGSTOP) on either store; one thread's writers filling a PostgreSQL pool; a
statement too slow for its limit. Every wait ends, with a store error that says why,
and nothing written is lost.
"""

from __future__ import annotations

import os
import signal
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
from pioneer.history.open import open_store
from pioneer.history.postgres_store import (
    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_STATEMENT_TIMEOUT,
    PostgresStore,
)

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
