"""A built body's blocks in cache order, per API: what a cache plan walks.

Each API's function takes the body its adapter built and gives (the prefix blocks: tools
and system content, the conversation blocks), each a :class:`BodyBlock` with a label
naming where it sits in the body and whether it carries a cache mark. The cache report
(:mod:`pioneer.audit.cache_report`) asks the API's object for its function
(:attr:`~pioneer.providers.api.ProviderApi.body_blocks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._breakpoints import BREAKPOINT_KEY

__all__ = [
    "BodyBlock",
    "BodyBlocks",
    "anthropic_blocks",
    "gemini_blocks",
    "openai_chat_blocks",
    "openai_responses_blocks",
]


@dataclass(frozen=True, slots=True)
class BodyBlock:
    """One block of a body: a tool, a piece of the system prompt or a message part."""

    kind: Literal["tools", "system", "message"]
    label: str
    content: Any
    marked: bool = False


#: (prefix blocks: tools and system content, conversation blocks), in cache order.
BodyBlocks = tuple[list[BodyBlock], list[BodyBlock]]


def anthropic_blocks(body: Mapping[str, Any]) -> BodyBlocks:
    """Tools, system blocks, then each message's content blocks; marks are
    ``cache_control``."""
    head = [BodyBlock("tools", f"tool {tool.get('name')}", tool, "cache_control" in tool)
            for tool in body.get("tools", [])]
    head += [BodyBlock("system", f"system[{index}]", block, "cache_control" in block)
             for index, block in enumerate(body.get("system", []) or [])]
    conversation = [
        BodyBlock("message", f"messages[{index}] ({turn.get('role')}) block {position}",
                  block, "cache_control" in block)
        for index, turn in enumerate(body.get("messages", []))
        for position, block in enumerate(turn.get("content", []))]
    return head, conversation


def openai_chat_blocks(body: Mapping[str, Any]) -> BodyBlocks:
    """Tools, then each message (the system prompt is a message)."""
    head = [BodyBlock("tools", f"tool {tool['function'].get('name')}", tool)
            for tool in body.get("tools", [])]
    conversation = [
        BodyBlock("message", f"messages[{index}] ({message.get('role')})", message,
                  _breakpoint(message.get("content")))
        for index, message in enumerate(body.get("messages", []))]
    return head, conversation


def openai_responses_blocks(body: Mapping[str, Any]) -> BodyBlocks:
    """Tools, the instructions, then each input item."""
    head = [BodyBlock("tools", f"tool {tool.get('name')}", tool)
            for tool in body.get("tools", [])]
    if "instructions" in body:
        head.append(BodyBlock("system", "instructions", body["instructions"]))
    conversation = []
    for index, item in enumerate(body.get("input", [])):
        name = item.get("role") or item.get("type")
        parts = item.get("output") if item.get("type") == "function_call_output" \
            else item.get("content")
        conversation.append(BodyBlock("message", f"input[{index}] ({name})", item,
                                      _breakpoint(parts)))
    return head, conversation


def gemini_blocks(body: Mapping[str, Any]) -> BodyBlocks:
    """Function declarations, system instruction parts, then each content's parts."""
    head = [BodyBlock("tools", f"tool {declaration.get('name')}", declaration)
            for tool in body.get("tools", [])
            for declaration in tool.get("functionDeclarations", [])]
    parts = body.get("systemInstruction", {}).get("parts", [])
    head += [BodyBlock("system", f"systemInstruction.parts[{index}]", part)
             for index, part in enumerate(parts)]
    conversation = [
        BodyBlock("message", f"contents[{index}] ({content.get('role')}) part {position}", part)
        for index, content in enumerate(body.get("contents", []))
        for position, part in enumerate(content.get("parts", []))]
    return head, conversation


def _breakpoint(parts: Any) -> bool:
    """Whether an OpenAI message's content parts carry a ``prompt_cache_breakpoint``."""
    return isinstance(parts, list) and any(
        isinstance(part, Mapping) and BREAKPOINT_KEY in part for part in parts)
