"""One turn: run the prompt hook phases, compile, and record where every section came from.

:func:`compile_turn` is the high-level call. It is a straight chain: each prompt phase
in turn order (:data:`~pioneer.hooks.registry.TURN_PROMPT_PHASES`) → hook contributions become
runtime sections (higher priority first, so they get pool room first) → the Current
Permissions and Hidden Tool Domains sections, when the turn has them and the profile
places them → the compiler → the manifest gets one ``hook_sources`` entry per hook
contribution, diagnostic or failure, and the hook diagnostics after the compiler's own.

A contribution's truncation is ``hook`` when the hook (or the runtime, at the hook's
own ``max_chars``) cut it, ``prompt`` when the compiled prompt does not hold all of it
(a pool or section cap cut it, or it was left out), ``hook_and_prompt`` for both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import telemetry
from ..compile.bootstrap import sanitize
from ..compile.boundary import strip_prompt_cache_boundary
from ..compile.compiler import PromptCompiler
from ..compile.inputs import PromptCompileInput, RuntimeSectionInput
from ..compile.manifest import (
    CompiledPromptPayload,
    CompiledSection,
    Diagnostic,
    HookSourceEntry,
    PromptManifest,
)
from ..hooks.registry import TURN_PROMPT_PHASES, CollectedContribution, HookRegistry, TurnContext
from ..sections.permissions import PermissionProfile, render_current_permissions
from ..sections.tool_domains import SECTION_ID as HIDDEN_DOMAINS_ID
from ..sections.tool_domains import render_hidden_tool_domains

__all__ = ["compile_attributes", "compile_turn", "manifest_attributes"]

Truncation = Literal["none", "hook", "prompt", "hook_and_prompt"]
_TRUNCATION: dict[tuple[bool, bool], Truncation] = {
    (False, False): "none",
    (True, False): "hook",
    (False, True): "prompt",
    (True, True): "hook_and_prompt",
}


def compile_turn(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput,
    hooks: HookRegistry | None = None,
    *,
    turn: TurnContext | None = None,
    permissions: PermissionProfile | None = None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None = None,
    phases: Sequence[str] = TURN_PROMPT_PHASES,
) -> CompiledPromptPayload:
    """Run the hook phases for one turn, then compile it (inside a ``pioneer.compile_turn``
    span when OpenTelemetry is installed, see :mod:`pioneer.telemetry`)."""
    with telemetry.span("pioneer.compile_turn") as current:
        compiled = _compile_turn(compiler, compile_input, hooks, turn, permissions,
                                 hidden_tool_domains, phases)
        if current is not None and current.is_recording():
            telemetry.set_attributes(current, compile_attributes(compiled))
        return compiled


def _compile_turn(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput,
    hooks: HookRegistry | None,
    turn: TurnContext | None,
    permissions: PermissionProfile | None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None,
    phases: Sequence[str],
) -> CompiledPromptPayload:
    turn = turn or TurnContext()
    hooks = hooks or HookRegistry()
    env = compiler.templates.env
    collected: list[CollectedContribution] = []
    records: list[CollectedContribution | HookSourceEntry] = []
    hook_diagnostics: list[Diagnostic] = []
    for phase in phases:
        outcome = hooks.run_phase(
            phase, turn=turn, compile_input=compile_input, env=env, earlier=tuple(collected)
        )
        collected.extend(outcome.contributions)
        records.extend(outcome.records)
        hook_diagnostics.extend(outcome.diagnostics)
    runtime = [*compile_input.runtime_sections, *_hook_sections(collected)]
    # Built-in sections go only where the profile places them: a tool-less profile has
    # no Hidden Tool Domains section, and the catalog must not fall into its slot.
    wanted = compiler.load_profile(compile_input.profile).claimed - {s.id for s in runtime}
    if permissions is not None and "current_permissions" in wanted:
        text = render_current_permissions(permissions, env)
        if text:
            runtime.append(RuntimeSectionInput(id="current_permissions", content=text))
    if hidden_tool_domains and HIDDEN_DOMAINS_ID in wanted:
        text = render_hidden_tool_domains(hidden_tool_domains, env)
        if text:
            runtime.append(RuntimeSectionInput(id=HIDDEN_DOMAINS_ID, content=text))
    ref_count = compile_input.artifact_ref_count + sum(
        c.output.artifact_ref_count for c in collected if c.content
    )
    compiled = compiler.compile(compile_input.model_copy(
        update={"runtime_sections": runtime, "artifact_ref_count": ref_count}
    ))
    manifest = compiled.manifest.model_copy(update={
        "hook_sources": [
            *compiled.manifest.hook_sources,
            *(_entry(r, compiled.sections) for r in records),
        ],
        "diagnostics": [*compiled.manifest.diagnostics, *hook_diagnostics],
    })
    return compiled.model_copy(update={"manifest": manifest})


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


def _hook_sections(collected: Sequence[CollectedContribution]) -> list[RuntimeSectionInput]:
    # Pools are first come, first served: higher priority goes first (stable for ties).
    ordered = sorted(collected, key=lambda c: -c.output.priority)
    return [
        RuntimeSectionInput(id=c.section_id, title=c.title, content=c.content,
                            truncated=c.hook_truncated)
        for c in ordered
    ]


def _entry(
    record: CollectedContribution | HookSourceEntry, sections: Sequence[CompiledSection]
) -> HookSourceEntry:
    if isinstance(record, HookSourceEntry):
        return record
    content = sanitize(record.content)
    in_prompt = any(s.id == record.section_id and content in s.text for s in sections)
    output = record.output
    return HookSourceEntry(
        source=record.subscription.source(output.contribution_id, record.content_hash),
        section_id=record.section_id,
        contribution_kind=record.kind,
        priority=output.priority,
        source_count=len(output.source_refs),
        truncation=_TRUNCATION[(record.hook_truncated, bool(content) and not in_prompt)],
    )
