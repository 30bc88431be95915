"""Artifact reference lines: how the compiler finds them in the text a prompt carries.

The Artifact References policy belongs in a prompt exactly when the request carries
refs (docs/hooks-and-sections.md, "When the policy appears"): in a contribution (thread
context with the artifacts of a recalled message), in an input text, or in the history
messages sent with the prompt.
A ref is one line in the format :func:`pioneer.sections.artifacts.ref_line` writes; this
module knows only how such a line starts, so the compiler can count them without
depending on the renderer.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["REF_LINE_START", "RefLineCounts", "count_ref_lines"]

#: How every artifact reference line starts (after any indentation).
REF_LINE_START = "- artifactId="

#: The line breaks ``str.splitlines`` splits at (every one is whitespace too).
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def count_ref_lines(texts: Iterable[str]) -> int:
    """Artifact reference lines in ``texts`` (lines that start with :data:`REF_LINE_START`
    after any leading whitespace)."""
    # The same lines as ``line.lstrip().startswith(REF_LINE_START)`` over
    # ``text.splitlines()``, found by searching for the marker and looking back from each
    # hit to the line break: this runs on every compile, and splitting every text into
    # lines cost more than the rest of reading the compile input.
    count = 0
    for text in texts:
        at = text.find(REF_LINE_START)
        while at != -1:
            before = at - 1
            while before >= 0 and text[before].isspace() and text[before] not in _BREAKS:
                before -= 1
            if before < 0 or text[before] in _BREAKS:
                count += 1
            at = text.find(REF_LINE_START, at + len(REF_LINE_START))
    return count


class RefLineCounts:
    """:func:`count_ref_lines` of one text per slot (a contribution's place, an input
    field), reusing the last count while the slot's text is equal to the last one seen.

    Comparing two equal texts costs a fraction of searching one, and most of a turn's
    texts are the turn before's. An entry is replaced whole, so a compiler's counts can
    be shared between threads; the map starts again once it holds ``size`` slots.
    """

    def __init__(self, size: int = 512):
        self._size = size
        self._last: dict[object, tuple[str, int]] = {}

    def count(self, slot: object, text: str) -> int:
        """The ref lines in ``text``, the text now held at ``slot``."""
        found = self._last.get(slot)
        if found is not None and found[0] == text:
            return found[1]
        counted = count_ref_lines((text,))
        if len(self._last) >= self._size and slot not in self._last:
            self._last = {}
        self._last[slot] = (text, counted)
        return counted
