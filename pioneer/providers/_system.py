"""What every adapter sends as system content, in the one order that keeps caches warm.

The order is fixed: the stable text first (the provider-cacheable prefix), then the
dynamic text, then every system message of the conversation (the history summary among
them) in conversation order. Each piece is cleaned of the boundary marker on its own
(:func:`~pioneer.providers.request.clean`), so the marker never reaches a model and the
stable piece depends on the stable text alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..compile.boundary import render_sections
from .request import ChatRequest, clean

__all__ = [
    "SystemPart",
    "joined_prompt",
    "prompt_cache_key",
    "prompt_parts",
    "system_parts",
]


@dataclass(frozen=True, slots=True)
class SystemPart:
    """One piece of system content and where it came from."""

    kind: Literal["stable", "dynamic", "message"]
    text: str
    #: Index into ``ChatRequest.messages`` for a system message, else None.
    index: int | None = None


def prompt_parts(request: ChatRequest) -> list[SystemPart]:
    """The compiled prompt's stable and dynamic pieces, the blank ones left out."""
    payload = request.compiled_prompt
    if payload is None:
        return []
    parts = [
        SystemPart("stable", clean(payload.stable_system_text).strip()),
        SystemPart("dynamic", clean(payload.dynamic_system_text).strip()),
    ]
    return [part for part in parts if part.text]


def system_parts(request: ChatRequest) -> list[SystemPart]:
    """Stable, dynamic, then each system message in conversation order."""
    messages = [
        SystemPart("message", clean(message.content).strip(), index)
        for index, message in enumerate(request.messages)
        if message.role == "system"
    ]
    return [*prompt_parts(request), *messages]


def joined_prompt(request: ChatRequest) -> str:
    """Stable and dynamic text as one text, joined like sections (one blank line)."""
    return render_sections(part.text for part in prompt_parts(request))


def prompt_cache_key(request: ChatRequest) -> str | None:
    """A routing key shared by every request with the same stable text, or None without one.

    Derived from ``fingerprint_stable`` (and at most 64 characters, the OpenAI limit) so an
    audit can match it to the manifest that compiled the turn.
    """
    payload = request.compiled_prompt
    if payload is None or not clean(payload.stable_system_text).strip():
        return None
    return f"pioneer-{payload.manifest.fingerprint_stable[:48]}"
