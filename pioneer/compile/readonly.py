"""Read-only views: what templates (and hooks) see of a caller's values.

The compile input is a frozen model, but its lists are ordinary lists: a template doing
``runtime_sections.append(...)`` or a hook doing ``ctx.compile_input.runtime_sections
.clear()`` would change the caller's value, and every later compile of it. :func:`read_only`
gives a view that cannot be changed: lists become :class:`FrozenList` (a tuple that prints,
compares and concatenates like the list it came from), mappings :class:`FrozenDict`, sets
frozensets, and frozen models and dataclasses a copy holding such views. Strings, numbers,
paths and other immutable values are returned as they are. A change attempted through a
view raises :class:`ReadOnlyError` (a ``TypeError``) saying so.

Templates get less still: :func:`plain` turns a value into **plain data** only (strings,
numbers, booleans, ``None``, and read-only lists and mappings of them). A model or a
dataclass becomes a :class:`FrozenDict` of its fields, a path its text, an enum its
value; anything else is refused. No object with methods of its own (a ``Path`` that can
read and write files, a model with ``parse_file``, a settings object, a store) can
reach template code (docs/failure-behaviour.md, "The sandbox: plain data only").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from enum import Enum
from pathlib import PurePath
from typing import Any, NoReturn

from pydantic import BaseModel

__all__ = ["PLAIN_TYPES", "FrozenDict", "FrozenList", "ReadOnlyError", "plain", "read_only"]


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
    """A dict that cannot change (not a dict subclass, so ``dict.update`` refuses it).

    ``name`` is what a template calls it (``limits``, ``runtime_sections[0]``), for the
    message when a template asks it for a key it does not have.
    """

    __slots__ = ("_items", "_name")

    def __init__(self, items: Mapping[Any, Any], name: str | None = None):
        self._items = dict(items)
        self._name = name

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


#: The types of plain data: what a template's context may hold, at any depth.
PLAIN_TYPES: tuple[type, ...] = (str, int, float, bool, type(None), FrozenList, FrozenDict,
                                 frozenset)


def plain(value: Any, name: str = "value") -> Any:
    """``value`` as plain data (see the module's docstring); ``TypeError`` for a value
    that has no plain form. ``name`` is what a template calls it, kept by the mappings
    made here for their error messages."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return value
    if kind is FrozenList or kind is list or kind is tuple:
        return FrozenList([plain(item, f"{name}[{index}]") for index, item in enumerate(value)])
    if isinstance(value, Enum):
        return plain(value.value, name)
    if isinstance(value, Mapping):
        return FrozenDict({_key(key): plain(item, f"{name}.{key}")
                           for key, item in value.items()}, name)
    if isinstance(value, PurePath):
        return str(value)
    fields = _fields(value)
    if fields is not None:
        return FrozenDict({field: plain(getattr(value, field), f"{name}.{field}")
                           for field in fields}, name)
    if isinstance(value, str):  # a subclass (markup, say): its text alone
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)):
        return FrozenList([plain(item, f"{name}[{index}]") for index, item in enumerate(value)])
    if isinstance(value, (set, frozenset)):
        return frozenset(plain(item, name) for item in value)
    raise TypeError(f"{name}: a {kind.__name__} is not plain data, and templates see plain "
                    "data only")


def _key(key: Any) -> Any:
    if type(key) is str or type(key) is int:
        return key
    return plain(key, "key")


def _fields(value: Any) -> tuple[str, ...] | None:
    """The public fields of a model or dataclass instance (``None`` for anything else)."""
    if isinstance(value, BaseModel):
        return tuple(type(value).model_fields)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(f.name for f in dataclasses.fields(value) if not f.name.startswith("_"))
    return None
