"""Provider mapping: one provider-neutral :class:`ChatRequest` to each provider's request body.

Each adapter is a pure function from a ``ChatRequest`` to the JSON body (a plain dict)
of one API: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and Gemini
generateContent. Each API is one :class:`ProviderApi` in the registry
(:func:`provider_api`, :mod:`.api`): its builder, reply reader, usage mapping, cache rules
and name; :data:`PROVIDERS` names the builders for the command line. The way back is
:func:`read_response`: a provider's response as one :class:`ModelReply`. What differs per
model (cache minimums, prices, breakpoint style, prefill, stop sequences) is read from the
model table (:func:`model_facts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._caching import MAX_CACHE_BREAKPOINTS, count_breakpoints, minimum_cacheable_tokens
from ._layout import Layout, layout, turn_start
from .anthropic import to_anthropic
from .api import (
    PROVIDER_APIS,
    PROVIDER_NAMES,
    ProviderApi,
    build_request_body,
    provider_api,
    read_context_error,
    read_response,
)
from .gemini import to_gemini
from .models import ModelFacts, ModelTable, load_model_table, model_facts, using_model_table
from .names import ProviderName
from .openai_chat import to_openai_chat
from .openai_responses import to_openai_responses
from .replies import STOP_REASONS, ContextOverflow, ModelReply, StopReason
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
    "PROVIDER_APIS",
    "PROVIDER_NAMES",
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
    "ProviderApi",
    "ProviderName",
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
    "provider_api",
    "read_context_error",
    "read_response",
    "to_anthropic",
    "to_gemini",
    "to_openai_chat",
    "to_openai_responses",
    "turn_start",
    "using_model_table",
]

#: Provider name (as the CLI spells it) → its body builder with its default options.
PROVIDERS: dict[str, Callable[[ChatRequest], dict[str, Any]]] = {
    api.name: api.build for api in PROVIDER_APIS.values()
}
