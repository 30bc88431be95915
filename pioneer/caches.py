"""The one cache type: least recently used, bounded by bytes, safe to share between threads.

Every cache pioneer keeps (stable parts, bootstrap files, rendered sections, condition
results, placements, did-you-mean hints, stored turns, token counts) is an
:class:`LruCache` with its own byte budget (docs/speed.md, "Caches"). A hit moves the
entry to the most recent end; a ``put`` past the budget evicts least recently used
entries, one at a time, until the cache is back under it, so filling a cache never
empties it. An entry is charged for what it keeps alive, its key and its value alike:
:func:`entry_bytes` walks both once, when the entry is stored, and adds the
interpreter's own size of every object it meets (:func:`deep_bytes`), so a key that
holds a whole input list is charged for that list's text.

Each cache counts its hits, misses and evictions; :meth:`LruCache.stats` gives them
with its entries, bytes and budget, and :func:`cache_stats` sums every live cache of
the process by name.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import threading
import types
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Generic, TypeVar

__all__ = ["ENTRY_OVERHEAD", "CacheStats", "LruCache", "cache_stats", "deep_bytes",
           "entry_bytes"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Bytes counted for each entry on top of its key and value: the map's slot and links,
#: the pair that holds the value with its size, and the size itself.
ENTRY_OVERHEAD = 160

#: Every cache alive in the process, for :func:`cache_stats`.
_LIVE: weakref.WeakSet[LruCache[Any, Any]] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


_Children = Callable[[Any], Iterable[Any]]
#: Types whose objects hold no other object.
_ATOMS = frozenset({str, bytes, bytearray, int, float, complex, bool, type(None), range})
#: Objects every cache shares with the rest of the process (classes, modules, functions,
#: enum members, ``None``...): never charged to an entry.
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, enum.Enum)
_WALKS: dict[type, _Children | None] = {}


def _items(mapping: Any) -> Iterable[Any]:
    for key, value in mapping.items():
        yield key
        yield value


def _model_parts(model: Any) -> Iterable[Any]:
    """A pydantic model's fields (in its ``__dict__``) and its own bookkeeping."""
    return (model.__dict__, getattr(model, "__pydantic_fields_set__", None),
            getattr(model, "__pydantic_extra__", None),
            getattr(model, "__pydantic_private__", None))


def _attributes(kind: type) -> _Children:
    """The parts of an object of ``kind``: its slots along the class's ancestry, and its
    ``__dict__`` when it has one."""
    names = [name for klass in kind.__mro__
             for name in klass.__dict__.get("__slots__", ())
             if name not in ("__dict__", "__weakref__")]
    has_dict = any("__dict__" in klass.__dict__ for klass in kind.__mro__ if klass is not object)

    def parts(obj: Any) -> Iterable[Any]:
        for name in names:
            value = getattr(obj, name, None)
            if value is not None:
                yield value
        if has_dict:
            yield obj.__dict__
    return parts


def _walk_for(kind: type) -> _Children | None:
    """How to reach the objects an object of ``kind`` holds (``None``: it holds none, or
    none that is its own: a lock, a file, an object of a library pioneer does not cache
    the internals of, counted by its own size only)."""
    if issubclass(kind, (tuple, list, set, frozenset, deque)):
        return iter
    if issubclass(kind, dict):
        return _items
    if hasattr(kind, "__pydantic_validator__"):  # a pydantic model (pydantic not imported)
        return _model_parts
    if (dataclasses.is_dataclass(kind) or issubclass(kind, PurePath)
            or kind.__module__.split(".")[0] == "pioneer"):
        return _attributes(kind)
    return None


def deep_bytes(*objects: object) -> int:
    """The bytes ``objects`` keep alive, by the interpreter's own size of every object
    reached from them (``sys.getsizeof``), each counted once: through tuples, lists, sets,
    dicts, pydantic models (their fields), dataclasses and pioneer's own classes (their
    slots and attributes), and paths. Classes, modules, functions and enum members are
    shared with the whole process and not counted.

    A walk without recursion, so any depth is measured; linear in the objects reached.
    """
    seen: set[int] = set()
    stack = list(objects)
    total = 0
    getsizeof = sys.getsizeof
    walks = _WALKS
    while stack:
        obj = stack.pop()
        kind = type(obj)
        if kind in _ATOMS:
            if kind is not type(None) and id(obj) not in seen:
                seen.add(id(obj))
                total += getsizeof(obj)
            continue
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        total += getsizeof(obj)
        try:
            walk = walks[kind]
        except KeyError:
            walk = walks[kind] = _walk_for(kind)
        if walk is not None:
            stack.extend(walk(obj))
    return total


def entry_bytes(key: object, value: object) -> int:
    """What a cache entry costs: its key and value (:func:`deep_bytes`, an object the two
    share counted once) and :data:`ENTRY_OVERHEAD` for its place in the map."""
    return ENTRY_OVERHEAD + deep_bytes(key, value)


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

    def put(self, key: K, value: V, size: int | None = None) -> None:
        """Store ``value`` under ``key`` as the most recent, counted as ``size`` bytes
        (by default what the two keep alive, :func:`entry_bytes`)."""
        if size is None:
            size = entry_bytes(key, value)
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
