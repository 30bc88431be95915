"""The four provider APIs' names, spelled out here and nowhere else.

A name is how ``--provider``, an :class:`~pioneer.turn.Agent` and a turn record spell an
API. Everything an API does differently (its body builder, reply reader, usage mapping,
cache rules, context-length errors) is asked of its object in the registry
(:func:`pioneer.providers.api.provider_api`), never decided by comparing names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

__all__ = [
    "ANTHROPIC",
    "GEMINI",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "TABLE_FAMILIES",
    "ProviderName",
    "TableProvider",
]

#: A provider API, as ``--provider`` spells it.
ProviderName = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]

ANTHROPIC: Final = "anthropic"
OPENAI_CHAT: Final = "openai-chat"
OPENAI_RESPONSES: Final = "openai-responses"
GEMINI: Final = "gemini"

#: The ``provider`` column of the model table: the vendor whose models a row describes.
TableProvider = Literal["anthropic", "openai", "gemini"]
#: Each API → the model table rows it reads (both OpenAI APIs read ``openai``'s).
TABLE_FAMILIES: Final[Mapping[str, TableProvider]] = {
    ANTHROPIC: "anthropic",
    OPENAI_CHAT: "openai",
    OPENAI_RESPONSES: "openai",
    GEMINI: "gemini",
}
