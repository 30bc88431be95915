"""The attributes of the span a round's compile records (docs/telemetry.md).

:meth:`PromptCompiler.compile <pioneer.compile.compiler.PromptCompiler.compile>` opens a
``pioneer.compile_turn`` span around the compile of a
:class:`~pioneer.compile.round.RoundInput` (a bare compile input records none); the turn
record's span reuses :func:`manifest_attributes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import telemetry
from ..caches import CacheStats
from .boundary import strip_prompt_cache_boundary
from .manifest import CompiledPromptPayload, PromptManifest

__all__ = ["SPAN", "cache_attributes", "compile_attributes", "manifest_attributes"]

#: The name of a round's compile span.
SPAN = "pioneer.compile_turn"


def manifest_attributes(manifest: PromptManifest) -> dict[str, Any]:
    """pioneer's own span attributes of a compiled prompt (ids and counts, no content)."""
    stable = [s.id for s in manifest.sections if s.stability == "stable"]
    return {
        "pioneer.profile": manifest.profile,
        "pioneer.profile_fingerprint": manifest.profile_fingerprint,
        "pioneer.fingerprint_stable": manifest.fingerprint_stable,
        "pioneer.fingerprint_dynamic": manifest.fingerprint_dynamic,
        "pioneer.section_ids": list(manifest.section_ids),
        "pioneer.stable_section_ids": stable,
        "pioneer.dynamic_section_ids": [i for i in manifest.section_ids if i not in stable],
        "pioneer.diagnostics.count": len(manifest.diagnostics),
        "pioneer.diagnostic_codes": sorted({d.code for d in manifest.diagnostics}),
    }


def compile_attributes(payload: CompiledPromptPayload) -> dict[str, Any]:
    """The compile span's attributes; the stable and dynamic text as
    ``gen_ai.system_instructions`` only when :func:`pioneer.telemetry.capture_content`."""
    attributes = manifest_attributes(payload.manifest)
    attributes["pioneer.stable.chars"] = len(payload.stable_system_text)
    attributes["pioneer.dynamic.chars"] = len(payload.dynamic_system_text)
    if telemetry.capture_content():
        attributes["gen_ai.system_instructions"] = telemetry.system_instructions(
            strip_prompt_cache_boundary(text).strip()
            for text in (payload.stable_system_text, payload.dynamic_system_text)
        )
    return attributes


def cache_attributes(stats: Iterable[CacheStats]) -> dict[str, Any]:
    """The compile span's cache attributes: each cache's entries, bytes, hits, misses and
    evictions since the compiler was made, as ``pioneer.cache.<name>.<count>``."""
    attributes: dict[str, Any] = {}
    for one in stats:
        prefix = f"pioneer.cache.{one.name}."
        attributes[prefix + "entries"] = one.entries
        attributes[prefix + "bytes"] = one.bytes
        attributes[prefix + "hits"] = one.hits
        attributes[prefix + "misses"] = one.misses
        attributes[prefix + "evictions"] = one.evictions
    return attributes
