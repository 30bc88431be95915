"""Hidden Tool Domains: the catalog of tool domains the model can ask to see.

Data in (a mapping of domain → tool names, in the order to list them), text out
(:func:`render_hidden_tool_domains`, or ``None`` when nothing is hidden). One line per
domain, ``- {domain}: {tools joined ", "}.``; names only, never a tool schema. The whole
body stays within 1200 characters: domain lines that do not fit are left off from the
end (docs/hooks-and-sections.md, "Built-in structured sections"). The words come from
``templates/renderers/hidden_tool_domains.md.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jinja2

from ._macros import call_macro

__all__ = [
    "DEFAULT_TOOL_DOMAINS", "MAX_CHARS", "SECTION_ID", "TASK_DOMAIN", "HiddenToolDomains",
    "render_hidden_tool_domains",
]

TEMPLATE = "renderers/hidden_tool_domains.md.j2"
SECTION_ID = "request_tools.hidden_domains"
#: The domain of the task tools: Task Orchestration is compiled into every round where
#: one of its tools is visible, and ``task_subagent = "deny"`` forbids its tools.
TASK_DOMAIN = "task"
MAX_CHARS = 1200
#: The built-in domain map, in listing order (docs/explain.md, "Tool visibility"); the
#: artifact domain holds ``artifact_read``, which the Artifact References policy names.
DEFAULT_TOOL_DOMAINS: Mapping[str, tuple[str, ...]] = {
    "memory": ("memory_search", "memory_list", "memory_get", "memory_remember", "memory_forget"),
    "task": (
        "task_create", "task_wait", "task_accept", "task_revise", "task_cancel", "task_update",
        "task_detach", "task_list", "task_get", "task_reschedule", "task_pause", "task_resume",
    ),
    "artifact": ("artifact_read", "artifact_prepare", "artifact_register"),
    "computer_use": ("computer_use",),
}


@dataclass(frozen=True, slots=True)
class HiddenToolDomains:
    """The Hidden Tool Domains section as a round's structured input
    (:class:`~pioneer.compile.round.RoundInput`): placed where the profile places
    :data:`SECTION_ID`, rendered by its template."""

    domains: Mapping[str, Sequence[str]]
    id: str = SECTION_ID

    def render(self, env: jinja2.Environment) -> str | None:
        """The section body (:func:`render_hidden_tool_domains`)."""
        return render_hidden_tool_domains(self.domains, env) if self.domains else None


def render_hidden_tool_domains(
    domains: Mapping[str, Sequence[str]], env: jinja2.Environment
) -> str | None:
    """The catalog body for the hidden ``domains``, or ``None`` when there are none."""
    lines = [
        call_macro(env, TEMPLATE, "line", domain, list(tools))
        for domain, tools in domains.items() if tools
    ]
    while lines:
        text = call_macro(env, TEMPLATE, "section", lines)
        if len(text) <= MAX_CHARS:
            return text
        lines.pop()
    return None
