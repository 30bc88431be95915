"""Tools as the model sees them: the visible set per provider round and ``request_tools``.

Tool definitions travel only in ``ChatRequest.tools``, never as prompt prose. A turn
starts with its hideable domains hidden; :mod:`._request_tools` is the tool that reveals
them and the check of its arguments; :mod:`.artifact_read` defines the tool that reads an
artifact the conversation refers to; :mod:`.visibility` keeps the per-turn state, builds
each round's tool list and refuses calls to tools the round did not offer;
:mod:`.contribution` is what a hook returns to register a tool; :mod:`._permissions`
names the tools a permission profile forbids, which a turn never offers.
"""

from __future__ import annotations

from ._permissions import forbidden_tools
from ._request_tools import (
    REASON_MAX_CHARS,
    REQUEST_TOOLS,
    RequestedDomains,
    RequestTools,
    ToolArgumentsError,
    request_tools_for,
)
from .artifact_read import ARTIFACT_READ, artifact_read_tool
from .contribution import ToolContribution
from .visibility import CallOutcome, ToolCatalog, ToolRound, TurnTools, Verdict

__all__ = [
    "ARTIFACT_READ",
    "REASON_MAX_CHARS",
    "REQUEST_TOOLS",
    "CallOutcome",
    "RequestTools",
    "RequestedDomains",
    "ToolArgumentsError",
    "ToolCatalog",
    "ToolContribution",
    "ToolRound",
    "TurnTools",
    "Verdict",
    "artifact_read_tool",
    "forbidden_tools",
    "request_tools_for",
]
