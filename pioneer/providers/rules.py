"""Rules an API enforces that its SDK does not check: refused here, or mapped to a safe form.

A :class:`~pioneer.providers.request.ChatRequest` is already checked for what holds
everywhere (tool names, call/result pairing, no empty stop sequence). What differs per API
lives here, for the adapters to apply:

- :func:`check_stop_count`: Chat Completions takes at most 4 stop sequences;
- :func:`refuse_empty`: Anthropic and Gemini need at least one conversation message.

Every rule and its reason is listed in docs/providers.md,
"What each provider refuses and what is mapped".
"""

from __future__ import annotations

from ..errors import InputError, Problem
from .request import ChatRequest

__all__ = [
    "OPENAI_CHAT_MAX_STOP",
    "check_stop_count",
    "refuse_empty",
]

#: Chat Completions refuses more stop sequences than this.
OPENAI_CHAT_MAX_STOP = 4


def check_stop_count(request: ChatRequest, provider: str, limit: int) -> None:
    """Refuse more stop sequences than ``provider`` takes."""
    count = len(request.sampling.stop)
    if count > limit:
        raise InputError(Problem(
            f"{provider} takes at most {limit} stop sequences; sampling.stop has {count}",
            path="sampling → stop",
        ))


def refuse_empty(provider: str) -> InputError:
    """The error for a request with no user or assistant message to send."""
    return InputError(Problem(
        f"{provider} needs at least one user or assistant message; this request has none "
        "(system messages and the history summary go to the system prompt, which is not "
        "enough on its own)",
        path="messages",
    ))
