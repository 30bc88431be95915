"""The plan of a profile: what each section reads, split at the cache boundary.

A template's output is a function of the context names it reads (found once per
profile with jinja2's ``meta``, through includes and imports), so a rendered section
can be reused whenever those values are equal to a previous turn's. The plan records,
once per profile, which names each section's template and condition read, which
sections are stable and which base names and identity files the stable part reads:
what the caches' keys are made of (:mod:`pioneer.compile.render`,
:mod:`pioneer.compile.stable`); :func:`freeze` makes a value part of a key.

Templates must be deterministic functions of their context (no ``random`` filter, no
``lipsum``), which the determinism rule of the design already demands.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .profile import SectionSpec
    from .templates import TemplateSet

__all__ = ["ProfilePlan", "freeze", "plan_profile"]

#: The names a template reads the prompt's artifact ref count by (the second one is the
#: deprecated compile-input field's, kept for the profiles that read it).
_REF_NAMES = frozenset({"artifact_refs", "artifact_ref_count"})


def freeze(value: Any) -> Hashable:
    """A hashable value equal exactly when ``value`` is; ``TypeError`` when there is none.

    Numbers carry their type (``True``, ``1`` and ``1.0`` are equal in Python but render
    differently) and floats their repr (``0.0`` and ``-0.0`` too).
    """
    kind = type(value)
    if kind is str or value is None:
        return cast(Hashable, value)
    if kind is bool or kind is int:
        return (kind.__name__, value)
    if kind is float:
        return ("float", repr(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *map(freeze, value))
    if isinstance(value, Mapping):
        return ("mapping", *((key, freeze(item)) for key, item in sorted(value.items())))
    hash(value)  # frozen models and dataclasses hash their fields; anything else raises
    return cast(Hashable, value)


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    """A profile split at the cache boundary, with what each section reads."""

    stable: tuple[SectionSpec, ...]
    dynamic: tuple[SectionSpec, ...]
    #: Context names each section's template reads (``None``: possibly any name).
    reads: Mapping[str, tuple[str, ...] | None]
    #: Context names each section's condition reads.
    condition_reads: Mapping[str, tuple[str, ...]]
    #: Base-context names (compile input and profile) the stable part depends on.
    stable_names: tuple[str, ...]
    #: Bootstrap files the stable part renders (contributions are never stable).
    stable_files: tuple[str, ...]
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
    #: Sections whose template reads only ``content`` (most contribution and input ones).
    content_only: frozenset[str] = frozenset()
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
    needed = base_reads(stable)
    return ProfilePlan(
        stable=stable,
        dynamic=tuple(s for s in ordered if s.stability == "dynamic"),
        reads=reads,
        condition_reads=conditions,
        stable_names=tuple(sorted(needed)),
        stable_files=tuple(s.file for s in stable if s.source == "bootstrap" and s.file),
        read_names=frozenset(read),
        unreported=frozenset(read) | consumed,
        ref_readers=ref_readers,
        stable_reads_refs=any(s.id in ref_readers for s in stable),
        content_only=frozenset(s.id for s in ordered if reads[s.id] == ("content",)),
        input_reads=input_reads,
    )
