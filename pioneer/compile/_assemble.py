"""The last stages of a compile: the stable part, then the payload and its manifest.

:func:`stable_part` renders the sections before the cache boundary and keeps the sha256
state of their joined text. The stable part and the dynamic sections are joined into the
payload: the kept
sections' entries and records in order, the dynamic text, the fingerprints (the full
one continues the stable part's sha256 with the marker and the dynamic UTF-8, so the
full text is joined only when it is read) and the manifest with every diagnostic,
omission and placement met on the way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from ._loaded import LoadedProfile
from .bootstrap import BootstrapResult
from .boundary import BOUNDARY_MARKER
from .manifest import (
    COMPILER_VERSION,
    CompiledPromptPayload,
    CompiledSection,
    Diagnostic,
    HookSourceEntry,
    InputRecord,
    ManifestSection,
    Omission,
    Placement,
    PromptManifest,
    built,
)
from .profile import SectionSpec
from .render import Rendered, SectionRenderer

__all__ = ["SEPARATOR", "SEPARATOR_BYTES", "StablePart", "assemble", "stable_part"]

#: Between two rendered sections, as text and as UTF-8 (boundary.render_sections).
SEPARATOR = "\n\n"
SEPARATOR_BYTES = b"\n\n"

_MARKER_BYTES = BOUNDARY_MARKER.encode("utf-8")
#: Fields of a Rendered, for the maps over a turn's sections.
_ID, _SECTION, _RECORD, _DATA = (attrgetter("id"), attrgetter("section"), attrgetter("record"),
                                 attrgetter("data"))
_TEXT, _DIAGNOSTIC, _OMISSION = (attrgetter("section.text"), attrgetter("diagnostic"),
                                 attrgetter("omission"))


@dataclass(frozen=True, slots=True)
class StablePart:
    """The stable half of a compile."""

    text: str
    digest: hashlib._Hash  # sha256 of ``text``; copied, never updated in place
    fingerprint: str
    #: Diagnostics of the stable sections (kept or not), in order.
    diagnostics: tuple[Diagnostic, ...]
    #: The kept sections' payload entries and manifest records, in order.
    sections: tuple[CompiledSection, ...]
    records: tuple[ManifestSection, ...]
    #: Why each stable section that emitted nothing was left out, in order.
    omissions: tuple[Omission, ...] = ()
    #: Artifact ref lines the kept stable contribution and input sections carry.
    refs: int = 0


def stable_part(renderer: SectionRenderer, sections: Sequence[SectionSpec]) -> StablePart:
    """The stable ``sections`` rendered, their text and its sha256."""
    rendered = renderer.render(sections)
    kept = [r for r in rendered if r.section is not None]
    digest = hashlib.sha256()
    for index, one in enumerate(kept):
        if index:
            digest.update(SEPARATOR_BYTES)
        digest.update(one.data)
    return StablePart(
        # render_sections, without its test for empty texts: a kept section has text.
        SEPARATOR.join(map(_TEXT, kept)), digest, digest.hexdigest(),
        tuple(r.diagnostic for r in rendered if r.diagnostic),
        tuple(map(_SECTION, kept)),
        tuple(map(_RECORD, kept)),
        tuple(r.omission for r in rendered if r.omission),
        sum(r.refs for r in rendered),
    )


def assemble(
    profile: LoadedProfile,
    stable: StablePart,
    dynamic: list[Rendered],
    boot: BootstrapResult,
    diagnostics: list[Diagnostic],
    omissions: list[Omission],
    placements: list[Placement],
    ignored: list[str],
    ignored_diagnostics: list[Diagnostic],
    inputs: list[InputRecord] | None = None,
    hook_sources: list[HookSourceEntry] | None = None,
) -> CompiledPromptPayload:
    """The payload; ``diagnostics`` and ``omissions`` (those met before the dynamic
    sections) get the dynamic sections' own appended, in the same pass, then
    ``ignored_diagnostics`` (one per name of ``ignored``, then the hooks' own);
    ``hook_sources`` are the manifest's entries of the round's hook contributions."""
    # A rendered section has its record, text and UTF-8; their lists are made by
    # C-level maps over the kept ones (these run on every turn).
    kept = [r for r in dynamic if r.section is not None]
    sections = [*stable.sections, *map(_SECTION, kept)]
    records = [*stable.records, *map(_RECORD, kept)]
    if any(map(_DIAGNOSTIC, dynamic)):
        diagnostics += [r.diagnostic for r in dynamic if r.diagnostic is not None]
    if any(map(_OMISSION, dynamic)):
        omissions += [r.omission for r in dynamic if r.omission is not None]
    diagnostics += ignored_diagnostics
    # render_sections, without its test for empty texts: a kept section has text.
    dynamic_text = SEPARATOR.join(map(_TEXT, kept))
    dynamic_bytes = SEPARATOR_BYTES.join(map(_DATA, kept))
    # The full text is the stable text, then the marker and the dynamic text when
    # there is any (join_full_text), so its hash continues the stable one; the payload
    # joins the text itself only when it is read.
    full_hash = stable.digest.copy()
    if dynamic_text:
        full_hash.update(_MARKER_BYTES)
        full_hash.update(dynamic_bytes)
    manifest = built(
        PromptManifest,
        compiler_version=COMPILER_VERSION,
        profile=profile.spec.name,
        profile_fingerprint=profile.fingerprint,
        section_ids=list(map(_ID, records)),
        sections=records,
        fingerprint_stable=stable.fingerprint,
        fingerprint_dynamic=hashlib.sha256(dynamic_bytes).hexdigest(),
        fingerprint_full=full_hash.hexdigest(),
        source_manifest=list(boot.source_manifest),
        diagnostics=diagnostics,
        hook_sources=hook_sources or [],
        omitted=omissions,
        placements=placements,
        ignored_inputs=ignored,
        inputs=inputs,
    )
    return built(
        CompiledPromptPayload,
        stable_system_text=stable.text,
        dynamic_system_text=dynamic_text,
        boundary_marker=BOUNDARY_MARKER,
        sections=sections,
        manifest=manifest,
    )
