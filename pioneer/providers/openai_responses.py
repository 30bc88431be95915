"""OpenAI Responses: a :class:`ChatRequest` as the body of ``POST /v1/responses``.

Cache-first (the default, see :mod:`~pioneer.providers._layout`): ``instructions`` is the
stable text; the conversation becomes ``input`` items, its system messages (the history
summary first) in their place as system or, by option, developer messages, and this
turn's dynamic text one more such message just before the current user message. With
``dynamic_placement = "system"`` the instructions are the stable text, a blank line and
the dynamic text, as earlier versions sent them. ``prompt_cache_key`` is derived from
``fingerprint_stable`` as for Chat Completions and ``prompt_cache_retention`` passed when
set; GPT-5.6 and later get planned breakpoints and ``prompt_cache_options`` instead, with
the stable text as the first input message (:mod:`~pioneer.providers._breakpoints`).
``store`` is sent as false unless the request asks to store (the whole conversation is
sent on every round, so nothing needs keeping server-side); the ``system`` placement
sends it only when asked. Each tool call is a ``function_call`` item and each result a
``function_call_output`` item. Tools are function tools with ``strict``
off, because a tool's JSON Schema need not follow the strict-mode subset. The Responses
API has no stop sequences and no error flag on tool output: a request with stop
sequences is refused rather than sent without them.
"""

from __future__ import annotations

from typing import Any

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
from .names import OPENAI_RESPONSES
from .openai_chat import SystemRole, arguments_json
from .request import ChatMessage, ChatRequest, clean, model_facing
from .rules import OPENAI_RESPONSES_CALL_IDS, map_call_ids

__all__ = ["to_openai_responses"]


@model_facing
def to_openai_responses(
    request: ChatRequest, *, system_role: SystemRole = "system"
) -> dict[str, Any]:
    """The Responses body; ``system_role`` is the role of system messages kept in ``input``.

    Refused: stop sequences; ``prompt_cache_retention`` for GPT-5.6 and later,
    ``prompt_cache_ttl`` for older models. Mapped: call ids longer than 64 characters.
    For GPT-5.6 and later, the breakpoints of :mod:`~pioneer.providers._breakpoints`, and
    the stable text as the first input message (``instructions`` takes no breakpoint).
    """
    sampling = request.sampling
    if sampling.stop:
        raise InputError(Problem(
            f"{OPENAI_RESPONSES} has no stop sequences; leave sampling.stop empty",
            path="sampling → stop",
        ))
    request = map_call_ids(request, OPENAI_RESPONSES_CALL_IDS)
    plan = layout(request)
    parts = uses_breakpoints(request, OPENAI_RESPONSES)
    body: dict[str, Any] = {"model": request.model}
    slots: list[Slot] = []
    prompt = plan.stable if plan.cache_first else joined_prompt(request)
    if prompt and parts:
        slots.append(Slot(_text_item(system_role, prompt, parts), True, "stable"))
    elif prompt:
        body["instructions"] = prompt
    # With breakpoints the dynamic text follows the current user message (see breakpoints).
    at = plan.turn_start + 1 if parts and plan.turn_start < len(request.messages) \
        else plan.turn_start
    dynamic: int | None = None
    for index, message in enumerate(request.messages):
        if plan.cache_first and index == at and plan.dynamic:
            dynamic = len(slots)
            slots.append(Slot(_text_item(system_role, plan.dynamic, parts), True))
        slots += _slots(index, message, system_role, plan, parts)
    if plan.cache_first and at >= len(request.messages) and plan.dynamic:
        dynamic = len(slots)
        slots.append(Slot(_text_item(system_role, plan.dynamic, parts), True))
    body["input"] = [slot.body for slot in slots]
    if plan.tools:
        body["tools"] = [
            {"type": "function", "name": tool.name,
             **({"description": tool.description} if tool.description else {}),
             "parameters": plan.schema(tool.parameters), "strict": False}
            for tool in plan.tools
        ]
        if request.tool_choice == "none":
            body["tool_choice"] = "none"
    marks = plan_slots(slots, head=body.get("tools", []), dynamic=dynamic, request=request,
                       provider=OPENAI_RESPONSES) if parts else []
    for index, mark in marks:
        item = slots[index].body
        content = item["output"] if item.get("type") == "function_call_output" else item["content"]
        content[-1][BREAKPOINT_KEY] = breakpoint_mark(
            long_ttl=request.cache.long_ttl and mark.prefix_part)
    key = prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    cache = request.cache
    body.update(cache_option_fields(request, OPENAI_RESPONSES, marked=bool(marks)))
    if cache.store is not None or plan.cache_first:
        body["store"] = bool(cache.store)
    if sampling.max_tokens is not None:
        body["max_output_tokens"] = sampling.max_tokens
    if sampling.temperature is not None:
        body["temperature"] = sampling.temperature
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    return body


def _text_item(role: str, text: str, parts: bool) -> dict[str, Any]:
    """An input message of text: a list of one ``input_text`` part when breakpoints are
    used (a part is what carries one), else the plain string."""
    if parts and text:
        return {"role": role, "content": [{"type": "input_text", "text": text}]}
    return {"role": role, "content": text}


def _slots(index: int, message: ChatMessage, system_role: SystemRole, plan: Layout,
           parts: bool) -> list[Slot]:
    caller = message.cache_breakpoint
    if message.tool_result is not None:
        text = clean(message.tool_result.content)
        output: Any = [{"type": "input_text", "text": text}] if parts and text else text
        return [Slot({"type": "function_call_output", "call_id": message.tool_result.call_id,
                      "output": output}, parts and bool(text), caller=caller)]
    if message.role == "system":
        role = "leading" if plan.leading(index) else "message"
        return [Slot(_text_item(system_role, clean(message.content).strip(), parts), parts,
                     role, caller)]
    slots: list[Slot] = []
    text = clean(message.content)
    if text.strip() and message.role == "user":
        role = "turn" if index == plan.turn_start and plan.cache_first else "message"
        slots.append(Slot(_text_item("user", text, parts), parts, role, caller))
    elif text.strip():
        slots.append(Slot({"role": message.role, "content": text}, False))
    slots += [
        Slot({"type": "function_call", "call_id": call.id, "name": call.name,
              "arguments": arguments_json(call.arguments, plan, call_id=call.id)}, False)
        for call in message.tool_calls
    ]
    return slots
