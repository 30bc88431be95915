"""Turn records in the conversation store's database: save, load, and save with the turn.

Two tables (added by a migration step of each store): ``turn_records`` holds one row per
turn (mode, history decision, permission profile, execution security snapshot, skills
decision, tool catalog; a row written before a column was added has it NULL, read as not
recorded) and ``turn_rounds`` one row per provider round (manifest, visible tools, hidden
domains, provider shape, judged calls, cache plan, reported usage, the reply read back,
section titles, how the request fits the context window); every JSON column holds one
concept as text with sorted keys, so a stored
record is byte-stable on SQLite and PostgreSQL alike.
:class:`TurnRecords` runs the SQL through the store's transactions
(:class:`~pioneer.history.store.DatabaseStore`): the store knows nothing of records. A
record refers to its turn: :meth:`TurnRecords.save` writes it once the turn is stored,
and :meth:`TurnRecords.expecting` holds it until the store writes its turn, then writes
it in the turn's own transaction (the write hook), so the turn and its record commit
together or not at all. Writing a record also sets the turn's ``prompt_manifest`` to the
last round's manifest, in the same transaction.

A turn that sent a body and ended without ``finish()`` keeps its record in a third table,
``abandoned_turns`` (one row per attempt of a turn id: the whole record as JSON, its
``abandoned`` reason, the user's text and the last reply's): :meth:`TurnRecords.abandon`
writes it, :meth:`TurnRecords.get` reads it when the turn has no finished record. It is
no ``turns`` row, so no history window carries it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import StoreError, format_path
from ..history.sql_store import check_row
from ..history.store import (
    DatabaseStore,
    StoreEvent,
    StoreTransaction,
    TurnWritten,
    check_id,
)
from ..text import utf8_text
from .record import TurnRecord

__all__ = ["TurnRecords", "read_abandoned_turn", "read_turn_record", "write_abandoned_turn",
           "write_turn_record"]

_RECORD_COLUMNS = "thread_id, mode, history, permissions, skills, security, tools"
_ROUND_COLUMNS = (
    "round, manifest, visible_tools, hidden_domains, provider, calls, cache, usage, reply, "
    "section_titles, context_window"
)


def _json(value: BaseModel | list[Any] | None) -> str | None:
    if value is None:
        return None
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    # Sorted keys keep stored records byte-stable; lists keep their order (domain map).
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _titles(titles: dict[str, str]) -> str | None:
    # A round without titles (a record written before they were kept) stays NULL.
    return json.dumps(titles, sort_keys=True, ensure_ascii=False) if titles else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def write_turn_record(tx: StoreTransaction, record: TurnRecord, *, created_at: str,
                      retry: bool = False) -> None:
    """Insert ``record``; the turn must exist in the same thread and have no record yet.

    On a ``retry`` (the unit of work runs again after a lost connection), a stored record
    equal to ``record`` is the first run's commit and is accepted.
    """
    where = tx.where
    row = tx.execute("SELECT thread_id FROM turns WHERE turn_id = ?",
                     (record.turn_id,)).fetchone()
    if row is None:
        raise StoreError(f"{where}: turn {record.turn_id!r} does not exist; store the turn "
                         "before its record")
    if row[0] != record.thread_id:
        raise StoreError(f"{where}: turn {record.turn_id!r} is in thread {row[0]!r}, "
                         f"not {record.thread_id!r}")
    inserted = tx.execute(
        "INSERT INTO turn_records (turn_id, thread_id, mode, history, permissions, "
        "skills, security, tools, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (turn_id) DO NOTHING",
        (record.turn_id, record.thread_id, record.mode, _json(record.history),
         _json(record.permissions), _json(record.skills), _json(record.security),
         None if record.tools is None else _json([t.model_dump(mode="json")
                                                  for t in record.tools]),
         created_at),
    ).rowcount
    if inserted == 0:
        if retry and read_turn_record(tx, record.turn_id) == record:
            return
        raise StoreError(f"{where}: turn {record.turn_id!r} already has a record")
    tx.executemany(
        f"INSERT INTO turn_rounds (turn_id, {_ROUND_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (record.turn_id, r.round, r.manifest.to_json(indent=None), _json(r.visible_tools),
             _json([h.model_dump(mode="json") for h in r.hidden_domains]), _json(r.provider),
             _json([c.model_dump(mode="json") for c in r.calls]), _json(r.cache),
             _json(r.usage), _json(r.reply), _titles(r.section_titles), _json(r.window))
            for r in record.rounds
        ],
    )
    if record.rounds:
        # The turn's manifest is its last round's (the prompt the final reply answered):
        # filled here, in the record's transaction, so get_turn_prompt_manifest and the
        # record never disagree.
        tx.execute("UPDATE turns SET prompt_manifest = ? WHERE turn_id = ?",
                   (record.rounds[-1].manifest.to_json(indent=None), record.turn_id))


class _NotJson(ValueError):
    pass


def _load(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise _NotJson(error.msg) from None
    except RecursionError:  # a row written by something else: nested past the parser
        raise _NotJson("lists or objects nested too deeply to read") from None
    except ValueError:  # the only other: an integer of more digits than Python reads
        raise _NotJson("a number too long to read") from None


def _unreadable(where: str, what: str, error: _NotJson | ValidationError) -> StoreError:
    """The error for a stored record that does not read back."""
    if isinstance(error, _NotJson):
        return StoreError(f"{where}: {what} is unreadable: not JSON ({error})")
    item = error.errors()[0]
    detail = f"{format_path(item['loc']) or '(record)'}: {item['msg']}"
    return StoreError(f"{where}: {what} is unreadable: {detail}")


def read_turn_record(tx: StoreTransaction, turn_id: str) -> TurnRecord | None:
    """The stored record of ``turn_id``, or ``None`` when the turn has none."""
    where = tx.where
    what = f"the record of turn {turn_id!r}"
    row = tx.execute(f"SELECT {_RECORD_COLUMNS} FROM turn_records WHERE turn_id = ?",
                     (turn_id,)).fetchone()
    if row is None:
        return None
    check_row(row, _RECORD_COLUMNS,
              ("text", "text", "text?", "text?", "text?", "text?", "text?"),
              where=where, what=what)
    thread_id, mode, history, permissions, skills, security, tools = row
    rows = tx.execute(f"SELECT {_ROUND_COLUMNS} FROM turn_rounds WHERE turn_id = ? "
                      "ORDER BY round", (turn_id,)).fetchall()
    for round_row in rows:
        check_row(round_row, _ROUND_COLUMNS, ("int",) + ("text",) * 5 + ("text?",) * 5,
                  where=where, what=what)
    try:
        rounds = [
            {"round": number, "manifest": _load(manifest), "visible_tools": _load(visible),
             "hidden_domains": _load(hidden), "provider": _load(provider),
             "calls": _load(calls), "cache": _load(cache), "usage": _load(usage),
             "reply": _load(reply), "section_titles": _load(titles) or {},
             "window": _load(window)}
            for (number, manifest, visible, hidden, provider, calls, cache, usage, reply,
                 titles, window) in rows
        ]
        return TurnRecord.model_validate({
            "turn_id": turn_id, "thread_id": thread_id, "mode": mode,
            "history": _load(history), "permissions": _load(permissions),
            "skills": _load(skills), "security": _load(security), "tools": _load(tools),
            "rounds": rounds,
        })
    except (_NotJson, ValidationError) as error:
        raise _unreadable(where, what, error) from None


def write_abandoned_turn(tx: StoreTransaction, record: TurnRecord, *, user_text: str,
                         assistant_text: str | None, created_at: str) -> int:
    """Keep ``record`` (its ``abandoned`` reason set) as a new attempt of its turn id in
    ``abandoned_turns``, with the user's text and the last reply's (``None``: no reply);
    return the attempt's number. Its thread must exist."""
    if record.abandoned is None:
        raise StoreError(f"{tx.where}: turn {record.turn_id!r}: only an abandoned record "
                         "is kept as abandoned")
    (last,) = tx.execute("SELECT coalesce(max(attempt), 0) FROM abandoned_turns "
                         "WHERE turn_id = ?", (record.turn_id,)).fetchone()
    tx.execute(
        "INSERT INTO abandoned_turns (turn_id, attempt, thread_id, user_text, "
        "assistant_text, reason, record, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (record.turn_id, int(last) + 1, record.thread_id, utf8_text(user_text),
         None if assistant_text is None else utf8_text(assistant_text), record.abandoned,
         _json(record), created_at),
    )
    return int(last) + 1


def read_abandoned_turn(tx: StoreTransaction, turn_id: str) -> TurnRecord | None:
    """The record of the latest abandoned attempt of ``turn_id``, or ``None``."""
    where, what = tx.where, f"the abandoned record of turn {turn_id!r}"
    row = tx.execute("SELECT record FROM abandoned_turns WHERE turn_id = ? "
                     "ORDER BY attempt DESC LIMIT 1", (turn_id,)).fetchone()
    if row is None:
        return None
    check_row(row, "record", ("text",), where=where, what=what)
    try:
        return TurnRecord.model_validate(_load(row[0]))
    except (_NotJson, ValidationError) as error:
        raise _unreadable(where, what, error) from None


class TurnRecords:
    """The turn records of one store (SQLite or PostgreSQL)."""

    def __init__(self, store: DatabaseStore) -> None:
        self.store = store
        self._expected: dict[str, TurnRecord] = {}
        self._lock = threading.Lock()
        self._unsubscribe = None if store.read_only else store.subscribe(self._on_write)

    def close(self) -> None:
        """Stop listening to the store's writes (the store stays open)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def __enter__(self) -> TurnRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def save(self, record: TurnRecord) -> None:
        """Store a turn's record, once, after the turn itself (one transaction)."""
        check_id(record.turn_id, "turn_id")
        runs = 0

        def work(tx: StoreTransaction) -> None:
            nonlocal runs
            runs += 1
            write_turn_record(tx, record, created_at=_now(), retry=runs > 1)

        self.store.write(work)

    @contextmanager
    def expecting(self, record: TurnRecord) -> Iterator[None]:
        """Inside the block, the store's write of ``record``'s turn (``add_turn`` with
        ``turn_id=record.turn_id``) also writes ``record``, in the turn's transaction:
        both commit, or neither."""
        with self._lock:
            self._expected[record.turn_id] = record
        try:
            yield
        finally:
            with self._lock:
                self._expected.pop(record.turn_id, None)

    def abandon(self, record: TurnRecord, *, user_text: str,
                assistant_text: str | None = None) -> None:
        """Keep the record of a turn that was not finished (``record.abandoned`` says
        why) with its texts: readable by :meth:`get` and ``pioneer explain``, never in a
        history."""
        check_id(record.turn_id, "turn_id")
        self.store.write(lambda tx: write_abandoned_turn(
            tx, record, user_text=user_text, assistant_text=assistant_text,
            created_at=_now()))

    def get(self, turn_id: str) -> TurnRecord | None:
        """The stored record of a turn (a finished one, else its latest abandoned
        attempt), or ``None``."""
        check_id(turn_id, "turn_id")
        return self.store.read(lambda tx: read_turn_record(tx, turn_id)
                               or read_abandoned_turn(tx, turn_id))

    def _on_write(self, tx: StoreTransaction, event: StoreEvent) -> None:
        if not isinstance(event, TurnWritten):
            return
        with self._lock:
            record = self._expected.get(event.entry.turn_id)
        if record is not None:
            write_turn_record(tx, record, created_at=_now())
