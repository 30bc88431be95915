"""The context window a request must fit, the reply's reserve, and a message's local size.

:func:`context_window` says which window applies to a model: the ``max_context_tokens``
setting when it is set (an override), else the model's ``context_window`` from the model
table (its family's row when the table does not name it). :func:`reply_reserve` is what
the reply is kept: the request's ``max_tokens``, else ``response_reserve_tokens``. The
turn runner, ``pioneer history``, ``inspect``, ``explain`` and the context map all take
the window from here, so they agree (docs/history.md, "Budgeting").

:func:`message_local_tokens` counts one :class:`~pioneer.providers.request.ChatMessage`
in local tokens: its text, tool calls and tool result, plus the per-message overhead.
The turn runner counts the rest of a request the same way, split by kind of text
(:mod:`pioneer.turn.window`); the count does not depend on a provider's body layout, so
one calibration serves every body of a model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from ..tokens import MESSAGE_OVERHEAD, TokenCounter
from .api import provider_api
from .models import model_facts
from .request import ChatMessage, SamplingOptions

__all__ = [
    "ContextWindow",
    "ReplyReserve",
    "context_window",
    "message_local_tokens",
    "reply_reserve",
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

