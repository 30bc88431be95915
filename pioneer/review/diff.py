"""Manifest diff: what changed between two compiles, and whether the provider cache breaks.

Takes two manifests (or two ``compile --json`` payloads, whose manifest is used) and
returns the sections added, removed, moved and changed, matched by id, in prompt order;
whether the stable prefix changed (the text a provider caches, so a change there means
every cached prefix is lost) and, when it did, the first stable section that broke it.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ..compile.manifest import ManifestSection, PromptManifest
from ..errors import InputError, Problem, format_path, read_document

__all__ = ["Change", "ManifestDiff", "diff_manifests", "read_manifest", "render_json",
           "render_text"]

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
class ManifestDiff:
    """Two compiles compared."""

    a: PromptManifest
    b: PromptManifest
    changes: tuple[Change, ...]
    stable_changed: bool
    cache_break: tuple[str, str] | None
    dynamic_changed: bool


def read_manifest(path: str | os.PathLike[str]) -> PromptManifest:
    """Read a manifest JSON file, or the manifest of a payload JSON file (``-``: standard
    input)."""
    data, name = read_document(path, "manifest", "json")
    prefix: list[str | int] = []
    if isinstance(data, dict) and isinstance(data.get("manifest"), dict):
        data, prefix = data["manifest"], ["manifest"]
    try:
        return PromptManifest.model_validate(data)
    except ValidationError as error:
        raise InputError([
            Problem("unknown field" if item["type"] == "extra_forbidden" else str(item["msg"]),
                    file=name, path=format_path([*prefix, *item["loc"]]) or "(root)")
            for item in error.errors()
        ], summary=f"{name} is not a pioneer manifest or payload") from None


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
    )


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


def render_text(diff: ManifestDiff, names: tuple[str, str]) -> str:
    """The diff for people: headers, one line per changed section, then the cache verdict."""
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
    if diff.cache_break is None:
        lines.append("stable prefix: unchanged; the provider prompt cache holds")
    else:
        broken, how = diff.cache_break
        where = f'at section "{broken}" ({how})' if broken else f"({how})"
        lines.append(f"stable prefix: changed; the provider prompt cache breaks {where}")
    lines.append(f"dynamic part: {'changed' if diff.dynamic_changed else 'unchanged'}")
    return "\n".join(lines)


def render_json(diff: ManifestDiff) -> str:
    """The diff for machines (sorted keys)."""
    def side(section: ManifestSection | None) -> dict[str, Any] | None:
        return section.model_dump(mode="json", exclude_none=True) if section else None

    data = {
        "profile_changed": diff.a.profile_fingerprint != diff.b.profile_fingerprint,
        "sections": [
            {"kind": c.kind, "id": c.id, "before": side(c.before), "after": side(c.after)}
            for c in diff.changes
        ],
        "stable_changed": diff.stable_changed,
        "cache_break": None if diff.cache_break is None else {
            "section": diff.cache_break[0] or None, "reason": diff.cache_break[1]
        },
        "dynamic_changed": diff.dynamic_changed,
    }
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
