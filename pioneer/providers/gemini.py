"""Gemini generateContent: a :class:`ChatRequest` as the body of ``models/{model}:generateContent``.

Cache-first (the default, see :mod:`~pioneer.providers._layout`): ``systemInstruction``
holds one text part for the stable text and one for each system message that opens the
conversation (the summary), so Gemini's implicit prefix cache sees the stable part first;
this turn's dynamic text is a text part of the current user turn, just before the user's
own text, and a later system message (a note between tool rounds) stays in its place as
a user text part, on this turn and the next.
Tools are sorted by name. With ``dynamic_placement = "system"`` the dynamic text is a
part of ``systemInstruction`` after the stable text, as earlier versions sent it.
``contents`` uses the ``user`` and
``model`` roles: tool calls are ``functionCall`` parts of the model turn (with the
call's ``thoughtSignature`` when it has one), their results ``functionResponse`` parts
of the next user turn (``{"output": ...}``, or ``{"error": ...}`` when the tool failed).
Consecutive messages of one role merge into one turn, except that function responses
keep a content of their own. The model is not part of the body; it names the endpoint
(:func:`endpoint`).

Refused: a request with no user or assistant message, a request whose last turn is the
model's (Gemini answers a user turn or function responses), more than 5 stop sequences.
Mapped: a conversation opening
with a function call turn gets a short user turn first (:data:`LEAD_TEXT`), and for
Gemini 3 and later a function call turn without a signature gets Google's placeholder
(:data:`PLACEHOLDER_SIGNATURE`) on its first call. Why is told in docs/providers.md,
"What each provider refuses and what is mapped".
"""

from __future__ import annotations

import re
from typing import Any

from ._layout import Layout, layout
from ._system import system_parts
from .names import GEMINI
from .request import ChatMessage, ChatRequest, clean, model_facing
from .rules import check_not_empty, check_prefill, check_stop_count

__all__ = [
    "LEAD_TEXT",
    "PLACEHOLDER_SIGNATURE",
    "endpoint",
    "needs_thought_signatures",
    "to_gemini",
]

#: The user text put before a conversation that opens with a function call turn.
LEAD_TEXT = "(The conversation continues from earlier turns.)"
#: The value Google documents for a Gemini 3 function call that has no signature of its
#: own (a trace written by another model, or one whose signature was not kept).
PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"


def endpoint(request: ChatRequest) -> str:
    """The method path the body is posted to, relative to the API version."""
    return f"models/{request.model}:generateContent"


@model_facing
def to_gemini(request: ChatRequest) -> dict[str, Any]:
    """The generateContent body.

    Refused: a request with no user or assistant message, one that ends with a model
    turn, more stop sequences than the model takes (5). Mapped: see the module.
    """
    check_stop_count(request, GEMINI)
    plan = layout(request)
    body: dict[str, Any] = {}
    if plan.cache_first:
        texts = [plan.stable] if plan.stable else []
        texts += [clean(m.content).strip() for i, m in enumerate(request.messages)
                  if m.role == "system" and plan.leading(i)]
        parts = [{"text": text} for text in texts]
    else:
        parts = [{"text": part.text} for part in system_parts(request)]
    if parts:
        body["systemInstruction"] = {"parts": parts}
    names = request.tool_call_names()
    contents: list[dict[str, Any]] = []

    def add(role: str, new: list[dict[str, Any]]) -> None:
        # Function responses travel in a content of their own: text after them (the next
        # user message, the dynamic text) starts the next user content.
        if (not contents or contents[-1]["role"] != role
                or _responses(contents[-1]) != _responses({"parts": new})):
            contents.append({"role": role, "parts": []})
        contents[-1]["parts"].extend(new)

    dynamic = [{"text": plan.dynamic}] if plan.cache_first and plan.dynamic else []
    for index, message in enumerate(request.messages):
        if index == plan.turn_start and dynamic:
            add("user", dynamic)
        if message.role == "system":
            if plan.cache_first and not plan.leading(index):
                add("user", [{"text": clean(message.content).strip()}])
            continue
        add("model" if message.role == "assistant" else "user", _parts(message, names, plan))
    if plan.turn_start == len(request.messages) and dynamic:
        add("user", dynamic)
    check_not_empty(GEMINI, not contents)
    check_prefill(request, GEMINI, bool(contents) and contents[-1]["role"] == "model",
                  model_turn=True)
    if contents and contents[0]["role"] == "model" and _calls(contents[0]):
        # A function call turn must follow a user turn: a history that opens with one
        # (its summary went to systemInstruction) gets a short user turn before it.
        contents.insert(0, {"role": "user", "parts": [{"text": LEAD_TEXT}]})
    if needs_thought_signatures(request.model):
        for content in contents:
            calls = _calls(content)
            if calls and "thoughtSignature" not in calls[0]:
                calls[0]["thoughtSignature"] = PLACEHOLDER_SIGNATURE
    body["contents"] = contents
    if plan.tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": tool.name,
             **({"description": tool.description} if tool.description else {}),
             "parametersJsonSchema": plan.schema(tool.parameters)}
            for tool in plan.tools
        ]}]
        if request.tool_choice == "none":
            body["toolConfig"] = {"functionCallingConfig": {"mode": "NONE"}}
    config = _generation_config(request)
    if config:
        body["generationConfig"] = config
    return body


def _parts(message: ChatMessage, names: dict[str, str], plan: Layout) -> list[dict[str, Any]]:
    if message.tool_result is not None:
        result = message.tool_result
        key = "error" if result.is_error else "output"
        return [{"functionResponse": {
            "id": result.call_id,
            "name": names[result.call_id],
            "response": {key: clean(result.content)},
        }}]
    parts: list[dict[str, Any]] = []
    text = clean(message.content)
    if text.strip():
        parts.append({"text": text})
    parts += [
        {"functionCall": {"id": call.id, "name": call.name, "args": plan.schema(call.arguments)},
         **({"thoughtSignature": call.thought_signature} if call.thought_signature else {})}
        for call in message.tool_calls
    ]
    return parts


def _responses(content: dict[str, Any]) -> bool:
    """Whether a content holds function responses (then it holds nothing else)."""
    return any("functionResponse" in part for part in content["parts"])


def _calls(content: dict[str, Any]) -> list[dict[str, Any]]:
    """The function call parts of a content."""
    return [part for part in content["parts"] if "functionCall" in part]


def needs_thought_signatures(model: str) -> bool:
    """Whether the model refuses a function call turn without a thought signature (Gemini 3+)."""
    found = re.search(r"gemini-(\d+)", model)
    return found is not None and int(found.group(1)) >= 3


def _generation_config(request: ChatRequest) -> dict[str, Any]:
    sampling = request.sampling
    config: dict[str, Any] = {}
    if sampling.max_tokens is not None:
        config["maxOutputTokens"] = sampling.max_tokens
    if sampling.temperature is not None:
        config["temperature"] = sampling.temperature
    if sampling.top_p is not None:
        config["topP"] = sampling.top_p
    if sampling.stop:
        config["stopSequences"] = list(sampling.stop)
    return config
