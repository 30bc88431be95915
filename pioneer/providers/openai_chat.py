"""OpenAI Chat Completions: a :class:`ChatRequest` as the body of ``POST /v1/chat/completions``.

The compiled prompt becomes one leading system (or, by option, developer) message: the
stable text, a blank line, the dynamic text, with the boundary marker gone. OpenAI caches
matching prompt prefixes on its own; ``prompt_cache_key`` (derived from
``fingerprint_stable``) sends every request with the same stable text to the same cache.
Other system messages, such as the history summary, keep their place in the conversation
with the same role. Tool calls and tool messages map one to one; arguments are sent as
the JSON text the API expects.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from .request import ChatMessage, ChatRequest, clean
from .system import joined_prompt, prompt_cache_key

__all__ = ["SystemRole", "to_openai_chat"]

SystemRole = Literal["system", "developer"]


def to_openai_chat(request: ChatRequest, *, system_role: SystemRole = "system") -> dict[str, Any]:
    """The Chat Completions body; ``system_role="developer"`` for models that want it."""
    messages: list[dict[str, Any]] = []
    prompt = joined_prompt(request)
    if prompt:
        messages.append({"role": system_role, "content": prompt})
    messages += [_message(message, system_role) for message in request.messages]
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": tool.name,
                **({"description": tool.description} if tool.description else {}),
                "parameters": tool.parameters,
            }}
            for tool in request.tools
        ]
    key = prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
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


def _message(message: ChatMessage, system_role: SystemRole) -> dict[str, Any]:
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
                "arguments": json.dumps(call.arguments, ensure_ascii=False),
            }}
            for call in message.tool_calls
        ]
    return out
