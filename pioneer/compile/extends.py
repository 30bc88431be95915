"""Derived profiles: resolve ``extends`` on raw TOML data, before the interpreter sees it.

Takes a profile file and the profile search path; returns a :class:`ProfileSource`: the
resolved :class:`~pioneer.compile.profile.ProfileSpec` (what the structural rules, the template
checks and the interpreter see) plus a :class:`SourceMap` that remembers which file and
which JSON path every resolved value was written at. A problem found in a resolved
profile therefore still names the file, line and path its author typed.

Each file is schema-checked on its own first (a derived file against the derived shape
of ``schemas/profile.schema.json``), then its base is resolved, its edits are applied in
order, and the merged data is schema-checked again as a whole profile. A base named by
``extends = "NAME"`` is looked up on the search path, skipping the extending file
itself, so a deployment's ``full.toml`` can derive from the built-in ``full``; a base
given as a ``.toml`` path is relative to the extending file. Cycles, unknown bases and
edits of unknown section ids are errors located at the offending key.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import Problem, ProfileError, ProfileSyntaxError, parse_document, read_text
from .ids import PROFILE_ALIASES
from .profile import (
    BudgetSpec,
    ProfileSpec,
    TextLocator,
    display_path,
    is_file,
    is_profile_path,
    problem_summary,
    profile_candidates,
    schema_problems,
    shown_name,
    unknown_profile,
)

__all__ = [
    "Origin", "PartialProfile", "ProfileSource", "SourceFile", "SourceMap", "resolve_profile",
]

Parts = tuple[str | int, ...]
_SECTION_OPS = frozenset({"remove", "replace", "before", "after"})


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One profile file of an extends chain, as read from disk."""

    file: str
    path: Path
    text: str
    data: dict[str, Any]
    #: Locates paths inside this file (one index of its lines, however many are asked for).
    locator: TextLocator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "locator", TextLocator(self.file, self.text, self.data))

    @property
    def sha256(self) -> str:
        """sha256 of the file's text."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a resolved value was written: a file and the JSON path inside it."""

    source: SourceFile
    parts: Parts


@dataclass(frozen=True, slots=True)
class SourceMap:
    """Maps JSON paths of a resolved profile to the file, line and path they came from."""

    files: tuple[SourceFile, ...]
    origins: Mapping[Parts, Origin]
    #: What ``check`` warns about in the chain (edits that may not do what was meant).
    warnings: tuple[Problem, ...] = ()

    def origin(self, parts: Sequence[str | int]) -> Origin:
        """The origin of ``parts``: the nearest recorded ancestor, extended by the rest."""
        key = tuple(parts)
        for size in range(len(key), -1, -1):
            found = self.origins.get(key[:size])
            if found is not None:
                return Origin(found.source, (*found.parts, *key[size:]))
        raise KeyError(key)  # the root is always recorded

    def where(self, parts: Sequence[str | int]) -> tuple[str, int | None, str]:
        """(file, line, rendered path) for ``parts``."""
        origin = self.origin(parts)
        return origin.source.locator.where(origin.parts)

    def problem(self, parts: Sequence[str | int], message: str) -> Problem:
        """A problem located where ``parts`` was written."""
        file, line, path = self.where(parts)
        return Problem(message, file=file, line=line, path=path)


@dataclass(frozen=True, slots=True)
class PartialProfile:
    """The parsed data of a profile file that failed its schema, and where its values
    are: attached to that :class:`~pioneer.errors.ProfileError` as ``partial``, so the
    compiler can check the templates of the sections that are well formed and report
    their problems with the schema's, all at once."""

    data: dict[str, Any]
    locator: TextLocator


@dataclass(frozen=True, slots=True)
class ProfileSource:
    """A resolved profile, the files it came from and where each of its values was written."""

    spec: ProfileSpec
    locator: SourceMap

    @property
    def file(self) -> str:
        """The profile file that was asked for."""
        return self.locator.files[0].file

    @property
    def files(self) -> tuple[SourceFile, ...]:
        """The extends chain: the requested file first, then each base."""
        return self.locator.files


def resolve_profile(path: Path, search: Sequence[Path]) -> ProfileSource:
    """Read a profile file, resolve its extends chain and schema-check the result."""
    data, locator = _resolve(path, search, ())
    return ProfileSource(ProfileSpec.model_validate(data), locator)


def _fail(problems: list[Problem], file: str) -> ProfileError:
    return ProfileError(problems, summary=problem_summary(problems, file))


def _read(path: Path) -> SourceFile:
    file = display_path(path)
    text = read_text(path, "profile", ProfileError)[0]
    data = parse_document(text, file, "toml", ProfileSyntaxError)
    return SourceFile(file, path, text, data)


def _resolve(
    path: Path, search: Sequence[Path], chain: tuple[SourceFile, ...]
) -> tuple[dict[str, Any], SourceMap]:
    source = _read(path)
    problems = list(schema_problems(source.data, source.locator, _file_model(source.data)))
    if problems:
        error = _fail(problems, source.file)
        if "extends" not in source.data:  # the rest can still be checked: see PartialProfile
            error.partial = PartialProfile(source.data, source.locator)  # type: ignore[attr-defined]
        raise error
    if "extends" not in source.data:
        return source.data, SourceMap((source,), {(): Origin(source, ())})
    base_path = _find_base(source, search, chain)
    base_data, base_map = _resolve(base_path, search, (*chain, source))
    merge = _Merge(source, base_data, base_map)
    if merge.problems:
        raise _fail(merge.problems, source.file)
    data, locator = merge.result()
    problems = list(schema_problems(data, locator, ProfileSpec))
    if problems:
        raise _fail(problems, source.file)
    return data, locator


def _file_model(data: Any) -> type[BaseModel]:
    """The model a profile file is checked against: a derived one when it has ``extends``."""
    if isinstance(data, dict) and "extends" in data:
        from .derived import DerivedProfileSpec  # builds its models: only when needed

        return DerivedProfileSpec
    return ProfileSpec


def _find_base(source: SourceFile, search: Sequence[Path], chain: tuple[SourceFile, ...]) -> Path:
    target = str(source.data["extends"])
    target = PROFILE_ALIASES.get(target, target)
    own = source.path.resolve()

    def fail(message: str) -> ProfileError:
        return ProfileError(source.locator.problem(["extends"], message))

    if is_profile_path(target):
        base = Path(os.path.normpath(source.path.parent / target))
        if not is_file(base):
            raise fail(f'profile file "{shown_name(target)}" not found (looked for '
                       f'{shown_name(str(base), 200)})')
    else:
        found = profile_candidates(target, search)
        resolved = [candidate.resolve() for candidate in found]
        if own in resolved:  # a file extending its own name means the next one down
            found = found[resolved.index(own) + 1:]
            if not found:
                raise fail(f'profile "{target}" extends itself and no other "{target}" '
                           "is further down the search path")
        if not found:
            raise fail(unknown_profile(target, search))
        base = found[0]
    walked = [*chain, source]
    repeats = [index for index, item in enumerate(walked) if item.path.resolve() == base.resolve()]
    if repeats:
        loop = [item.file for item in walked[repeats[0]:]] + [walked[repeats[0]].file]
        raise fail(f'"{source.data["extends"]}" closes a cycle: ' + " → ".join(loop))
    return base


@dataclass(slots=True)
class _Entry:
    """One resolved list entry (a section or a contribution) and where its parts came from."""

    data: dict[str, Any]
    origin: Origin
    keys: dict[Parts, Origin] = field(default_factory=dict)


class _Merge:
    """Applies one derived file's overrides and edits to its resolved base."""

    def __init__(self, derived: SourceFile, base: dict[str, Any], base_map: SourceMap):
        self.derived = derived
        self.base_name = str(base["name"])
        self.problems: list[Problem] = []
        self.top = {key: value for key, value in base.items() if key not in _LISTS}
        self.origins: dict[Parts, Origin] = {
            parts: origin for parts, origin in base_map.origins.items()
            if not parts or parts[0] not in _LISTS
        }
        self.files = (derived, *base_map.files)
        self.lists = {key: _entries(base, base_map, key) for key in _LISTS}
        self.present = {key for key in _LISTS if key in base or key in derived.data}
        self.touched: set[tuple[str, str]] = set()
        self.warnings: list[Problem] = list(base_map.warnings)
        edits = derived.data
        for key in ("name", "description"):
            if key in edits:
                self.top[key] = edits[key]
                self._mark((key,))
        if "budgets" in edits:
            self._budgets(edits["budgets"])
        for index, edit in enumerate(edits.get("contributions", [])):
            self._edit("contributions", index, edit)
        for index, edit in enumerate(edits.get("sections", [])):
            self._edit("sections", index, edit)
        self.problems.sort(key=lambda problem: problem.line or 0)  # document order

    def _mark(self, parts: Parts) -> None:
        """Record that the derived file wrote ``parts`` (at the same path)."""
        self.origins[parts] = Origin(self.derived, parts)

    def _problem(self, parts: Parts, message: str) -> None:
        self.problems.append(self.derived.locator.problem(list(parts), message))

    def _budgets(self, patch: dict[str, Any]) -> None:
        budgets = dict(self.top.get("budgets", {}))
        defaults = BudgetSpec().model_dump(mode="json", exclude_none=True)
        for key, value in patch.items():
            if isinstance(value, dict):  # a pool: merge key by key over the base's pool
                pool = dict(budgets.get(key, defaults[key]))
                for sub, number in value.items():
                    pool[sub] = number
                    self._mark(("budgets", key, sub))
                budgets[key] = pool
            else:
                budgets[key] = value
                self._mark(("budgets", key))
        self.top["budgets"] = budgets

    def _edit(self, kind: str, index: int, edit: dict[str, Any]) -> None:
        """Apply one ``[[sections]]`` or ``[[contributions]]`` entry of the derived file."""
        at: Parts = (kind, index)
        entries = self.lists[kind]
        ids = [str(entry.data["id"]) for entry in entries]
        item_id = str(edit["id"])
        current = ids.index(item_id) if item_id in ids else None
        anchor_key = "before" if "before" in edit else "after" if "after" in edit else None
        wrong = self._wrong(kind, edit, ids, current, anchor_key)
        self.touched.add((kind, item_id))
        self._mark((kind,))
        if wrong is not None:
            self._problem((*at, wrong[0]), wrong[1])
            return
        if edit.get("remove"):
            del entries[current]  # type: ignore[arg-type]  # _wrong ruled out None
            return
        fields = {key: value for key, value in edit.items() if key not in _SECTION_OPS}
        if current is not None and kind == "sections" and not edit.get("replace"):
            self._retitled(at, entries[current].data, fields, anchor_key)
        if current is None or edit.get("replace"):
            entry = _Entry(fields, Origin(self.derived, at))
        else:
            old = entries[current]
            entry = _Entry({**old.data, **fields}, old.origin, dict(old.keys))
            entry.keys.update({(key,): Origin(self.derived, (*at, key)) for key in fields})
        if anchor_key is not None:
            if current is not None:
                del entries[current], ids[current]
            entries.insert(ids.index(edit[anchor_key]) + (anchor_key == "after"), entry)
        elif current is None:
            entries.append(entry)
        else:
            entries[current] = entry

    def _retitled(self, at: Parts, base: dict[str, Any], fields: dict[str, Any],
                  anchor_key: str | None) -> None:
        """Warn about an entry written like a new section (a title, and a template or a
        stability) whose id is a base section's, without ``replace``: it patches (and,
        with ``before``/``after``, moves) that section instead of adding one. A plain
        patch of a few keys, such as a new title alone, says what it does and is quiet."""
        title = fields.get("title")
        if title is None or title == base.get("title") or not (
            {"template", "stability"} & set(fields)
        ):
            return
        what = "patches and moves" if anchor_key else "patches"
        self.warnings.append(self.derived.locator.problem(list((*at, "title")), (
            f'section "{base["id"]}" of base profile "{self.base_name}" exists: this entry '
            f'{what} it and changes its title from "{base.get("title")}" to "{title}" '
            '(add replace = true if that is meant, or give a new section its own id)'
        )))

    def _wrong(
        self, kind: str, edit: dict[str, Any], ids: list[str], current: int | None,
        anchor_key: str | None,
    ) -> tuple[str, str] | None:
        """What is wrong with an edit, as (key, message), or None."""
        item_id = str(edit["id"])
        noun = kind.removesuffix("s")
        if (kind, item_id) in self.touched:
            first = next(n for n, e in enumerate(self.derived.data[kind]) if e["id"] == item_id)
            return "id", f'{noun} "{item_id}" is already edited at {kind}[{first}]'
        if edit.get("remove"):
            extra = sorted(set(edit) - {"id", "remove"})
            if extra:
                got = ", ".join(f'"{key}"' for key in extra)
                return "remove", f"remove = true takes no other keys (got {got})"
            return None if current is not None else ("id", self._unknown(item_id, ids, noun))
        if "before" in edit and "after" in edit:
            return "after", 'give "before" or "after", not both'
        if current is None and edit.get("replace"):
            return "id", self._unknown(item_id, ids, noun)
        if current is None and anchor_key is None and kind == "sections":
            hint = '; to add a section, give it before = "<id>" or after = "<id>"'
            return "id", self._unknown(item_id, ids, noun, hint)
        if anchor_key is not None:
            anchor = str(edit[anchor_key])
            if anchor == item_id:
                return anchor_key, f'cannot place {noun} "{item_id}" {anchor_key} itself'
            if anchor not in ids:
                return anchor_key, self._unknown(anchor, ids, noun)
        return None

    def _unknown(self, item_id: str, ids: list[str], noun: str, hint: str = "") -> str:
        import difflib  # only to suggest a name for a wrong one

        message = f'unknown {noun} id "{item_id}" in base profile "{self.base_name}"'
        close = difflib.get_close_matches(item_id, ids, n=1, cutoff=0.75)
        return message + (f' (did you mean "{close[0]}"?)' if close else hint)

    def result(self) -> tuple[dict[str, Any], SourceMap]:
        """The merged data and its source map."""
        data = dict(self.top)
        origins = dict(self.origins)
        for kind, entries in self.lists.items():
            if kind not in self.present:
                continue
            data[kind] = [entry.data for entry in entries]
            for index, entry in enumerate(entries):
                origins[(kind, index)] = entry.origin
                for sub, origin in entry.keys.items():
                    origins[(kind, index, *sub)] = origin
        return data, SourceMap(self.files, origins, tuple(self.warnings))


_LISTS = ("contributions", "sections")


def _entries(base: dict[str, Any], base_map: SourceMap, kind: str) -> list[_Entry]:
    entries = []
    for index, item in enumerate(base.get(kind, [])):
        at: Parts = (kind, index)
        keys = {
            parts[2:]: origin for parts, origin in base_map.origins.items()
            if len(parts) > 2 and parts[:2] == at
        }
        entries.append(_Entry(dict(item), base_map.origin(at), keys))
    return entries
