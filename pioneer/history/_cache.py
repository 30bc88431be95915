"""An in-memory cache of stored turns, so a budgeting pass re-reads only new turns.

A turn is written once and never changed, so an entry read from the store stays valid
for the life of the process. The store keeps the turns it wrote or read in a
:class:`~pioneer.caches.LruCache` bounded by bytes (the ``history_cache_bytes``
setting, docs/speed.md, "Caches"): a pass that finds a turn refreshes it, so the
threads a gateway keeps serving stay in memory however many of them it serves, and a
pass reads from the database only the ids it has not kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..caches import LruCache
from ..settings import HISTORY_CACHE_BYTES
from .models import HistoryEntry

__all__ = ["TurnCache"]


class TurnCache:
    """Turns by id, least recently used evicted first, refreshed when read."""

    def __init__(self, budget: int = HISTORY_CACHE_BYTES) -> None:
        self.cache: LruCache[str, HistoryEntry] = LruCache("history_turns", budget)

    def get_many(self, turn_ids: Sequence[str]) -> dict[str, HistoryEntry]:
        """The cached entries among ``turn_ids`` (each now among the most recent)."""
        return self.cache.get_many(turn_ids)

    def put_many(self, entries: dict[str, HistoryEntry]) -> None:
        """Remember ``entries``, evicting the least recently used beyond the budget."""
        put = self.cache.put
        for turn_id, entry in entries.items():
            put(turn_id, entry)
