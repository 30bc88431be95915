"""Rules an API enforces that its SDK does not check: refused here, or mapped to a safe form.

A :class:`~pioneer.providers.request.ChatRequest` is already checked for what holds
everywhere (tool names, call/result pairing, no empty stop sequence). What differs per API
lives here, for the adapters to apply:

- :func:`map_call_ids`: a tool call id one API would refuse (Anthropic takes letters,
  digits, ``_`` and ``-`` only; Chat Completions at most 40 characters, Responses at most
  64) is replaced, in the
  call and in its result, by a safe form derived from the id alone, so a thread moved
  between providers keeps working and the same id is always sent the same way;
- :func:`check_stop_count`: the most stop sequences the model takes (its row of the model
  table: Chat Completions 4, Gemini 5);
- :func:`check_stop_text`: Anthropic refuses a stop sequence of whitespace only;
- :func:`check_prefill`: a request that ends with an assistant message, for a model that
  does not continue one (Claude 4.6 and later; Gemini, which wants a user turn last);
- :func:`refuse_empty`: Anthropic and Gemini need at least one conversation message.

Every rule and its reason is listed in docs/providers.md,
"What each provider refuses and what is mapped".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import InputError, Problem
from .models import model_facts
from .names import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES
from .request import ChatMessage, ChatRequest, ToolResult

__all__ = [
    "ANTHROPIC_CALL_IDS",
    "OPENAI_CHAT_CALL_IDS",
    "OPENAI_CHAT_MAX_STOP",
    "OPENAI_RESPONSES_CALL_IDS",
    "CallIdRule",
    "check_not_empty",
    "check_prefill",
    "check_stop_count",
    "check_stop_text",
    "map_call_ids",
    "model_named",
    "previewing",
    "refuse_empty",
    "safe_call_id",
]

#: Chat Completions refuses more stop sequences than this (its rows of the model table
#: say the same; a deployment's row can change it).
OPENAI_CHAT_MAX_STOP = 4

_DIGEST = 24  # hex digits of SHA-256 kept in a mapped id (96 bits)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class CallIdRule:
    """Which tool call ids one API accepts."""

    #: The API's name, as ``--provider`` spells it.
    provider: str
    #: Every id must match this pattern in full.
    pattern: re.Pattern[str] | None = None
    #: Ids longer than this are refused.
    max_length: int | None = None

    def accepts(self, call_id: str) -> bool:
        """Whether the API takes ``call_id`` as it is."""
        if self.max_length is not None and len(call_id) > self.max_length:
            return False
        return self.pattern is None or self.pattern.fullmatch(call_id) is not None


#: Anthropic: ``tool_use.id`` must match ``^[a-zA-Z0-9_-]+$``.
ANTHROPIC_CALL_IDS = CallIdRule(ANTHROPIC, pattern=re.compile(r"[A-Za-z0-9_-]+"))
#: Chat Completions: ``tool_calls[].id`` of at most 40 characters.
OPENAI_CHAT_CALL_IDS = CallIdRule(OPENAI_CHAT, max_length=40)
#: Responses: a ``function_call`` item's ``call_id`` of at most 64 characters.
OPENAI_RESPONSES_CALL_IDS = CallIdRule(OPENAI_RESPONSES, max_length=64)


def safe_call_id(call_id: str, rule: CallIdRule) -> str:
    """``call_id`` as the API takes it: unchanged when it is accepted, else a mapped form.

    The mapped form is the id with every character outside letters, digits, ``_`` and
    ``-`` replaced by ``_``, cut to 15 characters, then ``_`` and the first 24 hex digits
    of the id's SHA-256: at most 40 characters, readable, and a function of the id alone,
    so every round of a thread sends the same mapped id.
    """
    if rule.accepts(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    stem = _UNSAFE.sub("_", call_id[:15])  # one character for one: cut first
    return f"{stem}_{digest}"


def map_call_ids(request: ChatRequest, rule: CallIdRule) -> ChatRequest:
    """``request`` with every call id the API would refuse mapped, in calls and results alike.

    Ids the API accepts are kept. Two different ids of one request never map to the same
    id: should a mapped id equal another id of the request, the request is refused
    rather than sent with two calls the model cannot tell apart.
    """
    ids = [call.id for message in request.messages for call in message.tool_calls]
    mapping = {call_id: safe_call_id(call_id, rule) for call_id in ids}
    if all(mapped == call_id for call_id, mapped in mapping.items()):
        return request
    owners: dict[str, str] = {}
    for call_id, mapped in mapping.items():
        other = owners.setdefault(mapped, call_id)
        if other != call_id:
            raise InputError(Problem(
                f"{rule.provider}: call ids {other!r} and {call_id!r} would both be sent as "
                f"{mapped!r}; rename one of them", path="messages",
            ))
    return request.model_copy(update={
        "messages": [_renamed(message, mapping.__getitem__) for message in request.messages]
    })


def _renamed(message: ChatMessage, rename: Callable[[str], str]) -> ChatMessage:
    if message.tool_calls:
        calls = [call.model_copy(update={"id": rename(call.id)}) for call in message.tool_calls]
        return message.model_copy(update={"tool_calls": calls})
    result = message.tool_result
    if result is not None:
        renamed: ToolResult = result.model_copy(update={"call_id": rename(result.call_id)})
        return message.model_copy(update={"tool_result": renamed})
    return message


def model_named(model: str, provider: str) -> str:
    """``model`` as a refusal names it: quoted, and when the model table only knows it by
    its family, which family's rule applied."""
    facts = model_facts(model, provider)
    return f"{model!r}" if facts.matched else \
        f"{model!r} (as the model table's {facts.family} family)"


def check_stop_count(request: ChatRequest, provider: str, limit: int | None = None) -> None:
    """Refuse more stop sequences than ``provider`` takes: ``limit``, else the model's row
    of the model table (no check when it states no limit)."""
    if limit is None:
        limit = model_facts(request.model, provider).max_stop_sequences
    count = len(request.sampling.stop)
    if limit is not None and count > limit:
        raise InputError(Problem(
            f"{provider}: {model_named(request.model, provider)} takes at most {limit} stop "
            f"sequences; sampling.stop has {count}",
            path="sampling → stop",
        ))


def check_stop_text(request: ChatRequest, provider: str) -> None:
    """Refuse a stop sequence of whitespace only (``"\n"``), which Anthropic refuses."""
    for index, stop in enumerate(request.sampling.stop):
        if not stop.strip():
            raise InputError(Problem(
                f"{provider}: a stop sequence of whitespace only is refused for "
                f"{request.model!r}, as for every model of the API (got {stop!r}); each "
                "must contain another character",
                path=f"sampling → stop[{index}]",
            ))


def check_prefill(request: ChatRequest, provider: str, ends_with_assistant: bool, *,
                  model_turn: bool = False) -> None:
    """Refuse a body that ends with an assistant message when the model does not continue
    one: Claude 4.6 and later refuse an assistant prefill, and Gemini a request whose last
    turn is the model's (``model_turn``: the API names the assistant "model", as Gemini
    does). Which models do is the ``prefill_allowed`` of the model table."""
    if not ends_with_assistant or _PREVIEW.get():
        return
    if model_facts(request.model, provider).prefill_allowed:
        return
    named = model_named(request.model, provider)
    if model_turn:
        rule = f"a {provider} request may not end with a model turn; {named} answers only a " \
            "user turn or function responses"
    else:
        rule = f"{named} does not support an assistant message prefill (Claude 4.6 and " \
            "later refuse one)"
    raise InputError(Problem(
        f"{provider}: {rule}; the conversation ends with an assistant message: end it with "
        "a user message or a tool result",
        path="messages",
    ))


_PREVIEW: ContextVar[bool] = ContextVar("pioneer_provider_preview", default=False)


@contextmanager
def previewing() -> Iterator[None]:
    """Build bodies that are looked at, not sent: a request with no conversation, or one
    that ends with an assistant message, is allowed.

    ``pioneer inspect --html`` maps the prompt of a request that has no message yet, and
    a cache plan lays out the history alone (which ends with the model's last answer);
    those bodies are never sent, so the refusals that protect a sent body do not apply.
    """
    token = _PREVIEW.set(True)
    try:
        yield
    finally:
        _PREVIEW.reset(token)


def check_not_empty(provider: str, empty: bool) -> None:
    """Refuse a body with no conversation, unless it is only previewed (:func:`previewing`)."""
    if empty and not _PREVIEW.get():
        raise refuse_empty(provider)


def refuse_empty(provider: str) -> InputError:
    """The error for a request with no user or assistant message to send."""
    return InputError(Problem(
        f"{provider} needs at least one user or assistant message; this request has none "
        "(system messages and the history summary go to the system prompt, which is not "
        "enough on its own)",
        path="messages",
    ))
