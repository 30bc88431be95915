"""The stable part of a compile: the sections before the cache boundary, reused whole.

The stable sections' texts, records and the sha256 state of their joined text are kept
in an :class:`~pioneer.caches.LruCache` keyed on everything they read
(:meth:`~pioneer.compile.render.SectionRenderer.stable_key`: the profile fingerprint,
the values the stable sections read, the identity files and their diagnostics), so a
turn whose stable inputs did not move takes the part as it was, and the full
fingerprint continues its sha256 (:mod:`pioneer.compile.assemble`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from ..caches import LruCache
from .manifest import CompiledSection, Diagnostic, ManifestSection, Omission
from .profile import SectionSpec
from .render import Rendered, SectionRenderer

__all__ = ["SEPARATOR", "SEPARATOR_BYTES", "StablePart", "stable_digest",
           "stable_part"]

#: Between two rendered sections, as text and as UTF-8 (boundary.render_sections).
SEPARATOR = "\n\n"
SEPARATOR_BYTES = b"\n\n"
_REFS, _SECTION, _RECORD = attrgetter("refs"), attrgetter("section"), attrgetter("record")
_TEXT = attrgetter("section.text")


@dataclass(frozen=True, slots=True)
class StablePart:
    """The stable half of a compile, reusable while nothing it reads changes."""

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


def stable_part(
    renderer: SectionRenderer, sections: Sequence[SectionSpec],
    memo: LruCache[tuple[object, ...], StablePart],
) -> StablePart:
    """The stable ``sections``, their text and its sha256: from ``memo`` when nothing
    any stable section reads has changed since a compile that rendered them."""
    key = renderer.stable_key()
    if key is not None:
        found = memo.get(key)
        if found is not None:
            return found
    rendered = renderer.render(sections)
    kept = [r for r in rendered if r.section is not None]
    digest = stable_digest(kept)
    part = StablePart(
        # render_sections, without its test for empty texts: a kept section has text.
        SEPARATOR.join(map(_TEXT, kept)), digest, digest.hexdigest(),
        tuple(r.diagnostic for r in rendered if r.diagnostic),
        tuple(map(_SECTION, kept)),
        tuple(map(_RECORD, kept)),
        tuple(r.omission for r in rendered if r.omission),
        sum(map(_REFS, rendered)),
    )
    if key is not None:
        memo.put(key, part)
    return part

def stable_digest(kept: list[Rendered]) -> hashlib._Hash:
    """sha256 of the stable text, kept open so the full fingerprint can continue it."""
    digest = hashlib.sha256()
    for index, rendered in enumerate(kept):
        if index:
            digest.update(SEPARATOR_BYTES)
        digest.update(rendered.data)
    return digest
