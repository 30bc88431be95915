"""The provider shape of one round: how the request that was sent carried the prompt.

Takes the provider name, the :class:`~pioneer.providers.ChatRequest` and the body its
adapter built; gives a :class:`~pioneer.audit.record.ProviderShape`: where the system
prompt travels, the stable/dynamic split as sent, the cache breakpoints found in the body
(each ``cache_control`` mark, named by its place), the ``prompt_cache_key`` and a hash of
the body. In the cache-first layout the parts are listed in the order they are sent:
the stable text, the system messages of the history, then the dynamic text (which goes
after the history). The marks are read from the body itself, not predicted, so the record says
what was sent even if an adapter changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..providers._layout import layout
from ..providers._system import SystemPart, system_parts
from ..providers.api import PROVIDER_APIS
from ..providers.request import ChatRequest
from .record import ProviderShape, SystemPartRecord

__all__ = ["CACHE_FIRST_CARRIERS", "CARRIERS", "provider_shape"]

#: Provider name → where its adapter puts the system prompt (``system`` placement).
CARRIERS: Mapping[str, str] = {
    api.name: api.system_carrier for api in PROVIDER_APIS.values()
}
#: The same for the cache-first layout, where the dynamic text follows the history.
CACHE_FIRST_CARRIERS: Mapping[str, str] = {
    api.name: api.cache_first_carrier for api in PROVIDER_APIS.values()
}


def _parts(request: ChatRequest) -> tuple[list[SystemPart], str]:
    """The system pieces in the order sent, and the placement."""
    plan = layout(request)
    if not plan.cache_first:
        return system_parts(request), "system"
    parts = system_parts(request)
    ordered = [part for part in parts if part.kind == "stable"]
    ordered += [part for part in parts if part.kind == "message"
                and part.index is not None and not plan.in_turn(part.index)]
    ordered += [part for part in parts if part.kind == "dynamic"]
    return ordered, "cache-first"


def provider_shape(provider: str, request: ChatRequest, body: Mapping[str, Any]) -> ProviderShape:
    """The shape of ``body``, which the ``provider`` adapter built from ``request``."""
    parts, placement = _parts(request)
    carriers = CACHE_FIRST_CARRIERS if placement == "cache-first" else CARRIERS
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    key = body.get("prompt_cache_key")
    return ProviderShape(
        provider=provider,
        carrier=carriers.get(provider, "unknown adapter"),
        dynamic_placement=placement,
        system=[SystemPartRecord(kind=part.kind, chars=len(part.text)) for part in parts],
        cache_breakpoints=list(_breakpoints(body, [part.kind for part in parts])),
        prompt_cache_key=key if isinstance(key, str) else None,
        tool_count=_tool_count(body),
        body_sha256=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
    )


def _marked(block: object) -> bool:
    return isinstance(block, Mapping) and "cache_control" in block


def _breakpoints(body: Mapping[str, Any], kinds: list[str]) -> Iterator[str]:
    system = body.get("system")
    if isinstance(system, list):
        for index, block in enumerate(system):
            if _marked(block):
                kind = kinds[index] if index < len(kinds) else "block"
                yield f"system[{index}] ({kind})"
    tools = body.get("tools")
    if isinstance(tools, list):
        for index, tool in enumerate(tools):
            if _marked(tool):
                yield f"tools[{index}] ({tool.get('name', '?')})"
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(_marked(block) for block in content):
            yield f"messages[{index}] ({message.get('role', '?')})"


def _tool_count(body: Mapping[str, Any]) -> int:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return 0
    # Gemini nests every declaration in one tools entry.
    return sum(len(t["functionDeclarations"]) if isinstance(t, Mapping)
               and "functionDeclarations" in t else 1 for t in tools)
