"""OpenAI Chat Completions: a :class:`ChatRequest` as the body of ``POST /v1/chat/completions``.

Cache-first (the default, see :mod:`~pioneer.providers._layout`): the stable text is one
leading system (or, by option, developer) message, the conversation's own system
messages (the history summary first among them) keep their place right after it, and
this turn's dynamic text is one more system message placed just before the current user
message, so it never sits before the history. Tools are sorted by name and their schemas
and call arguments sent with their keys in a stable order. With ``dynamic_placement =
"system"`` the leading message is the stable text, a blank line and the dynamic text, as
earlier versions sent it. Models before GPT-5.6 cache matching prompt prefixes on their
own; ``prompt_cache_key`` (derived from ``fingerprint_stable``) sends every request with
the same stable text to the same cache, and ``prompt_cache_retention`` is passed when set.
GPT-5.6 and later get planned breakpoints and ``prompt_cache_options`` instead
(:mod:`~pioneer.providers._breakpoints`). Tool calls and tool messages map one to one;
arguments are sent as the JSON text the API expects.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from ..errors import InputError, Problem
from ._breakpoints import (
    BREAKPOINT_KEY,
    Slot,
    breakpoint_mark,
    cache_option_fields,
    plan_slots,
    uses_breakpoints,
)
from ._layout import Layout, layout
from ._system import joined_prompt, prompt_cache_key
from .names import OPENAI_CHAT
from .request import ChatMessage, ChatRequest, clean, model_facing, not_finite_error
from .rules import OPENAI_CHAT_CALL_IDS, check_stop_count, map_call_ids, model_named

__all__ = ["SystemRole", "arguments_json", "to_openai_chat"]

SystemRole = Literal["system", "developer"]


@model_facing
def to_openai_chat(request: ChatRequest, *, system_role: SystemRole = "system") -> dict[str, Any]:
    """The Chat Completions body; ``system_role="developer"`` for models that want it.

    Refused: more stop sequences than the model takes (4); ``prompt_cache_retention`` for
    GPT-5.6 and later, ``prompt_cache_ttl`` for older models or other than ``30m``.
    Mapped: call ids longer than 40 characters (:func:`~pioneer.providers.rules.map_call_ids`).
    For GPT-5.6 and later, the breakpoints of :mod:`~pioneer.providers._breakpoints`.
    """
    check_stop_count(request, OPENAI_CHAT)
    request = map_call_ids(request, OPENAI_CHAT_CALL_IDS)
    plan = layout(request)
    parts = uses_breakpoints(request, OPENAI_CHAT)
    slots: list[Slot] = []
    prompt = plan.stable if plan.cache_first else joined_prompt(request)
    if prompt:
        slots.append(Slot(_text_message(system_role, prompt, parts), True, "stable"))
    # With breakpoints the dynamic text follows the current user message (see breakpoints).
    at = plan.turn_start + 1 if parts and plan.turn_start < len(request.messages) \
        else plan.turn_start
    dynamic: int | None = None
    for index, message in enumerate(request.messages):
        if plan.cache_first and index == at and plan.dynamic:
            dynamic = len(slots)
            slots.append(Slot(_text_message(system_role, plan.dynamic, parts), True))
        slots.append(_slot(index, message, system_role, plan, parts))
    if plan.cache_first and at >= len(request.messages) and plan.dynamic:
        dynamic = len(slots)
        slots.append(Slot(_text_message(system_role, plan.dynamic, parts), True))
    body: dict[str, Any] = {"model": request.model, "messages": [s.body for s in slots]}
    if plan.tools:
        body["tools"] = [
            {"type": "function", "function": {
                "name": tool.name,
                **({"description": tool.description} if tool.description else {}),
                "parameters": plan.schema(tool.parameters),
            }}
            for tool in plan.tools
        ]
        if request.tool_choice == "none":
            body["tool_choice"] = "none"
    marks = plan_slots(slots, head=body.get("tools", []), dynamic=dynamic, request=request,
                       provider=OPENAI_CHAT) if parts else []
    for index, mark in marks:
        slots[index].body["content"][-1][BREAKPOINT_KEY] = breakpoint_mark(
            long_ttl=request.cache.long_ttl and mark.prefix_part)
    key = prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    options = cache_option_fields(request, OPENAI_CHAT, marked=bool(marks))
    ttl = request.cache.prompt_cache_ttl
    if ttl is not None and ttl != "30m":
        raise InputError(Problem(
            f"{OPENAI_CHAT}: Chat Completions takes prompt_cache_options.ttl 30m only, for "
            f"{model_named(request.model, OPENAI_CHAT)} too (got {ttl!r}); the Responses API "
            "also takes 12h", path="cache → prompt_cache_ttl"))
    body.update(options)
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


def _text_message(role: str, text: str, parts: bool) -> dict[str, Any]:
    """A message of text: a list of one text part when breakpoints are used (a part is
    what carries one), else the plain string."""
    if parts and text:
        return {"role": role, "content": [{"type": "text", "text": text}]}
    return {"role": role, "content": text}


def _slot(index: int, message: ChatMessage, system_role: SystemRole, plan: Layout,
          parts: bool) -> Slot:
    caller = message.cache_breakpoint
    if message.tool_result is not None:
        text = clean(message.tool_result.content)
        sent = _text_message("tool", text, parts)
        return Slot({"role": "tool", "tool_call_id": message.tool_result.call_id,
                     "content": sent["content"]}, parts and bool(text), caller=caller)
    if message.role == "system":
        role = "leading" if plan.leading(index) else "message"
        return Slot(_text_message(system_role, clean(message.content).strip(), parts), parts,
                    role, caller)
    text = clean(message.content)
    if message.role == "user":
        role = "turn" if index == plan.turn_start and plan.cache_first else "message"
        return Slot(_text_message("user", text, parts), parts, role, caller)
    out: dict[str, Any] = {"role": "assistant", "content": text if text.strip() else None}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {
                "name": call.name,
                "arguments": arguments_json(call.arguments, plan, call_id=call.id),
            }}
            for call in message.tool_calls
        ]
    return Slot(out, False)
