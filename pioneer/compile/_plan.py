"""The plan of a profile: what each section reads, split at the cache boundary.

The plan records, once per profile, which context names each section's template and
condition read (found with jinja2's ``meta``, through includes and imports): a template
is handed only those names, an input no section reads is reported as ignored, and the
sections that read the artifact ref count are rendered once the others' refs are
counted (:mod:`pioneer.compile.render`).

Templates must be deterministic functions of their context (no ``random`` filter, no
``lipsum``), which the determinism rule of the design already demands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .profile import SectionSpec
    from .templates import TemplateSet

__all__ = ["ProfilePlan", "plan_profile"]

#: The names a template reads the prompt's artifact ref count by (the second one is the
#: deprecated compile-input field's, kept for the profiles that read it).
_REF_NAMES = frozenset({"artifact_refs", "artifact_ref_count"})


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    """A profile split at the cache boundary, with what each section reads."""

    stable: tuple[SectionSpec, ...]
    dynamic: tuple[SectionSpec, ...]
    #: Context names each section's template reads (``None``: possibly any name).
    reads: Mapping[str, tuple[str, ...] | None]
    #: Context names each section's condition reads (a condition is handed only those).
    condition_reads: Mapping[str, tuple[str, ...]]
    #: Compile-input names some section's template, condition or input source reads
    #: (every name, when a template's reads cannot be known).
    read_names: frozenset[str] = frozenset()
    #: Input names never reported as ignored: ``read_names`` and those the compiler
    #: itself consumes.
    unreported: frozenset[str] = frozenset()
    #: Sections whose template or condition reads ``artifact_ref_count`` (or may: a
    #: template whose reads cannot be known): they are rendered once the refs the
    #: other sections carry are counted.
    ref_readers: frozenset[str] = frozenset()
    #: Whether a stable section is one of ``ref_readers``.
    stable_reads_refs: bool = False
    #: The declared inputs each section's template or condition reads (``None``: possibly
    #: every one: the template reads ``inputs`` whole, or its reads cannot be known).
    input_reads: Mapping[str, frozenset[str] | None] = field(default_factory=dict)


def plan_profile(
    sections: Iterable[SectionSpec], templates: TemplateSet, base_names: Iterable[str],
    *, consumed: frozenset[str] = frozenset(),
) -> ProfilePlan:
    """Split ``sections`` into stable and dynamic ones and record what each reads
    (``consumed``: input names the caller takes itself, whoever reads them)."""
    base = frozenset(base_names)
    ordered = tuple(sections)
    reads: dict[str, tuple[str, ...] | None] = {}
    conditions: dict[str, tuple[str, ...]] = {}
    for section in ordered:
        names = templates.names_read(section.template)
        reads[section.id] = None if names is None else tuple(sorted(names))
        when = templates.condition_names(section.when) if section.when else frozenset()
        conditions[section.id] = tuple(sorted(when))
    stable = tuple(s for s in ordered if s.stability == "stable")
    ref_readers = frozenset(
        s.id for s in ordered
        if reads[s.id] is None or not _REF_NAMES.isdisjoint(reads[s.id] or ())
        or not _REF_NAMES.isdisjoint(conditions[s.id])
    )
    input_reads: dict[str, frozenset[str] | None] = {}
    for section in ordered:
        uses = [*templates.input_uses(section.template),
                *(templates.condition_input_uses(section.when) if section.when else ())]
        used = {name for name, _, _ in uses}
        input_reads[section.id] = (None if reads[section.id] is None or None in used
                                   else frozenset(n for n in used if n is not None))

    def base_reads(chosen: Iterable[SectionSpec]) -> set[str]:
        """The compile-input names ``chosen`` read: templates, conditions, input fields."""
        found: set[str] = set()
        for section in chosen:
            template_reads = reads[section.id]
            found |= base if template_reads is None else set(template_reads) & base
            found |= set(conditions[section.id]) & base
            if section.source == "input" and section.field:
                found.add(section.field)
        return found

    read = base_reads(ordered)
    return ProfilePlan(
        stable=stable,
        dynamic=tuple(s for s in ordered if s.stability == "dynamic"),
        reads=reads,
        condition_reads=conditions,
        read_names=frozenset(read),
        unreported=frozenset(read) | consumed,
        ref_readers=ref_readers,
        stable_reads_refs=any(s.id in ref_readers for s in stable),
        input_reads=input_reads,
    )
