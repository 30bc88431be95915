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

A problem does not end the resolution: what a file's schema refuses is left out (a
wrong key; a list entry left without a key it needs, which is kept aside as a
:class:`DroppedSection` so its template can still be checked) and the rest goes on, so
``check`` sees every problem of a derived profile at once. Only what leaves nothing to go
on ends it: a file that does not parse, a base that cannot be found, a cycle.
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from ..documents import parse_document, read_text
from ..errors import Problem, ProfileError, ProfileSyntaxError, problem_summary
from .declared import InputSpec
from .ids import PROFILE_ALIASES
from .profile import (
    BudgetSpec,
    ContributionSpec,
    Locator,
    ProfileSpec,
    SectionSpec,
    TextLocator,
    display_path,
    is_file,
    is_profile_path,
    profile_candidates,
    schema_problems,
    shown_name,
    unknown_profile,
)

__all__ = [
    "DroppedSection", "Origin", "ProfileSource", "SourceFile", "SourceMap", "resolve_profile",
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

    def decided(self, index: int) -> tuple[int, str]:
        """Which file of the chain last decided where section ``index`` stands or how
        stable it is (0: the requested file, 1: its base, ...) and the key it did so
        with: ``before``, ``after`` or ``stability`` when a file wrote one for it, else
        ``id`` in the file that wrote the entry."""
        found = (self._depth(self.origin(("sections", index)).source), "id")
        for key in ("stability", "before", "after"):
            origin = self.origins.get(("sections", index, key))
            if origin is not None and self._depth(origin.source) <= found[0]:
                found = (self._depth(origin.source), key)
        return found

    def _depth(self, source: SourceFile) -> int:
        return next(i for i, item in enumerate(self.files) if item is source)

    def problem(self, parts: Sequence[str | int], message: str) -> Problem:
        """A problem located where ``parts`` was written."""
        file, line, path = self.where(parts)
        return Problem(message, file=file, line=line, path=path)


@dataclass(frozen=True, slots=True)
class DroppedSection:
    """A section entry left out of a resolved profile because its own keys are wrong (a
    key it needs is missing or refused; those problems are reported). Its template and
    condition are still checked, with the names of its source when that is one."""

    section: SectionSpec  # built unvalidated from the entry's keys of the right type
    locator: Locator  # where the entry was written
    index: int  # its position in ``locator``'s sections


@dataclass(frozen=True, slots=True)
class ProfileSource:
    """A resolved profile, the files it came from and where each of its values was written."""

    spec: ProfileSpec
    locator: SourceMap
    #: What was wrong on the way (``keep_going``): the spec holds the well-formed rest.
    problems: tuple[Problem, ...] = ()
    #: Section entries left out of ``spec`` because their own keys are wrong.
    dropped: tuple[DroppedSection, ...] = ()

    @property
    def file(self) -> str:
        """The profile file that was asked for."""
        return self.locator.files[0].file

    @property
    def files(self) -> tuple[SourceFile, ...]:
        """The extends chain: the requested file first, then each base."""
        return self.locator.files

    def select(self, indices: Sequence[int]) -> ProfileSource:
        """The profile with only the sections at ``indices``, each still located where
        it was written (for rendering the sound part of a profile with problems)."""
        sections = self.spec.sections
        spec = self.spec.model_copy(update={"sections": [sections[i] for i in indices]})
        moved = {"sections": {old: new for new, old in enumerate(indices)}}
        return ProfileSource(spec, _moved(self.locator, moved))


def resolve_profile(path: Path, search: Sequence[Path], *,
                    keep_going: bool = False) -> ProfileSource:
    """Read a profile file, resolve its extends chain and schema-check the result.

    Every problem is found. Without ``keep_going`` they are raised together as one
    :class:`~pioneer.errors.ProfileError`; with it they are returned in
    :attr:`ProfileSource.problems` beside the well-formed rest of the profile (what was
    refused is left out), and only a problem that leaves nothing to check is raised.
    """
    resolution = _Resolution(search)
    try:
        data, locator = resolution.resolve(path, ())
    except ProfileError as error:
        if not resolution.problems:
            raise
        raise _fail([*resolution.problems, *error.problems], display_path(path)) from None
    if resolution.problems and not keep_going:
        raise _fail(resolution.problems, locator.files[0].file)
    return ProfileSource(_spec(data, path), locator, tuple(resolution.problems),
                         tuple(resolution.dropped))


def _spec(data: dict[str, Any], path: Path) -> ProfileSpec:
    """The resolved data as a profile; when what is left still lacks a top-level key
    (reported already) the rest is taken as it is, its entries each validated."""
    try:
        return ProfileSpec.model_validate(data)
    except ValidationError:
        pass
    name = data.get("name")
    return ProfileSpec.model_construct(
        name=name if isinstance(name, str) else path.stem,
        description=str(data.get("description", "")),
        budgets=BudgetSpec.model_validate(data.get("budgets", {})),
        contributions=[ContributionSpec.model_validate(c) for c in data.get("contributions", [])],
        sections=[SectionSpec.model_validate(s) for s in data.get("sections", [])],
        inputs={name: InputSpec.model_validate(spec)
                for name, spec in data.get("inputs", {}).items()},
    )


def _fail(problems: list[Problem], file: str) -> ProfileError:
    return ProfileError(problems, summary=problem_summary(problems, file))


def _read(path: Path) -> SourceFile:
    file = display_path(path)
    text = read_text(path, "profile", ProfileError)[0]
    data = parse_document(text, file, "toml", ProfileSyntaxError)
    return SourceFile(file, path, text, data)


class _Resolution:
    """One resolution of an extends chain: the problems found and the entries dropped."""

    def __init__(self, search: Sequence[Path]):
        self.search = search
        self.problems: list[Problem] = []
        self.dropped: list[DroppedSection] = []
        #: Top-level keys some file of the chain had refused (each reported there).
        self.refused: set[str] = set()

    def resolve(
        self, path: Path, chain: tuple[SourceFile, ...]
    ) -> tuple[dict[str, Any], SourceMap]:
        source = _read(path)
        data, tainted = self._checked(source.data, source.locator, _file_model(source.data))
        if "extends" not in source.data:
            return _compacted(data, SourceMap((source,), {(): Origin(source, ())}))
        if "extends" not in data:  # refused itself: there is no base to go on with
            raise _fail([], source.file)
        base_path = _find_base(source, self.search, chain)
        base_data, base_map = self.resolve(base_path, (*chain, source))
        merge = _Merge(source, data, base_data, base_map, tainted)
        self.problems += merge.problems
        merged, locator = merge.result()
        # An entry of this file that had a key refused was reported: the whole profile's
        # check does not report it again (as a key now missing).
        reported = {(kind, index) for kind in _LISTS
                    for index in range(len(merged.get(kind, [])))
                    if (found := locator.origin((kind, index))).source is source
                    and found.parts[:2] in tainted}
        merged, _ = self._checked(merged, locator, ProfileSpec, reported, whole=True)
        return _compacted(merged, locator)

    def _checked(
        self, data: dict[str, Any], where: Locator, model: type[BaseModel],
        reported: set[tuple[str, int]] | frozenset[tuple[str, int]] = frozenset(), *,
        whole: bool = False,
    ) -> tuple[dict[str, Any], dict[Parts, set[str]]]:
        """``data`` without what ``model`` refuses (dropped entries as ``None``), each
        refusal reported, located by ``where``, unless it is in an entry already
        ``reported`` or (for the ``whole`` profile) a top-level key a file of the chain
        refused; and the entries it changed."""
        view = data
        if reported or (whole and self.refused):
            view = {**data, **{key: _STAND_INS[key] for key in self.refused
                               if whole and key in _STAND_INS and key not in data}}
            for kind, index in reported:
                view[kind] = [*view[kind]]
                view[kind][index] = _STAND_INS[kind][0]
        problems = list(schema_problems(view, where, model))
        if not problems and not reported:
            return data, {}
        self.problems += problems
        # what becomes the profile loses each entry with a wrong value whole: the section
        # would otherwise be checked and rendered as if the key were not there
        pruned = _pruned(data, model, reported, whole_entries=model is ProfileSpec)
        self.refused |= pruned.refused
        for index, entry in pruned.dropped:
            section = _dropped_section(entry)
            if section is not None:
                self.dropped.append(DroppedSection(section, where, index))
        return pruned.data, pruned.changed


#: What stands in, for the whole profile's check, for a value already reported: a
#: section entry of a derived file, a top-level key a file of the chain had refused.
_STAND_INS: dict[str, Any] = {
    "name": "-",
    "sections": [{"id": "-", "title": "-", "stability": "dynamic", "template": "-"}],
    "contributions": [{"id": "-"}],
}


def _dropped_section(entry: Any) -> SectionSpec | None:
    """A dropped section entry as a section to check the template of: its keys of the
    right type, unvalidated; ``None`` when it names no template."""
    if not isinstance(entry, dict):
        return None
    keys: dict[str, Any] = {
        key: value for key, value in entry.items()
        if key in ("id", "template", "source", "when") and isinstance(value, str) and value}
    if "template" not in keys:
        return None
    keys.setdefault("id", "?")
    return SectionSpec.model_construct(title="", stability="stable", **keys)


#: A pruning round can leave an entry without a key it needs; the next round drops it.
_PRUNE_ROUNDS = 8


class _Pruned(NamedTuple):
    data: dict[str, Any]
    dropped: list[tuple[int, Any]]  # the dropped sections (index, entry as written)
    changed: dict[Parts, set[str]]  # the list entries changed: the keys taken out
    refused: set[str]  # the top-level keys taken out


def _pruned(data: dict[str, Any], model: type[BaseModel], drop: Iterable[Parts] = (), *,
            whole_entries: bool = False) -> _Pruned:
    """``data`` without what ``model`` refuses: a wrong key is left out, and a list entry
    that is not a table or lacks a key it needs (with ``whole_entries``, any entry with a
    key of a wrong value; and each entry in ``drop``) is replaced by ``None``, so every
    other entry keeps its index: an unknown key changes nothing an entry means, a wrong
    value does. A top-level key that is missing cannot be left out and stays
    missing."""
    work = copy.deepcopy(data)
    found = _Pruned(work, [], {}, set())
    for kind, index in drop:
        work[str(kind)][int(index)] = None
        found.changed.setdefault((kind, index), set())
        if kind == "sections":
            found.dropped.append((int(index), data[str(kind)][int(index)]))
    for _ in range(_PRUNE_ROUNDS):
        kept = {kind: [i for i, entry in enumerate(work[kind]) if entry is not None]
                for kind in _LISTS if isinstance(work.get(kind), list)}
        view = {key: [work[key][i] for i in kept[key]] if key in kept else value
                for key, value in work.items()}
        try:
            model.model_validate(view, strict=True)
        except ValidationError as error:
            errors = error.errors()
        else:
            break
        changed = False
        for item in errors:
            loc = list(item["loc"])
            if loc and loc[0] in kept and len(loc) > 1 and isinstance(loc[1], int):
                kind, index = str(loc[0]), kept[str(loc[0])][loc[1]]
                entry = work[kind][index]
                if entry is None:
                    continue
                wrong = whole_entries and item["type"] != "extra_forbidden"
                if wrong or len(loc) == 2 or item["type"] == "missing" or not isinstance(
                        entry, dict):
                    work[kind][index] = None
                    if kind == "sections":
                        found.dropped.append((index, data[kind][index]))
                    changed = True
                elif entry.pop(loc[2], None) is not None:
                    changed = True
                key = str(loc[2]) if len(loc) > 2 else ""
                found.changed.setdefault((kind, index), set()).add(key)
                continue
            target = loc[:-1] if item["type"] == "missing" else loc[:3]
            if target and _remove(work, target):
                changed = True
                if len(target) == 1:
                    found.refused.add(str(target[0]))
        if not changed:
            break
    found.dropped.sort(key=lambda dropped: dropped[0])
    return found


def _remove(data: dict[str, Any], parts: Sequence[Any]) -> bool:
    """Delete the value at ``parts``; whether there was one."""
    node: Any = data
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and parts[-1] in node:
        del node[parts[-1]]
        return True
    return False


def _compacted(data: dict[str, Any], locator: SourceMap) -> tuple[dict[str, Any], SourceMap]:
    """``data`` with its dropped (``None``) entries taken out of its lists, and the source
    map moved to match: every entry still points where it was written."""
    moved: dict[str, dict[int, int]] = {}
    for kind in _LISTS:
        entries = data.get(kind)
        if isinstance(entries, list) and None in entries:
            kept = [i for i, entry in enumerate(entries) if entry is not None]
            moved[kind] = {old: new for new, old in enumerate(kept)}
            data = {**data, kind: [entries[i] for i in kept]}
    if not moved:
        return data, locator
    return data, _moved(locator, moved)


def _moved(locator: SourceMap, moved: Mapping[str, Mapping[int, int]]) -> SourceMap:
    """``locator`` for lists whose entries moved (old index → new; the rest are gone)."""
    origins: dict[Parts, Origin] = {}
    for parts, origin in locator.origins.items():
        if len(parts) > 1 and parts[0] in moved and isinstance(parts[1], int):
            new = moved[str(parts[0])].get(parts[1])
            if new is None:
                continue
            parts = (parts[0], new, *parts[2:])
        origins[parts] = origin
    for kind, positions in moved.items():
        for old, new in positions.items():
            origins.setdefault((kind, new), locator.origin((kind, old)))
    return SourceMap(locator.files, origins, locator.warnings)


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

    def __init__(self, derived: SourceFile, edits: dict[str, Any], base: dict[str, Any],
                 base_map: SourceMap, refused: Mapping[Parts, set[str]]):
        self.derived = derived
        self.edits = edits  # the derived file's data, what its schema refused left out
        self.refused = refused  # by entry, the keys its schema refused (each reported)
        self.base_name = str(base["name"])
        self.problems: list[Problem] = []
        self.top = {key: value for key, value in base.items() if key not in _LISTS}
        self.origins: dict[Parts, Origin] = {
            parts: origin for parts, origin in base_map.origins.items()
            if not parts or parts[0] not in _LISTS
        }
        self.files = (derived, *base_map.files)
        self.lists = {key: _entries(base, base_map, key) for key in _LISTS}
        self.ids = {key: [str(entry.data["id"]) for entry in entries]
                    for key, entries in self.lists.items()}
        self.present = {key for key in _LISTS if key in base or key in edits}
        self.touched: set[tuple[str, str]] = set()
        self.warnings: list[Problem] = list(base_map.warnings)
        for key in ("name", "description"):
            if key in edits:
                self.top[key] = edits[key]
                self._mark((key,))
        if "budgets" in edits:
            self._budgets(edits["budgets"])
        if "inputs" in edits:
            self._inputs(edits["inputs"], base_map)
        for kind in _LISTS:
            for index, edit in enumerate(edits.get(kind, [])):
                if edit is not None:  # None: dropped, its problems reported
                    self._edit(kind, index, edit)
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

    def _inputs(self, added: dict[str, Any], base_map: SourceMap) -> None:
        """Add the derived file's inputs to the base's; one the base declares already is
        refused (it would change what the base's templates were checked against)."""
        inputs = dict(self.top.get("inputs", {}))
        for name, spec in added.items():
            if name in inputs:
                file, line, _ = base_map.where(("inputs", name))
                self._problem(("inputs", name), (
                    f'input "{name}" is already declared by base profile "{self.base_name}" '
                    f"({file}{f':{line}' if line else ''}); a derived profile may add "
                    "inputs, not declare one of its base again"))
                continue
            inputs[name] = spec
            self._mark(("inputs", name))
        self.top["inputs"] = inputs

    def _edit(self, kind: str, index: int, edit: dict[str, Any]) -> None:
        """Apply one ``[[sections]]`` or ``[[contributions]]`` entry of the derived file."""
        at: Parts = (kind, index)
        entries, ids = self.lists[kind], self.ids[kind]  # kept in step
        item_id = str(edit["id"])
        current = ids.index(item_id) if item_id in ids else None
        anchor_key = "before" if "before" in edit else "after" if "after" in edit else None
        wrong = self._wrong(kind, edit, ids, current, anchor_key)
        self.touched.add((kind, item_id))
        self._mark((kind,))
        if wrong is not None:
            if not self.refused.get(at, set()) & _SECTION_OPS:  # else it is what was meant
                self._problem((*at, wrong[0]), wrong[1])
            return
        if edit.get("remove"):
            del entries[current], ids[current]  # type: ignore[index]  # _wrong ruled out None
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
            # where the entry now stands was decided here, whoever wrote the rest of it
            entry.keys[(anchor_key,)] = Origin(self.derived, (*at, anchor_key))
            if current is not None:
                del entries[current], ids[current]
            place = ids.index(edit[anchor_key]) + (anchor_key == "after")
            entries.insert(place, entry)
            ids.insert(place, item_id)
        elif current is None:
            entries.append(entry)
            ids.append(item_id)
        else:
            entries[current] = entry
            ids[current] = str(entry.data["id"])

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
            first = next(n for n, e in enumerate(self.edits[kind])
                         if e is not None and e["id"] == item_id)
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
    keys: dict[int, dict[Parts, Origin]] = {}  # each entry's recorded keys, in one pass
    for parts, origin in base_map.origins.items():
        if len(parts) > 2 and parts[0] == kind and isinstance(parts[1], int):
            keys.setdefault(parts[1], {})[parts[2:]] = origin
    return [_Entry(dict(item), base_map.origin((kind, index)), keys.get(index, {}))
            for index, item in enumerate(base.get(kind, []))]
