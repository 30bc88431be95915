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

import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["EDGE_CONFIG", "REPLACEMENT", "EdgeModel", "scrub", "utf8_text"]

#: The configuration of every model validated at an edge (profiles, the compile input,
#: manifests, hook contributions, lock files, records): immutable, and an unknown key is
#: an error rather than ignored.
EDGE_CONFIG = ConfigDict(frozen=True, extra="forbid")

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (unchanged when it has none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text


def scrub(value: Any) -> Any:
    """:func:`utf8_text` over the strings in a mapping, list or tuple (keys too)."""
    if isinstance(value, str):
        return utf8_text(value)
    if type(value) is dict:
        return {scrub(key): scrub(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(scrub(item) for item in value)
    return value


class EdgeModel(BaseModel):
    """A model validated at an edge: lone surrogates in its input become U+FFFD.

    Fields named in ``raw_fields`` are left alone (a path may carry surrogates that
    stand for the undecodable bytes of a real file name).
    """

    raw_fields: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _utf8(cls, data: Any) -> Any:
        if type(data) is not dict:
            return scrub(data)
        return {
            scrub(key): value if key in cls.raw_fields else scrub(value)
            for key, value in data.items()
        }
