"""Read-only views: what templates (and hooks) see of a caller's values.

The compile input is a frozen model, but its lists are ordinary lists: a template doing
``runtime_sections.append(...)`` or a hook doing ``ctx.compile_input.runtime_sections
.clear()`` would change the caller's value, and every later compile of it. :func:`read_only`
gives a view that cannot be changed: lists become :class:`FrozenList` (a tuple that prints,
compares and concatenates like the list it came from), mappings :class:`FrozenDict`, sets
frozensets, and frozen models and dataclasses a copy holding such views. Strings, numbers,
paths and other immutable values are returned as they are. A change attempted through a
view raises :class:`ReadOnlyError` (a ``TypeError``) saying so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from pydantic import BaseModel

__all__ = ["FrozenDict", "FrozenList", "ReadOnlyError", "read_only"]


class ReadOnlyError(TypeError):
    """An attempt to change a read-only view."""


def _refuse(kind: str, method: str) -> NoReturn:
    raise ReadOnlyError(f"{method}: this {kind} is read-only (a view of the caller's input)")


class FrozenList(tuple):  # type: ignore[type-arg]
    """A list that cannot change: a tuple that prints, compares and adds like a list."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(list(self))

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple)):
            return tuple.__eq__(self, tuple(other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    def __add__(self, other: Any) -> Any:
        if isinstance(other, list):
            return [*self, *other]
        return FrozenList(tuple.__add__(self, tuple(other)))

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, list):
            return [*other, *self]
        return NotImplemented

    def copy(self) -> list[Any]:
        """A plain, changeable list of the same items."""
        return list(self)

    def append(self, *_: Any) -> NoReturn:
        _refuse("list", "append")

    def extend(self, *_: Any) -> NoReturn:
        _refuse("list", "extend")

    def insert(self, *_: Any) -> NoReturn:
        _refuse("list", "insert")

    def remove(self, *_: Any) -> NoReturn:
        _refuse("list", "remove")

    def pop(self, *_: Any) -> NoReturn:
        _refuse("list", "pop")

    def clear(self) -> NoReturn:
        _refuse("list", "clear")

    def sort(self, *_: Any, **__: Any) -> NoReturn:
        _refuse("list", "sort")

    def reverse(self) -> NoReturn:
        _refuse("list", "reverse")


class FrozenDict(Mapping[Any, Any]):
    """A dict that cannot change (not a dict subclass, so ``dict.update`` refuses it)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[Any, Any]):
        self._items = dict(items)

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def copy(self) -> dict[Any, Any]:
        """A plain, changeable dict of the same items."""
        return dict(self._items)

    def update(self, *_: Any, **__: Any) -> NoReturn:
        _refuse("mapping", "update")

    def setdefault(self, *_: Any) -> NoReturn:
        _refuse("mapping", "setdefault")

    def pop(self, *_: Any) -> NoReturn:
        _refuse("mapping", "pop")

    def popitem(self) -> NoReturn:
        _refuse("mapping", "popitem")

    def clear(self) -> NoReturn:
        _refuse("mapping", "clear")


_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), frozenset, FrozenList,
              FrozenDict)


def read_only(value: Any) -> Any:
    """A view of ``value`` that cannot be changed (``value`` itself when it cannot be)."""
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, (list, tuple)):
        items = [read_only(item) for item in value]
        if type(value) is tuple and all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return FrozenList(items)
    if isinstance(value, Mapping):
        return FrozenDict({key: read_only(item) for key, item in value.items()})
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, BaseModel) and value.model_config.get("frozen"):
        changed = {name: view for name, item in value.__dict__.items()
                   if (view := read_only(item)) is not item}
        return value.model_copy(update=changed) if changed else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        params = getattr(value, "__dataclass_params__", None)
        if params is not None and params.frozen:
            changed = {f.name: view for f in dataclasses.fields(value) if f.init
                       and (view := read_only(getattr(value, f.name))) is not getattr(
                           value, f.name)}
            return dataclasses.replace(value, **changed) if changed else value
    return value  # a path, an enum, an object of its own: as it is
