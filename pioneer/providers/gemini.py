"""Gemini generateContent: a :class:`ChatRequest` as the body of ``models/{model}:generateContent``.

``systemInstruction`` holds one text part each for the stable text, the dynamic text and
every system message (the history summary among them), in that order, so Gemini's
implicit prefix cache sees the stable part first. ``contents`` uses the ``user`` and
``model`` roles: tool calls are ``functionCall`` parts of the model turn, their results
``functionResponse`` parts of the next user turn (``{"output": ...}``, or
``{"error": ...}`` when the tool failed). Consecutive messages of one role merge into one
turn. The model is not part of the body; it names the endpoint (:func:`endpoint`).
"""

from __future__ import annotations

from typing import Any

from .request import ChatMessage, ChatRequest, clean
from .system import system_parts

__all__ = ["endpoint", "to_gemini"]


def endpoint(request: ChatRequest) -> str:
    """The method path the body is posted to, relative to the API version."""
    return f"models/{request.model}:generateContent"


def to_gemini(request: ChatRequest) -> dict[str, Any]:
    """The generateContent body."""
    body: dict[str, Any] = {}
    parts = [{"text": part.text} for part in system_parts(request)]
    if parts:
        body["systemInstruction"] = {"parts": parts}
    names = request.tool_call_names()
    contents: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        if not contents or contents[-1]["role"] != role:
            contents.append({"role": role, "parts": []})
        contents[-1]["parts"].extend(_parts(message, names))
    body["contents"] = contents
    if request.tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": tool.name,
             **({"description": tool.description} if tool.description else {}),
             "parametersJsonSchema": tool.parameters}
            for tool in request.tools
        ]}]
    config = _generation_config(request)
    if config:
        body["generationConfig"] = config
    return body


def _parts(message: ChatMessage, names: dict[str, str]) -> list[dict[str, Any]]:
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
        {"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}
        for call in message.tool_calls
    ]
    return parts


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
