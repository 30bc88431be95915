"""The conversation store for several nodes: PostgreSQL through psycopg 3 and a pool.

Takes a ``postgresql://`` URL (any libpq connection string; ``options=-csearch_path=…``
puts the tables in a schema of their own) and a token counter; implements
:class:`~pioneer.history.store.CrudStore` and
:class:`~pioneer.history.store.DatabaseStore` with the SQL it shares with the SQLite
store (:mod:`.sql_store`). Needs the ``postgres`` extra.

Transactions: a write is one ``READ COMMITTED`` transaction that first holds the thread's
row (``SELECT … FOR NO KEY UPDATE``), so the turns of one thread get their positions in
commit order whichever node writes them, and a summary's coverage is a conditional update
that never moves it back; a read is one ``REPEATABLE READ READ ONLY`` transaction, so a
history window (summary plus the turns after it) is one snapshot. The writes of one
thread from one process queue on a lock of the process (one per thread id, held around
the whole transaction), so that however many of them wait, they hold one pooled
connection between them and the pool stays open to every other thread; across nodes
they queue on the thread's row, once per turn.

Time limits (every session starts with them, from the settings ``postgres_*``):
``lock_timeout`` bounds a write's wait for a thread another session holds (the wait in
the process counts against it too), ``statement_timeout`` any one statement, and
``idle_in_transaction_session_timeout`` how long the server lets a session that stopped
in the middle of a transaction (a node frozen, stopped or cut off) keep its locks: it
ends that session, the transaction rolls back, and the writers behind it go on. A write
that waits longer than ``lock_timeout`` is a :class:`StoreError` saying so.

Faults: a connection the server ended (``pg_terminate_backend``, a restart, a network
cut) is a :class:`~.sql_store.ConnectionLost`; the unit of work then runs again from the
start on a fresh connection, a few times with a growing pause, and is a
:class:`StoreError` when the server stays away. Before the retry, the pool's idle
connections are checked and the dead ones dropped (a restart kills them all), rather
than spending a round trip on every hand-out. A serialization failure or deadlock is
retried the same way, and so is a server short of resources (SQLSTATE class 53).
Everything else PostgreSQL refuses (a data exception, a constraint, a program limit
such as an index row too large) would fail the same way again: it is a
:class:`StoreError` with its message at once, never retried.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

import psycopg
import psycopg.errors
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import Format
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StoreError
from ..settings import HISTORY_CACHE_BYTES
from ..tokens import TokenCounter
from ._urls import normalize_url, redact_url
from .migrations import Migration, check_order, check_version
from .postgres_migrations import MIGRATION_LOCK, MIGRATIONS
from .sql_store import ConnectionLost, SqlStore
from .store import Cursor, Dialect, StoreTimeout, StoreTransaction

__all__ = [
    "DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT", "DEFAULT_LOCK_TIMEOUT", "DEFAULT_STATEMENT_TIMEOUT",
    "PostgresStore", "escape_text", "restore_text",
]

#: Seconds a write waits for a thread's row (the settings' ``postgres_lock_timeout``).
DEFAULT_LOCK_TIMEOUT = 10.0
#: Seconds one statement may run (``postgres_statement_timeout``).
DEFAULT_STATEMENT_TIMEOUT = 30.0
#: Seconds a session may sit idle in a transaction (``postgres_idle_in_transaction_timeout``).
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT = 5.0

# Errors after which the transaction is gone but repeating it is safe.
_RETRYABLE = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected,
              psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown,
              psycopg.errors.CannotConnectNow, psycopg.errors.IdleInTransactionSessionTimeout)


# -- text PostgreSQL cannot hold ---------------------------------------------------------
# A PostgreSQL text value cannot hold NUL (U+0000), which SQLite keeps and a provider or a
# user can send. Every string the store writes is escaped on its way to the server and
# every text value it reads is restored, by the connection's own adapters: U+0001 is the
# escape character, so NUL is written as U+0001 U+0001 and U+0001 itself as U+0001
# U+0002. Text holding neither is written as it is, so indexes, equality and full-text
# search see exactly the text they saw before (both escapes are separators to the
# full-text parser, as NUL would be). The mapping is one to one: a stored U+0001 always
# starts a pair.

_ESCAPE = "\x01"
_PAIRS = re.compile("\x01[\x01\x02]")
_RESTORED = {"\x01\x01": "\x00", "\x01\x02": "\x01"}


def escape_text(text: str) -> str:
    """``text`` as the store writes it to PostgreSQL (unchanged without NUL or U+0001)."""
    if "\x00" not in text and _ESCAPE not in text:
        return text
    return text.replace(_ESCAPE, "\x01\x02").replace("\x00", "\x01\x01")


def restore_text(text: str) -> str:
    """The text :func:`escape_text` was given."""
    if _ESCAPE not in text:
        return text
    return _PAIRS.sub(lambda pair: _RESTORED[pair.group()], text)


def _encoding(context: Any) -> str:
    connection = getattr(context, "connection", None)
    return connection.info.encoding if connection is not None else "utf-8"


class _TextDumper(Dumper):
    """A string parameter, escaped (as psycopg's default: text format, type unknown)."""

    format = Format.TEXT

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        self._encoding = _encoding(self)

    def dump(self, obj: str) -> bytes:
        return escape_text(obj).encode(self._encoding)


class _BinaryTextDumper(_TextDumper):
    """A string parameter in binary format, escaped."""

    format = Format.BINARY
    oid = psycopg.adapters.types["text"].oid


class _TextLoader(Loader):
    """A text value read back, restored."""

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._encoding = _encoding(self)

    def load(self, data: Buffer) -> str:
        return restore_text(bytes(data).decode(self._encoding))


class _BinaryTextLoader(_TextLoader):
    format = Format.BINARY


def _escaping(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Make ``conn`` escape every string it sends and restore every text it reads."""
    adapters = conn.adapters
    adapters.register_dumper(str, _BinaryTextDumper)
    adapters.register_dumper(str, _TextDumper)  # the last one is the default, as psycopg's
    for name in ("text", "varchar"):
        adapters.register_loader(name, _TextLoader)
        adapters.register_loader(name, _BinaryTextLoader)


def _sql(statement: str, params: Sequence[Any]) -> tuple[str, Sequence[Any] | None]:
    # The shared SQL uses "?" placeholders; psycopg's are "%s" (and "%" is then "%%").
    if not params:
        return statement, None
    return statement.replace("%", "%%").replace("?", "%s"), params


class _Transaction:
    """A :class:`StoreTransaction` on one psycopg connection."""

    dialect: Dialect = "postgresql"

    def __init__(self, conn: psycopg.Connection[Any], where: str) -> None:
        self.conn = conn
        self.where = where

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        query, values = _sql(sql, params)
        return self.conn.execute(query, values)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        query, _ = _sql(sql, rows[0] if rows else ())
        with self.conn.cursor() as cursor:
            cursor.executemany(query, rows)

    @contextmanager
    def time_limit(self, milliseconds: int | None) -> Iterator[None]:
        if milliseconds is None:
            yield
            return
        # 0 would mean "no limit" to PostgreSQL; the shortest real limit is 1 ms.
        self.conn.execute(f"SET LOCAL statement_timeout = {max(1, int(milliseconds))}")
        try:
            yield
        except psycopg.errors.QueryCanceled:
            raise StoreTimeout(
                f"{self.where}: the query stopped at its {milliseconds} ms time limit"
            ) from None
        self.conn.execute("SET LOCAL statement_timeout = DEFAULT")


#: SQLSTATE classes and codes of operational errors that running the work again may
#: cure: a connection exception (08), insufficient resources (53: out of memory, too
#: many connections), the server shutting down or starting (57P01-57P03) and an idle
#: session ended (57P05). Every other one (a program limit such as an index row too
#: large, 54000; a cancelled query, 57014) fails the same way each time.
_TRANSIENT_STATES = ("08", "53", "57P01", "57P02", "57P03", "57P05")


def _transient(error: psycopg.Error) -> bool:
    """Whether ``error`` came from the connection or the server's state rather than from
    the work itself (an error with no SQLSTATE is the client's connection failing)."""
    state = error.sqlstate
    return state is None or state.startswith(_TRANSIENT_STATES)


def _message(error: psycopg.Error) -> str:
    primary = getattr(error.diag, "message_primary", None)
    return str(primary or error).strip()


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))  # 0 would mean "no limit" to PostgreSQL


class _Gate:
    """The lock a process's writes of one thread queue on, and how many want it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class PostgresStore(SqlStore):
    """Conversation history in a PostgreSQL database (its schema migrated on open)."""

    def __init__(
        self,
        url: str,
        *,
        counter: TokenCounter | None = None,
        read_only: bool = False,
        cache_bytes: int = HISTORY_CACHE_BYTES,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
        idle_in_transaction_timeout: float = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> None:
        super().__init__(dialect="postgresql", where=redact_url(url), counter=counter,
                         cache_bytes=cache_bytes, read_only=read_only)
        url = normalize_url(url)
        self.url = url
        self._connect_timeout = connect_timeout
        self._lock_timeout = lock_timeout
        self._gates: dict[str, _Gate] = {}
        self._gates_lock = threading.Lock()
        # One direct connection first: a wrong URL, a refused connection or a missing
        # database is reported with the server's reason, not as a pool timeout. It runs
        # the migrations, which the time limits below must not cut short.
        try:
            with psycopg.connect(url, autocommit=True,
                                 connect_timeout=max(1, round(connect_timeout))) as conn:
                if read_only:
                    self._check_known(conn, migrations, upgrade=False)
                else:
                    self._migrate(conn, migrations)
        except psycopg.Error as error:
            raise StoreError(f"{self._where}: {_message(error)}") from None
        except UnicodeEncodeError:
            raise StoreError(f"{self._where}: text that is not valid Unicode (a lone "
                             "surrogate) cannot be stored") from None
        # The limits go in the sessions' start-up options, so that they are each session's
        # default (``SET LOCAL … = DEFAULT`` returns to them) and later than the URL's own;
        # so does a read-only store's read-only default.
        limits = (f"-c lock_timeout={_milliseconds(lock_timeout)} "
                  f"-c statement_timeout={_milliseconds(statement_timeout)} "
                  "-c idle_in_transaction_session_timeout="
                  f"{_milliseconds(idle_in_transaction_timeout)}"
                  + (" -c default_transaction_read_only=on" if read_only else ""))
        options = f"{conninfo_to_dict(url).get('options', '')} {limits}".strip()
        self._open_pool(make_conninfo(url, options=options), pool_size)

    def _open_pool(self, conninfo: str, size: int) -> None:
        """Open the pool of sessions (:meth:`_pooled` hands them out), its first session
        made before the store is returned."""
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo, min_size=1, max_size=size, open=False, timeout=self._connect_timeout,
            kwargs={"autocommit": True}, configure=self._configure,
            name=f"pioneer {self._where}",
        )
        # Not opened in the background: the store's first unit of work would find the pool
        # still empty and make it grow a second session for one caller, and both would
        # connect on the pool's threads while the caller goes on. Each new session also
        # draws its lifetime's jitter from the process's ``random`` module, so a program
        # that seeds ``random`` would see its sequence move at a moment it cannot know.
        # The limit is the one the direct connection above had (libpq counts whole seconds).
        limit = max(1, round(self._connect_timeout))
        try:
            self._pool.open(wait=True, timeout=limit)
        except PoolTimeout:  # the pool closed itself
            raise StoreError(f"{self._where}: no connection to the server within "
                             f"{limit:g} s") from None

    def _configure(self, conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
        """Set up a new session of the pool (no I/O: the async pool's sessions too)."""
        _escaping(conn)

    # -- schema ----------------------------------------------------------------------

    def _check_known(self, conn: psycopg.Connection[Any], steps: Sequence[Migration], *,
                     upgrade: bool) -> int:
        if conn.execute("SELECT to_regclass('pioneer_schema')").fetchone() == (None,):
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchone()
            if not upgrade:
                raise StoreError(f"{self._where}: not a pioneer conversation store (no "
                                 "pioneer_schema table)")
            if tables is not None and tables[0]:
                raise StoreError(f"{self._where}: not a pioneer conversation store (its "
                                 "schema has tables but no pioneer_schema); refusing to "
                                 "add tables to it")
            return 0
        rows = conn.execute("SELECT version FROM pioneer_schema").fetchall()
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise StoreError(f"{self._where}: not a pioneer conversation store "
                             f"(pioneer_schema holds {len(rows)} rows, expected one version)")
        version = int(rows[0][0])
        check_version(
            version, steps, where=self._where, upgrade=upgrade,
            has_table=lambda table: conn.execute("SELECT to_regclass(%s)",
                                                 (table,)).fetchone() != (None,),
            reopen="open it once for writing",
        )
        return version

    def _migrate(self, conn: psycopg.Connection[Any], steps: Sequence[Migration]) -> None:
        check_order(steps)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            current = self._check_known(conn, steps, upgrade=True)
            if current == 0:
                conn.execute("CREATE TABLE pioneer_schema (version INTEGER NOT NULL)")
                conn.execute("INSERT INTO pioneer_schema (version) VALUES (0)")
            for step in steps[current:]:
                for statement in step.statements:
                    conn.execute(statement)
                conn.execute("UPDATE pioneer_schema SET version = %s", (step.version,))

    # -- transactions ----------------------------------------------------------------

    def _lock_thread(self, tx: StoreTransaction, thread_id: str) -> bool:
        return tx.execute("SELECT 1 FROM threads WHERE thread_id = ? FOR NO KEY UPDATE",
                          (thread_id,)).fetchone() is not None

    @contextmanager
    def _thread_gate(self, thread_id: str) -> Iterator[None]:
        with self._gates_lock:
            gate = self._gates.get(thread_id)
            if gate is None:
                gate = self._gates[thread_id] = _Gate()
            gate.users += 1
        try:
            if not gate.lock.acquire(timeout=self._lock_timeout):
                raise StoreError(f"{self._where}: thread {thread_id!r}: {self._held()}")
            try:
                yield
            finally:
                gate.lock.release()
        finally:
            with self._gates_lock:
                gate.users -= 1
                if not gate.users:
                    del self._gates[thread_id]

    def _held(self) -> str:
        return (f"another writer held it for more than the {self._lock_timeout:g} s lock "
                "timeout (postgres_lock_timeout)")

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[StoreTransaction]:
        with self._session() as conn:
            try:
                conn.execute("BEGIN" if write else
                             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield _Transaction(conn, self._where)
                conn.execute("COMMIT")
            except BaseException:
                if not conn.broken and not conn.closed:
                    with suppress(psycopg.Error):
                        conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _statement(self) -> Iterator[StoreTransaction]:
        # One statement is a consistent snapshot by itself: sent on its own, in autocommit,
        # it is one round trip to the server instead of three (BEGIN, it, COMMIT).
        with self._session() as conn:
            yield _Transaction(conn, self._where)

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, with the server's and the pool's errors as store errors."""
        if self._closed():
            raise StoreError(f"{self._where}: the store is closed")
        try:
            with self._pooled() as conn:
                yield conn
        except PoolTimeout:
            raise ConnectionLost(f"{self._where}: no connection to the server within "
                                 f"{self._connect_timeout:g} s") from None
        except _RETRYABLE as error:
            raise ConnectionLost(f"{self._where}: {_message(error)}") from None
        except psycopg.errors.LockNotAvailable:
            raise StoreError(f"{self._where}: a row this write needs: {self._held()}") from None
        except psycopg.OperationalError as error:
            if not _transient(error):  # the same work would fail the same way again
                raise StoreError(f"{self._where}: {_message(error)}") from None
            # The connection broke, the server went away or ran short of resources.
            raise ConnectionLost(f"{self._where}: {_message(error)}") from None
        except psycopg.Error as error:
            raise StoreError(f"{self._where}: {_message(error)}") from None
        except UnicodeEncodeError:
            raise StoreError(f"{self._where}: text that is not valid Unicode (a lone "
                             "surrogate) cannot be stored") from None

    def _closed(self) -> bool:
        return self._pool.closed

    def _pooled(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection of the pool, handed back when the block ends."""
        return self._pool.connection()

    def _recover(self) -> None:
        self._pool.check()

    def close(self) -> None:
        """Close the pool and its connections."""
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self
