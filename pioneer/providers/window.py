"""The context window a request must fit, the reply's reserve, and a request's local size.

:func:`context_window` says which window applies to a model: the ``max_context_tokens``
setting when it is set (an override), else the model's ``context_window`` from the model
table (its family's row when the table does not name it). :func:`reply_reserve` is what
the reply is kept: the request's ``max_tokens``, else ``response_reserve_tokens``. The
turn runner, ``pioneer history``, ``inspect``, ``explain`` and the context map all take
the window from here, so they agree (docs/history.md, "Budgeting").

:func:`request_tokens` counts a :class:`~pioneer.providers.request.ChatRequest` in local
tokens, part by part: the system text, each tool definition, each message (its text,
tool calls and tool result, plus the per-message overhead). The history's messages can
be given their stored counts instead of being counted again. It is the local estimate
the runner sets against the provider's reported input; the count does not depend on a
provider's body layout, so one calibration serves every body of a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..tokens import MESSAGE_OVERHEAD, TokenCounter
from .api import provider_api
from .models import model_facts
from .request import ChatMessage, ChatRequest, SamplingOptions, ToolSpec

__all__ = [
    "ContextWindow",
    "ReplyReserve",
    "context_window",
    "message_local_tokens",
    "reply_reserve",
    "request_tokens",
    "system_local_tokens",
    "tool_local_tokens",
]


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The window a request of one model must fit, and where that figure comes from."""

    tokens: int
    #: ``the max_context_tokens setting`` or ``the model table: <row>, <file>, <date>``.
    source: str


@dataclass(frozen=True, slots=True)
class ReplyReserve:
    """The tokens kept for the reply, and which setting gave them."""

    tokens: int
    source: Literal["max_tokens", "response_reserve_tokens"]


def context_window(model: str, provider: str | None, override: int | None) -> ContextWindow:
    """The window of ``model`` (as ``provider`` names it): ``override`` (the
    ``max_context_tokens`` setting) when set, else the model table's ``context_window``."""
    if override is not None:
        return ContextWindow(override, "the max_context_tokens setting")
    facts = model_facts(model, provider)
    where = f"the model table: {facts.row}, {facts.origin}, {facts.source_date}"
    return ContextWindow(facts.context_window, where + (f"; {facts.note}" if facts.note else ""))


def reply_reserve(sampling: SamplingOptions | None, response_reserve_tokens: int,
                  provider: str | None = None) -> ReplyReserve:
    """The request's ``max_tokens`` when it sets one, else ``response_reserve_tokens``
    (for an API whose body then carries a default ``max_tokens``, at least that: Anthropic
    counts it against the window; :attr:`~pioneer.providers.api.ProviderApi.default_max_tokens`)."""
    if sampling is not None and sampling.max_tokens is not None:
        return ReplyReserve(sampling.max_tokens, "max_tokens")
    floor = provider_api(provider).default_max_tokens if provider is not None else None
    if floor is not None and response_reserve_tokens < floor:
        return ReplyReserve(floor, "max_tokens")
    return ReplyReserve(response_reserve_tokens, "response_reserve_tokens")


def system_local_tokens(request: ChatRequest, counter: TokenCounter) -> int:
    """The stable and the dynamic system text, each as one message."""
    payload = request.compiled_prompt
    if payload is None:
        return 0
    return sum(counter.count(text) + MESSAGE_OVERHEAD
               for text in (payload.stable_system_text, payload.dynamic_system_text) if text)


def tool_local_tokens(tools: Sequence[ToolSpec], counter: TokenCounter) -> int:
    """Each tool definition as compact JSON (name, description, parameters)."""
    return sum(counter.count(json.dumps(tool.model_dump(mode="json"), ensure_ascii=False,
                                        sort_keys=True, separators=(",", ":")))
               for tool in tools)


def message_local_tokens(message: ChatMessage, counter: TokenCounter) -> int:
    """One message: its text, its tool calls (name and arguments), its tool result, and
    the per-message overhead."""
    tokens = MESSAGE_OVERHEAD + counter.count(message.content)
    for call in message.tool_calls:
        tokens += counter.count(call.name) + counter.count(
            json.dumps(call.arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
    if message.tool_result is not None:
        tokens += counter.count(message.tool_result.content)
    return tokens


def request_tokens(request: ChatRequest, counter: TokenCounter,
                   history_tokens: Sequence[int] = ()) -> int:
    """The local tokens of ``request``: system text, tools and messages. The first
    ``len(history_tokens)`` messages are the history and count as given (their stored
    counts); the rest are counted."""
    given = len(history_tokens)
    return (system_local_tokens(request, counter) + tool_local_tokens(request.tools, counter)
            + sum(history_tokens)
            + sum(message_local_tokens(m, counter) for m in request.messages[given:]))
