"""The PostgreSQL store on psycopg's async pool, for :class:`~pioneer.turn.AsyncAgent`.

:class:`AsyncPostgresStore` is :class:`~pioneer.history.postgres_store.PostgresStore` with
its sessions taken from a :class:`psycopg_pool.AsyncConnectionPool` instead of the sync
pool: every statement, transaction, retry, time limit and error mapping is the sync store's
own code (the SQL is written once, in :mod:`.sql_store`), running on the async agent's
worker threads; only the round trips to the server are awaited, on the agent's event loop,
through its :class:`~pioneer.history.loop.LoopBridge`. One statement is one hand-over to
the loop (the statement and its rows), so a worker waits for the server without holding
the loop, and the loop serves the other turns meanwhile.

The async pool opens on the loop at the first statement, and that statement waits for the
pool's first session, as the sync store's constructor does (so a lone caller uses that one
session and the pool connects nothing on the loop behind its back);
:meth:`AsyncPostgresStore.close` closes it there. Opening the store (the one direct
connection that checks the URL and migrates the schema) is done by the constructor, like
the sync store's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import StoreError
from .loop import LoopBridge
from .postgres_store import PostgresStore

__all__ = ["AsyncPostgresStore"]


class _Rows:
    """A statement's result, read on the loop: its rows and its row count."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self._next = 0

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rows, self._next = self._rows[self._next:], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


async def _execute(conn: psycopg.AsyncConnection[Any], query: str,
                   params: Sequence[Any] | None) -> _Rows:
    cursor = await conn.execute(query, params)
    rows = await cursor.fetchall() if cursor.description is not None else []
    return _Rows(rows, cursor.rowcount)


async def _executemany(conn: psycopg.AsyncConnection[Any], query: str,
                       rows: Sequence[Sequence[Any]]) -> None:
    async with conn.cursor() as cursor:
        await cursor.executemany(query, rows)


class _ManyCursor:
    """What the shared code's ``with conn.cursor() as c: c.executemany(...)`` needs."""

    def __init__(self, session: _Session) -> None:
        self._session = session

    def __enter__(self) -> _ManyCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        self._session.bridge.run(_executemany(self._session.conn, query, rows))


class _Session:
    """One async pooled connection as the sync store code uses a connection."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], bridge: LoopBridge) -> None:
        self.conn = conn
        self.bridge = bridge

    def execute(self, query: str, params: Sequence[Any] | None = None) -> _Rows:
        return self.bridge.run(_execute(self.conn, query, params))

    def cursor(self) -> _ManyCursor:
        return _ManyCursor(self)

    @property
    def broken(self) -> bool:
        return self.conn.broken

    @property
    def closed(self) -> bool:
        return self.conn.closed


class AsyncPostgresStore(PostgresStore):
    """The PostgreSQL store with its round trips on psycopg's async pool (module doc).

    Takes the sync store's arguments and the ``bridge`` to the event loop; its methods are
    the sync store's, called from worker threads (never from the loop's own thread)."""

    def __init__(self, url: str, *, bridge: LoopBridge, **options: Any) -> None:
        self._bridge = bridge
        self._opened: asyncio.Future[None] | None = None
        super().__init__(url, **options)

    def _open_pool(self, conninfo: str, size: int) -> None:
        """Make the async pool; it opens on the loop, at the first statement (:meth:`_open`)."""
        self._conninfo, self._size = conninfo, size
        self._apool = self._new_pool()
        self._shut = False

    def _new_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            self._configure(conn)

        return AsyncConnectionPool(
            self._conninfo, min_size=1, max_size=self._size, open=False,
            timeout=self._connect_timeout, kwargs={"autocommit": True}, configure=configure,
            name=f"pioneer {self._where} (async)",
        )

    async def _open(self) -> None:
        # Every caller runs on the one loop: the first starts the opening, all wait for it.
        if self._opened is None:
            self._opened = asyncio.ensure_future(self._open_waiting())
        await asyncio.shield(self._opened)

    async def _open_waiting(self) -> None:
        # The sync store's rule (PostgresStore._open_pool): the pool is in use only once its
        # first session is made. Opened in the background, the first unit of work would find
        # it empty and make it grow a second session for one caller, connected on the loop
        # while the caller goes on, each drawing its lifetime's jitter from the process's
        # ``random``. The loop serves the other tasks meanwhile; only the caller's worker
        # thread waits, as long as the constructor's direct connection could have.
        limit = max(1, round(self._connect_timeout))
        try:
            await self._apool.open(wait=True, timeout=limit)
        except PoolTimeout:
            # The pool closed itself and cannot be opened again: the next unit of work
            # starts over with a new one.
            self._apool, self._opened = self._new_pool(), None
            raise StoreError(f"{self._where}: no connection to the server within "
                             f"{limit:g} s") from None

    def _closed(self) -> bool:
        return self._shut

    @contextmanager
    def _pooled(self) -> Iterator[Any]:
        bridge = self._bridge
        bridge.run(self._open())
        conn = bridge.run(self._apool.getconn())
        try:
            yield _Session(conn, bridge)
        finally:
            # The pool rolls back a connection left in a transaction and drops a broken one.
            bridge.run(self._apool.putconn(conn))

    def _recover(self) -> None:
        self._bridge.run(self._apool.check())

    async def aclose(self) -> None:
        """Close the async pool (on the loop)."""
        self._shut = True
        if self._opened is not None:
            await self._apool.close()

    def close(self) -> None:
        """Close the async pool, from a worker thread (or before the pool was ever used)."""
        if self._opened is None:
            self._shut = True
            return
        self._bridge.run(self.aclose())
