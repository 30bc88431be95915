"""OpenAI Responses: a :class:`ChatRequest` as the body of ``POST /v1/responses``.

The compiled prompt becomes ``instructions``: the stable text, a blank line, the dynamic
text, with the boundary marker gone; ``prompt_cache_key`` is derived from
``fingerprint_stable`` as for Chat Completions. The conversation becomes ``input`` items:
messages by role (system messages such as the history summary keep their place, as
system or, by option, developer messages), each tool call a ``function_call`` item and
each result a ``function_call_output`` item. Tools are function tools with ``strict``
off, because a tool's JSON Schema need not follow the strict-mode subset. The Responses
API has no stop sequences and no error flag on tool output: a request with stop
sequences is refused rather than sent without them.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import InputError, Problem
from .openai_chat import SystemRole
from .request import ChatMessage, ChatRequest, clean
from .system import joined_prompt, prompt_cache_key

__all__ = ["to_openai_responses"]


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
    body: dict[str, Any] = {"model": request.model}
    prompt = joined_prompt(request)
    if prompt:
        body["instructions"] = prompt
    body["input"] = [item for message in request.messages for item in _items(message, system_role)]
    if request.tools:
        body["tools"] = [
            {"type": "function", "name": tool.name,
             **({"description": tool.description} if tool.description else {}),
             "parameters": tool.parameters, "strict": False}
            for tool in request.tools
        ]
    key = prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    if sampling.max_tokens is not None:
        body["max_output_tokens"] = sampling.max_tokens
    if sampling.temperature is not None:
        body["temperature"] = sampling.temperature
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    return body


def _items(message: ChatMessage, system_role: SystemRole) -> list[dict[str, Any]]:
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
         "arguments": json.dumps(call.arguments, ensure_ascii=False)}
        for call in message.tool_calls
    ]
    return items
