"""Text at the edges: every string that enters pioneer can be encoded as UTF-8.

A Python ``str`` can hold lone surrogates (``"\\ud800"``; ``json.loads`` makes them from
``"\\ud800"`` escapes) that UTF-8 cannot encode, so hashing, JSON output, a provider
request or the store would fail on them deep inside a turn. The edge models
(:class:`EdgeModel`: the compile input, its sections, hook contributions) replace each
lone surrogate with U+FFFD (the replacement character) while validating, once, so one
bad character from a client or a hook never stops a turn and every later stage sees
valid text.
"""

from __future__ import annotations

import functools
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from .errors import InputError, Problem, did_you_mean, format_path

__all__ = [
    "EDGE_CONFIG",
    "REPLACEMENT",
    "CheckedModel",
    "EdgeModel",
    "json_writer",
    "scrub",
    "texts",
    "unknown_field",
    "utf8_text",
    "validation_problems",
]

def json_writer(*, sort_keys: bool = True,
                separators: tuple[str, str] = (",", ":")) -> Callable[[Any], str]:
    """A function writing a value as ``json.dumps(value, ensure_ascii=False, sort_keys=...,
    separators=...)`` does, for the many small values written one by one (a request's
    blocks): the standard library's C encoder is made once here rather than at each
    call, which costs about as much as writing a small value (docs/speed.md)."""
    encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, separators=separators)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C encoder
        return encoder.encode
    item_separator, key_separator = separators
    # As JSONEncoder.iterencode makes it for one value, without the check for a value
    # that holds itself (JSON data never does).
    write = make(None, encoder.default, json.encoder.encode_basestring, None, key_separator,
                 item_separator, sort_keys, False, True)

    def written(value: Any) -> str:
        return "".join(write(value, 0))

    return written


#: The configuration of every model validated at an edge (profiles, the compile input,
#: manifests, hook contributions, lock files, records): immutable, and an unknown key is
#: an error rather than ignored.
EDGE_CONFIG = ConfigDict(frozen=True, extra="forbid")

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (unchanged when it has none)."""
    if text.isascii():  # a flag of the string: no surrogate, and nothing to encode
        return text
    try:
        # UTF-32 refuses lone surrogates as UTF-8 does, and is a plain copy of each code
        # point: 2 to 10 times faster than UTF-8 for text that is not ASCII.
        text.encode("utf-32-le")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text


def scrub(value: Any) -> Any:
    """:func:`utf8_text` over the strings in a mapping, list or tuple (keys too), at any
    depth: a walk with its own stack, so no nesting a JSON parser accepts can exhaust
    Python's recursion limit."""
    if isinstance(value, str):
        return value if value.isascii() else utf8_text(value)
    if type(value) is not dict and type(value) not in (list, tuple):
        return value
    # Each frame: the container, an iterator over its parts (a dict's keys and values in
    # turn) and the parts scrubbed so far; a container is made when its last part is.
    frames: list[tuple[Any, Any, list[Any]]] = [(value, _parts(value), [])]
    while True:
        source, parts, done = frames[-1]
        for part in parts:
            if isinstance(part, str):
                done.append(part if part.isascii() else utf8_text(part))
            elif type(part) is dict or type(part) in (list, tuple):
                frames.append((part, _parts(part), []))
                break
            else:
                done.append(part)
        else:
            frames.pop()
            if type(source) is dict:
                made: Any = dict(zip(done[::2], done[1::2], strict=True))
            else:
                made = type(source)(done)
            if not frames:
                return made
            frames[-1][2].append(made)


def _parts(value: Any) -> Any:
    """An iterator over a list's or tuple's items, or a dict's keys and values in turn."""
    if type(value) is dict:
        return (part for pair in value.items() for part in pair)
    return iter(value)


def unknown_field(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """The message for an unknown field at ``loc`` (pydantic's location, from ``model``):
    the close field it was probably meant to be, else the fields there are
    (docs/cli.md, "Conventions")."""
    known = _fields_at(model, loc[:-1])
    if not known:
        return "unknown field"
    return "unknown field" + (did_you_mean(str(loc[-1]), known)
                              or f" (known: {', '.join(known)})")


def _fields_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The fields of the model found at ``loc`` under ``model`` (its own at the root);
    none when ``loc`` leads elsewhere (a mapping's key, a union's branch tag)."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _model_of(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):  # list[X], X | None
        found = _model_of(argument)
        if found is not None:
            return found
    return None


def validation_problems(error: ValidationError, where: str,
                        model: type[BaseModel] | None = None) -> list[Problem]:
    """Each error of a pydantic validation as a located problem (``where → path``); with
    the ``model`` validated, an unknown field names the fields there are."""
    problems = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = unknown_field(model, item["loc"]) if model else "unknown field"
        path = format_path(item["loc"])
        problems.append(Problem(message, path=f"{where} → {path}" if path else where))
    return problems


class CheckedModel(BaseModel):
    """A model whose constructor reports bad input as an :class:`~pioneer.errors.InputError`
    naming the model and each field, never as pydantic's own error (docs/cli.md)."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise InputError(validation_problems(error, type(self).__name__, type(self))) from None

    # The same validation as pydantic's own __init__: nested models and model_validate
    # keep validating without calling it (pydantic's documented marker).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


class EdgeModel(CheckedModel):
    """A model validated at an edge: lone surrogates in its input become U+FFFD.

    Fields named in ``raw_fields`` are left alone (a path may carry surrogates that
    stand for the undecodable bytes of a real file name), and so is a field whose every
    value is an edge model (``list[RuntimeSectionInput]``): each of its items is scrubbed
    by its own model, so each string is read once, not once per level.
    """

    raw_fields: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _utf8(cls, data: Any) -> Any:
        if type(data) is not dict:
            return scrub(data)
        left_alone = _left_alone(cls)
        return {
            scrub(key): value if key in left_alone else scrub(value)
            for key, value in data.items()
        }


@functools.cache
def _left_alone(model: type[EdgeModel]) -> frozenset[str]:
    """The fields of ``model`` its ``_utf8`` leaves alone: its raw fields, and those whose
    values are edge models that scrub themselves."""
    return model.raw_fields | {
        name for name, field in model.model_fields.items()
        if _scrubs_itself(field.annotation)
    }


def _scrubs_itself(annotation: Any) -> bool:
    """Whether every value ``annotation`` admits is an edge model (or ``None``), alone
    or in a list or tuple: then the value's own validation scrubs it."""
    if annotation is type(None):
        return True
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return issubclass(annotation, EdgeModel)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _scrubs_itself(typing.get_args(annotation)[0])
    if origin in (list, tuple, typing.Union, types.UnionType):
        arguments = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return bool(arguments) and all(map(_scrubs_itself, arguments))
    return False

def texts(value: object) -> tuple[str, ...] | None:
    """``value`` as a tuple of strings, or None when it is not a list of them (a lone
    string is not: it would be read as its characters)."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return None
    found = tuple(value)
    return found if all(isinstance(item, str) for item in found) else None
