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

from ..caches import ENTRY_OVERHEAD, LruCache, text_bytes
from ..settings import HISTORY_CACHE_BYTES
from .models import HistoryEntry
from .tool_rounds import counted_text

__all__ = ["TurnCache", "turn_bytes"]
#: Bytes counted for each artifact ref a turn carries (its fields and rendered block).
_REF_BYTES = 256


def turn_bytes(entry: HistoryEntry) -> int:
    """The size estimate of a cached turn: its two texts twice (as stored and as
    rendered into messages), its tool rounds' texts, its refs and the fixed per-entry
    overhead."""
    texts = text_bytes(text for text in (entry.user_text, entry.assistant_text) if text)
    texts += text_bytes(counted_text(message) for message in entry.tool_rounds)
    refs = len(entry.user_artifacts) + len(entry.assistant_artifacts)
    return ENTRY_OVERHEAD + 2 * texts + _REF_BYTES * refs


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
            put(turn_id, entry, turn_bytes(entry))
