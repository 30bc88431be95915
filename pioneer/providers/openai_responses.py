"""OpenAI Responses: a :class:`ChatRequest` as the body of ``POST /v1/responses``.

Cache-first (the default, see :mod:`~pioneer.providers.layout`): ``instructions`` is the
stable text; the conversation becomes ``input`` items, its system messages (the history
summary first) in their place as system or, by option, developer messages, and this
turn's dynamic text one more such message just before the current user message. With
``dynamic_placement = "system"`` the instructions are the stable text, a blank line and
the dynamic text, as earlier versions sent them. ``prompt_cache_key`` is derived from
``fingerprint_stable`` as for Chat Completions and ``prompt_cache_retention`` passed when
set. ``store`` is sent as false unless the request asks to store (the whole conversation
is sent on every round, so nothing needs keeping server-side); the ``system`` placement
sends it only when asked. Each tool call is a ``function_call`` item and each result a
``function_call_output`` item. Tools are function tools with ``strict``
off, because a tool's JSON Schema need not follow the strict-mode subset. The Responses
API has no stop sequences and no error flag on tool output: a request with stop
sequences is refused rather than sent without them.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError, Problem
from .layout import Layout, layout
from .openai_chat import SystemRole, arguments_json
from .request import ChatMessage, ChatRequest, clean, model_facing
from .system import joined_prompt, prompt_cache_key

__all__ = ["to_openai_responses"]


@model_facing
def to_openai_responses(
    request: ChatRequest, *, system_role: SystemRole = "system"
) -> dict[str, Any]:
    """The Responses body; ``system_role`` is the role of system messages kept in ``input``."""
    sampling = request.sampling
    if sampling.stop:
        raise InputError(Problem(
            "openai-responses has no stop sequences; leave sampling.stop empty",
            path="sampling → stop",
        ))
    plan = layout(request)
    body: dict[str, Any] = {"model": request.model}
    prompt = plan.stable if plan.cache_first else joined_prompt(request)
    if prompt:
        body["instructions"] = prompt
    items: list[dict[str, Any]] = []
    for index, message in enumerate(request.messages):
        if plan.cache_first and index == plan.turn_start and plan.dynamic:
            items.append({"role": system_role, "content": plan.dynamic})
        items += _items(message, system_role, plan)
    if plan.cache_first and plan.turn_start == len(request.messages) and plan.dynamic:
        items.append({"role": system_role, "content": plan.dynamic})
    body["input"] = items
    if plan.tools:
        body["tools"] = [
            {"type": "function", "name": tool.name,
             **({"description": tool.description} if tool.description else {}),
             "parameters": plan.schema(tool.parameters), "strict": False}
            for tool in plan.tools
        ]
    key = prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    cache = request.cache
    if cache.prompt_cache_retention is not None:
        body["prompt_cache_retention"] = cache.prompt_cache_retention
    if cache.store is not None or plan.cache_first:
        body["store"] = bool(cache.store)
    if sampling.max_tokens is not None:
        body["max_output_tokens"] = sampling.max_tokens
    if sampling.temperature is not None:
        body["temperature"] = sampling.temperature
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    return body


def _items(message: ChatMessage, system_role: SystemRole, plan: Layout) -> list[dict[str, Any]]:
    if message.tool_result is not None:
        return [{"type": "function_call_output", "call_id": message.tool_result.call_id,
                 "output": clean(message.tool_result.content)}]
    if message.role == "system":
        return [{"role": system_role, "content": clean(message.content).strip()}]
    items: list[dict[str, Any]] = []
    text = clean(message.content)
    if text.strip():
        items.append({"role": message.role, "content": text})
    items += [
        {"type": "function_call", "call_id": call.id, "name": call.name,
         "arguments": arguments_json(call.arguments, plan, call_id=call.id)}
        for call in message.tool_calls
    ]
    return items
