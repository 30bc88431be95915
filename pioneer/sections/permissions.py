"""Current Permissions: what the agent may do this turn, when that is less than everything.

Data in (:class:`PermissionProfile`), text out (:func:`render_current_permissions`). Plain
full access with nothing narrowed gives ``None``: no section. Otherwise the section lists
the mode, a word on what the mode means, every behaviour axis that is not ``allow`` (in
the order of :data:`GUIDANCE_AXES`, ``mcp_read`` left out), the non-empty tool and path
lists, and closing lines that say which tool rules pioneer enforces itself
(:func:`enforced_rules`) and that the application checks the rest
(docs/hooks-and-sections.md, "Current Permissions"). The words
come from
``templates/renderers/current_permissions.md.j2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import jinja2
from pydantic import Field

from ..text import EDGE_CONFIG, CheckedModel
from ._macros import call_macro

__all__ = [
    "AXES", "GUIDANCE_AXES", "Behavior", "CurrentPermissions", "PermissionProfile",
    "enforced_rules", "render_current_permissions",
]

TEMPLATE = "renderers/current_permissions.md.j2"
#: Every behaviour axis of a permission profile.
AXES = (
    "file_read",
    "file_write",
    "shell_command",
    "network",
    "mcp_read",
    "mcp_write_or_unknown",
    "dynamic_skill_tool",
    "task_subagent",
)
#: The axes the guidance lists, in order.
GUIDANCE_AXES = tuple(axis for axis in AXES if axis != "mcp_read")
_LISTS = ("allowed_tools", "denied_tools", "allowed_paths")

Behavior = Literal["allow", "ask", "deny"]


class PermissionProfile(CheckedModel):
    """The permission profile in force for a turn."""

    model_config = EDGE_CONFIG
    mode: str = Field(default="full_access", min_length=1,
                      description="full_access, workspace_write, read_only or a custom mode.")
    file_read: Behavior = Field(default="allow", description="Reading files.")
    file_write: Behavior = Field(default="allow", description="Writing files.")
    shell_command: Behavior = Field(default="allow", description="Running shell commands.")
    network: Behavior = Field(default="allow", description="Network access.")
    mcp_read: Behavior = Field(default="allow", description="Read-only MCP tools.")
    mcp_write_or_unknown: Behavior = Field(default="allow", description="Other MCP tools.")
    dynamic_skill_tool: Behavior = Field(default="allow", description="Tools defined by skills.")
    task_subagent: Behavior = Field(default="allow", description="Starting tasks and subagents.")
    allowed_tools: tuple[str, ...] = Field(default=(), description="Only these tools, when set.")
    denied_tools: tuple[str, ...] = Field(default=(), description="Never these tools.")
    allowed_paths: tuple[str, ...] = Field(default=(), description="Only these paths, when set.")

    def narrowed(self) -> bool:
        """Whether any list is set or any axis asks or denies."""
        return any(getattr(self, name) for name in _LISTS) or any(
            getattr(self, axis) != "allow" for axis in AXES
        )

    def guidance(self) -> bool:
        """Whether the profile calls for the Current Permissions section: anything but
        plain full access with nothing narrowed."""
        return self.mode != "full_access" or self.narrowed()


def render_current_permissions(
    profile: PermissionProfile, env: jinja2.Environment
) -> str | None:
    """The Current Permissions body, or ``None`` for plain full access."""
    if not profile.guidance():
        return None
    axes = [(axis, getattr(profile, axis)) for axis in GUIDANCE_AXES
            if getattr(profile, axis) != "allow"]
    lists = [(name, list(getattr(profile, name))) for name in _LISTS if getattr(profile, name)]
    return call_macro(env, TEMPLATE, "section", profile.mode, axes, lists, enforced_rules(profile))


@dataclass(frozen=True, slots=True)
class CurrentPermissions:
    """The Current Permissions section as a round's structured input
    (:class:`~pioneer.compile.round.RoundInput`): placed where the profile places
    ``current_permissions``, rendered by its template."""

    profile: PermissionProfile
    id: str = "current_permissions"

    def render(self, env: jinja2.Environment) -> str | None:
        """The section body (:func:`render_current_permissions`)."""
        return render_current_permissions(self.profile, env)


def enforced_rules(profile: PermissionProfile) -> list[str]:
    """The tool rules of ``profile`` that pioneer enforces itself (the turn's tool list
    leaves those tools out and refuses calls to them: :func:`pioneer.tools.forbidden_tools`),
    as the words the section uses."""
    rules = []
    if profile.denied_tools:
        rules.append("in denied_tools")
    if profile.allowed_tools:
        rules.append("outside allowed_tools")
    if profile.task_subagent == "deny":
        rules.append("of the task domain (task_subagent is deny)")
    return rules
