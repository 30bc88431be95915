"""Choosing a store by its target: a ``postgresql://`` URL or the path of an SQLite file.

:func:`open_store` is what the CLI and settings (``store_url``, ``PIONEER_STORE_URL``,
``--db``) go through, so every command that takes a database takes either; given the
settings themselves, it opens the store they configure (``store_url`` when set, else the
``database`` path), so a program never picks the wrong one by hand, with their
PostgreSQL time limits. The PostgreSQL store needs the ``postgres`` extra (psycopg 3 and
psycopg-pool); it is imported only when a URL asks for it.

A URL is read by libpq's own parser (:func:`~pioneer.settings.store_url_parameters`), so
what is checked and what is hidden in messages is what the driver will see: a message
names a URL by :func:`redact_url`, rebuilt from the parsed parameters without the
password, and a URL libpq cannot read is a :class:`StoreError` that does not repeat it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..errors import InputError, Problem, StoreError
from ..settings import HISTORY_CACHE_BYTES, PioneerSettings, store_url_parameters
from ..tokens import TokenCounter, default_counter
from ._urls import URL_SCHEMES, is_store_url, normalize_url, redact_url
from .sql_store import SqlStore

__all__ = ["URL_SCHEMES", "configured_store", "is_store_url", "normalize_url", "open_store",
           "redact_url"]

#: ``password=`` as libpq's key=value connection strings write it.
_CONNINFO_PASSWORD = re.compile(r"(?:^|\s)password\s*=")


def configured_store(settings: PioneerSettings) -> str | os.PathLike[str]:
    """The store the settings configure: ``store_url`` when set (a plain string or a
    secret that reveals one), else the ``database`` path."""
    url: object = settings.store_url
    if url is None:
        return settings.database
    reveal = getattr(url, "get_secret_value", None)
    value = reveal() if callable(reveal) else url
    if not isinstance(value, str):
        raise InputError(Problem(f"expected a postgresql:// URL (got {type(value).__name__})",
                                 path="settings → store_url"))
    return value


def open_store(target: str | os.PathLike[str] | PioneerSettings, *, read_only: bool = False,
               create: bool = True, counter: TokenCounter | None = None,
               cache_bytes: int | None = None,
               settings: PioneerSettings | None = None,
               postgres: Callable[..., SqlStore] | None = None) -> SqlStore:
    """The store at ``target``: :class:`PostgresStore` for a URL, else :class:`SqliteStore`;
    for :class:`PioneerSettings`, the store they configure (:func:`configured_store`).

    A PostgreSQL store takes its time limits from ``settings`` (or the settings given as
    ``target``), else the defaults. ``read_only`` opens it for reading only (the read
    commands): nothing is created, migrated or switched, and a database this pioneer does
    not know is refused. ``cache_bytes`` is the budget of the store's cache of turns
    (default: the settings' ``history_cache_bytes``); the settings' ``token_cache_bytes``
    sizes the process-wide token counter's cache when the store uses it. ``postgres``
    makes the store for a URL instead of :class:`PostgresStore` (with its arguments).
    """
    if isinstance(target, PioneerSettings):
        settings = settings or target
        target = configured_store(target)
    elif not isinstance(target, str | os.PathLike):
        raise InputError(Problem(f"expected a store URL, an SQLite path or PioneerSettings "
                                 f"(got {type(target).__name__})", path="open_store → target"))
    if cache_bytes is None:
        cache_bytes = HISTORY_CACHE_BYTES if settings is None else settings.history_cache_bytes
    if counter is None and settings is not None:
        counter = default_counter(settings.token_cache_bytes)
    if is_store_url(target):
        url = str(target)
        try:
            store_url_parameters(url)
        except ValueError as error:
            raise StoreError(f"{redact_url(url)}: {error}") from None
        try:
            from .postgres_store import PostgresStore
        except ImportError as error:  # the extra is missing
            raise StoreError(f"{redact_url(url)}: the PostgreSQL store needs the "
                             f"'postgres' extra (pip install 'pioneer[postgres]'): "
                             f"{error}") from None
        limits: dict[str, Any] = {} if settings is None else {
            "lock_timeout": settings.postgres_lock_timeout,
            "statement_timeout": settings.postgres_statement_timeout,
            "idle_in_transaction_timeout": settings.postgres_idle_in_transaction_timeout,
        }
        return (postgres or PostgresStore)(url, read_only=read_only, counter=counter,
                                           cache_bytes=cache_bytes, **limits)
    if _CONNINFO_PASSWORD.search(str(target)):
        # libpq's key=value form: not a store pioneer opens, and never echoed (a password)
        raise StoreError("a libpq key=value string with a password is not a store: give "
                         "a postgresql:// URL or an SQLite path")
    from .sqlite_store import SqliteStore

    return SqliteStore(target, read_only=read_only, create=create, counter=counter,
                       cache_bytes=cache_bytes)
