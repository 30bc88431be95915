"""A fast yes/no JSON Schema check, so a valid profile never pays for importing jsonschema.

Takes a JSON-like value (parsed TOML) and a Draft 2020-12 schema; returns ``True`` when
the value is valid, ``False`` when it is not, and ``None`` when the schema uses a
keyword this module does not implement. Only ``True`` lets a caller skip jsonschema:
anything else goes to jsonschema, which locates and words every problem. The keywords
implemented are the ones the committed schemas use, each with jsonschema's meaning
(types as its type checker defines them, ``pattern`` as ``re.search``, ``enum`` with
booleans kept apart from numbers); a test checks the two agree on generated profiles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

__all__ = ["is_valid"]

#: Keywords that never make a value invalid (jsonschema asserts no ``format`` by default).
_ANNOTATIONS = frozenset(
    {"$schema", "$comment", "title", "description", "default", "examples", "deprecated",
     "readOnly", "writeOnly", "format", "then", "else"}
)


class _Unknown(Exception):
    """The schema uses a keyword (or a reference) this module does not implement."""


def is_valid(instance: Any, schema: Mapping[str, Any]) -> bool | None:
    """Whether ``instance`` is valid; ``None`` when only jsonschema can tell."""
    try:
        return _valid(instance, schema, schema)
    except _Unknown:
        return None


def _valid(instance: Any, schema: Any, root: Mapping[str, Any]) -> bool:
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, Mapping):
        raise _Unknown("schema is not an object")
    if "$defs" in schema and schema is not root:
        raise _Unknown("$defs below the root")
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or (keyword == "$defs" and schema is root):
            continue
        check = _KEYWORDS.get(keyword)
        if check is None:
            raise _Unknown(keyword)
        if not check(instance, value, schema, root):
            return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: _is_number(v) and (isinstance(v, int) or float(v).is_integer()),
    "number": _is_number,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _type(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    names = [value] if isinstance(value, str) else value
    if any(name not in _TYPES for name in names):
        raise _Unknown(f"type {value!r}")
    return any(_TYPES[name](instance) for name in names)


def _properties(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    if not isinstance(instance, dict):
        return True
    return all(
        _valid(instance[name], sub, root) for name, sub in value.items() if name in instance
    )


def _additional(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    if not isinstance(instance, dict):
        return True
    if "patternProperties" in schema:
        raise _Unknown("patternProperties")
    known = schema.get("properties", {})
    return all(_valid(item, value, root) for name, item in instance.items() if name not in known)


def _required(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    return not isinstance(instance, dict) or all(name in instance for name in value)


def _items(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    if "prefixItems" in schema:
        raise _Unknown("prefixItems")
    return not isinstance(instance, list) or all(_valid(item, value, root) for item in instance)


def _unbool(value: Any) -> Any:
    # jsonschema's equality: True and 1 (and False and 0) are different values.
    return ("bool", value) if isinstance(value, bool) else value


def _equal(one: Any, two: Any) -> bool:
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(one[key], two[key]) for key in one)
    return bool(_unbool(one) == _unbool(two))


@cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _ref(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    if not isinstance(value, str) or not value.startswith("#/$defs/") or value.count("/") != 2:
        raise _Unknown(f"$ref {value!r}")
    target = root.get("$defs", {}).get(value.removeprefix("#/$defs/"))
    if target is None:
        raise _Unknown(f"$ref {value!r}")
    return _valid(instance, target, root)


def _if(instance: Any, value: Any, schema: Any, root: Any) -> bool:
    branch = "then" if _valid(instance, value, root) else "else"
    return branch not in schema or _valid(instance, schema[branch], root)


_Check = Callable[[Any, Any, Any, Any], bool]
_KEYWORDS: dict[str, _Check] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "items": _items,
    "minItems": lambda i, v, s, r: not isinstance(i, list) or len(i) >= v,
    "maxItems": lambda i, v, s, r: not isinstance(i, list) or len(i) <= v,
    "minLength": lambda i, v, s, r: not isinstance(i, str) or len(i) >= v,
    "maxLength": lambda i, v, s, r: not isinstance(i, str) or len(i) <= v,
    "pattern": lambda i, v, s, r: not isinstance(i, str) or _pattern(v).search(i) is not None,
    "minimum": lambda i, v, s, r: not _is_number(i) or i >= v,
    "maximum": lambda i, v, s, r: not _is_number(i) or i <= v,
    "exclusiveMinimum": lambda i, v, s, r: not _is_number(i) or i > v,
    "exclusiveMaximum": lambda i, v, s, r: not _is_number(i) or i < v,
    "enum": lambda i, v, s, r: any(_equal(i, option) for option in v),
    "const": lambda i, v, s, r: _equal(i, v),
    "anyOf": lambda i, v, s, r: any(_valid(i, sub, r) for sub in v),
    "allOf": lambda i, v, s, r: all(_valid(i, sub, r) for sub in v),
    "oneOf": lambda i, v, s, r: sum(_valid(i, sub, r) for sub in v) == 1,
    "not": lambda i, v, s, r: not _valid(i, v, r),
    "$ref": _ref,
    "if": _if,
}
