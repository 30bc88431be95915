"""Contribution sections: the two budget pools.

Runtime sections and hook (dynamic) sections arrive with the compile input. Each pool is
budgeted on its own (docs/hooks-and-sections.md, "Contribution budgets"): a count limit,
a character pool, a per-section cap that a caller may lower but never raise, and an
omission diagnostic for every input that is dropped. The output is the list of kept
contributions in pool order; where each one is placed in the prompt is the profile's
business, not this module's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Literal, NamedTuple

from .manifest import Diagnostic, Omission, OmissionReason, built

if TYPE_CHECKING:
    from .inputs import SectionInput
    from .profile import ContributionSpec, PoolSpec

__all__ = [
    "Contribution",
    "budget_pool",
    "omitted_diagnostic",
]

class Contribution(NamedTuple):
    """A contribution that survived its pool's budget, ready to be placed by the profile.

    A named tuple: a turn makes one per kept input, so it is built cheaply.
    """

    id: str
    title: str
    content: str
    pool: Literal["runtime", "hook"]
    truncated: bool
    original_chars: int
    #: Position in its pool's input list (what the manifest's placements name).
    position: int = 0


#: ``tuple.__new__``: a Contribution from all its fields in order, as ``_make`` makes it
#: without its Python-level count check (a turn makes one per kept input).
_new_tuple = tuple.__new__
_ID = attrgetter("id")


OMIT_COUNT = "dynamic section count limit was reached"
OMIT_EMPTY = "content was empty"
OMIT_EXHAUSTED = "dynamic section budget was exhausted"
OMIT_ZERO = "section character limit was zero"
_REASONS: dict[str, OmissionReason] = {
    OMIT_COUNT: "budget", OMIT_EMPTY: "input_empty", OMIT_EXHAUSTED: "budget", OMIT_ZERO: "budget",
}


def omitted_diagnostic(section_id: str, reason: str) -> Diagnostic:
    """The ``dynamic_section_omitted`` diagnostic for a contribution left out."""
    return Diagnostic(
        code="dynamic_section_omitted",
        message=f"dynamic prompt section `{section_id}` omitted: {reason}",
        section_id=section_id,
    )


def budget_pool(
    inputs: Sequence[SectionInput],
    *,
    pool: Literal["runtime", "hook"],
    spec: PoolSpec,
    known: Mapping[str, ContributionSpec],
    default_max_chars: int,
    default_sort_key: int,
) -> tuple[list[Contribution], list[Diagnostic], list[Omission]]:
    """Budget one pool; runtime inputs are stable-sorted by sort key, hook inputs keep order.

    Returns the kept contributions, the diagnostics and one omission record per input left
    out (each naming the input's position in ``inputs``).
    """
    # The profile's spec for each input's id, looked up once; the runtime pool's order is
    # a stable sort of the positions by sort key.
    specs = list(map(known.get, map(_ID, inputs)))
    order: Iterable[int] = range(len(inputs))
    if pool == "runtime" and len(inputs) > 1:
        keys = [default_sort_key if found is None else found.sort_key for found in specs]
        order = sorted(order, key=keys.__getitem__)
    kept: list[Contribution] = []
    diagnostics: list[Diagnostic] = []
    omitted: list[Omission] = []

    def omit(index: int, item_id: str, reason: str) -> None:
        diagnostics.append(omitted_diagnostic(item_id, reason))
        omitted.append(built(Omission, id=item_id, reason=_REASONS[reason], detail=reason,
                              pool=pool, index=index))

    remaining = spec.max_chars
    max_sections = spec.max_sections
    for index in order:
        item, spec_for_id = inputs[index], specs[index]
        item_id = item.id
        if len(kept) >= max_sections:
            omit(index, item_id, OMIT_COUNT)
            continue
        content = item.content.strip()
        if not content:
            omit(index, item_id, OMIT_EMPTY)
            continue
        if remaining <= 0:
            omit(index, item_id, OMIT_EXHAUSTED)
            continue
        cap = default_max_chars if spec_for_id is None else spec_for_id.max_chars
        requested = item.max_chars
        limit = cap if requested is None or requested > cap else requested
        if remaining < limit:
            limit = remaining
        if limit <= 0:
            omit(index, item_id, OMIT_ZERO)
            continue
        original = len(content)
        cut = original > limit
        text = content[:limit] if cut else content
        truncated = cut or item.truncated
        if truncated:
            diagnostics.append(
                Diagnostic(
                    code="dynamic_section_truncated",
                    message=(
                        f"dynamic prompt section `{item_id}` truncated: "
                        f"{original} -> {len(text)} chars"
                    ),
                    section_id=item_id,
                )
            )
        remaining -= len(text)
        title = item.title.strip() if item.title else ""
        if not title:
            title = (spec_for_id.title if spec_for_id else None) or f"Dynamic: {item_id}"
        kept.append(_new_tuple(Contribution,
                               (item_id, title, text, pool, truncated, original, index)))
    return kept, diagnostics, omitted
