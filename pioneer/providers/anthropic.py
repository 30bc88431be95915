"""Anthropic Messages: a :class:`ChatRequest` as the body of ``POST /v1/messages``.

Cache-first (the default, see :mod:`~pioneer.providers._layout`): ``tools`` sorted by
name, ``system`` the stable text then the system messages that open the conversation
(the summary right after the stable text), the conversation as user and assistant turns of content
blocks, and this turn's dynamic text as a text block of the current user turn, just
before the user's own text. Tool calls are ``tool_use`` blocks and their results
``tool_result`` blocks in the user turn right after, because consecutive messages of one
role merge into one turn, which is how Anthropic wants parallel results. The cache marks
are planned by :func:`~pioneer.providers._caching.plan_breakpoints` (end of history, last
block, stable part, a bridge within the 20-block lookback, summary; caller marks first;
none below the model's minimum).

With ``dynamic_placement = "system"`` the body is the one earlier versions sent: the
stable text, the dynamic text and the system messages as system blocks, tools in the
caller's order, marks on the stable block (or the last tool), the last message and the
caller's marks. The current API version takes no ``temperature`` or ``top_p``; they are
not sent.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterator
from typing import Any, cast

from ..tokens import default_counter
from ._caching import (
    MarkCandidate,
    MarkReason,
    allot_breakpoints,
    bridge_position,
    cache_control,
    minimum_cacheable_tokens,
    plan_breakpoints,
)
from ._layout import Layout, layout
from ._system import SystemPart, system_parts
from .names import ANTHROPIC
from .request import ChatMessage, ChatRequest, clean, model_facing
from .rules import (
    ANTHROPIC_CALL_IDS,
    check_not_empty,
    check_prefill,
    check_stop_text,
    map_call_ids,
)

__all__ = ["DEFAULT_MAX_TOKENS", "to_anthropic"]

#: ``max_tokens`` is required by the Messages API; used when the request leaves it unset.
DEFAULT_MAX_TOKENS = 4096

# A block's place: ("tool", i), ("system", i) or ("block", turn, position).
Place = tuple[Any, ...]


@model_facing
def to_anthropic(request: ChatRequest, *, cache_conversation: bool = True) -> dict[str, Any]:
    """The Messages API body; ``cache_conversation=False`` leaves the last block unmarked.

    Refused: a request with no user or assistant message; a stop sequence of whitespace
    only; a final assistant message (a prefill) for a model that refuses one (Claude 4.6
    and later: ``prefill_allowed`` in the model table). Mapped: call ids outside letters,
    digits, ``_`` and ``-`` (:func:`~pioneer.providers.rules.map_call_ids`), and a
    prefill loses its trailing whitespace, which the API refuses.
    """
    check_stop_text(request, ANTHROPIC)
    request = map_call_ids(request, ANTHROPIC_CALL_IDS)
    plan = layout(request)
    if not plan.cache_first:
        return _system_placement(request, cache_conversation)
    tools: list[dict[str, Any]] = [
        {"name": tool.name, **({"description": tool.description} if tool.description else {}),
         "input_schema": plan.schema(tool.parameters)}
        for tool in plan.tools
    ]
    system_blocks: list[dict[str, Any]] = []
    candidates: list[MarkCandidate] = []
    wanted: list[tuple[Place, MarkReason, int]] = []  # (place, reason, order) before counting
    if plan.stable:
        system_blocks.append({"type": "text", "text": plan.stable})
        wanted.append((("system", 0), "stable", 0))
    elif tools:
        wanted.append((("tool", len(tools) - 1), "tools", 0))
    for index, message in enumerate(request.messages):
        if message.role == "system" and plan.leading(index):
            system_blocks.append({"type": "text", "text": clean(message.content).strip()})
            place = ("system", len(system_blocks) - 1)
            if message.cache_breakpoint:
                wanted.append((place, "caller", index))
    if len(system_blocks) > (1 if plan.stable else 0):
        wanted.append((("system", len(system_blocks) - 1), "summary", 0))
    turns, last_block = _cache_first_turns(request.messages, plan)
    _prefill(request, turns)
    history = [i for i in last_block if i < plan.turn_start]
    if history:
        turn, position = last_block[history[-1]]
        wanted.append((("block", turn, position), "history", 0))
        bridge = _bridge(request.messages, history, last_block, turns,
                         len(tools) + len(system_blocks))
        if bridge is not None:
            wanted.append((bridge, "bridge", 0))
    if cache_conversation and turns and turns[-1]["content"]:
        wanted.append((("block", len(turns) - 1, len(turns[-1]["content"]) - 1), "last", 0))
    for index, (turn, position) in last_block.items():
        if request.messages[index].cache_breakpoint:
            wanted.append((("block", turn, position), "caller", index))

    minimum = minimum_cacheable_tokens(request.model)
    counts = _prefix_tokens(tools, system_blocks, turns, minimum)
    for place, reason, order in wanted:
        candidates.append(MarkCandidate(
            place=place, reason=reason,
            prefix_tokens=counts[place], prefix_part=place[0] != "block", order=order,
        ))
    for mark in plan_breakpoints(candidates, minimum=minimum):
        place = cast(Place, mark.place)
        _block_at(place, tools, system_blocks, turns)["cache_control"] = cache_control(
            long_ttl=request.cache.long_ttl and mark.prefix_part
        )
    return _body(request, system_blocks, turns, tools)


def _bridge(
    messages: list[ChatMessage], history: list[int], last_block: dict[int, tuple[int, int]],
    turns: list[dict[str, Any]], head: int,
) -> Place | None:
    """A mark that keeps the previous turn's entry within Anthropic's lookback, or None.

    The previous turn's request ended what this one sends again with the block before
    the newest history turn (the last user message of the history): its history mark,
    or its stable mark when it had no history. When this turn's history mark is more
    blocks past that one than the lookback reaches (that turn's tool rounds are kept), a
    bridge between them still reads it (:func:`~pioneer.providers._caching.bridge_position`).
    ``head`` is the number of tool and system blocks before the conversation.
    """
    users = [i for i in history if messages[i].role == "user"]
    if not users:
        return None
    positions = [(t, b) for t, turn in enumerate(turns) for b in range(len(turn["content"]))]
    index = {place: head + number for number, place in enumerate(positions)}
    earlier = [i for i in history if i < users[-1]]
    before = index[last_block[earlier[-1]]] if earlier else head - 1
    at = bridge_position(before, index[last_block[history[-1]]]) if before >= 0 else None
    if at is None or at < head:
        return None
    return ("block", *positions[at - head])


def _prefill(request: ChatRequest, turns: list[dict[str, Any]]) -> None:
    """A final assistant turn is a prefill the model continues: refused for a model that
    does not take one (Claude 4.6 and later), else its trailing whitespace is stripped,
    which the API refuses there.

    Its final block is text: a tool call at the end would be unanswered, which the
    request refuses already.
    """
    ends_with_assistant = bool(turns) and turns[-1]["role"] == "assistant"
    check_prefill(request, ANTHROPIC, ends_with_assistant)
    if ends_with_assistant:
        block = turns[-1]["content"][-1]
        if block.get("type") == "text":
            block["text"] = block["text"].rstrip()


def _body(
    request: ChatRequest, system: list[dict[str, Any]], turns: list[dict[str, Any]],
    tools: list[dict[str, Any]],
) -> dict[str, Any]:
    check_not_empty(ANTHROPIC, not turns)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.sampling.max_tokens or DEFAULT_MAX_TOKENS,
    }
    if system:
        body["system"] = system
    body["messages"] = turns
    if tools:
        body["tools"] = tools
        if request.tool_choice == "none":
            body["tool_choice"] = {"type": "none"}
    body.update(_sampling(request))
    return body


def _block_at(
    place: Place, tools: list[dict[str, Any]], system: list[dict[str, Any]],
    turns: list[dict[str, Any]],
) -> dict[str, Any]:
    if place[0] == "tool":
        return tools[place[1]]
    if place[0] == "system":
        return system[place[1]]
    block: dict[str, Any] = turns[place[1]]["content"][place[2]]
    return block


def _prefix_tokens(
    tools: list[dict[str, Any]], system: list[dict[str, Any]], turns: list[dict[str, Any]],
    minimum: int,
) -> dict[Place, int]:
    """Tokens from the start of the request through each block, in request order.

    Counting stops once the running total reaches ``minimum``: every later block is past
    it too, and a long history is never encoded just to learn that.
    """
    counter = default_counter()
    places: list[tuple[Place, dict[str, Any]]] = [
        *((("tool", i), tool) for i, tool in enumerate(tools)),
        *((("system", i), block) for i, block in enumerate(system)),
        *((("block", t, b), block) for t, turn in enumerate(turns)
          for b, block in enumerate(turn["content"])),
    ]
    counts: dict[Place, int] = {}
    total = 0
    for place, block in places:
        if total < minimum:
            text = block["text"] if block.get("type") == "text" else json.dumps(
                block, ensure_ascii=False)
            total += counter.count(text)
        counts[place] = total
    return counts


def _cache_first_turns(
    messages: list[ChatMessage], plan: Layout
) -> tuple[list[dict[str, Any]], dict[int, tuple[int, int]]]:
    """Turns with the dynamic text before the current user text, and each message's last block.

    The system messages that open the conversation (the summary) went to ``system``; a
    later one (a retry note between tool rounds, in this turn or an earlier one) stays in
    its place as user text, so it never moves what comes before it.
    """
    turns: list[dict[str, Any]] = []
    last_block: dict[int, tuple[int, int]] = {}

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not turns or turns[-1]["role"] != role:
            turns.append({"role": role, "content": []})
        turns[-1]["content"].extend(blocks)

    for index, message in enumerate(messages):
        if index == plan.turn_start and plan.dynamic:
            add("user", [{"type": "text", "text": plan.dynamic}])
        if message.role == "system":
            if plan.leading(index):
                continue
            blocks = [{"type": "text", "text": clean(message.content).strip()}]
            role = "user"
        else:
            blocks = _blocks(message, plan)
            role = "assistant" if message.role == "assistant" else "user"
        add(role, blocks)
        last_block[index] = (len(turns) - 1, len(turns[-1]["content"]) - 1)
    if plan.turn_start == len(messages) and plan.dynamic:
        add("user", [{"type": "text", "text": plan.dynamic}])
    return turns, last_block


def _system_placement(request: ChatRequest, cache_conversation: bool) -> dict[str, Any]:
    """The body earlier versions sent (``dynamic_placement = "system"``)."""
    system = system_parts(request)
    turns, last_block = _turns(request.messages)
    _prefill(request, turns)
    tools: list[dict[str, Any]] = [
        {"name": tool.name, **({"description": tool.description} if tool.description else {}),
         "input_schema": tool.parameters}
        for tool in request.tools
    ]
    granted = allot_breakpoints(_wanted(request, system, cache_conversation))
    long_ttl = request.cache.long_ttl

    system_blocks: list[dict[str, Any]] = []
    for part in system:
        block: dict[str, Any] = {"type": "text", "text": part.text}
        if _key(part) in granted:
            block["cache_control"] = cache_control(long_ttl=long_ttl)
        system_blocks.append(block)
    for index, (turn, position) in last_block.items():
        if ("message", index) in granted and request.messages[index].role != "system":
            turns[turn]["content"][position]["cache_control"] = cache_control()
    if tools and ("tools",) in granted:
        tools[-1]["cache_control"] = cache_control(long_ttl=long_ttl)
    return _body(request, system_blocks, turns, tools)


def _key(part: SystemPart) -> Hashable:
    return ("message", part.index) if part.kind == "message" else (part.kind,)


def _wanted(
    request: ChatRequest, system: list[SystemPart], conversation: bool
) -> Iterator[Hashable]:
    """Breakpoint places, most valuable first."""
    if any(part.kind == "stable" for part in system):
        yield ("stable",)
    elif request.tools:
        yield ("tools",)
    if conversation and request.messages:
        yield ("message", len(request.messages) - 1)
    for index in reversed(range(len(request.messages))):
        if request.messages[index].cache_breakpoint:
            yield ("message", index)


def _turns(
    messages: list[ChatMessage],
) -> tuple[list[dict[str, Any]], dict[int, tuple[int, int]]]:
    """User/assistant turns, and for each message the (turn, block) of its last block."""
    turns: list[dict[str, Any]] = []
    last_block: dict[int, tuple[int, int]] = {}
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if not turns or turns[-1]["role"] != role:
            turns.append({"role": role, "content": []})
        turns[-1]["content"].extend(_blocks(message, None))
        last_block[index] = (len(turns) - 1, len(turns[-1]["content"]) - 1)
    return turns, last_block


def _blocks(message: ChatMessage, plan: Layout | None) -> list[dict[str, Any]]:
    if message.tool_result is not None:
        result = message.tool_result
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
        if result.content:
            block["content"] = clean(result.content)
        if result.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    text = clean(message.content)
    if text.strip():
        blocks.append({"type": "text", "text": text})
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name,
         "input": plan.schema(call.arguments) if plan else call.arguments}
        for call in message.tool_calls
    ]
    return blocks


def _sampling(request: ChatRequest) -> dict[str, Any]:
    # The current Messages API version refuses temperature and top_p outright, so they
    # are left out rather than turning a provider-neutral request into a 400.
    return {"stop_sequences": list(request.sampling.stop)} if request.sampling.stop else {}
