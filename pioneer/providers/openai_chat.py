"""OpenAI Chat Completions: a :class:`ChatRequest` as the body of ``POST /v1/chat/completions``.

Cache-first (the default, see :mod:`~pioneer.providers.layout`): the stable text is one
leading system (or, by option, developer) message, the conversation's own system
messages (the history summary first among them) keep their place right after it, and
this turn's dynamic text is one more system message placed just before the current user
message, so it never sits before the history. Tools are sorted by name and their schemas
and call arguments sent with their keys in a stable order. With ``dynamic_placement =
"system"`` the leading message is the stable text, a blank line and the dynamic text, as
earlier versions sent it. OpenAI caches matching prompt prefixes on its own;
``prompt_cache_key`` (derived from ``fingerprint_stable``) sends every request with the
same stable text to the same cache, and ``prompt_cache_retention`` is passed when set.
Tool calls and tool messages map one to one; arguments are sent as the JSON text the
API expects.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from .layout import Layout, layout
from .request import ChatMessage, ChatRequest, clean, model_facing, not_finite_error
from .rules import OPENAI_CHAT_CALL_IDS, OPENAI_CHAT_MAX_STOP, check_stop_count, map_call_ids
from .system import joined_prompt, prompt_cache_key

__all__ = ["SystemRole", "arguments_json", "to_openai_chat"]

SystemRole = Literal["system", "developer"]


@model_facing
def to_openai_chat(request: ChatRequest, *, system_role: SystemRole = "system") -> dict[str, Any]:
    """The Chat Completions body; ``system_role="developer"`` for models that want it.

    Refused: more than 4 stop sequences. Mapped: call ids longer than 40 characters
    (:func:`~pioneer.providers.rules.map_call_ids`).
    """
    check_stop_count(request, "openai-chat", OPENAI_CHAT_MAX_STOP)
    request = map_call_ids(request, OPENAI_CHAT_CALL_IDS)
    plan = layout(request)
    messages: list[dict[str, Any]] = []
    prompt = plan.stable if plan.cache_first else joined_prompt(request)
    if prompt:
        messages.append({"role": system_role, "content": prompt})
    for index, message in enumerate(request.messages):
        if plan.cache_first and index == plan.turn_start and plan.dynamic:
            messages.append({"role": system_role, "content": plan.dynamic})
        messages.append(_message(message, system_role, plan))
    if plan.cache_first and plan.turn_start == len(request.messages) and plan.dynamic:
        messages.append({"role": system_role, "content": plan.dynamic})
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if plan.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": tool.name,
                **({"description": tool.description} if tool.description else {}),
                "parameters": plan.schema(tool.parameters),
            }}
            for tool in plan.tools
        ]
    key = prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    if request.cache.prompt_cache_retention is not None:
        body["prompt_cache_retention"] = request.cache.prompt_cache_retention
    sampling = request.sampling
    if sampling.max_tokens is not None:
        body["max_completion_tokens"] = sampling.max_tokens
    if sampling.temperature is not None:
        body["temperature"] = sampling.temperature
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    return body


def arguments_json(arguments: dict[str, Any], plan: Layout, *, call_id: str = "") -> str:
    """Call arguments as the JSON text OpenAI expects (keys sorted when cache-first);
    NaN or an infinity in them is an InputError naming where."""
    try:
        return json.dumps(plan.schema(arguments), ensure_ascii=False, allow_nan=False)
    except ValueError:  # written into a string, the body's own check would not see it
        raise not_finite_error(arguments, f'tool call "{call_id}" → arguments') from None


def _message(message: ChatMessage, system_role: SystemRole, plan: Layout) -> dict[str, Any]:
    if message.tool_result is not None:
        return {"role": "tool", "tool_call_id": message.tool_result.call_id,
                "content": clean(message.tool_result.content)}
    if message.role == "system":
        return {"role": system_role, "content": clean(message.content).strip()}
    text = clean(message.content)
    if message.role == "user":
        return {"role": "user", "content": text}
    out: dict[str, Any] = {"role": "assistant", "content": text if text.strip() else None}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {
                "name": call.name,
                "arguments": arguments_json(call.arguments, plan, call_id=call.id),
            }}
            for call in message.tool_calls
        ]
    return out
