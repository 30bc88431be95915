"""Everything one provider round contributes to its prompt, for one compile call.

A :class:`RoundInput` holds the compile input, the hook contributions with their sources
and priorities (and the hooks' ready manifest entries: diagnostics, failures), the
structured sections as typed inputs that render themselves with the profile's templates
(Current Permissions, Hidden Tool Domains) and the texts of the history messages sent
with the prompt. :meth:`PromptCompiler.compile <pioneer.compile.compiler.PromptCompiler.compile>`
takes it whole and writes the whole manifest, ``hook_sources`` included.

How the round's parts become runtime sections, in order: the compile input's own runtime
sections; then the hook contributions, higher priority first (pools are first come,
first served, so they get pool room first; ties keep their order); then each structured
section whose id the profile places and no earlier section took, when it renders text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import jinja2

from .inputs import PromptCompileInput, RuntimeSectionInput
from .manifest import Diagnostic, HookSourceEntry, HookSourceRef, Placement

__all__ = ["HookSection", "RoundInput", "StructuredSection", "hook_sources", "round_sections"]

Truncation = Literal["none", "hook", "prompt", "hook_and_prompt"]
_TRUNCATION: dict[tuple[bool, bool], Truncation] = {
    (False, False): "none",
    (True, False): "hook",
    (False, True): "prompt",
    (True, True): "hook_and_prompt",
}


@dataclass(frozen=True, slots=True)
class HookSection:
    """One hook contribution as the round hands it to the compiler."""

    #: The section it fills (a built-in runtime id or a dynamic id).
    section_id: str
    content: str
    #: Higher goes first into the runtime pool.
    priority: int
    #: The subscription that produced it, as the manifest names it.
    source: HookSourceRef
    kind: Literal["prompt_context", "thread_context", "prompt_section"]
    title: str | None = None
    #: The hook (or the runtime, at the hook's own ``max_chars``) cut it.
    hook_truncated: bool = False
    #: How many source refs the contribution carries.
    source_count: int = 0


class StructuredSection(Protocol):
    """A built-in section given as typed data; it renders its own body with the
    profile's template environment (None or empty: the section is left out)."""

    @property
    def id(self) -> str:
        """The section id the profile places it by."""
        ...

    def render(self, env: jinja2.Environment) -> str | None:
        """The section body."""
        ...


@dataclass(frozen=True, slots=True)
class RoundInput:
    """What one round contributes to its prompt (see the module docstring)."""

    compile_input: PromptCompileInput
    #: Hook contributions and the hooks' ready manifest entries, in phase order.
    hooks: tuple[HookSection | HookSourceEntry, ...] = ()
    #: The hooks' diagnostics, written after the compiler's own.
    hook_diagnostics: tuple[Diagnostic, ...] = ()
    #: Structured sections, in the order they are offered to the profile.
    sections: tuple[StructuredSection, ...] = ()
    #: The texts of the messages sent with the prompt (their artifact refs count
    #: towards the Artifact References policy); None: not given.
    history: Sequence[str] | None = field(default=None)


def round_sections(
    round_input: RoundInput, claimed: frozenset[str], env: jinja2.Environment
) -> tuple[PromptCompileInput, list[int]]:
    """The compile input with the round's runtime sections, and the runtime index each
    hook contribution of ``round_input.hooks`` takes (in their order)."""
    given = round_input.compile_input
    contributions = [h for h in round_input.hooks if isinstance(h, HookSection)]
    if not contributions and not round_input.sections:
        return given, []
    first = len(given.runtime_sections)
    ordered = sorted(range(len(contributions)), key=lambda k: -contributions[k].priority)
    position = [0] * len(contributions)
    for rank, k in enumerate(ordered):
        position[k] = first + rank
    runtime = [*given.runtime_sections, *(
        RuntimeSectionInput(id=c.section_id, title=c.title, content=c.content,
                            truncated=c.hook_truncated)
        for c in (contributions[k] for k in ordered))]
    # A built-in section goes only where the profile places it: a tool-less profile has
    # no Hidden Tool Domains section, and the catalog must not fall into its slot.
    wanted = claimed - {s.id for s in runtime}
    for section in round_input.sections:
        if section.id in wanted:
            text = section.render(env)
            if text:
                runtime.append(RuntimeSectionInput(id=section.id, content=text))
    return given.model_copy(update={"runtime_sections": runtime}), position


def hook_sources(
    round_input: RoundInput, position: list[int], placements: Sequence[Placement]
) -> list[HookSourceEntry]:
    """One manifest entry per hook contribution, diagnostic or failure, in order; a
    contribution's truncation reads where the compile placed it."""
    if not round_input.hooks:
        return []
    placed = {p.index: p for p in placements if p.pool == "runtime"}
    entries: list[HookSourceEntry] = []
    k = 0
    for item in round_input.hooks:
        if isinstance(item, HookSourceEntry):
            entries.append(item)
            continue
        cut = placed[position[k]].cut
        k += 1
        entries.append(HookSourceEntry(
            source=item.source, section_id=item.section_id, contribution_kind=item.kind,
            priority=item.priority, source_count=item.source_count,
            truncation=_TRUNCATION[(item.hook_truncated, cut)],
        ))
    return entries
