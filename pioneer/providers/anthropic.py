"""Anthropic Messages: a :class:`ChatRequest` as the body of ``POST /v1/messages``.

``system`` is a list of text blocks: the stable text, the dynamic text, then every system
message (the history summary among them). The conversation becomes user and assistant
turns of content blocks; tool calls are ``tool_use`` blocks and their results
``tool_result`` blocks in the user turn right after, because consecutive messages of one
role merge into one turn, which is how Anthropic wants parallel results. Cache
breakpoints are requested most valuable first and granted by
:func:`~pioneer.providers.caching.allot_breakpoints`: the stable block (or, with no
stable text, the last tool), the last message, so the next tool round reads the whole
conversation from cache, then messages the caller marked, newest first. The current API
version takes no ``temperature`` or ``top_p``; they are not sent.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from .caching import allot_breakpoints, cache_control
from .request import ChatMessage, ChatRequest, clean
from .system import SystemPart, system_parts

__all__ = ["DEFAULT_MAX_TOKENS", "to_anthropic"]

#: ``max_tokens`` is required by the Messages API; used when the request leaves it unset.
DEFAULT_MAX_TOKENS = 4096


def to_anthropic(request: ChatRequest, *, cache_conversation: bool = True) -> dict[str, Any]:
    """The Messages API body; ``cache_conversation=False`` leaves the last message unmarked."""
    system = system_parts(request)
    turns, last_block = _turns(request.messages)
    tools: list[dict[str, Any]] = [
        {"name": tool.name, **({"description": tool.description} if tool.description else {}),
         "input_schema": tool.parameters}
        for tool in request.tools
    ]
    granted = allot_breakpoints(_wanted(request, system, cache_conversation))

    system_blocks: list[dict[str, Any]] = []
    for part in system:
        block: dict[str, Any] = {"type": "text", "text": part.text}
        if _key(part) in granted:
            block["cache_control"] = cache_control()
        system_blocks.append(block)
    for index, (turn, position) in last_block.items():
        if ("message", index) in granted:
            turns[turn]["content"][position]["cache_control"] = cache_control()
    if tools and ("tools",) in granted:
        tools[-1]["cache_control"] = cache_control()

    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.sampling.max_tokens or DEFAULT_MAX_TOKENS,
    }
    if system_blocks:
        body["system"] = system_blocks
    body["messages"] = turns
    if tools:
        body["tools"] = tools
    body.update(_sampling(request))
    return body


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
        turns[-1]["content"].extend(_blocks(message))
        last_block[index] = (len(turns) - 1, len(turns[-1]["content"]) - 1)
    return turns, last_block


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
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
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    ]
    return blocks


def _sampling(request: ChatRequest) -> dict[str, Any]:
    # The current Messages API version refuses temperature and top_p outright, so they
    # are left out rather than turning a provider-neutral request into a 400.
    return {"stop_sequences": list(request.sampling.stop)} if request.sampling.stop else {}
