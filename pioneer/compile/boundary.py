"""The cache boundary: joining rendered sections and splitting the full text again.

A section renders as ``## {title}\\n{body}``; sections join with one blank line; the full
text is ``stable + BOUNDARY + dynamic``, with the rules for an empty side written down in
docs/compile-input-and-manifest.md, "Joining sections".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "BOUNDARY_MARKER",
    "QUOTED_MARKER",
    "join_full_text",
    "render_section",
    "render_section_parts",
    "render_sections",
    "split_prompt_cache_boundary",
    "strip_prompt_cache_boundary",
]

BOUNDARY_MARKER = "\n<!-- PIONEER_PROMT_CACHE_BOUNDARY -->\n"
_COMMENT = BOUNDARY_MARKER.strip()
#: What the marker's comment becomes inside a section: no longer the marker, and of the
#: same length, so every character budget measured before still holds.
QUOTED_MARKER = "<!-- PIONEER-PROMT-CACHE-BOUNDARY -->"
_SEPARATOR = "\n\n"


def render_section(title: str, content: str) -> str:
    """``## title`` over the trimmed content, or ``""`` when the content is blank.

    Input text may carry the marker's comment (a file, a hook, a user): it becomes
    :data:`QUOTED_MARKER`, so the only boundary in a full text is the one
    :func:`join_full_text` puts there and splitting it gives back stable and dynamic.
    """
    return render_section_parts(title, (content,))


def render_section_parts(title: str, parts: Sequence[str]) -> str:
    """:func:`render_section` of ``"".join(parts)``, trimmed across the parts and joined
    once, so a long body is copied once rather than joined, trimmed and prefixed."""
    start, end = 0, len(parts)
    while start < end and (not parts[start] or parts[start].isspace()):
        start += 1
    while end > start and (not parts[end - 1] or parts[end - 1].isspace()):
        end -= 1
    if start == end:
        return ""
    # A title is one line: a newline in a hook's title must not open a heading of its own.
    head = f"## {' '.join(title.split())}\n"
    if end - start == 1:
        text = head + parts[start].strip()
    else:
        text = "".join([head, parts[start].lstrip(), *parts[start + 1 : end - 1],
                        parts[end - 1].rstrip()])
    return text.replace(_COMMENT, QUOTED_MARKER) if _COMMENT in text else text


def render_sections(rendered: Iterable[str]) -> str:
    """Join already rendered sections with one blank line, skipping empty ones."""
    return _SEPARATOR.join(text for text in rendered if text)


def join_full_text(stable: str, dynamic: str) -> str:
    """Stable and dynamic text joined by the boundary marker when both are present."""
    # isspace() scans without copying; these texts can be tens of thousands of chars.
    has_stable = bool(stable) and not stable.isspace()
    has_dynamic = bool(dynamic) and not dynamic.isspace()
    if has_stable and has_dynamic:
        return "".join((stable, BOUNDARY_MARKER, dynamic))
    if has_dynamic:
        return BOUNDARY_MARKER + dynamic
    return stable if has_stable else ""


def split_prompt_cache_boundary(text: str) -> tuple[str, str] | None:
    """Split at the first marker into ``(before.rstrip(), after.lstrip())``; None without one."""
    before, marker, after = text.partition(BOUNDARY_MARKER)
    if not marker:
        return None
    return before.rstrip(), after.lstrip()


def strip_prompt_cache_boundary(text: str) -> str:
    """Replace every marker (with its surrounding newlines) by a single newline."""
    return text.replace(BOUNDARY_MARKER, "\n")
