"""Skills: find ``SKILL.md`` folders, choose the skills active for a turn, and write the
``[Skills]`` text of the Skills Runtime section.

The data types, the renderer and the name of its template live together here.
:func:`discover_skills` reads each immediate subfolder of a skills root that holds a
``SKILL.md``: YAML front matter (``name``, ``description``, optional ``paths`` globs,
``user-invocable``, ``disable-model-invocation``) between ``---`` lines, then the body.
A broken skill is skipped and reported as a located :class:`~pioneer.errors.Problem`;
it never stops the others. :func:`resolve_skills` picks the active skills in order of
reasons (explicit, then path match, then implicit) and :func:`match_path` is its glob
(``**`` spans segments, ``*`` stays within one).

:func:`build_skills_prompt` turns the active skills (in resolver order) into a
:class:`SkillsPrompt`: a compact block per skill with its exact ``read_skill`` slug;
full bodies only for path-matched skills and only when at most ``compact_threshold``
skills are active; the read_skill footer; a truncation note when anything was left
out; then the read_skill hint, cutting the text to make room for it. Every length check
counts UTF-8 bytes; a budget of 0 counts as 1. The words come from
``templates/renderers/skills.md.j2``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jinja2
import yaml  # type: ignore[import-untyped]

from ..errors import InputError, Problem
from ..files import Beneath, Opened, Refused
from ._macros import call_macro

__all__ = [
    "COMPACT_MODE_THRESHOLD",
    "MAX_SKILLS_PER_SOURCE",
    "READ_SKILL_MAX_CHARS",
    "SKILLS_MAX_CHARS",
    "SKILL_FILE",
    "ActivationReason",
    "ActiveSkill",
    "Skill",
    "SkillDiscovery",
    "SkillSource",
    "SkillsPrompt",
    "build_skills_prompt",
    "discover_skills",
    "match_path",
    "parse_skill",
    "resolve_skills",
]

TEMPLATE = "renderers/skills.md.j2"
SKILLS_MAX_CHARS = 24_000
COMPACT_MODE_THRESHOLD = 6

SkillSource = Literal["system", "user", "registry"]
ActivationReason = Literal["explicit", "path_match", "implicit"]


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill: a folder with a SKILL.md."""

    #: Owner-qualified slug, e.g. ``workspace/weather``.
    slug: str
    name: str
    description: str
    #: The skill's asset root.
    directory: str
    source: SkillSource = "user"
    body: str = ""
    #: Globs over touched paths that activate the skill.
    paths: tuple[str, ...] = ()
    user_invocable: bool = True
    disable_model_invocation: bool = False

    @property
    def skill_id(self) -> str:
        """The exact value read_skill takes: ``{source}:{slug}``."""
        return f"{self.source}:{self.slug}"


@dataclass(frozen=True, slots=True)
class ActiveSkill:
    """A skill chosen for this turn, and why."""

    skill: Skill
    reason: ActivationReason


@dataclass(frozen=True, slots=True)
class SkillsPrompt:
    """The built text, whether anything was left out, and the skill ids concerned."""

    text: str
    truncated: bool
    omitted: tuple[str, ...]


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _cut(text: str, limit: int) -> str:
    return text.encode("utf-8")[: max(0, limit)].decode("utf-8", "ignore")


class _Builder:
    def __init__(self, env: jinja2.Environment, limit: int):
        self.env = env
        self.limit = limit
        self.text = ""

    def piece(self, macro: str, *args: object, lead: str = "") -> str:
        return lead + call_macro(self.env, TEMPLATE, macro, *args) + "\n"

    def append(self, piece: str) -> bool:
        if _size(self.text + piece) > self.limit:
            return False
        self.text += piece
        return True


def build_skills_prompt(
    active: Sequence[ActiveSkill],
    env: jinja2.Environment,
    *,
    max_chars: int = SKILLS_MAX_CHARS,
    compact_threshold: int = COMPACT_MODE_THRESHOLD,
    include_read_skill_hint: bool = True,
) -> SkillsPrompt:
    """Build the ``[Skills]`` text for ``active`` within ``max_chars`` UTF-8 bytes."""
    if not active:
        return SkillsPrompt("", False, ())
    out = _Builder(env, max(1, max_chars))
    out.text = out.piece("intro")
    omitted: list[str] = []
    for item in active:
        skill = item.skill
        block = out.piece("block", skill.name, skill.skill_id, skill.directory,
                          skill.description.strip())
        if not out.append(block):
            omitted.append(skill.skill_id)
    if len(active) <= compact_threshold:
        matched = sorted((a.skill for a in active if a.reason == "path_match"),
                         key=lambda s: s.slug)
        for skill in matched:
            body = out.piece("body", skill.skill_id, skill.directory, skill.body.strip(),
                             lead="\n")
            if not out.append(body):
                omitted.append(skill.skill_id)
    else:
        omitted.extend(a.skill.skill_id for a in active)
    out.append(out.piece("footer"))
    if omitted:
        out.append(out.piece("truncation_note"))
    if include_read_skill_hint:
        hint = out.piece("hint")
        if not out.append(hint):
            room = out.limit - _size(hint) - 1
            kept = _cut(out.text, room)
            if kept and not kept.endswith("\n"):
                kept += "\n"
            out.text = kept + hint
    # Only a budget smaller than the intro (or the hint) can still be over here.
    text = _cut(out.text, out.limit)
    return SkillsPrompt(text, bool(omitted), tuple(dict.fromkeys(omitted)))


SKILL_FILE = "SKILL.md"
READ_SKILL_MAX_CHARS = 72_000
MAX_SKILLS_PER_SOURCE = 256
_RANK: dict[ActivationReason, int] = {"explicit": 0, "path_match": 1, "implicit": 2}


@dataclass(frozen=True, slots=True)
class SkillDiscovery:
    """The skills found under a root, and the problems with the ones skipped."""

    skills: tuple[Skill, ...]
    problems: tuple[Problem, ...]


def _flag(meta: dict[str, Any], key: str, default: bool, file: str) -> bool:
    for spelling in (key, key.replace("-", "_")):
        if spelling in meta:
            value = meta[spelling]
            if not isinstance(value, bool):
                raise InputError(Problem(f"expected true or false (got {value!r})",
                                            file=file, path=f"front matter → {spelling}"))
            return value
    return default


def _text(meta: dict[str, Any], key: str, file: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value.strip():
        shown = "nothing" if value is None else repr(value)
        raise InputError(Problem(f"expected a non-empty string (got {shown})", file=file,
                                    path=f"front matter → {key}"))
    return value.strip()


def _globs(meta: dict[str, Any], file: str) -> tuple[str, ...]:
    value = meta.get("paths", ())
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(Problem(f"expected a glob or a list of globs (got {value!r})",
                                    file=file, path="front matter → paths"))
    return tuple(v.strip() for v in value if v.strip())


def parse_skill(
    text: str, *, file: str, slug: str, directory: str, source: SkillSource = "user"
) -> Skill:
    """Parse one SKILL.md; raise :class:`~pioneer.errors.InputError` naming file and line."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise InputError(Problem("missing front matter: the first line must be ---",
                                    file=file, line=1))
    end = next((n for n in range(1, len(lines)) if lines[n].strip() == "---"), None)
    if end is None:
        raise InputError(Problem("front matter is not closed by a --- line", file=file,
                                    line=1))
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        reason = getattr(error, "problem", None) or "invalid YAML"
        raise InputError(Problem(f"{reason} (YAML front matter)", file=file,
                                    line=mark.line + 2 if mark else None)) from None
    if not isinstance(meta, dict):
        raise InputError(Problem("front matter must be a mapping of keys", file=file, line=2))
    return Skill(
        slug=slug,
        name=_text(meta, "name", file),
        description=_text(meta, "description", file),
        directory=directory,
        source=source,
        body="\n".join(lines[end + 1:]).strip(),
        paths=_globs(meta, file),
        user_invocable=_flag(meta, "user-invocable", True, file),
        disable_model_invocation=_flag(meta, "disable-model-invocation", False, file),
    )


def _read(opened: Opened) -> str:
    with os.fdopen(opened.fd, encoding="utf-8", newline=None) as handle:
        return handle.read(READ_SKILL_MAX_CHARS)


def discover_skills(
    root: Path, *, source: SkillSource = "user", owner: str = "workspace"
) -> SkillDiscovery:
    """Every ``<root>/<folder>/SKILL.md``, folders in name order; slugs ``owner/folder``.

    Each file is opened by :class:`~pioneer.files.Beneath`, so neither a symlinked
    folder or file nor one swapped in meanwhile can lead the read out of ``root``.
    """
    skills: list[Skill] = []
    problems: list[Problem] = []
    if not root.is_dir():
        return SkillDiscovery((), ())
    with Beneath(root) as beneath:
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            path = folder / SKILL_FILE
            file = str(path)
            try:
                opened = beneath.open([folder.name, SKILL_FILE])
            except Refused as refused:
                if refused.kind == "outside":
                    problems.append(Problem("skipped: it resolves outside the skills folder",
                                            file=file))
                elif refused.kind == "error":
                    problems.append(Problem(f"cannot read: {refused.reason}", file=file))
                continue
            if not opened.regular:
                os.close(opened.fd)
                continue
            if len(skills) == MAX_SKILLS_PER_SOURCE:
                os.close(opened.fd)
                problems.append(Problem(f"skipped: more than {MAX_SKILLS_PER_SOURCE} skills "
                                        f"in one folder", file=file))
                continue
            try:
                text = _read(opened)
                skills.append(parse_skill(text, file=file, slug=f"{owner}/{folder.name}",
                                          directory=str(folder), source=source))
            except InputError as error:
                problems.extend(error.problems)
            except (OSError, UnicodeDecodeError) as error:
                problems.append(Problem(f"cannot read: {error}", file=file))
    return SkillDiscovery(tuple(skills), tuple(problems))


def _segments(path: str) -> tuple[str, ...]:
    return tuple(s for s in path.replace("\\", "/").split("/") if s not in ("", "."))


def _segment_match(glob: str, name: str) -> bool:
    """One path segment against a glob whose only wildcard is ``*``: the literal pieces in
    order, the first at the start and the last at the end (leftmost placement is always
    enough, so this is linear and never backtracks)."""
    pieces = glob.split("*")
    if len(pieces) == 1:
        return glob == name
    first, *middle, last = pieces
    end = len(name) - len(last)
    if end < len(first) or not name.startswith(first) or not name.endswith(last):
        return False
    position = len(first)
    for piece in middle:
        found = name.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def _match(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether ``path`` matches ``pattern`` (``**`` spans any number of segments), each
    pair of positions tried once, so repeated ``**`` cannot make it explode."""

    @cache
    def at(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(path)
        if pattern[i] == "**":
            return any(at(i + 1, skip) for skip in range(j, len(path) + 1))
        return j < len(path) and _segment_match(pattern[i], path[j]) and at(i + 1, j + 1)

    return at(0, 0)


def match_path(glob: str, path: str) -> bool:
    """Whether ``path`` matches ``glob`` (``\\`` and ``/`` alike; empty and ``.`` ignored)."""
    return _match(_segments(glob), _segments(path))


def resolve_skills(
    skills: Iterable[Skill],
    *,
    explicit: Sequence[str] = (),
    touched_paths: Sequence[str] = (),
    allow_implicit: bool = False,
) -> list[ActiveSkill]:
    """The skills active for a turn, sorted by reason, then skill id.

    ``explicit`` names skills by skill id (``user:workspace/weather``) or slug. A skill
    that disables model invocation is only ever active when named explicitly.
    """
    named = set(explicit)
    active: list[ActiveSkill] = []
    for skill in skills:
        reason: ActivationReason | None = None
        if skill.skill_id in named or skill.slug in named:
            reason = "explicit"
        elif skill.disable_model_invocation:
            continue
        elif any(match_path(g, p) for g in skill.paths for p in touched_paths):
            reason = "path_match"
        elif allow_implicit and skill.user_invocable:
            reason = "implicit"
        if reason is not None:
            active.append(ActiveSkill(skill, reason))
    return sorted(active, key=lambda a: (_RANK[a.reason], a.skill.skill_id))
