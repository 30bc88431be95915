"""Cache breakpoints: one budget per request, spent on the most valuable places first.

Anthropic caches the prompt prefix up to every block marked with ``cache_control`` and
rejects a request with more than four marks. Adapters never mark a block directly: they
list the places they would like a mark, most valuable first, and :func:`allot_breakpoints`
grants at most :data:`MAX_CACHE_BREAKPOINTS` of them. Keeping the count in this one
place is what makes "never more than four" hold whatever the caller asked for.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["MAX_CACHE_BREAKPOINTS", "allot_breakpoints", "cache_control", "count_breakpoints"]

#: Anthropic's limit of ``cache_control`` marks in one request.
MAX_CACHE_BREAKPOINTS = 4

K = TypeVar("K", bound=Hashable)


def allot_breakpoints(wanted: Iterable[K], limit: int = MAX_CACHE_BREAKPOINTS) -> frozenset[K]:
    """The first ``limit`` distinct places of ``wanted`` (listed most valuable first)."""
    granted: list[K] = []
    for place in wanted:
        if len(granted) == limit:
            break
        if place not in granted:
            granted.append(place)
    return frozenset(granted)


def cache_control() -> dict[str, str]:
    """The mark itself: a fresh dict, so no two blocks share one mutable value."""
    return {"type": "ephemeral"}


def count_breakpoints(body: Mapping[str, Any]) -> int:
    """How many ``cache_control`` marks an Anthropic Messages body holds.

    Only the places a mark can go are looked at (tools, system blocks, message content
    blocks), so a tool schema with a property named ``cache_control`` is not counted.
    """
    system = body.get("system")
    blocks: list[Any] = [*body.get("tools", []), *(system if isinstance(system, list) else [])]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            blocks += content
    return sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)
