"""OpenAI GPT-5.6 and later: explicit cache breakpoints, planned as Anthropic's marks are.

For these models (``breakpoint_style = "prompt_cache_breakpoint"`` in the model table) a
request caches a prefix exactly where a content part carries ``prompt_cache_breakpoint``
(no rounding, no lookback limit, at most four written a request), and otherwise only at
one implicit breakpoint the API places near the latest user or tool message. Under the
cache-first layout no earlier request ends where a new turn's first request stops sharing
it, so without explicit marks a turn's first request reads nothing. Both OpenAI adapters
therefore, for these models:

* send the content of every message that can carry a breakpoint (system, developer, user
  and tool messages; never an assistant's, whose output parts take none) as a list of
  text parts, marked or not, so a message is the same bytes on every turn;
* put this turn's dynamic text right after the current user message, so the part the
  next turn sends again ends with a message that takes a breakpoint;
* mark, through :func:`~pioneer.providers._caching.plan_breakpoints`, the caller's marks,
  the end of that part (the current user message), the last message, the stable text
  and the summary: at most four, none below the model's minimum;
* send ``prompt_cache_options`` with ``mode: explicit`` (only the planned breakpoints are
  written) and the request's ``prompt_cache_ttl``.

docs/providers.md, "OpenAI breakpoints (GPT-5.6 and later)", has the rules and sources.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..errors import InputError, Problem
from ..tokens import counter_for
from ._caching import MAX_CACHE_BREAKPOINTS, MarkCandidate, MarkReason, plan_breakpoints
from .models import model_facts
from .request import ChatRequest
from .rules import model_named

__all__ = [
    "BREAKPOINT_KEY",
    "Slot",
    "breakpoint_mark",
    "cache_option_fields",
    "plan_slots",
    "uses_breakpoints",
]

#: The key of a content part that marks the end of a cacheable prefix.
BREAKPOINT_KEY = "prompt_cache_breakpoint"


def uses_breakpoints(request: ChatRequest, provider: str) -> bool:
    """Whether the request is laid out and marked for explicit breakpoints: the
    cache-first layout and a model whose row says ``prompt_cache_breakpoint``."""
    return request.cache.dynamic_placement == "cache-first" and model_facts(
        request.model, provider).breakpoint_style == "prompt_cache_breakpoint"


def breakpoint_mark(*, long_ttl: bool = False) -> dict[str, str]:
    """The mark itself (a fresh dict each time); ``long_ttl``: it lives 12 hours."""
    return {"mode": "explicit", "ttl": "12h"} if long_ttl else {"mode": "explicit"}


def cache_option_fields(request: ChatRequest, provider: str, *, marked: bool) -> dict[str, Any]:
    """``prompt_cache_options`` and ``prompt_cache_retention`` as the model takes them.

    GPT-5.6 and later take ``prompt_cache_options`` (``mode: explicit`` when the request
    carries breakpoints, ``ttl`` from ``cache.prompt_cache_ttl``) and refuse the
    deprecated ``prompt_cache_retention``; older models take only the retention, with a
    value among the ``ttls`` of their row of the model table (gpt-5.5: ``24h`` only).
    """
    cache = request.cache
    facts = model_facts(request.model, provider)
    if facts.breakpoint_style != "prompt_cache_breakpoint":
        if cache.prompt_cache_ttl is not None:
            raise InputError(Problem(
                f"{provider}: {model_named(request.model, provider)} takes no "
                "prompt_cache_options (GPT-5.6 and later do); leave cache.prompt_cache_ttl "
                "unset or use cache.prompt_cache_retention", path="cache → prompt_cache_ttl"))
        retention = cache.prompt_cache_retention
        if retention is not None and facts.ttls and retention not in facts.ttls:
            raise InputError(Problem(
                f"{provider}: {model_named(request.model, provider)} takes "
                f"prompt_cache_retention {' or '.join(facts.ttls)} only (got {retention!r})",
                path="cache → prompt_cache_retention"))
        return {"prompt_cache_retention": retention} if retention is not None else {}
    if cache.prompt_cache_retention is not None:
        raise InputError(Problem(
            f"{provider}: prompt_cache_retention is deprecated for "
            f"{model_named(request.model, provider)} (GPT-5.6 and later); set "
            "cache.prompt_cache_ttl, sent as prompt_cache_options.ttl",
            path="cache → prompt_cache_retention"))
    ttl = cache.prompt_cache_ttl
    options: dict[str, str] = {}
    if marked:
        options["mode"] = "explicit"
    if ttl is not None:
        options["ttl"] = ttl
    return {"prompt_cache_options": options} if options else {}


@dataclass(frozen=True, slots=True)
class Slot:
    """One message of an OpenAI body in cache order, as the planner sees it."""

    #: The message (or item) as it will be sent; a mark is added to it in place.
    body: dict[str, Any]
    #: It can carry a breakpoint (not an assistant message, not an empty text).
    markable: bool
    #: What it is, for the planner: the stable text, a leading system message (the
    #: summary), the current user message, or any other message.
    role: str = "message"
    #: The caller asked for a mark here (``ChatMessage.cache_breakpoint``).
    caller: bool = False


def plan_slots(
    slots: Sequence[Slot], *, head: Sequence[dict[str, Any]], dynamic: int | None,
    request: ChatRequest, provider: str,
) -> list[tuple[int, MarkCandidate]]:
    """The slots to mark (index, the candidate that won), at most four, none below the
    model's minimum; ``head`` holds the blocks before the first slot (the tools) and
    ``dynamic`` the index of the dynamic text's slot, if any."""
    facts = model_facts(request.model, provider)
    minimum = facts.min_cacheable_tokens
    # The minimum is in the model's tokens: counted with the tokenizer its row names
    # (o200k for these models), not cl100k, which counts other scripts far higher.
    counter = counter_for(facts.tokenizer)
    total = sum(counter.count(json.dumps(item, ensure_ascii=False)) for item in head)
    counts: list[int] = []
    for slot in slots:
        if total < minimum:
            total += counter.count(json.dumps(slot.body, ensure_ascii=False))
        counts.append(total)

    def back(index: int) -> int | None:
        """``index`` or the nearest markable slot before it."""
        while index >= 0 and not slots[index].markable:
            index -= 1
        return index if index >= 0 else None

    wanted: list[tuple[int | None, MarkReason, int]] = []
    turn = next((i for i, slot in enumerate(slots) if slot.role == "turn"), None)
    if turn is not None:
        wanted.append((back(turn), "history", 0))
    elif dynamic is not None:
        wanted.append((back(dynamic - 1), "history", 0))
    wanted.append((back(len(slots) - 1), "last", 0))
    stable = next((i for i, slot in enumerate(slots) if slot.role == "stable"), None)
    wanted.append((stable, "stable", 0))
    leading = [i for i, slot in enumerate(slots) if slot.role == "leading"]
    if leading:
        wanted.append((back(leading[-1]), "summary", 0))
    wanted += [(i, "caller", i) for i, slot in enumerate(slots) if slot.caller and slot.markable]
    candidates = [
        MarkCandidate(place=index, reason=reason, prefix_tokens=counts[index],
                      prefix_part=reason in ("stable", "summary"), order=order)
        for index, reason, order in wanted if index is not None
    ]
    return [(cast(int, mark.place), mark) for mark in
            plan_breakpoints(candidates, minimum=minimum, limit=MAX_CACHE_BREAKPOINTS)]
