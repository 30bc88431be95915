"""The permissions pioneer enforces itself: which tools a turn may offer at all.

Takes the turn's permission profile (:class:`~pioneer.sections.PermissionProfile`) and
its tool catalog; gives the tools the profile forbids, each with the rule that forbids
it. pioneer decides which tools a body offers and which calls are runnable, so these
rules are enforced there: a forbidden tool is left out of the catalog (never in a body's
``tools``, never listed among the hidden domains) and a call to it is refused with an
error result (:class:`~pioneer.tools.TurnTools`). The rules: a tool in ``denied_tools``;
a tool outside ``allowed_tools`` when that list is set; a tool of the task domain when
``task_subagent`` is ``deny``. Everything else in a profile (the other behaviour axes,
``ask``, ``allowed_paths``) concerns what a tool does with its arguments, which only the
application that runs it can judge (docs/hooks-and-sections.md, "Current Permissions").
"""

from __future__ import annotations

from ..sections.permissions import PermissionProfile
from ..sections.tool_domains import TASK_DOMAIN
from .visibility import ToolCatalog

__all__ = ["forbidden_tools"]


def forbidden_tools(profile: PermissionProfile | None, catalog: ToolCatalog) -> dict[str, str]:
    """Name → the rule that forbids it, for every tool of ``catalog`` ``profile`` forbids."""
    if profile is None:
        return {}
    denied = set(profile.denied_tools)
    allowed = set(profile.allowed_tools)
    forbidden: dict[str, str] = {}
    for tool in catalog.tools:
        name = tool.name
        if name in denied:
            forbidden[name] = "denied_tools lists it"
        elif allowed and name not in allowed:
            forbidden[name] = "allowed_tools does not list it"
        elif profile.task_subagent == "deny" and catalog.domain_of(name) == TASK_DOMAIN:
            forbidden[name] = "task_subagent is deny"
    return forbidden
