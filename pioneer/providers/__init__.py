"""Provider mapping: one provider-neutral :class:`ChatRequest` to each provider's request body.

Each adapter is a pure function from a ``ChatRequest`` to the JSON body (a plain dict)
of one API: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and Gemini
generateContent. :data:`PROVIDERS` names them for the command line. The way back is
:func:`read_response`: a provider's response as one :class:`ModelReply`. What differs per
model (cache minimums, prices, breakpoint style, prefill, stop sequences) is read from the
model table (:func:`model_facts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InputError, Problem
from .anthropic import to_anthropic
from .caching import MAX_CACHE_BREAKPOINTS, count_breakpoints, minimum_cacheable_tokens
from .gemini import to_gemini
from .layout import Layout, layout, turn_start
from .models import ModelFacts, ModelTable, load_model_table, model_facts, using_model_table
from .openai_chat import SystemRole, to_openai_chat
from .openai_responses import to_openai_responses
from .replies import (
    STOP_REASONS,
    ContextOverflow,
    ModelReply,
    StopReason,
    read_context_error,
    read_response,
)
from .request import (
    CacheOptions,
    ChatMessage,
    ChatRequest,
    DynamicPlacement,
    SamplingOptions,
    ToolCall,
    ToolResult,
    ToolSpec,
    load_chat_request,
    parse_chat_request,
)
from .usage import ReportedUsage

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "PROVIDERS",
    "STOP_REASONS",
    "CacheOptions",
    "ChatMessage",
    "ChatRequest",
    "ContextOverflow",
    "DynamicPlacement",
    "Layout",
    "ModelFacts",
    "ModelReply",
    "ModelTable",
    "ReportedUsage",
    "SamplingOptions",
    "StopReason",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "build_request_body",
    "count_breakpoints",
    "layout",
    "load_chat_request",
    "load_model_table",
    "minimum_cacheable_tokens",
    "model_facts",
    "parse_chat_request",
    "read_context_error",
    "read_response",
    "to_anthropic",
    "to_gemini",
    "to_openai_chat",
    "to_openai_responses",
    "turn_start",
    "using_model_table",
]

#: Provider name (as the CLI spells it) → adapter with its default options.
PROVIDERS: dict[str, Callable[[ChatRequest], dict[str, Any]]] = {
    "anthropic": to_anthropic,
    "openai-chat": to_openai_chat,
    "openai-responses": to_openai_responses,
    "gemini": to_gemini,
}


def build_request_body(
    provider: str, request: ChatRequest, *, system_role: SystemRole | None = None
) -> dict[str, Any]:
    """The request body for a provider named as in :data:`PROVIDERS`.

    ``system_role`` ("system" or "developer") is the role of system messages for the two
    OpenAI APIs; the other providers have no such role and refuse it.
    """
    adapter = PROVIDERS.get(provider)
    if adapter is None:
        raise InputError(Problem(
            f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}"
        ))
    if system_role is None:
        return adapter(request)
    if provider == "openai-chat":
        return to_openai_chat(request, system_role=system_role)
    if provider == "openai-responses":
        return to_openai_responses(request, system_role=system_role)
    raise InputError(Problem(f"{provider} has no system role option; leave system_role unset"))
