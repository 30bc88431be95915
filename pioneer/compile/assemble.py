"""The last stage of a compile: the payload and its manifest.

The stable part and the dynamic sections are joined into the payload: the kept
sections' entries and records in order, the dynamic text, the fingerprints (the full
one continues the stable part's sha256 with the marker and the dynamic UTF-8, so the
full text is joined only when it is read) and the manifest with every diagnostic,
omission and placement met on the way.
"""

from __future__ import annotations

import hashlib
from operator import attrgetter

from .bootstrap import BootstrapResult
from .boundary import BOUNDARY_MARKER
from .loaded import LoadedProfile
from .manifest import (
    COMPILER_VERSION,
    CompiledPromptPayload,
    Diagnostic,
    InputRecord,
    Omission,
    Placement,
    PromptManifest,
    built,
)
from .render import Rendered
from .stable import SEPARATOR, SEPARATOR_BYTES, StablePart

__all__ = ["assemble"]

_MARKER_BYTES = BOUNDARY_MARKER.encode("utf-8")
#: Fields of a Rendered, for the maps over a turn's sections.
_ID, _SECTION, _RECORD, _DATA = (attrgetter("id"), attrgetter("section"), attrgetter("record"),
                                 attrgetter("data"))
_TEXT, _DIAGNOSTIC, _OMISSION = (attrgetter("section.text"), attrgetter("diagnostic"),
                                 attrgetter("omission"))


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
) -> CompiledPromptPayload:
    """The payload; ``diagnostics`` and ``omissions`` (those met before the dynamic
    sections) get the dynamic sections' own appended, in the same pass, then
    ``ignored_diagnostics`` (one per name of ``ignored``)."""
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
