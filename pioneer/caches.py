"""The one cache type: least recently used, bounded by bytes, safe to share between threads.

Every cache pioneer keeps (stable parts, bootstrap files, rendered sections, condition
results, placements, did-you-mean hints, stored turns, token counts) is an
:class:`LruCache` with its own byte budget (docs/speed.md, "Caches"). A hit moves the
entry to the most recent end; a ``put`` past the budget evicts least recently used
entries, one at a time, until the cache is back under it, so filling a cache never
empties it. The caller gives each entry's size at ``put``: an estimate, cheap to make,
of the bytes the entry keeps alive (:func:`text_bytes` of the texts it holds plus
:data:`ENTRY_OVERHEAD` and, for records, a fixed size per record), never a walk of the
objects.

Each cache counts its hits, misses and evictions; :meth:`LruCache.stats` gives them
with its entries, bytes and budget, and :func:`cache_stats` sums every live cache of
the process by name.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["ENTRY_OVERHEAD", "CacheStats", "LruCache", "cache_stats", "text_bytes"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Bytes counted for each entry on top of the texts it holds: the map's slot, the key
#: tuple and the value's own object (measured on the benchmark workload, docs/speed.md,
#: "Caches").
ENTRY_OVERHEAD = 512

#: Every cache alive in the process, for :func:`cache_stats`.
_LIVE: weakref.WeakSet[LruCache[Any, Any]] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


def text_bytes(texts: Iterable[str | bytes]) -> int:
    """The bytes ``texts`` take: each one's own size as the interpreter reports it, which
    it knows without reading the text (1, 2 or 4 bytes a character, by the widest one it
    holds, plus a header)."""
    return sum(map(sys.getsizeof, texts))


@dataclass(frozen=True, slots=True)
class CacheStats:
    """One cache's size and use since it was made."""

    name: str
    entries: int
    bytes: int
    budget: int
    hits: int
    misses: int
    evictions: int

    @property
    def hit_rate(self) -> float:
        """Hits over lookups (0.0 before the first lookup)."""
        looked = self.hits + self.misses
        return self.hits / looked if looked else 0.0


class LruCache(Generic[K, V]):
    """A map of at most ``budget`` bytes (as the sizes given to :meth:`put` add up).

    ``get`` refreshes what it finds; ``put`` evicts the least recently used entries
    until the total is within the budget. An entry larger than the whole budget is not
    kept (nothing else is evicted for it). A budget of 0 keeps nothing.
    """

    __slots__ = ("__weakref__", "_budget", "_bytes", "_evictions", "_hits", "_items", "_lock",
                 "_misses", "name")

    def __init__(self, name: str, budget: int):
        if budget < 0:
            raise ValueError(f"cache {name!r}: a budget is a number of bytes >= 0, got {budget}")
        self.name = name
        self._budget = budget
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = 0
        self._lock = threading.Lock()
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def budget(self) -> int:
        """The byte budget."""
        return self._budget

    def get(self, key: K) -> V | None:
        """The value stored under ``key`` (now the most recent), or ``None``."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                self._misses += 1
                return None
            self._items.move_to_end(key)
            self._hits += 1
            return found[0]

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The values held among ``keys`` (each now the most recent), under one lock."""
        found: dict[K, V] = {}
        with self._lock:
            items = self._items
            for key in keys:
                held = items.get(key)
                if held is None:
                    self._misses += 1
                else:
                    items.move_to_end(key)
                    self._hits += 1
                    found[key] = held[0]
        return found

    def put(self, key: K, value: V, size: int) -> None:
        """Store ``value`` under ``key`` as the most recent, counted as ``size`` bytes."""
        with self._lock:
            items = self._items
            old = items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self._budget:
                return
            items[key] = (value, size)
            self._bytes += size
            self._shrink()

    def resize(self, budget: int) -> None:
        """Set a new budget, evicting the least recently used entries beyond it."""
        if budget < 0:
            raise ValueError(f"cache {self.name!r}: a budget is a number of bytes >= 0, "
                             f"got {budget}")
        with self._lock:
            self._budget = budget
            self._shrink()

    def _shrink(self) -> None:
        items = self._items
        while self._bytes > self._budget:
            _, (_, size) = items.popitem(last=False)
            self._bytes -= size
            self._evictions += 1

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held (not a lookup: no refresh, not counted)."""
        return key in self._items

    def keys(self) -> list[K]:
        """The keys, least recently used first (a copy)."""
        with self._lock:
            return list(self._items)

    def stats(self) -> CacheStats:
        """The cache's entries, bytes, budget, hits, misses and evictions."""
        with self._lock:
            return CacheStats(self.name, len(self._items), self._bytes, self._budget,
                              self._hits, self._misses, self._evictions)


def cache_stats() -> list[CacheStats]:
    """Every live cache of the process, summed by name (sorted by name): what a gateway
    that runs many compilers and stores holds in all of them."""
    with _LIVE_LOCK:
        caches = list(_LIVE)
    totals: dict[str, list[int]] = {}
    for cache in caches:
        one = cache.stats()
        into = totals.setdefault(one.name, [0] * 6)
        for index, value in enumerate((one.entries, one.bytes, one.budget, one.hits,
                                       one.misses, one.evictions)):
            into[index] += value
    return [CacheStats(name, *values) for name, values in sorted(totals.items())]
