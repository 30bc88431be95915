"""Manifest diff: what changed between two compiles, and whether the provider cache breaks.

Takes two manifests (or two ``compile --json`` payloads, whose manifest is used) and
returns the sections added, removed, moved and changed, matched by id, in prompt order;
whether the stable prefix changed (the text a provider caches, so a change there means
every cached prefix is lost) and, when it did, the first stable section that broke it.
The declared inputs each side was given
are compared too, by name and by the sha256 of each value (a manifest records no value).
Two payloads also hold each section's text, so :func:`text_diffs` can say how a section
changed: a unified diff of its text (``pioneer diff --text``); a manifest records only
each text's sha256.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ..compile.manifest import InputRecord, ManifestSection, PromptManifest
from ..documents import read_document
from ..errors import InputError, Problem, format_path
from .terminal import Painter, plain

__all__ = ["Change", "Compiled", "InputChange", "ManifestDiff", "TextDiff", "diff_manifests",
           "read_compiled", "read_manifest", "render_json", "render_text", "text_diffs"]

Kind = Literal["added", "removed", "moved", "changed"]
_MARKS = {"added": "+", "removed": "-", "moved": ">", "changed": "~"}


@dataclass(frozen=True, slots=True)
class Change:
    """One section that differs: what happened, and the section before and after."""

    kind: Kind
    id: str
    before: ManifestSection | None
    after: ManifestSection | None


@dataclass(frozen=True, slots=True)
class InputChange:
    """One declared input given differently: given only by the later compile (``added``),
    only by the earlier one (``removed``), or by both with values whose sha256 differ
    (``changed``)."""

    kind: Literal["added", "removed", "changed"]
    name: str
    before: str | None
    after: str | None


@dataclass(frozen=True, slots=True)
class ManifestDiff:
    """Two compiles compared."""

    a: PromptManifest
    b: PromptManifest
    changes: tuple[Change, ...]
    stable_changed: bool
    cache_break: tuple[str, str] | None
    dynamic_changed: bool
    inputs: tuple[InputChange, ...] = ()


@dataclass(frozen=True, slots=True)
class Compiled:
    """One side of a diff as read from its file: the manifest and, for a payload, each
    section's text by the sha256 of its UTF-8 (``None`` for a bare manifest)."""

    name: str
    manifest: PromptManifest
    texts: Mapping[str, str] | None


def read_compiled(path: str | os.PathLike[str]) -> Compiled:
    """Read a manifest JSON file, or a payload JSON file with its manifest and section
    texts (``-``: standard input)."""
    data, name = read_document(path, "manifest", "json")
    prefix: list[str | int] = []
    texts: dict[str, str] | None = None
    if isinstance(data, dict) and isinstance(data.get("manifest"), dict):
        sections = data.get("sections")
        texts = {
            _sha256(section["text"]): section["text"]
            for section in (sections if isinstance(sections, list) else [])
            if isinstance(section, dict) and isinstance(section.get("text"), str)
        }
        data, prefix = data["manifest"], ["manifest"]
    try:
        manifest = PromptManifest.model_validate(data)
    except ValidationError as error:
        raise InputError([
            Problem("unknown field" if item["type"] == "extra_forbidden" else str(item["msg"]),
                    file=name, path=format_path([*prefix, *item["loc"]]) or "(root)")
            for item in error.errors()
        ], summary=f"{name} is not a pioneer manifest or payload") from None
    return Compiled(name, manifest, texts)


def read_manifest(path: str | os.PathLike[str]) -> PromptManifest:
    """Read a manifest JSON file, or the manifest of a payload JSON file (``-``: standard
    input)."""
    return read_compiled(path).manifest


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _keys(sections: Sequence[ManifestSection]) -> list[str]:
    seen: dict[str, int] = {}
    keys = []
    for section in sections:
        seen[section.id] = seen.get(section.id, 0) + 1
        keys.append(section.id if seen[section.id] == 1 else f"{section.id}#{seen[section.id]}")
    return keys


def diff_manifests(a: PromptManifest, b: PromptManifest) -> ManifestDiff:
    """Compare two manifests section by section."""
    keys_a, keys_b = _keys(a.sections), _keys(b.sections)
    by_a, by_b = dict(zip(keys_a, a.sections, strict=True)), dict(zip(keys_b, b.sections,
                                                                       strict=True))
    common_a = [key for key in keys_a if key in by_b]
    common_b = [key for key in keys_b if key in by_a]
    matcher = difflib.SequenceMatcher(a=common_a, b=common_b, autojunk=False)
    in_place = {key for block in matcher.get_matching_blocks()
                for key in common_a[block.a:block.a + block.size]}
    changes: list[Change] = []
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(a=keys_a, b=keys_b,
                                                        autojunk=False).get_opcodes():
        for key in keys_a[a1:a2] if tag != "equal" else []:
            if key not in by_b:
                changes.append(Change("removed", by_a[key].id, by_a[key], None))
        for key in keys_b[b1:b2]:
            before, after = by_a.get(key), by_b[key]
            if before is None:
                changes.append(Change("added", after.id, None, after))
            elif key not in in_place:
                changes.append(Change("moved", after.id, before, after))
            elif (before.sha256, before.stability) != (after.sha256, after.stability):
                changes.append(Change("changed", after.id, before, after))
    stable_changed = a.fingerprint_stable != b.fingerprint_stable
    return ManifestDiff(
        a=a, b=b, changes=tuple(changes), stable_changed=stable_changed,
        cache_break=_first_break(a, b) if stable_changed else None,
        dynamic_changed=a.fingerprint_dynamic != b.fingerprint_dynamic,
        inputs=_input_changes(a.inputs or [], b.inputs or []),
    )


def _input_changes(a: Sequence[InputRecord], b: Sequence[InputRecord]
                   ) -> tuple[InputChange, ...]:
    """The declared inputs given differently by two compiles, by name."""
    before = {record.name: record.sha256 for record in a}
    after = {record.name: record.sha256 for record in b}
    found = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old != new:
            kind: Literal["added", "removed", "changed"] = (
                "added" if old is None else "removed" if new is None else "changed")
            found.append(InputChange(kind, name, old, new))
    return tuple(found)


def _first_break(a: PromptManifest, b: PromptManifest) -> tuple[str, str]:
    """The first stable section that differs, and how: the cached prefix ends before it."""
    old = [s for s in a.sections if s.stability == "stable"]
    new = [s for s in b.sections if s.stability == "stable"]
    old_ids, new_ids = {s.id for s in old}, {s.id for s in new}
    for index in range(max(len(old), len(new))):
        before = old[index] if index < len(old) else None
        after = new[index] if index < len(new) else None
        if before and after and (before.id, before.sha256) == (after.id, after.sha256):
            continue
        if before and before.id not in new_ids:
            moved = any(s.id == before.id for s in b.sections)
            return before.id, "now dynamic" if moved else "removed"
        if after and after.id not in old_ids:
            moved = any(s.id == after.id for s in a.sections)
            return after.id, "now stable" if moved else "added"
        if before and after:
            return after.id, "changed" if before.id == after.id else "moved"
    return "", "the stable text differs though its sections match"


def _sizes(change: Change) -> str:
    before, after = change.before, change.after
    if change.kind == "added" and after:
        return f"{after.chars} chars"
    if change.kind != "changed" or not before or not after:
        return ""
    parts = []
    if before.stability != after.stability:
        parts.append(f"{before.stability} → {after.stability}")
    parts.append(f"{before.chars} → {after.chars} chars")
    if before.tokens is not None and after.tokens is not None:
        parts.append(f"{before.tokens} → {after.tokens} tokens")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class TextDiff:
    """How one section's text changed: a unified diff (``a/ID`` before, ``b/ID`` after;
    ``/dev/null`` for the missing side of an added or removed section)."""

    change: Change
    lines: tuple[str, ...]


def text_diffs(diff: ManifestDiff, a: Compiled, b: Compiled) -> tuple[TextDiff, ...]:
    """A unified diff of the text of each section whose text differs, in the order of
    ``diff.changes``; both sides must be payloads (:class:`~pioneer.errors.InputError`
    naming each manifest otherwise)."""
    manifests = [side for side in (a, b) if side.texts is None]
    if manifests:
        raise InputError([
            Problem("a manifest holds no section text: --text needs two payloads (what "
                    "`pioneer compile --json` prints)", file=side.name)
            for side in manifests
        ])
    assert a.texts is not None and b.texts is not None
    found = []
    for change in diff.changes:
        before = _text_of(change.before, a.texts, a.name)
        after = _text_of(change.after, b.texts, b.name)
        if before == after:
            continue
        lines = difflib.unified_diff(
            before.splitlines(), after.splitlines(), lineterm="",
            fromfile=f"a/{change.id}" if change.before else "/dev/null",
            tofile=f"b/{change.id}" if change.after else "/dev/null",
        )
        found.append(TextDiff(change, tuple(lines)))
    return tuple(found)


def _text_of(section: ManifestSection | None, texts: Mapping[str, str], name: str) -> str:
    if section is None:
        return ""
    text = texts.get(section.sha256)
    if text is None:
        raise InputError(Problem(f'the text of section "{section.id}" is missing (no section '
                                 "of the payload has the sha256 its manifest records)",
                                 file=name, path="sections"))
    return text


def _paint_line(line: str, paint: Painter) -> str:
    if line.startswith(("---", "+++")):
        return paint(line, "heading")
    style = {"@": "hunk", "+": "added", "-": "removed"}.get(line[:1])
    return paint(line, style) if style else line


def render_text(diff: ManifestDiff, names: tuple[str, str],
                texts: Sequence[TextDiff] | None = None, paint: Painter = plain) -> str:
    """The diff for people: headers, one line per changed section, then the cache verdict;
    with ``texts``, each changed section's unified diff after them."""
    a, b = diff.a, diff.b
    same = a.profile_fingerprint == b.profile_fingerprint
    lines = [
        f"a: {names[0]}  profile {a.profile}  fingerprint {a.profile_fingerprint[:12]}",
        f"b: {names[1]}  profile {b.profile}  fingerprint {b.profile_fingerprint[:12]}"
        + ("" if same else " (profile sources changed)"),
    ]
    width = max((len(change.id) for change in diff.changes), default=0)
    for change in diff.changes:
        section = change.after or change.before
        stability = section.stability if section else ""
        detail = _sizes(change) or change.kind
        lines.append(f"  {_MARKS[change.kind]} {change.id.ljust(width)}  {stability:<7}  "
                     f"{detail}".rstrip())
    if not diff.changes:
        lines.append("  no section changes")
    if diff.inputs:
        lines.append("inputs given:")
        width = max(len(given.name) for given in diff.inputs)
        for given in diff.inputs:
            lines.append(f"  {_MARKS[given.kind]} {given.name.ljust(width)}  "
                         f"{_input_detail(given)}")
    if diff.cache_break is None:
        lines.append("stable prefix: unchanged; the provider prompt cache holds")
    else:
        broken, how = diff.cache_break
        where = f'at section "{broken}" ({how})' if broken else f"({how})"
        lines.append(f"stable prefix: changed; the provider prompt cache breaks {where}")
    lines.append(f"dynamic part: {'changed' if diff.dynamic_changed else 'unchanged'}")
    for text in texts or ():
        lines.append("")
        lines.extend(_paint_line(line, paint) for line in text.lines)
    return "\n".join(lines)


def _input_detail(change: InputChange) -> str:
    if change.kind == "added":
        return f"now given (sha256 {(change.after or '')[:12]})"
    if change.kind == "removed":
        return f"no longer given (was sha256 {(change.before or '')[:12]})"
    return f"value changed (sha256 {(change.before or '')[:12]} → {(change.after or '')[:12]})"


def render_json(diff: ManifestDiff, texts: Sequence[TextDiff] | None = None) -> str:
    """The diff for machines (sorted keys); with ``texts``, each section entry has
    ``text_diff``: its unified diff, or ``null`` when its text is the same."""
    def side(section: ManifestSection | None) -> dict[str, Any] | None:
        return section.model_dump(mode="json", exclude_none=True) if section else None

    by_change = {id(text.change): "\n".join(text.lines) for text in texts or ()}

    def entry(change: Change) -> dict[str, Any]:
        found = {"kind": change.kind, "id": change.id, "before": side(change.before),
                 "after": side(change.after)}
        if texts is not None:
            found["text_diff"] = by_change.get(id(change))
        return found

    data = {
        "profile_changed": diff.a.profile_fingerprint != diff.b.profile_fingerprint,
        "sections": [entry(c) for c in diff.changes],
        "stable_changed": diff.stable_changed,
        "cache_break": None if diff.cache_break is None else {
            "section": diff.cache_break[0] or None, "reason": diff.cache_break[1]
        },
        "dynamic_changed": diff.dynamic_changed,
        "inputs": [{"kind": given.kind, "name": given.name, "before": given.before,
                    "after": given.after} for given in diff.inputs],
    }
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
