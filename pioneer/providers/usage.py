"""The token usage a provider reports for one response, in one set of terms.

:class:`ReportedUsage` is what a turn record keeps for each round and what the
``chat {model}`` span carries: ``input_tokens`` counts the whole prompt, the cached part
included, whatever the provider calls it (docs/telemetry.md, "Attributes", has the
mapping per provider). It lives with the providers because reading a response
(:func:`~pioneer.providers.read_response`) produces it; the audit stores it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field

from ..errors import InputError, Problem
from ..text import EDGE_CONFIG, CheckedModel

__all__ = [
    "ReportedUsage",
    "anthropic_usage",
    "gemini_usage",
    "openai_chat_usage",
    "openai_responses_usage",
    "register_usage",
]

#: Each API's usage mapping by the API's name, in ``--provider`` order: the registry
#: (:mod:`.api`) enters each API object's own as it builds them, so the mapping is the
#: object's and this module never imports the registry above it (importing any module of
#: :mod:`pioneer.providers` imports the package, and so the registry, first).
_MAPPINGS: dict[str, Callable[[Mapping[str, Any]], ReportedUsage]] = {}


def register_usage(name: str, mapping: Callable[[Mapping[str, Any]], ReportedUsage]) -> None:
    """Enter the usage mapping of the API ``name`` (the registry does, once per API)."""
    _MAPPINGS[name] = mapping

class ReportedUsage(CheckedModel):
    """The token usage a provider reported for one round, in one set of terms.

    ``input_tokens`` counts the whole prompt, the cached part included (Anthropic reports
    the uncached rest apart: its three input counts are added); docs/telemetry.md has the
    mapping per provider.
    """

    model_config = EDGE_CONFIG
    input_tokens: int = Field(ge=0, description="Prompt tokens, cached ones included.")
    output_tokens: int | None = Field(None, ge=0, description="Reply tokens.")
    cache_read_input_tokens: int | None = Field(
        None, ge=0, description="Prompt tokens served from the provider's cache."
    )
    cache_creation_input_tokens: int | None = Field(
        None, ge=0, description="Prompt tokens written to the cache (Anthropic)."
    )

    @classmethod
    def from_response(cls, provider: str, usage: Mapping[str, Any]) -> ReportedUsage:
        """The ``usage`` object of ``provider``'s response (JSON as the API sends it, or an
        official SDK object's ``model_dump()``: Gemini's SDK spells the keys in
        snake_case), read by that API's object's mapping
        (:attr:`~pioneer.providers.api.ProviderApi.read_usage`)."""
        mapping = _MAPPINGS.get(provider)
        if mapping is None:
            raise InputError(Problem(
                f"unknown provider {provider!r}; expected one of {', '.join(_MAPPINGS)}"))
        return mapping(usage)


def anthropic_usage(usage: Mapping[str, Any]) -> ReportedUsage:
    """Anthropic Messages' ``usage``: the uncached rest, the read and the written part."""
    read = _int(usage, "cache_read_input_tokens")
    written = _int(usage, "cache_creation_input_tokens")
    rest = _int(usage, "input_tokens") or 0
    return ReportedUsage(input_tokens=rest + (read or 0) + (written or 0),
                         output_tokens=_int(usage, "output_tokens"),
                         cache_read_input_tokens=read, cache_creation_input_tokens=written)


def openai_chat_usage(usage: Mapping[str, Any]) -> ReportedUsage:
    """Chat Completions' ``usage``."""
    details = _mapping(usage, "prompt_tokens_details")
    return ReportedUsage(input_tokens=_int(usage, "prompt_tokens") or 0,
                         output_tokens=_int(usage, "completion_tokens"),
                         cache_read_input_tokens=_int(details, "cached_tokens"))


def openai_responses_usage(usage: Mapping[str, Any]) -> ReportedUsage:
    """Responses' ``usage``."""
    details = _mapping(usage, "input_tokens_details")
    return ReportedUsage(input_tokens=_int(usage, "input_tokens") or 0,
                         output_tokens=_int(usage, "output_tokens"),
                         cache_read_input_tokens=_int(details, "cached_tokens"))


def gemini_usage(usage: Mapping[str, Any]) -> ReportedUsage:
    """Gemini's ``usageMetadata`` (camelCase as sent, snake_case from the SDK)."""
    return ReportedUsage(
        input_tokens=_int(usage, "promptTokenCount", "prompt_token_count") or 0,
        output_tokens=_int(usage, "candidatesTokenCount", "candidates_token_count"),
        cache_read_input_tokens=_int(usage, "cachedContentTokenCount",
                                     "cached_content_token_count"),
    )


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _int(data: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = data.get(key) if isinstance(data, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
