"""One turn: run the prompt hook phases, compile, and record where every section came from.

:func:`compile_turn` is the high-level call. It is a straight chain: each prompt phase
in turn order (:data:`~pioneer.hooks.registry.TURN_PROMPT_PHASES`) → hook contributions become
runtime sections (higher priority first, so they get pool room first) → the Current
Permissions and Hidden Tool Domains sections, when the turn has them and the profile
places them → the compiler → the manifest gets one ``hook_sources`` entry per hook
contribution, diagnostic or failure, and the hook diagnostics after the compiler's own.

A contribution's truncation is ``hook`` when the hook (or the runtime, at the hook's
own ``max_chars``) cut it, ``prompt`` when the compiled prompt does not hold all of it
(a pool or section cap cut it, or it was left out), ``hook_and_prompt`` for both. The
prompt side is read from the manifest's ``placements``: each hook contribution is a
runtime input at a known position, and the compiler records where that input went.

``history`` is the conversation sent with the prompt (the history budgeter's messages,
or their texts); the artifact refs it carries are counted for the Artifact References
policy, so no caller copies a count by hand.

A turn with several provider rounds runs its hook phases once (:func:`run_hooks`) and
compiles each round from that one :class:`HookRun` (``compile_turn(..., hook_run=...)``),
so every round sees the same contributions and only the round's tool state changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .. import telemetry
from ..caches import CacheStats
from ..compile.boundary import strip_prompt_cache_boundary
from ..compile.compiler import PromptCompiler, as_compile_input
from ..compile.inputs import PromptCompileInput, RuntimeSectionInput
from ..compile.manifest import (
    CompiledPromptPayload,
    Diagnostic,
    HookSourceEntry,
    Placement,
    PromptManifest,
)
from ..hooks.registry import (
    TURN_PROMPT_PHASES,
    CollectedContribution,
    HookRegistry,
    Offered,
    TurnContext,
)
from ..sections.permissions import PermissionProfile, render_current_permissions
from ..sections.tool_domains import SECTION_ID as HIDDEN_DOMAINS_ID
from ..sections.tool_domains import render_hidden_tool_domains

__all__ = [
    "HistoryText", "HookRun", "cache_attributes", "compile_attributes", "compile_turn",
    "manifest_attributes", "run_hooks",
]


class HistoryText(Protocol):
    """A history message as the turn sees it: its text."""

    @property
    def content(self) -> str:
        """The message text as sent."""
        ...

Truncation = Literal["none", "hook", "prompt", "hook_and_prompt"]
_TRUNCATION: dict[tuple[bool, bool], Truncation] = {
    (False, False): "none",
    (True, False): "hook",
    (False, True): "prompt",
    (True, True): "hook_and_prompt",
}


@dataclass(frozen=True, slots=True)
class HookRun:
    """What the hook phases of one turn produced, for each compile of the turn."""

    #: Contributions, in phase and subscription order.
    contributions: tuple[CollectedContribution, ...] = ()
    #: Contributions and ready manifest entries (diagnostics, failures), in order.
    records: tuple[CollectedContribution | HookSourceEntry, ...] = ()
    #: Manifest diagnostics of the hooks, after the compiler's own.
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Values of the accepted types (tool definitions), with their subscriptions.
    offered: tuple[Offered, ...] = ()


def run_hooks(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput | Mapping[str, Any],
    hooks: HookRegistry | None = None,
    *,
    turn: TurnContext | None = None,
    phases: Sequence[str] = TURN_PROMPT_PHASES,
    accept: Mapping[str, tuple[type, ...]] | None = None,
) -> HookRun:
    """Run ``phases`` of ``hooks`` for one turn, in order; ``accept`` maps a phase to the
    further types its hooks may return (:meth:`HookRegistry.run_phase`)."""
    accept = accept or {}
    compile_input = as_compile_input(compile_input)
    turn = turn or TurnContext()
    hooks = hooks or HookRegistry()
    env = compiler.templates.env
    collected: list[CollectedContribution] = []
    records: list[CollectedContribution | HookSourceEntry] = []
    diagnostics: list[Diagnostic] = []
    offered: list[Offered] = []
    for phase in phases:
        outcome = hooks.run_phase(phase, turn=turn, compile_input=compile_input, env=env,
                                  earlier=tuple(collected), accept=accept.get(phase, ()))
        collected.extend(outcome.contributions)
        records.extend(outcome.records)
        diagnostics.extend(outcome.diagnostics)
        offered.extend(outcome.offered)
    return HookRun(tuple(collected), tuple(records), tuple(diagnostics), tuple(offered))


def compile_turn(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput | Mapping[str, Any],
    hooks: HookRegistry | None = None,
    *,
    turn: TurnContext | None = None,
    permissions: PermissionProfile | None = None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None = None,
    phases: Sequence[str] = TURN_PROMPT_PHASES,
    history: Sequence[HistoryText | str] | None = None,
    hook_run: HookRun | None = None,
) -> CompiledPromptPayload:
    """Run the hook phases for one turn, then compile it (inside a ``pioneer.compile_turn``
    span when OpenTelemetry is installed, see :mod:`pioneer.telemetry`).

    ``history`` is the messages sent with this prompt: the refs they carry count towards
    the Artifact References policy (:meth:`PromptCompiler.compile`). ``hook_run`` is what
    :func:`run_hooks` already produced for this turn: then no phase runs again.
    """
    with telemetry.span("pioneer.compile_turn") as current:
        compile_input = as_compile_input(compile_input)
        if hook_run is None:
            hook_run = run_hooks(compiler, compile_input, hooks, turn=turn, phases=phases)
        compiled = _compile_turn(compiler, compile_input, hook_run, permissions,
                                 hidden_tool_domains, history)
        if current is not None and current.is_recording():
            telemetry.set_attributes(current, compile_attributes(compiled))
            telemetry.set_attributes(current, cache_attributes(compiler.cache_stats()))
        return compiled


def _compile_turn(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput,
    hook_run: HookRun,
    permissions: PermissionProfile | None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None,
    history: Sequence[HistoryText | str] | None,
) -> CompiledPromptPayload:
    env = compiler.templates.env
    collected = hook_run.contributions
    records = hook_run.records
    hook_diagnostics = hook_run.diagnostics
    ordered = _by_priority(collected)
    first_hook = len(compile_input.runtime_sections)
    position = {id(c): first_hook + k for k, c in enumerate(ordered)}
    runtime = [*compile_input.runtime_sections, *_hook_sections(ordered)]
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
    compiled = compiler.compile(
        compile_input.model_copy(update={"runtime_sections": runtime}),
        history=None if history is None else (
            m if isinstance(m, str) else m.content for m in history
        ),
    )
    placed = {p.index: p for p in compiled.manifest.placements if p.pool == "runtime"}
    manifest = compiled.manifest.model_copy(update={
        "hook_sources": [
            *compiled.manifest.hook_sources,
            *(r if isinstance(r, HookSourceEntry) else _entry(r, placed[position[id(r)]])
              for r in records),
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


def _by_priority(collected: Sequence[CollectedContribution]) -> list[CollectedContribution]:
    # Pools are first come, first served: higher priority goes first (stable for ties).
    return sorted(collected, key=lambda c: -c.output.priority)


def _hook_sections(ordered: Sequence[CollectedContribution]) -> list[RuntimeSectionInput]:
    return [
        RuntimeSectionInput(id=c.section_id, title=c.title, content=c.content,
                            truncated=c.hook_truncated)
        for c in ordered
    ]


def _entry(record: CollectedContribution, placement: Placement) -> HookSourceEntry:
    output = record.output
    return HookSourceEntry(
        source=record.subscription.source(output.contribution_id, record.content_hash),
        section_id=record.section_id,
        contribution_kind=record.kind,
        priority=output.priority,
        source_count=len(output.source_refs),
        truncation=_TRUNCATION[(record.hook_truncated, placement.cut)],
    )
