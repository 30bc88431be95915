"""What a hook returns to register a tool for the turn with the domain that hides it.

A hook at ``turn.pre_tool_materialization`` may return a :class:`~pioneer.providers.ToolSpec`
(its domain is the domain map's) or a :class:`ToolContribution` (a tool and its domain);
the runner adds them to the turn's catalog (:mod:`pioneer.turn.hook_tools`).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from ..providers.request import TOOL_NAME_PATTERN, ToolSpec
from ..text import EDGE_CONFIG, EdgeModel

__all__ = ["ToolContribution"]


def _domain(value: str) -> str:
    if not re.fullmatch(TOOL_NAME_PATTERN, value):
        raise ValueError(f"must match {TOOL_NAME_PATTERN} (got {value!r})")
    return value


class ToolContribution(EdgeModel):
    """A tool a hook registers for the turn, and the domain that hides it."""

    model_config = EDGE_CONFIG
    tool: ToolSpec = Field(description="The tool definition the model is sent.")
    domain: Annotated[str, AfterValidator(_domain)] | None = Field(
        default=None,
        description="The hideable domain it belongs to (memory, task, ... or a new one); "
        "None: the domain map's, or always visible when the map does not name it.",
    )
