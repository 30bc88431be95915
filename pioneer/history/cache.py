"""An in-memory cache of stored turns, so a budgeting pass re-reads only new turns.

A turn is written once and never changed, so an entry read from the store stays valid
for the life of the process; the store keeps the most recently added ones by turn id
and reads from SQLite only the ids it has not seen.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from .models import HistoryEntry

__all__ = ["TurnCache"]


class TurnCache:
    """Recently read turns by id, oldest evicted first.

    A stored turn never changes, so a cached entry never goes stale.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[str, HistoryEntry] = {}
        self._lock = threading.Lock()

    def get_many(self, turn_ids: Sequence[str]) -> dict[str, HistoryEntry]:
        """The cached entries among ``turn_ids``."""
        with self._lock:
            get = self._entries.get
            return {turn_id: entry for turn_id in turn_ids if (entry := get(turn_id)) is not None}

    def put_many(self, entries: dict[str, HistoryEntry]) -> None:
        """Remember ``entries``, evicting the oldest beyond the size."""
        if self._size <= 0:
            return
        with self._lock:
            self._entries.update(entries)
            overflow = len(self._entries) - self._size
            if overflow > 0:
                for turn_id in list(self._entries)[:overflow]:
                    del self._entries[turn_id]
