"""Provider replies read back: a response's JSON as one provider-neutral :class:`ModelReply`.

Each API's reader here (:func:`read_anthropic`, :func:`read_openai_chat`,
:func:`read_openai_responses`, :func:`read_gemini`; :func:`~pioneer.providers.read_response`
picks one through the API's object in :mod:`~pioneer.providers.api`) takes the response
the API sent: its JSON as a dict, or an official SDK response
object (or its ``model_dump()``). It gives the assistant message (the text, and every
tool call with its id, its parsed arguments and, on Gemini, the thought signature that
must go back with it), the usage in one set of terms
(:class:`~pioneer.providers.usage.ReportedUsage`) and why the model stopped, normalised
to one of :data:`STOP_REASONS`. docs/providers.md, "Reading a reply", has the mapping per
provider. A call that failed because the request was too long is read by
:func:`~pioneer.providers.read_context_error` (:mod:`.overflow`).

Replies are untrusted input: reasoning items are counted and skipped, a tool call whose
arguments are not a JSON object, or nest deeper than :data:`~pioneer.documents.MAX_DEPTH`
levels, is kept (with empty arguments) and its problem listed in
:attr:`ModelReply.argument_errors`, so the tool router answers it with an error result
and the model can try again; a call id longer than :data:`MAX_CALL_ID_CHARS` is replaced
by a short form derived from it (as Chat Completions' long ids are,
:func:`~pioneer.providers.rules.safe_call_id`); anything that is not the API's shape is a
:class:`~pioneer.errors.ProviderError` naming the path
(``choices[0].message.tool_calls[1].function.name: expected a string (got a number)``).
"""

from __future__ import annotations

import base64
import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..documents import MAX_DEPTH
from ..errors import Problem, ProviderError
from .overflow import ContextOverflow
from .request import TOOL_NAME_PATTERN, ChatMessage, ToolCall, clean
from .rules import CallIdRule, safe_call_id
from .usage import (
    ReportedUsage,
    anthropic_usage,
    gemini_usage,
    openai_chat_usage,
    openai_responses_usage,
)

__all__ = [
    "MAX_CALL_ID_CHARS",
    "STOP_REASONS",
    "ContextOverflow",
    "ModelReply",
    "StopReason",
    "claims_anthropic",
    "claims_gemini",
    "claims_openai_chat",
    "claims_openai_responses",
    "read_anthropic",
    "read_gemini",
    "read_openai_chat",
    "read_openai_responses",
    "response_json",
]

#: The longest tool-call id a reply's call keeps as sent; a longer one is replaced by a
#: 40-character form derived from it (the ids the APIs make are 20 to 50 characters).
MAX_CALL_ID_CHARS = 256
_LONG_CALL_IDS = CallIdRule("reply", max_length=MAX_CALL_ID_CHARS)

#: Why the model stopped, in one set of words for every provider.
StopReason = Literal["end_turn", "tool_calls", "max_tokens", "stop_sequence", "refusal", "other"]
STOP_REASONS: tuple[StopReason, ...] = (
    "end_turn", "tool_calls", "max_tokens", "stop_sequence", "refusal", "other",
)


class _Dumpable(Protocol):
    def model_dump(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One provider response, read back."""

    #: The assistant's message: its text and every tool call, in the order sent. ``None``
    #: when the reply holds neither (a refusal or a cut-off with no text): ``stop_reason``
    #: says why.
    message: ChatMessage | None
    #: The usage the provider reported (``None`` when the response carries none).
    usage: ReportedUsage | None
    stop_reason: StopReason
    #: The provider's own word for why it stopped, as sent (``None`` when it sent none).
    provider_stop_reason: str | None = None
    #: Reasoning items (thinking blocks, reasoning output items, thought parts) skipped.
    reasoning_items: int = 0
    #: Call id → why its arguments were not used (not JSON, or not a JSON object).
    argument_errors: Mapping[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The assistant text ("" when there is none)."""
        return self.message.content if self.message is not None else ""

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls, in order."""
        return tuple(self.message.tool_calls) if self.message is not None else ()


def response_json(response: Mapping[str, Any] | _Dumpable) -> Any:
    """The JSON of ``response``: itself when it is a mapping, else the SDK object's
    ``model_dump()``."""
    return response if isinstance(response, Mapping) else _dump(response)


def claims_anthropic(data: Mapping[str, Any]) -> bool:
    """Whether a response's JSON names itself an Anthropic message."""
    return data.get("type") == "message" and data.get("object") not in _OPENAI_OBJECTS


def claims_openai_chat(data: Mapping[str, Any]) -> bool:
    """Whether a response's JSON names itself a chat completion."""
    return data.get("object") == "chat.completion"


def claims_openai_responses(data: Mapping[str, Any]) -> bool:
    """Whether a response's JSON names itself a Responses response."""
    return data.get("object") == "response"


def claims_gemini(data: Mapping[str, Any]) -> bool:
    """Whether a response's JSON has the top-level key only Gemini sends."""
    return "candidates" in data and "choices" not in data and "output" not in data \
        and data.get("object") not in _OPENAI_OBJECTS and data.get("type") != "message"


_OPENAI_OBJECTS = ("chat.completion", "response")


def read_anthropic(data: Any) -> ModelReply:
    """An Anthropic Messages response's JSON, read."""
    return _anthropic(_At(data, ""))


def read_openai_chat(data: Any) -> ModelReply:
    """A Chat Completions response's JSON, read."""
    return _openai_chat(_At(data, ""))


def read_openai_responses(data: Any) -> ModelReply:
    """A Responses response's JSON, read."""
    return _openai_responses(_At(data, ""))


def read_gemini(data: Any) -> ModelReply:
    """A Gemini generateContent response's JSON, read."""
    return _gemini(_At(data, ""))


def _dump(response: Any) -> Any:
    dump = getattr(response, "model_dump", None)
    if not callable(dump):
        raise ProviderError(Problem(
            f"expected the response JSON (an object) or an SDK response object "
            f"(got {_kind(response)})", path="(response)"))
    try:
        return dump()
    except RecursionError:  # an object built by hand, deeper than its own dump can go
        raise ProviderError(Problem("the SDK response object nests too deeply to be read",
                                    path="(response)")) from None


# -- walking the JSON with its path ------------------------------------------------------

_MISSING: Any = object()


def _kind(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


class _At:
    """A value of the response and where it is, for located errors."""

    __slots__ = ("path", "value")

    def __init__(self, value: Any, path: str) -> None:
        self.value = value
        self.path = path

    def fail(self, expected: str) -> ProviderError:
        return ProviderError(Problem(f"expected {expected} (got {_kind(self.value)})",
                                     path=self.path or "(response)"))

    def key(self, *names: str) -> _At:
        """The child under the first of ``names`` present (the SDKs' spelling second)."""
        data = self.object()
        for name in names:
            if name in data:
                return _At(data[name], self._join(name))
        return _At(_MISSING, self._join(names[0]))

    def _join(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    @property
    def present(self) -> bool:
        return self.value is not _MISSING and self.value is not None

    def object(self) -> Mapping[str, Any]:
        if not isinstance(self.value, Mapping):
            raise self.fail("an object")
        return self.value

    def items(self, *, optional: bool = False) -> list[_At]:
        """The list's items (an absent or null list is empty when ``optional``)."""
        if optional and not self.present:
            return []
        if not isinstance(self.value, list | tuple):
            raise self.fail("a list")
        return [_At(item, f"{self.path}[{index}]") for index, item in enumerate(self.value)]

    def text(self, *, optional: bool = False) -> str | None:
        value = self.value
        if isinstance(value, enum.Enum):  # the Gemini SDK's enums dump as members
            value = value.value
        if optional and (value is _MISSING or value is None):
            return None
        if not isinstance(value, str):
            raise self.fail("a string")
        return value

    def required_text(self) -> str:
        value = self.text()
        assert value is not None
        return value

    def flag(self) -> bool:
        return self.value is True


def _name(at: _At) -> str:
    name = at.required_text()
    if not re.fullmatch(TOOL_NAME_PATTERN, name):
        raise ProviderError(Problem(f"expected a tool name matching {TOOL_NAME_PATTERN} "
                                    f"(got {name[:80]!r})", path=at.path))
    return name


def _call_id(at: _At) -> str:
    value = at.required_text()
    if not value:
        raise at.fail("a non-empty string")
    return safe_call_id(value, _LONG_CALL_IDS) if len(value) > MAX_CALL_ID_CHARS else value


def _arguments_json(at: _At, call_id: str, errors: dict[str, str]) -> dict[str, Any]:
    """Arguments sent as JSON text (OpenAI): parsed, or kept as a problem."""
    text = at.required_text()
    try:
        value = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError) as error:
        errors[call_id] = f"the arguments are not valid JSON ({_json_reason(error)})"
        return {}
    return _arguments_object(value, call_id, errors)


def _json_reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at character {error.pos}"
    return "nested too deeply"


def _arguments_object(value: Any, call_id: str, errors: dict[str, str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        errors[call_id] = f"the arguments are not a JSON object (got {_kind(value)})"
        return {}
    deep = _too_deep(value)
    if deep is not None:
        errors[call_id] = f"the arguments nest more than {MAX_DEPTH} levels deep (at {deep})"
        return {}
    return dict(value)


def _too_deep(value: Any) -> str | None:
    """Where ``value`` first nests deeper than :data:`~pioneer.documents.MAX_DEPTH` levels
    (its path, shortened), or ``None``: a walk with its own stack, so any depth a parser
    accepts is measured without Python's recursion limit."""
    # Each entry: a value, its depth and its trail (the key it is under, then the
    # parent's trail), so a path is only spelt out for the one that is too deep.
    stack: list[tuple[Any, int, Any]] = [(value, 1, None)]
    while stack:
        item, depth, trail = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > MAX_DEPTH:
            return _trail_text(trail)
        stack.extend((child, depth + 1, (key, trail)) for key, child in children)
    return None


def _trail_text(trail: Any) -> str:
    keys: list[Any] = []
    while trail is not None:
        key, trail = trail
        keys.append(key)
    keys.reverse()
    shown = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in keys[:8])
    return shown.lstrip(".") + (f"..., {len(keys)} levels down" if len(keys) > 8 else "")


def _message(texts: list[str], calls: list[ToolCall]) -> ChatMessage | None:
    text = "".join(texts)
    if not clean(text).strip() and not calls:
        return None
    return ChatMessage.assistant(text, tool_calls=calls)


def _usage(read: Callable[[Mapping[str, Any]], ReportedUsage], at: _At) -> ReportedUsage | None:
    return read(at.object()) if at.present else None


def _api_error(root: _At) -> None:
    """A response that is an API error object, not a reply."""
    error = root.key("error")
    if not error.present:
        return
    detail = error.value
    message = detail.get("message") if isinstance(detail, Mapping) else detail
    said = f": {str(message)[:200]}" if isinstance(message, str) and message else ""
    raise ProviderError(Problem(f"the response is an API error, not a reply{said}",
                                path=error.path))


# -- Anthropic Messages ----------------------------------------------------------------

_ANTHROPIC_STOPS: dict[str, StopReason] = {
    "end_turn": "end_turn", "tool_use": "tool_calls", "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens", "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}


def _anthropic(root: _At) -> ModelReply:
    if root.object().get("type") == "error":
        _api_error(root)
    texts: list[str] = []
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    reasoning = 0
    for block in root.key("content").items():
        kind = block.key("type").required_text()
        if kind == "text":
            texts.append(block.key("text").required_text())
        elif kind == "tool_use":
            call_id = _call_id(block.key("id"))
            name = _name(block.key("name"))
            arguments = _arguments_object(block.key("input").value, call_id, errors)
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        elif kind in ("thinking", "redacted_thinking"):
            reasoning += 1
    said = root.key("stop_reason").text(optional=True)
    stop = _ANTHROPIC_STOPS.get(said or "", "other")
    return ModelReply(_message(texts, calls), _usage(anthropic_usage, root.key("usage")), stop,
                      said, reasoning, errors)


# -- OpenAI Chat Completions -------------------------------------------------------------

_CHAT_STOPS: dict[str, StopReason] = {
    "stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_calls",
    "function_call": "tool_calls", "content_filter": "refusal",
}


def _openai_chat(root: _At) -> ModelReply:
    _api_error(root)
    choices = root.key("choices").items()
    if not choices:
        raise root.key("choices").fail("at least one choice")
    choice = choices[0]
    message = choice.key("message")
    message.object()
    texts = [message.key("content").text(optional=True) or ""]
    refusal = message.key("refusal").text(optional=True)
    if refusal and not texts[0].strip():
        texts = [refusal]
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    for item in message.key("tool_calls").items(optional=True):
        call_id = _call_id(item.key("id"))
        function = item.key("function")
        name = _name(function.key("name"))
        calls.append(ToolCall(id=call_id, name=name, arguments=_arguments_json(
            function.key("arguments"), call_id, errors)))
    said = choice.key("finish_reason").text(optional=True)
    stop = "refusal" if refusal else _CHAT_STOPS.get(said or "", "other")
    if calls and stop == "end_turn":
        stop = "tool_calls"
    return ModelReply(_message(texts, calls), _usage(openai_chat_usage, root.key("usage")), stop,
                      said, 0, errors)


# -- OpenAI Responses --------------------------------------------------------------------

_INCOMPLETE: dict[str, StopReason] = {
    "max_output_tokens": "max_tokens", "content_filter": "refusal",
}


def _openai_responses(root: _At) -> ModelReply:
    _api_error(root)
    texts: list[str] = []
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    reasoning = 0
    refused = False
    for item in root.key("output").items():
        kind = item.key("type").required_text()
        if kind == "message":
            for part in item.key("content").items():
                part_kind = part.key("type").required_text()
                if part_kind == "output_text":
                    texts.append(part.key("text").required_text())
                elif part_kind == "refusal":
                    refused = True
                    texts.append(part.key("refusal").required_text())
        elif kind == "function_call":
            call_id = _call_id(item.key("call_id"))
            name = _name(item.key("name"))
            calls.append(ToolCall(id=call_id, name=name, arguments=_arguments_json(
                item.key("arguments"), call_id, errors)))
        elif kind == "reasoning":
            reasoning += 1
    status = root.key("status").text(optional=True)
    said = status
    stop: StopReason
    if status == "incomplete":
        reason = root.key("incomplete_details")
        said = reason.key("reason").text(optional=True) if reason.present else None
        stop = _INCOMPLETE.get(said or "", "other")
    elif refused:
        stop = "refusal"
    elif calls:
        stop = "tool_calls"
    else:
        stop = "end_turn" if status in ("completed", None) else "other"
    return ModelReply(_message(texts, calls), _usage(openai_responses_usage, root.key("usage")),
                      stop, said, reasoning, errors)


# -- Gemini generateContent --------------------------------------------------------------

_GEMINI_STOPS: dict[str, StopReason] = {
    "STOP": "end_turn", "MAX_TOKENS": "max_tokens", "SAFETY": "refusal",
    "RECITATION": "refusal", "BLOCKLIST": "refusal", "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal", "IMAGE_SAFETY": "refusal", "LANGUAGE": "refusal",
}


def _signature(at: _At) -> str | None:
    """The thought signature: base64 text in the JSON, bytes in the SDK's dump."""
    if isinstance(at.value, bytes):
        return base64.b64encode(at.value).decode("ascii")
    return at.text(optional=True)


def _gemini(root: _At) -> ModelReply:
    _api_error(root)
    usage = _usage(gemini_usage, root.key("usageMetadata", "usage_metadata"))
    listed = root.key("candidates")
    candidates = listed.items(optional=True)
    if not candidates:
        feedback = root.key("promptFeedback", "prompt_feedback")
        if not listed.present and not feedback.present:  # neither a reply nor a block
            raise listed.fail("a list")
        blocked = feedback.key("blockReason", "block_reason").text(optional=True) \
            if feedback.present else None
        return ModelReply(None, usage, "refusal" if blocked else "other", blocked)
    candidate = candidates[0]
    texts: list[str] = []
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    reasoning = 0
    content = candidate.key("content")
    parts = content.key("parts").items(optional=True) if content.present else []
    for part in parts:
        call = part.key("functionCall", "function_call")
        if call.present:
            given = call.key("id")
            call_id = _call_id(given) if given.text(optional=True) else f"call_{len(calls) + 1}"
            arguments = call.key("args")
            calls.append(ToolCall(
                id=call_id, name=_name(call.key("name")),
                arguments=_arguments_object(arguments.value, call_id, errors)
                if arguments.present else {},
                thought_signature=_signature(part.key("thoughtSignature", "thought_signature")),
            ))
        elif part.key("thought").flag():
            reasoning += 1
        else:
            text = part.key("text")
            if text.present:
                texts.append(text.required_text())
    said = candidate.key("finishReason", "finish_reason").text(optional=True)
    stop = _GEMINI_STOPS.get(said or "", "other")
    if calls and stop == "end_turn":
        stop = "tool_calls"
    return ModelReply(_message(texts, calls), usage, stop, said, reasoning, errors)

