"""The cache-first layout: one request ordered by how rarely each piece changes.

Every provider caches a request's prefix, so a request is laid out as

    tools (by name) → stable text → history summary → history turns
      → this turn: dynamic text, the current user message, the turn's tool rounds

and a piece that changes on every turn (the dynamic text: a clock line, recalled memory,
a retry instruction) never sits before the history. :class:`Layout` is what every
adapter reads: where this turn begins, the stable and dynamic text, the tools in their
byte-stable order. With ``dynamic_placement = "system"`` the adapters send the bodies of
earlier versions instead (dynamic text in the system prompt, tools as given).
docs/providers.md says, per API, where each piece goes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .request import ChatMessage, ChatRequest, ToolSpec, clean

__all__ = ["Layout", "canonical_json", "layout", "turn_start"]


def turn_start(messages: Sequence[ChatMessage]) -> int:
    """Index of the message this turn begins with: the last user message.

    Everything before it is history, which the next turn sends again unchanged; the
    dynamic text goes right before it. With no user message at all the turn has no
    user text, and the dynamic text goes after the last message (``len(messages)``).
    """
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return len(messages)


def canonical_json(value: Any) -> Any:
    """``value`` with the keys of every JSON object in sorted order.

    The members of a schema's ``properties`` keep the author's order: the order a schema
    lists its properties in is the order a model tends to fill them in, which is a choice,
    not an accident of how a caller built the dict.
    """
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key in sorted(value, key=str):
            child = value[key]
            if key == "properties" and isinstance(child, Mapping):
                out[key] = {name: canonical_json(child[name]) for name in child}
            else:
                out[key] = canonical_json(child)
        return out
    if isinstance(value, list):
        return [canonical_json(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Layout:
    """What one request sends, in cache order, for any adapter to map."""

    #: True for the cache-first layout, False for the ``system`` placement.
    cache_first: bool
    #: The compiled stable text, cleaned and trimmed ("" when there is none).
    stable: str
    #: This turn's dynamic text, cleaned and trimmed ("" when there is none).
    dynamic: str
    #: Index of the first message of this turn (``len(messages)`` when it has no user text).
    turn_start: int
    #: The tools in the order they are sent.
    tools: tuple[ToolSpec, ...]
    #: Index of the first message that is not a system message: the system messages
    #: before it (the history summary) open the conversation.
    lead: int = 0

    def in_turn(self, index: int) -> bool:
        """Whether message ``index`` belongs to this turn rather than to the history."""
        return index >= self.turn_start

    def leading(self, index: int) -> bool:
        """Whether message ``index`` is one of the system messages that open the
        conversation (the summary), which APIs with a system part send there; a system
        message after the conversation began (a note between tool rounds) keeps its place,
        on this turn and on every later one, so it never moves what comes before it."""
        return index < self.lead

    def schema(self, value: dict[str, Any]) -> dict[str, Any]:
        """A tool schema or call arguments as sent: keys in stable order when cache-first."""
        return canonical_json(value) if self.cache_first else value


def layout(request: ChatRequest) -> Layout:
    """The layout of one request."""
    payload = request.compiled_prompt
    stable = clean(payload.stable_system_text).strip() if payload else ""
    dynamic = clean(payload.dynamic_system_text).strip() if payload else ""
    cache_first = request.cache.dynamic_placement == "cache-first"
    tools = tuple(request.tools)
    if cache_first and request.cache.tool_order == "by_name":
        tools = tuple(sorted(tools, key=lambda tool: tool.name))
    messages = request.messages
    lead = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    return Layout(cache_first, stable, dynamic, turn_start(messages), tools, lead)
