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

__all__ = ["REF_LINE_START", "count_ref_lines"]

#: How every artifact reference line starts (after any indentation).
REF_LINE_START = "- artifactId="


def count_ref_lines(texts: Iterable[str]) -> int:
    """Artifact reference lines in ``texts``."""
    count = 0
    for text in texts:
        if REF_LINE_START in text:
            count += sum(1 for line in text.splitlines()
                         if line.lstrip().startswith(REF_LINE_START))
    return count
