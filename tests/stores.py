"""The stores the conformance suite runs against: an SQLite file, or a PostgreSQL schema.

PostgreSQL is the real server of the machine (``PIONEER_TEST_POSTGRES_URL``, by default
the local socket as user ``postgres``; ``.ci/run`` starts it when it is down). A test
session creates one database of its own and every test one schema in it, dropped
afterwards; a session that finds no server fails its PostgreSQL tests, it does not skip
them.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from pioneer.history.open import open_store
from pioneer.history.sql_store import SqlStore

SERVER_URL = os.environ.get("PIONEER_TEST_POSTGRES_URL",
                            "postgresql://postgres@/postgres?host=/var/run/postgresql")
START_HINT = ("start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) "
              "main start (or set PIONEER_TEST_POSTGRES_URL)")

Target = str | Path


def with_database(url: str, database: str, schema: str | None = None) -> str:
    """``url`` pointing at ``database``, its tables in ``schema`` when given."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    if schema is not None:
        query.append(("options", f"-csearch_path={schema}"))
    return urlunsplit(parts._replace(path="/" + database, query=urlencode(query)))


def admin(url: str = SERVER_URL) -> psycopg.Connection[tuple[object, ...]]:
    """An autocommit connection for creating and dropping databases and schemas."""
    return psycopg.connect(url, autocommit=True, connect_timeout=5)


class Server:
    """The session's database on the PostgreSQL server, and its per-test schemas."""

    def __init__(self, url: str = SERVER_URL) -> None:
        self.url = url
        self.database = f"pg_pioneer_tests_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with admin(url) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        self.database_url = with_database(url, self.database)

    def new_schema(self) -> tuple[str, str]:
        """A fresh schema: its name and the store URL that puts the tables in it."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        with admin(self.database_url) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return name, with_database(self.url, self.database, name)

    def drop_schema(self, name: str) -> None:
        with admin(self.database_url) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def execute(self, schema: str, *statements: str) -> None:
        """Run SQL in ``schema`` behind the store's back (to damage rows, say)."""
        with admin(with_database(self.url, self.database, schema)) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def terminate(self, schema_url: str | None = None) -> int:
        """End every other session on the test database, as a server restart would; how
        many were ended."""
        with admin(self.database_url) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()", (self.database,)
            ).fetchall()
        return sum(1 for (ended,) in rows if ended)

    def close(self) -> None:
        with admin(self.url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


def make_store(target: Target, **options: object) -> SqlStore:
    """The store at ``target`` (an SQLite path or a PostgreSQL URL)."""
    return open_store(target, **options)  # type: ignore[arg-type]


#: Texts a provider or a user can send that a store must keep exactly (the conformance
#: suite writes each to both stores): NUL alone and inside text, every other C0
#: character, DEL, C1, the escape pairs the PostgreSQL store uses (U+0001 U+0001, U+0001
#: U+0002), noncharacters, a byte order mark, bidi overrides and astral characters.
HOSTILE_TEXTS: tuple[str, ...] = (
    "\x00",
    "before\x00after",
    "\x00" * 3 + "tail",
    "".join(map(chr, range(32))),
    "\x7f" + "".join(map(chr, range(0x80, 0xA0))),
    "\x01",
    "\x01\x01",
    "\x01\x02",
    "\x01\x01\x00\x01\x02\x02",
    "\x02\x01\x01\x01",
    "\uffff\ufffe\ufeff\ufdd0",
    "\u202eevil\u202c \u2066x\u2069 \u200b",
    "\U0001f600\U0010ffff\U000e0001",
)
