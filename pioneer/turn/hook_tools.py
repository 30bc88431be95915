"""Tools from hooks: what hooks register at ``turn.pre_tool_materialization`` joins the catalog.

A hook at that phase may return :class:`~pioneer.providers.ToolSpec` values (their
domain is the domain map's, when it names them) or
:class:`~pioneer.tools.ToolContribution` values (a tool and the domain it belongs to).
:func:`catalog_with_hook_tools` adds them to the application's tools under the same
visibility rules (a tool in a hidden domain stays hidden until ``request_tools`` asks for
it; docs/explain.md, "Tool visibility") and says which hook registered each, so the turn
record and ``pioneer explain`` can tell. A tool the turn cannot take (its name is taken,
or is ``request_tools``) is left out with a ``hook_diagnostic``, never a failed turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..compile.manifest import Diagnostic
from ..hooks.models import Offered
from ..providers.request import ToolSpec
from ..tools._request_tools import REQUEST_TOOLS
from ..tools.contribution import ToolContribution
from ..tools.visibility import ToolCatalog

__all__ = ["HOOK_TOOL_PHASE", "HOOK_TOOL_TYPES", "HookTools", "catalog_with_hook_tools"]


#: The phase whose hooks register tools, and what they may return there.
HOOK_TOOL_PHASE = "turn.pre_tool_materialization"
HOOK_TOOL_TYPES: tuple[type, ...] = (ToolSpec, ToolContribution)


@dataclass(frozen=True, slots=True)
class HookTools:
    """The turn's catalog with the hooks' tools, and who registered what."""

    catalog: ToolCatalog
    #: Tool name → the hook id that registered it (the application's tools are absent).
    registered: Mapping[str, str]
    #: One ``hook_diagnostic`` per tool left out.
    diagnostics: tuple[Diagnostic, ...] = ()


def catalog_with_hook_tools(
    tools: Sequence[ToolSpec], domains: Mapping[str, Sequence[str]],
    offered: Sequence[Offered],
) -> HookTools:
    """The catalog of ``tools`` and the tools in ``offered``, over the ``domains`` map."""
    names = {tool.name for tool in tools}
    merged = {domain: list(members) for domain, members in domains.items()}
    added: list[ToolSpec] = []
    registered: dict[str, str] = {}
    diagnostics: list[Diagnostic] = []
    for offer in offered:
        value = offer.value
        tool, domain = (value.tool, value.domain) if isinstance(value, ToolContribution) \
            else (value, None)
        if not isinstance(tool, ToolSpec):
            continue
        hook_id = offer.subscription.hook_id
        why = (f"`{REQUEST_TOOLS}` is reserved for tool visibility" if tool.name == REQUEST_TOOLS
               else "the turn has a tool of that name already" if tool.name in names else None)
        if why is not None:
            diagnostics.append(Diagnostic(
                code="hook_diagnostic", hook_source=hook_id,
                message=f"hook `{hook_id}`: tool `{tool.name}` not registered: {why}"))
            continue
        names.add(tool.name)
        added.append(tool)
        registered[tool.name] = hook_id
        if domain is not None and tool.name not in merged.get(domain, ()):
            for members in merged.values():
                if tool.name in members:
                    members.remove(tool.name)
            merged.setdefault(domain, []).append(tool.name)
    catalog = ToolCatalog.build([*tools, *added], merged)
    return HookTools(catalog, registered, tuple(diagnostics))
