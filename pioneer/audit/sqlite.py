"""Turn records in the SQLite conversation store: the SQL behind save and load.

Two tables (added by a migration step in :mod:`pioneer.history.migrations`):
``turn_records`` holds one row per turn (mode, history decision, permission snapshot,
skills) and ``turn_rounds`` one row per provider round (manifest, visible tools, hidden
domains, provider shape, judged calls); every JSON column holds one concept, so SQLite's
``json_extract`` can query it. The functions run inside the caller's transaction:
:class:`~pioneer.history.sqlite_store.SqliteStore` owns the connection and its locking.
A record is written once, after its turn, and refers to it.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import StoreError, format_path
from .record import TurnRecord

__all__ = ["read_turn_record", "write_turn_record"]


def _json(value: BaseModel | list[Any] | None) -> str | None:
    if value is None:
        return None
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    # Sorted keys keep stored records byte-stable; lists keep their order (domain map).
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def write_turn_record(
    conn: sqlite3.Connection, record: TurnRecord, *, created_at: str, where: str
) -> None:
    """Insert ``record``; the turn must exist in the same thread and have no record yet."""
    row = conn.execute("SELECT thread_id FROM turns WHERE turn_id = ?",
                       (record.turn_id,)).fetchone()
    if row is None:
        raise StoreError(f"{where}: turn {record.turn_id!r} does not exist; store the turn "
                         "before its record")
    if row[0] != record.thread_id:
        raise StoreError(f"{where}: turn {record.turn_id!r} is in thread {row[0]!r}, "
                         f"not {record.thread_id!r}")
    try:
        conn.execute(
            "INSERT INTO turn_records (turn_id, thread_id, mode, history, permissions, "
            "skills, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (record.turn_id, record.thread_id, record.mode, _json(record.history),
             _json(record.permissions), _json(record.skills), created_at),
        )
    except sqlite3.IntegrityError:
        raise StoreError(f"{where}: turn {record.turn_id!r} already has a record") from None
    conn.executemany(
        "INSERT INTO turn_rounds (turn_id, round, manifest, visible_tools, hidden_domains, "
        "provider, calls) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (record.turn_id, r.round, r.manifest.to_json(indent=None), _json(r.visible_tools),
             _json([h.model_dump(mode="json") for h in r.hidden_domains]), _json(r.provider),
             _json([c.model_dump(mode="json") for c in r.calls]))
            for r in record.rounds
        ],
    )


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def read_turn_record(conn: sqlite3.Connection, turn_id: str, *, where: str) -> TurnRecord | None:
    """The stored record of ``turn_id``, or ``None`` when the turn has none."""
    row = conn.execute(
        "SELECT thread_id, mode, history, permissions, skills FROM turn_records "
        "WHERE turn_id = ?", (turn_id,),
    ).fetchone()
    if row is None:
        return None
    thread_id, mode, history, permissions, skills = row
    try:
        rounds = [
            {"round": number, "manifest": _load(manifest), "visible_tools": _load(tools),
             "hidden_domains": _load(hidden), "provider": _load(provider),
             "calls": _load(calls)}
            for number, manifest, tools, hidden, provider, calls in conn.execute(
                "SELECT round, manifest, visible_tools, hidden_domains, provider, calls "
                "FROM turn_rounds WHERE turn_id = ? ORDER BY round", (turn_id,),
            )
        ]
        return TurnRecord.model_validate({
            "turn_id": turn_id, "thread_id": thread_id, "mode": mode,
            "history": _load(history), "permissions": _load(permissions),
            "skills": _load(skills), "rounds": rounds,
        })
    except json.JSONDecodeError as error:
        raise StoreError(f"{where}: the record of turn {turn_id!r} is unreadable: "
                         f"not JSON ({error.msg})") from None
    except ValidationError as error:
        item = error.errors()[0]
        detail = f"{format_path(item['loc']) or '(record)'}: {item['msg']}"
        raise StoreError(f"{where}: the record of turn {turn_id!r} is unreadable: {detail}") \
            from None
