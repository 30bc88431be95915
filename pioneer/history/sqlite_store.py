"""The embedded conversation store: SQLite in WAL mode, one transaction per write.

Takes a database path and a token counter; implements
:class:`~pioneer.history.store.CrudStore` and
:class:`~pioneer.history.store.DatabaseStore` (the SQL is shared with the PostgreSQL
store, :mod:`.sql_store`). Connections are pooled: a unit of work takes an idle one (or
opens one) and hands it back, so the fresh threads a recall hook runs on do not each
keep a connection. WAL lets readers run beside the one writer; each write is a single
``BEGIN IMMEDIATE`` … ``COMMIT``, so concurrent writers queue instead of losing turns:
the threads of one process on the store's write lock, other processes on SQLite's, which
a writer asks for again after short pauses of its own (:meth:`SqliteStore._begin_write`)
until ``busy_timeout``. Copying the WAL back into the file (a checkpoint, with its
fsyncs) runs on the process's one checkpoint thread, not in the commit of whichever turn
crossed SQLite's threshold. ``synchronous=NORMAL``: a crash never leaves a half-written
turn; a power cut may lose the last commits. A new file is created mode 0600. Lone
surrogates in turn and summary text become U+FFFD (:mod:`pioneer.text`); in an id they
are a StoreError.

Opened with ``read_only=True`` (what the read commands do), the file is opened by SQLite
in read-only mode: no journal switch, no migration; a file whose schema this code does
not know exactly (another program's database, an older or newer pioneer's, a negative
version) is refused with a :class:`StoreError`.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import StoreError
from ..files import os_reason
from ..settings import HISTORY_CACHE_BYTES
from ..tokens import TokenCounter
from .migrations import MIGRATIONS, Migration, check_known, configure_connection, migrate
from .sql_store import SqlStore
from .store import Cursor, Dialect, StoreTimeout, StoreTransaction

__all__ = ["SqliteStore"]

# SQLite VM steps between two checks of a statement's time limit.
_PROGRESS_STEPS = 1000
# A writer that finds the write lock taken asks again after a pause that starts here and
# doubles up to the cap, each drawn from the upper half of its range so that waiting
# processes do not ask in step. SQLite's own busy handler sleeps up to 100 ms a try once
# it has waited a while, so a writer that came early sleeps through the turns of the
# ones that came after it: the tail of add_turn under several writer processes.
_FIRST_PAUSE = 0.000_25
_MAX_PAUSE = 0.002
# Commits to a store after which the process's checkpoint thread copies its WAL back:
# with the episodic index about SQLite's own threshold of 1,000 pages (a turn and its
# snippets write some 20).
_CHECKPOINT_COMMITS = 32
# WAL pages after which a commit checkpoints itself after all: only if that thread falls
# far behind.
_COMMIT_CHECKPOINT_PAGES = 10_000


class _Transaction:
    """A :class:`StoreTransaction` on one SQLite connection."""

    dialect: Dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection, where: str) -> None:
        self.conn = conn
        self.where = where

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    @contextmanager
    def time_limit(self, milliseconds: int | None) -> Iterator[None]:
        if milliseconds is None:
            yield
            return
        stop = time.monotonic() + milliseconds / 1000
        self.conn.set_progress_handler(lambda: int(time.monotonic() >= stop), _PROGRESS_STEPS)
        try:
            yield
        except sqlite3.OperationalError as error:
            if "interrupted" not in str(error):
                raise
            raise StoreTimeout(
                f"{self.where}: the query stopped at its {milliseconds} ms time limit"
            ) from None
        finally:
            self.conn.set_progress_handler(None, 0)


class _Checkpoints:
    """The process's one checkpoint thread, shared by every store: a store hands itself
    over every ``_CHECKPOINT_COMMITS`` commits, and the thread copies its WAL back into
    the file (``PASSIVE``: it never waits for a reader or a writer, and leaves it to
    another process already checkpointing). Started on first use, again in a forked
    child."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[int, SqliteStore] = {}
        self._wake = threading.Event()
        self._started = False

    def add(self, store: SqliteStore) -> None:
        """Checkpoint ``store`` soon."""
        with self._lock:
            self._due[id(store)] = store
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, name="pioneer checkpoints",
                                 daemon=True).start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                due = list(self._due.values())
                self._due.clear()
            for store in due:
                store._checkpoint()


_CHECKPOINTS = _Checkpoints()


class SqliteStore(SqlStore):
    """Conversation history in one SQLite file (created and migrated on open)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        counter: TokenCounter | None = None,
        create: bool = True,
        read_only: bool = False,
        busy_timeout: float = 30.0,
        cache_bytes: int = HISTORY_CACHE_BYTES,
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> None:
        if os.fspath(path) in ("", ":memory:"):
            # SQLite's names for a private database of one connection: the store opens
            # several connections, and each would see an empty database of its own.
            raise StoreError(f"{os.fspath(path) or '(empty path)'}: a conversation store "
                             "needs a file; SQLite gives this name a private database of one "
                             "connection, and the store uses several")
        self.path = Path(path)
        super().__init__(dialect="sqlite", where=str(self.path), counter=counter,
                         cache_bytes=cache_bytes, read_only=read_only)
        if (read_only or not create) and not self.path.is_file():
            raise StoreError(f"{self.path}: no conversation store at this path")
        if not (read_only or self.path.exists()):
            self._create_private()
        self._busy_timeout = busy_timeout
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # The threads of this process queue here for the write lock, rather than each
        # asking SQLite for it in turn.
        self._write_lock = threading.Lock()
        self._commits = 0  # since the last hand-over to the checkpoint thread
        self._closed = False
        with self._guard():
            conn = self._open()
            try:
                if read_only:
                    check_known(conn, migrations, where=self._where)
                else:
                    check_known(conn, migrations, where=self._where, upgrade=True)
                    configure_connection(conn)
                    migrate(conn, migrations, where=self._where)
            except BaseException:
                conn.close()
                raise
            self._idle.append(conn)

    def _create_private(self) -> None:
        """Create the empty file for the owner alone (0600, whatever the umask): it holds
        the conversations, and SQLite gives its WAL and shared-memory files its mode."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:  # another process made it first
            pass
        except OSError as error:
            raise StoreError(f"{self.path}: cannot create the store: {os_reason(error)}") from None

    # -- connections -----------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._read_only:
            uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=self._busy_timeout,
                                   isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            return conn
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA wal_autocheckpoint = {_COMMIT_CHECKPOINT_PAGES}")
        return conn

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: {error}") from None
        except UnicodeEncodeError:  # an id or a name with a lone surrogate
            raise StoreError(f"{self.path}: text that is not valid Unicode (a lone "
                             "surrogate) cannot be stored") from None

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[StoreTransaction]:
        if not write:
            with self._connection() as conn:
                conn.execute("BEGIN")
                yield from self._work(conn)
            return
        deadline = time.monotonic() + self._busy_timeout
        if not self._write_lock.acquire(timeout=self._busy_timeout):
            raise StoreError(f"{self.path}: {self._locked()}")
        try:
            with self._connection() as conn:
                self._begin_write(conn, deadline)
                yield from self._work(conn)
            self._commits += 1
            if self._commits >= _CHECKPOINT_COMMITS:
                self._commits = 0
                _CHECKPOINTS.add(self)
        finally:
            self._write_lock.release()

    def _work(self, conn: sqlite3.Connection) -> Iterator[StoreTransaction]:
        try:
            yield _Transaction(conn, self._where)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """An idle connection (or a new one) for one unit of work, handed back after it."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path}: the store is closed")
            conn = self._idle.pop() if self._idle else None
        try:
            with self._guard():
                if conn is None:
                    conn = self._open()
                    if not self._read_only:
                        configure_connection(conn)
                yield conn
        finally:
            if conn is not None:
                self._hand_back(conn)

    def _begin_write(self, conn: sqlite3.Connection, deadline: float) -> None:
        """``BEGIN IMMEDIATE``, asked for again after short pauses until ``deadline``."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            pause = _FIRST_PAUSE
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as error:
                    if error.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                        raise
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise StoreError(f"{self.path}: {self._locked()}") from None
                time.sleep(min(left, random.uniform(pause / 2, pause)))
                pause = min(2 * pause, _MAX_PAUSE)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {round(self._busy_timeout * 1000)}")

    def _locked(self) -> str:
        return (f"database is locked: another writer held it for more than the "
                f"{self._busy_timeout:g} s busy timeout")

    def _checkpoint(self) -> None:
        """Copy the WAL back into the file now, on an idle connection (the checkpoint
        thread's work; a closed or busy store is left as it is)."""
        with suppress(StoreError, sqlite3.Error), self._connection() as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _hand_back(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            conn.close()
            return
        with self._lock:
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)

    def close(self) -> None:
        """Close every idle connection (one in use closes when it is handed back)."""
        with self._lock:
            self._closed = True
            for conn in self._idle:
                conn.close()
            self._idle.clear()

    def __enter__(self) -> SqliteStore:
        return self
