"""The embedded conversation store: SQLite in WAL mode, one transaction per write.

Takes a database path and a token counter; implements
:class:`~pioneer.history.store.CrudStore` and
:class:`~pioneer.history.store.DatabaseStore` (the SQL is shared with the PostgreSQL
store, :mod:`.sql_store`). Connections are pooled: a unit of work takes an idle one (or
opens one) and hands it back, so the fresh threads a recall hook runs on do not each
keep a connection. WAL lets readers run beside the one writer; each write is a single
``BEGIN IMMEDIATE`` … ``COMMIT``, so concurrent writers in threads or processes queue on
SQLite's lock instead of losing turns. ``synchronous=NORMAL``: a crash never leaves a
half-written turn; a power cut may lose the last commits. A new file is created mode
0600. Lone surrogates in turn and summary text become U+FFFD (:mod:`pioneer.text`); in
an id they are a StoreError.

Opened with ``read_only=True`` (what the read commands do), the file is opened by SQLite
in read-only mode: no journal switch, no migration; a file whose schema this code does
not know exactly (another program's database, an older or newer pioneer's, a negative
version) is refused with a :class:`StoreError`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import StoreError
from ..files import os_reason
from ..tokens import TokenCounter
from .migrations import MIGRATIONS, Migration, check_known, configure_connection, migrate
from .sql_store import SqlStore
from .store import Cursor, Dialect, StoreTimeout, StoreTransaction

__all__ = ["SqliteStore"]

# SQLite VM steps between two checks of a statement's time limit.
_PROGRESS_STEPS = 1000


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
        cache_size: int = 4096,
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> None:
        self.path = Path(path)
        super().__init__(dialect="sqlite", where=str(self.path), counter=counter,
                         cache_size=cache_size, read_only=read_only)
        if (read_only or not create) and not self.path.is_file():
            raise StoreError(f"{self.path}: no conversation store at this path")
        if not (read_only or self.path.exists()):
            self._create_private()
        self._busy_timeout = busy_timeout
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
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
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield _Transaction(conn, self._where)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        finally:
            if conn is not None:
                self._hand_back(conn)

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
