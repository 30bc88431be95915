"""Cache breakpoints (Anthropic): at most four marks, planned where they pay.

Anthropic caches the prompt prefix (tools → system → messages) up to every block marked
with ``cache_control``, rejects a request with more than four marks, and caches nothing
for a prefix shorter than the model's minimum. An adapter never marks a block directly:
it lists the places a mark could go (:class:`MarkCandidate`, each with why it is wanted
and how many tokens its prefix holds) and :func:`plan_breakpoints` picks at most
:data:`MAX_CACHE_BREAKPOINTS` of them:

1. the marks the caller asked for (``ChatMessage.cache_breakpoint``), newest first;
2. the end of the history, so the next turn reads the whole history from cache;
3. the last block, so the next tool round of this turn reads the whole turn;
4. the end of the stable part (the stable text, or the tools when there is none), which
   still reads when the history changes (a new summary, a truncation cut);
5. a bridge: when the end of the history is more than :data:`LOOKBACK_BLOCKS` blocks past
   the end of the previous turn's history (the entry the previous turn wrote, which a
   history that keeps tool rounds leaves far behind), a mark within reach of both
   (:func:`bridge_position`), so the request still reads that entry;
6. the end of the history summary.

A candidate whose prefix is shorter than the model's minimum
(:func:`minimum_cacheable_tokens`, read from the model table) is dropped: it would cache
nothing and only take a slot. With ``long_ttl`` the marks on the tools and system blocks
get a 1-hour lifetime; they come before every message block, so 1-hour entries always
precede 5-minute ones, as the API requires. docs/providers.md has the rules and their sources.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .models import model_facts

__all__ = [
    "DEFAULT_MINIMUM_TOKENS",
    "LOOKBACK_BLOCKS",
    "MAX_CACHE_BREAKPOINTS",
    "MarkCandidate",
    "MarkReason",
    "allot_breakpoints",
    "bridge_position",
    "cache_control",
    "count_breakpoints",
    "marked_blocks",
    "minimum_cacheable_tokens",
    "plan_breakpoints",
]

#: Anthropic's limit of ``cache_control`` marks in one request.
MAX_CACHE_BREAKPOINTS = 4

#: The minimum of a model the table knows nothing about (the built-in Anthropic
#: catch-all row of ``models/models.toml``).
DEFAULT_MINIMUM_TOKENS = 1024

MarkReason = Literal["caller", "history", "last", "stable", "tools", "bridge", "summary"]
_ORDER: dict[MarkReason, int] = {
    "caller": 0, "history": 1, "last": 2, "stable": 3, "tools": 3, "bridge": 4, "summary": 5,
}
#: Anthropic looks for an entry at a mark and up to this many blocks before it.
LOOKBACK_BLOCKS = 20

K = TypeVar("K", bound=Hashable)


def minimum_cacheable_tokens(model: str) -> int:
    """The shortest prefix ``model`` caches, from the model table (:func:`model_facts`).

    A dated snapshot (``claude-opus-4-1-20250805``) finds its model's row; a model the
    table does not name takes its family's row, and a name no family claims the catch-all
    row (:data:`DEFAULT_MINIMUM_TOKENS`).
    """
    return model_facts(model).min_cacheable_tokens


@dataclass(frozen=True, slots=True)
class MarkCandidate:
    """A place a mark could go, why, and the tokens of the prefix it would cache."""

    place: Hashable
    reason: MarkReason
    #: Tokens from the start of the request through this block (a count may stop early
    #: once it is past every minimum; it is then a lower bound).
    prefix_tokens: int
    #: The block is a tool or a system block (1-hour lifetime with ``long_ttl``).
    prefix_part: bool = False
    #: For caller marks: the message index, so newer marks win.
    order: int = 0


def plan_breakpoints(
    candidates: Iterable[MarkCandidate], *, minimum: int, limit: int = MAX_CACHE_BREAKPOINTS
) -> tuple[MarkCandidate, ...]:
    """The marks to set: at most ``limit`` distinct places, none below ``minimum`` tokens.

    Returned in the order they were planned (most valuable first).
    """
    ranked = sorted(
        (c for c in candidates if c.prefix_tokens >= minimum),
        key=lambda c: (_ORDER[c.reason], -c.order),
    )
    granted: list[MarkCandidate] = []
    places: set[Hashable] = set()
    for candidate in ranked:
        if len(granted) == limit:
            break
        if candidate.place not in places:
            places.add(candidate.place)
            granted.append(candidate)
    return tuple(granted)


def bridge_position(written: int, wanted: int, lookback: int = LOOKBACK_BLOCKS) -> int | None:
    """Where a bridge mark goes (block positions in request order), or None when none is
    needed: ``wanted`` (a mark) is at most ``lookback`` blocks past ``written`` (an entry an
    earlier request wrote), so it reads that entry itself.

    The bridge is ``lookback`` blocks before ``wanted`` when that still reaches back to
    ``written``, so both marks are within reach of an entry; on a longer gap it is as far
    as one mark can be from ``written`` and still read it.
    """
    if wanted - written <= lookback:
        return None
    return min(written + lookback, max(written, wanted - lookback))


def allot_breakpoints(wanted: Iterable[K], limit: int = MAX_CACHE_BREAKPOINTS) -> frozenset[K]:
    """The first ``limit`` distinct places of ``wanted`` (the ``system`` placement's rule)."""
    granted: list[K] = []
    for place in wanted:
        if len(granted) == limit:
            break
        if place not in granted:
            granted.append(place)
    return frozenset(granted)


def cache_control(*, long_ttl: bool = False) -> dict[str, str]:
    """The mark itself: a fresh dict, so no two blocks share one mutable value."""
    return {"type": "ephemeral", "ttl": "1h"} if long_ttl else {"type": "ephemeral"}


def count_breakpoints(body: Mapping[str, Any]) -> int:
    """How many ``cache_control`` marks an Anthropic Messages body holds.

    Only the places a mark can go are looked at (tools, system blocks, message content
    blocks), so a tool schema with a property named ``cache_control`` is not counted.
    """
    return sum(1 for block in _blocks(body) if isinstance(block, dict) and "cache_control" in block)


def marked_blocks(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The blocks of an Anthropic body that carry a mark, in request order."""
    return [block for block in _blocks(body)
            if isinstance(block, Mapping) and "cache_control" in block]


def _blocks(body: Mapping[str, Any]) -> Sequence[Any]:
    system = body.get("system")
    blocks: list[Any] = [*body.get("tools", []), *(system if isinstance(system, list) else [])]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            blocks += content
    return blocks
