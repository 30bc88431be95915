"""Artifact reference blocks: the metadata-only lines appended to a history message.

Takes a message's text and the artifact refs bound to it and returns the text the model
sees (docs/history.md, "Artifact blocks"): the trimmed text, a blank line, a header
naming the message's side, then one ``- artifactId=…`` line per distinct ``(artifact_id,
version_id)``. Only metadata is rendered, never the artifact's contents, and no tool is
named. Every field has its control characters written as escapes (``\\n``, ``\\u001b``),
so no id, name, kind or MIME type can end its line and forge further lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

__all__ = [
    "HEADERS",
    "ArtifactRef",
    "escape_controls",
    "human_size",
    "ref_line",
    "render_message",
    "unique_refs",
]

Side = Literal["user", "assistant"]

HEADERS: dict[Side, str] = {
    "user": "Available artifacts from this user message:",
    "assistant": "Available artifacts from this assistant message:",
}


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """Metadata of an artifact bound to a message; never its contents."""

    artifact_id: str
    display_name: str
    kind: str
    version_id: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    role: str | None = None
    message_id: str | None = None
    turn_item_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data with unset fields left out."""
        return {
            item.name: getattr(self, item.name)
            for item in fields(self)
            if getattr(self, item.name) is not None
        }


_KIB = 1024
_MIB = 1024 * _KIB
_GIB = 1024 * _MIB


def human_size(size: int) -> str:
    """Base-1024 size: ``1.5 GB``, ``2.0 MB``, ``842 KB`` or ``512 B``."""
    if size >= _GIB:
        return f"{size / _GIB:.1f} GB"
    if size >= _MIB:
        return f"{size / _MIB:.1f} MB"
    if size >= _KIB:
        return f"{size / _KIB:.0f} KB"
    return f"{size} B"


#: Control characters (C0, DEL, C1, which holds NEL) and the Unicode line and paragraph
#: separators: anything a reader may take for the end of a line.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(value: str) -> str:
    """``value`` with each control character written as an escape (``\\n``, ``\\u001b``)."""
    return _CONTROLS.sub(lambda m: _NAMED.get(m[0], f"\\u{ord(m[0]):04x}"), value)


def _quoted(name: str) -> str:
    return '"' + escape_controls(name.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def ref_line(ref: ArtifactRef) -> str:
    """One reference line, ending with a period; no field can break it."""
    e = escape_controls
    parts = [
        f"artifactId={e(ref.artifact_id)}",
        f"versionId={e(ref.version_id) if ref.version_id is not None else 'null'}",
        f"name={_quoted(ref.display_name)}",
        f"kind={e(ref.kind)}",
    ]
    if ref.mime_type and ref.mime_type.strip():
        parts.append(f"mime={e(ref.mime_type)}")
    if ref.size_bytes is not None:
        parts.append(f"size={human_size(ref.size_bytes)}")
    if ref.role:
        parts.append(f"role={e(ref.role)}")
    return "- " + ", ".join(parts) + "."


def unique_refs(refs: Iterable[ArtifactRef]) -> tuple[ArtifactRef, ...]:
    """Refs without repeats of ``(artifact_id, version_id)``, first occurrence kept."""
    seen: set[tuple[str, str | None]] = set()
    kept: list[ArtifactRef] = []
    for ref in refs:
        key = (ref.artifact_id, ref.version_id)
        if key not in seen:
            seen.add(key)
            kept.append(ref)
    return tuple(kept)


def render_message(text: str | None, refs: Sequence[ArtifactRef], side: Side) -> str | None:
    """The message as sent: text, then the artifact block; ``None`` when both are empty."""
    body = (text or "").strip()
    distinct = unique_refs(refs)
    if not distinct:
        return body or None
    block = HEADERS[side] + "".join("\n" + ref_line(ref) for ref in distinct)
    return f"{body}\n\n{block}" if body else block
