"""The conversation store protocol: threads, turns, summaries and per-turn manifests.

:class:`CrudStore` is what the budgeter and the CLI need from a store. The SQLite store
(:mod:`pioneer.history.sqlite_store`) is the embedded implementation; a gateway with its
own database implements the same methods. Writes compute token counts before they
commit, so a reader never counts old text again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..compile.manifest import PromptManifest
from ..sections.artifacts import ArtifactRef
from .models import HistoryEntry, HistoryWindow, ThreadRecord, ThreadSummary

__all__ = ["MAX_TURNS", "CrudStore"]

#: Turns loaded for one budgeting pass (newest first, returned in order).
MAX_TURNS = 200


class CrudStore(Protocol):
    """Threads, their turns, their summary and each turn's prompt manifest."""

    def ensure_thread(self, thread_id: str, *, model: str | None = None) -> ThreadRecord:
        """Create the thread when missing (setting ``model`` when given); return it."""
        ...

    def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None`` when it does not exist."""
        ...

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
        ...

    def get_thread_conversation_history(
        self,
        thread_id: str,
        limit: int = MAX_TURNS,
        *,
        after_seq: int = 0,
        exclude_turn_id: str | None = None,
    ) -> tuple[HistoryEntry, ...]:
        """The newest ``limit`` turns after ``after_seq``, oldest first."""
        ...

    def get_thread_summary(self, thread_id: str) -> ThreadSummary | None:
        """The stored summary, or ``None``."""
        ...

    def set_thread_summary(
        self, thread_id: str, summary: str, *, through_turn_id: str
    ) -> ThreadSummary:
        """Store a summary covering every turn up to and including ``through_turn_id``.

        A summary never moves coverage backwards: when a summary covering later turns
        is already stored (a concurrent writer won), that one is kept and returned.
        """
        ...

    def get_history_window(
        self, thread_id: str, limit: int = MAX_TURNS, *, exclude_turn_id: str | None = None
    ) -> HistoryWindow:
        """Summary plus the turns it does not cover, read as one consistent snapshot."""
        ...

    def update_turn_prompt_manifest(
        self, turn_id: str, manifest: str | PromptManifest
    ) -> None:
        """Attach the prompt manifest (JSON text or model) that compiled a turn."""
        ...

    def get_turn_prompt_manifest(self, turn_id: str) -> str | None:
        """The manifest JSON stored for a turn, or ``None``."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...
