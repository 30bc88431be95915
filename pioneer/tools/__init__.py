"""Tools as the model sees them: the visible set per provider round and ``request_tools``.

Tool definitions travel only in ``ChatRequest.tools``, never as prompt prose. A turn
starts with its hideable domains hidden; :mod:`.request_tools` is the tool that reveals
them and the check of its arguments; :mod:`.visibility` keeps the per-turn state, builds
each round's tool list and refuses calls to tools the round did not offer.
"""

from __future__ import annotations

from .request_tools import (
    REASON_MAX_CHARS,
    REQUEST_TOOLS,
    RequestedDomains,
    RequestTools,
    ToolArgumentsError,
    request_tools_for,
)
from .visibility import CallOutcome, ToolCatalog, ToolRound, TurnTools, Verdict

__all__ = [
    "REASON_MAX_CHARS",
    "REQUEST_TOOLS",
    "CallOutcome",
    "RequestTools",
    "RequestedDomains",
    "ToolArgumentsError",
    "ToolCatalog",
    "ToolRound",
    "TurnTools",
    "Verdict",
    "request_tools_for",
]
