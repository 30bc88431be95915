"""The embedded conversation store: SQLite in WAL mode, one transaction per write.

Takes a database path and a token counter; implements :class:`~pioneer.history.store.CrudStore`.
Each thread of the calling process gets its own connection (WAL lets readers run beside
the one writer); each write is a single ``BEGIN IMMEDIATE`` … ``COMMIT``, so concurrent
writers in threads or processes queue on SQLite's lock instead of losing turns. Token
counts of a turn's rendered messages are computed before the write and stored with it,
so budgeting a thread later only sums integers; and since a stored turn never changes,
recently read turns are kept in memory by id, so a pass reads only the window's ids and
the turns it has not seen yet. ``synchronous=NORMAL``: a crash never leaves a
half-written turn; a power cut may lose the last commits. Unless ``episodic=False``, a
turn's snippets for episodic recall (:mod:`pioneer.episodic`) are written in the turn's
own transaction, and a new summary's in the summary's. Lone surrogates in turn and
summary text become U+FFFD (:mod:`pioneer.text`); in an id they are a StoreError.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..compile.manifest import PromptManifest
from ..errors import StoreError
from ..sections.artifacts import ArtifactRef, Side, render_message
from ..text import utf8_text
from ..tokens import TokenCounter, default_counter, message_tokens
from .cache import TurnCache
from .migrations import MIGRATIONS, Migration, configure_connection, migrate
from .models import HistoryEntry, HistoryWindow, ThreadRecord, ThreadSummary, summary_message_text
from .store import MAX_TURNS

if TYPE_CHECKING:
    from ..audit.record import TurnRecord

__all__ = ["SqliteStore"]

_TURN_COLUMNS = (
    "seq, turn_id, thread_id, user_item_id, assistant_item_id, user_text, assistant_text, "
    "user_tokens, assistant_tokens"
)
_REF_COLUMNS = (
    "artifact_id, display_name, kind, version_id, mime_type, size_bytes, sha256, role, "
    "message_id, turn_item_id"
)
_WINDOW = (
    "FROM turns WHERE thread_id = ? AND seq > ? AND turn_id IS NOT ? ORDER BY seq DESC LIMIT ?"
)
_BATCH = 500  # turn ids per IN (...) query, well under SQLite's parameter limit


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class SqliteStore:
    """Conversation history in one SQLite file (created and migrated on open)."""

    def __init__(
        self,
        path: str | Path,
        *,
        counter: TokenCounter | None = None,
        create: bool = True,
        busy_timeout: float = 30.0,
        cache_size: int = 4096,
        migrations: Sequence[Migration] = MIGRATIONS,
        episodic: bool = True,
    ) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"{self.path}: no conversation store at this path")
        self._counter = counter or default_counter()
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._cache = TurnCache(cache_size)
        # Snippets for episodic recall are written in the turn's own transaction. The
        # episodic package builds on this one, so it is imported here, not at the top.
        from ..episodic import writer

        self._episodic = writer if episodic else None
        with self._guard():
            migrate(self._connection(), migrations, where=str(self.path))

    # -- connections -------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout, isolation_level=None,
                check_same_thread=False,
            )
            configure_connection(conn)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
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
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        with self._guard():
            conn = self._connection()
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._transaction("BEGIN IMMEDIATE")

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._transaction("BEGIN")

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            self._closed = True
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- threads -----------------------------------------------------------------

    def ensure_thread(self, thread_id: str, *, model: str | None = None) -> ThreadRecord:
        """Create the thread when missing (setting ``model`` when given); return it."""
        if not thread_id.strip():
            raise StoreError("thread id must not be blank")
        with self._write() as conn:
            conn.execute(
                "INSERT INTO threads (thread_id, model, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT(thread_id) DO NOTHING",
                (thread_id, model, _now()),
            )
            if model is not None:
                conn.execute("UPDATE threads SET model = ? WHERE thread_id = ?", (model, thread_id))
            record = self._thread(conn, thread_id)
        assert record is not None
        return record

    def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None`` when it does not exist."""
        with self._guard():
            return self._thread(self._connection(), thread_id)

    @staticmethod
    def _thread(conn: sqlite3.Connection, thread_id: str) -> ThreadRecord | None:
        row = conn.execute(
            "SELECT thread_id, model, created_at FROM threads WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        return ThreadRecord(*row) if row else None

    # -- turns -------------------------------------------------------------------

    def _message_tokens(self, text: str | None, refs: Sequence[ArtifactRef], side: Side) -> int:
        rendered = render_message(text, refs, side)
        return 0 if rendered is None else message_tokens(self._counter, rendered)

    def add_turn(
        self,
        thread_id: str,
        *,
        user_text: str | None,
        assistant_text: str | None,
        user_artifacts: Sequence[ArtifactRef] = (),
        assistant_artifacts: Sequence[ArtifactRef] = (),
        turn_id: str | None = None,
        user_item_id: str | None = None,
        assistant_item_id: str | None = None,
    ) -> HistoryEntry:
        """Write one completed turn (ids generated when not given) in one transaction."""
        turn_id = turn_id or uuid.uuid4().hex
        user_text = None if user_text is None else utf8_text(user_text)
        assistant_text = None if assistant_text is None else utf8_text(assistant_text)
        if user_item_id is None and (user_text is not None or user_artifacts):
            user_item_id = uuid.uuid4().hex
        if assistant_item_id is None and (assistant_text is not None or assistant_artifacts):
            assistant_item_id = uuid.uuid4().hex
        # Counted outside the transaction so the write lock is held only for the insert.
        user_tokens = self._message_tokens(user_text, user_artifacts, "user")
        assistant_tokens = self._message_tokens(assistant_text, assistant_artifacts, "assistant")
        with self._write() as conn:
            if self._thread(conn, thread_id) is None:
                raise StoreError(f"{self.path}: thread {thread_id!r} does not exist")
            try:
                cursor = conn.execute(
                    "INSERT INTO turns (turn_id, thread_id, user_item_id, user_text, "
                    "user_tokens, assistant_item_id, assistant_text, assistant_tokens, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (turn_id, thread_id, user_item_id, user_text, user_tokens,
                     assistant_item_id, assistant_text, assistant_tokens, _now()),
                )
            except sqlite3.IntegrityError:
                raise StoreError(f"{self.path}: turn {turn_id!r} already exists") from None
            seq = cursor.lastrowid
            assert seq is not None
            for side, refs in (("user", user_artifacts), ("assistant", assistant_artifacts)):
                conn.executemany(
                    f"INSERT INTO artifact_refs (turn_id, side, position, {_REF_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (turn_id, side, position, ref.artifact_id, ref.display_name, ref.kind,
                         ref.version_id, ref.mime_type, ref.size_bytes, ref.sha256, ref.role,
                         ref.message_id, ref.turn_item_id)
                        for position, ref in enumerate(refs)
                    ],
                )
            if self._episodic is not None:
                self._episodic.index_turn(
                    conn, thread_id, turn_id, seq, user_item_id=user_item_id,
                    user_text=user_text, assistant_item_id=assistant_item_id,
                    assistant_text=assistant_text,
                )
        entry = HistoryEntry(
            seq=seq, turn_id=turn_id, thread_id=thread_id, user_item_id=user_item_id,
            assistant_item_id=assistant_item_id, user_text=user_text,
            assistant_text=assistant_text, user_tokens=user_tokens,
            assistant_tokens=assistant_tokens, user_artifacts=tuple(user_artifacts),
            assistant_artifacts=tuple(assistant_artifacts),
        )
        self._cache.put_many({turn_id: entry})
        return entry

    def get_thread_conversation_history(
        self,
        thread_id: str,
        limit: int = MAX_TURNS,
        *,
        after_seq: int = 0,
        exclude_turn_id: str | None = None,
    ) -> tuple[HistoryEntry, ...]:
        """The newest ``limit`` turns after ``after_seq``, oldest first."""
        with self._read() as conn:
            return self._entries(conn, thread_id, limit, after_seq, exclude_turn_id)

    def _entries(
        self, conn: sqlite3.Connection, thread_id: str, limit: int, after_seq: int,
        exclude_turn_id: str | None,
    ) -> tuple[HistoryEntry, ...]:
        params = (thread_id, after_seq, exclude_turn_id, max(0, limit))
        ids = [turn_id for (turn_id,) in conn.execute(f"SELECT turn_id {_WINDOW}", params)]
        ids.reverse()
        found = self._cache.get_many(ids)
        missing = [turn_id for turn_id in ids if turn_id not in found]
        for start in range(0, len(missing), _BATCH):
            loaded = self._load(conn, missing[start:start + _BATCH])
            self._cache.put_many(loaded)
            found.update(loaded)
        return tuple(found[turn_id] for turn_id in ids)

    @staticmethod
    def _load(conn: sqlite3.Connection, turn_ids: Sequence[str]) -> dict[str, HistoryEntry]:
        marks = ", ".join("?" * len(turn_ids))
        refs: dict[tuple[str, str], list[ArtifactRef]] = {}
        for turn_id, side, *fields in conn.execute(
            f"SELECT turn_id, side, {_REF_COLUMNS} FROM artifact_refs "
            f"WHERE turn_id IN ({marks}) ORDER BY turn_id, side, position",
            turn_ids,
        ):
            refs.setdefault((turn_id, side), []).append(ArtifactRef(*fields))
        rows = conn.execute(f"SELECT {_TURN_COLUMNS} FROM turns WHERE turn_id IN ({marks})",
                            turn_ids)
        return {
            turn_id: HistoryEntry(
                seq=seq, turn_id=turn_id, thread_id=thread, user_item_id=user_item,
                assistant_item_id=assistant_item, user_text=user_text,
                assistant_text=assistant_text, user_tokens=user_tokens,
                assistant_tokens=assistant_tokens,
                user_artifacts=tuple(refs.get((turn_id, "user"), ())),
                assistant_artifacts=tuple(refs.get((turn_id, "assistant"), ())),
            )
            for (seq, turn_id, thread, user_item, assistant_item, user_text, assistant_text,
                 user_tokens, assistant_tokens) in rows
        }

    # -- summary -----------------------------------------------------------------

    @staticmethod
    def _summary(conn: sqlite3.Connection, thread_id: str) -> ThreadSummary | None:
        row = conn.execute(
            "SELECT summary, summary_tokens, summary_turn_count, summary_through_seq, "
            "summary_through_turn_id FROM threads WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        if row is None or row[0] is None:
            return None
        return ThreadSummary(*row)

    def get_thread_summary(self, thread_id: str) -> ThreadSummary | None:
        """The stored summary, or ``None``."""
        with self._guard():
            return self._summary(self._connection(), thread_id)

    def set_thread_summary(
        self, thread_id: str, summary: str, *, through_turn_id: str
    ) -> ThreadSummary:
        """Store a summary covering every turn up to and including ``through_turn_id``.

        Coverage never moves backwards: if a summary covering later turns is already
        stored (a concurrent writer won), that one is kept and returned.
        """
        text = utf8_text(summary.strip())
        if not text:
            raise StoreError(f"{self.path}: a thread summary must not be empty")
        tokens = message_tokens(self._counter, summary_message_text(text))
        with self._write() as conn:
            row = conn.execute(
                "SELECT seq FROM turns WHERE turn_id = ? AND thread_id = ?",
                (through_turn_id, thread_id),
            ).fetchone()
            if row is None:
                raise StoreError(
                    f"{self.path}: turn {through_turn_id!r} is not in thread {thread_id!r}"
                )
            seq = int(row[0])
            current = self._summary(conn, thread_id)
            if current is not None and current.through_seq > seq:
                return current
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM turns WHERE thread_id = ? AND seq <= ?", (thread_id, seq)
            ).fetchone()
            conn.execute(
                "UPDATE threads SET summary = ?, summary_tokens = ?, summary_turn_count = ?, "
                "summary_through_seq = ?, summary_through_turn_id = ? WHERE thread_id = ?",
                (text, tokens, count, seq, through_turn_id, thread_id),
            )
            if self._episodic is not None:
                self._episodic.index_thread_summary(conn, thread_id, through_turn_id, seq, text)
        return ThreadSummary(text, tokens, int(count), seq, through_turn_id)

    def get_history_window(
        self, thread_id: str, limit: int = MAX_TURNS, *, exclude_turn_id: str | None = None
    ) -> HistoryWindow:
        """Summary plus the turns it does not cover, read as one consistent snapshot."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT thread_id, model, created_at, summary, summary_tokens, "
                "summary_turn_count, summary_through_seq, summary_through_turn_id "
                "FROM threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: thread {thread_id!r} does not exist")
            thread = ThreadRecord(*row[:3])
            summary = None if row[3] is None else ThreadSummary(*row[3:])
            after = summary.through_seq if summary else 0
            entries = self._entries(conn, thread_id, limit, after, exclude_turn_id)
        return HistoryWindow(thread, summary, entries)

    # -- manifests ---------------------------------------------------------------

    def update_turn_prompt_manifest(self, turn_id: str, manifest: str | PromptManifest) -> None:
        """Attach the prompt manifest (JSON text or model) that compiled a turn."""
        if isinstance(manifest, PromptManifest):
            text = manifest.to_json(indent=None)
        else:
            try:
                parsed = json.loads(manifest)
            except ValueError as error:
                raise StoreError(
                    f"prompt manifest for turn {turn_id!r}: not JSON: {error}"
                ) from None
            if not isinstance(parsed, dict):
                raise StoreError(f"prompt manifest for turn {turn_id!r}: expected a JSON object")
            text = manifest
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE turns SET prompt_manifest = ? WHERE turn_id = ?", (text, turn_id)
            )
            if cursor.rowcount == 0:
                raise StoreError(f"{self.path}: turn {turn_id!r} does not exist")

    def get_turn_prompt_manifest(self, turn_id: str) -> str | None:
        """The manifest JSON stored for a turn, or ``None``."""
        with self._guard():
            row = self._connection().execute(
                "SELECT prompt_manifest FROM turns WHERE turn_id = ?", (turn_id,)
            ).fetchone()
        return None if row is None else row[0]

    # -- turn records ------------------------------------------------------------

    def save_turn_record(self, record: TurnRecord) -> None:
        """Store a turn's audit record, once, after the turn itself (one transaction)."""
        # Imported here: the audit models import the renderers, which import history.
        from ..audit.sqlite import write_turn_record

        with self._write() as conn:
            write_turn_record(conn, record, created_at=_now(), where=str(self.path))

    def get_turn_record(self, turn_id: str) -> TurnRecord | None:
        """The stored audit record of a turn, or ``None``."""
        from ..audit.sqlite import read_turn_record

        with self._read() as conn:
            return read_turn_record(conn, turn_id, where=str(self.path))
