"""Artifact reference lines: how the compiler finds them in the text a prompt carries.

The Artifact References policy belongs in a prompt exactly when the request carries
refs (docs/hooks-and-sections.md, "When the policy appears"): in a contribution (thread
context with the artifacts of a recalled message), in an input text, or in the history
messages sent with the prompt.
A ref is one line in the format :func:`pioneer.history.artifacts.ref_line` writes; this
module knows only how such a line starts, so the compiler can count them without
depending on the renderer.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["REF_LINE_START", "count_ref_lines"]

#: How every artifact reference line starts (after any indentation).
REF_LINE_START = "- artifactId="

#: A ref line right after a newline (no indentation).
_AFTER_BREAK = "\n" + REF_LINE_START
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
        hits = text.count(REF_LINE_START)
        if not hits:
            continue
        # Most refs open their line with no indentation: when every hit does, the hits
        # are the count, found by two C-level scans.
        direct = text.count(_AFTER_BREAK) + text.startswith(REF_LINE_START)
        if direct == hits:
            count += hits
            continue
        at = text.find(REF_LINE_START)
        while at != -1:
            before = at - 1
            while before >= 0 and text[before].isspace() and text[before] not in _BREAKS:
                before -= 1
            if before < 0 or text[before] in _BREAKS:
                count += 1
            at = text.find(REF_LINE_START, at + len(REF_LINE_START))
    return count

