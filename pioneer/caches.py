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

__all__ = ["ENTRY_OVERHEAD", "SHARED_TEXT", "CacheStats", "LruCache", "cache_stats",
           "deep_bytes", "entry_bytes"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Bytes counted for each entry on top of its key and value: the map's slot and links,
#: the pair that holds the value with its size, and the size itself.
ENTRY_OVERHEAD = 160

#: Every cache alive in the process, for :func:`cache_stats`.
_LIVE: weakref.WeakSet[LruCache[Any, Any]] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


_Children = Callable[[Any], Iterable[Any]]
#: How :func:`deep_bytes` treats an object of a type: it holds no other object; it is
#: shared with the whole process (classes, modules, functions, enum members) and not
#: counted; it holds items (tuples, lists, sets); keys and values (dicts); fields (a
#: pydantic model); slots and attributes (dataclasses, paths, pioneer's own objects).
_ATOM, _SHARED, _ITEMS, _MAPPING, _MODEL, _PARTS = range(6)
_SHARED_TYPES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                 types.MethodType, enum.Enum)
#: A type's treatment, and for a model the bytes of its field names (strings the class
#: and all its objects share, counted once a walk), for the others how to reach its parts.
_KINDS: dict[type, tuple[int, Any]] = {
    kind: (_ATOM, None)
    for kind in (str, bytes, bytearray, int, float, complex, bool, range)
}
_KINDS[type(None)] = _KINDS[bool] = (_SHARED, None)
#: An ASCII string's size is this header plus one byte a character.
_ASCII_HEADER = sys.getsizeof("")
#: Texts at least this long are counted once per entry however often it holds them.
SHARED_TEXT = 256


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


def _kind_of(kind: type, example: Any) -> tuple[int, Any]:
    """How to measure objects of ``kind`` (``example`` is one of them). Anything not
    listed here (a lock, a file, an object of a library whose insides pioneer never
    caches) is counted by its own size only."""
    if issubclass(kind, _SHARED_TYPES):
        return _SHARED, None
    if issubclass(kind, (tuple, list, set, frozenset, deque)):
        return _ITEMS, None
    if issubclass(kind, dict):
        return _MAPPING, None
    if hasattr(kind, "__pydantic_validator__"):  # a pydantic model (pydantic not imported)
        # The same for every object of the class: the object and its fields' dict (one
        # key per field); then the field names themselves.
        fields = example.__dict__
        own = sys.getsizeof(example) + sys.getsizeof(fields)
        more = bool(getattr(kind, "__private_attributes__", None)) or (
            getattr(kind, "model_config", {}).get("extra") == "allow")
        return _MODEL, (own, sum(map(sys.getsizeof, fields)), more)
    if (dataclasses.is_dataclass(kind) or issubclass(kind, PurePath)
            or kind.__module__.split(".")[0] == "pioneer"):
        return _PARTS, _attributes(kind)
    return _ATOM, None


def _take(parts: Iterable[Any], seen: set[int], stack: list[Any]) -> int:
    """The bytes of the texts and numbers among ``parts`` (most of what an entry holds,
    counted here); anything else that is not shared goes onto ``stack``."""
    found = 0
    for part in parts:
        kind = type(part)
        if kind is str:
            size = len(part)
            if size >= SHARED_TEXT:
                if id(part) in seen:
                    continue
                seen.add(id(part))
            found += _ASCII_HEADER + size if part.isascii() else sys.getsizeof(part)
        elif kind is int or kind is float:
            found += sys.getsizeof(part)
        elif part is not None and kind is not bool:
            stack.append(part)
    return found


def deep_bytes(*objects: object) -> int:
    """The bytes ``objects`` keep alive, by the interpreter's own size of every object
    reached from them (``sys.getsizeof``): through tuples, lists, sets, dicts, pydantic
    models (their fields), dataclasses and pioneer's own classes (their slots and
    attributes), and paths. Classes, modules, functions, enum members, ``None`` and the
    booleans are shared with the whole process and not counted.

    Every container, and every text of :data:`SHARED_TEXT` characters or more, is counted
    once however often it is reached; a shorter text and a number are counted at each
    place that holds it (remembering them would cost more than they weigh: at most a few
    hundred bytes for each repeat), and a model's field names once for each model class.
    A walk without recursion, so any depth is measured; linear in the objects reached.
    """
    seen: set[int] = set()
    stack: list[Any] = []
    total = _take(objects, seen, stack)
    models: set[type] | None = None
    getsizeof = sys.getsizeof
    kinds = _KINDS
    while stack:
        obj = stack.pop()
        ident = id(obj)
        if ident in seen:
            continue
        seen.add(ident)
        kind = type(obj)
        found = kinds.get(kind)
        if found is None:
            found = kinds[kind] = _kind_of(kind, obj)
        how, extra = found
        if how == _ITEMS:
            total += getsizeof(obj) + _take(obj, seen, stack)
        elif how == _MODEL:
            own, names, more = extra
            total += (own + getsizeof(getattr(obj, "__pydantic_fields_set__", None))
                      + _take(obj.__dict__.values(), seen, stack))
            if models is None:
                models = set()
            if kind not in models:  # the field names, once for the class
                models.add(kind)
                total += names
            if more:
                for part in (obj.__pydantic_extra__, obj.__pydantic_private__):
                    if part is not None:
                        stack.append(part)
        elif how == _MAPPING:
            total += (getsizeof(obj) + _take(obj.keys(), seen, stack)
                      + _take(obj.values(), seen, stack))
        elif how == _PARTS:
            total += getsizeof(obj) + _take(extra(obj), seen, stack)
        elif how == _ATOM:
            total += getsizeof(obj)
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
