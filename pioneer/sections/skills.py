"""Skills: find ``SKILL.md`` folders, choose the skills active for a turn, and write the
``[Skills]`` text of the Skills Runtime section.

The data types, the renderer and the name of its template live together here.
:func:`discover_skills` reads each immediate subfolder of a skills root that holds a
``SKILL.md``: YAML front matter (``name``, ``description``, optional ``paths`` globs,
``user-invocable``, ``disable-model-invocation``) between ``---`` lines, then the body.
A broken skill is skipped and reported as a located :class:`~pioneer.errors.Problem`;
it never stops the others. :func:`resolve_skill_outcomes` decides, for every skill it is
given, whether it is active and why (explicit, then path match, then implicit) or why
not (model invocation disabled, or not implicitly invocable), so the turn record keeps
the decision as made; :func:`resolve_skills` is its active list. :func:`match_path` is
its glob (``**`` spans segments, ``*`` stays within one).

:func:`build_skills_prompt` turns the active skills (in resolver order) into a
:class:`SkillsPrompt`: a compact block per skill with its exact ``read_skill`` slug;
full bodies only for path-matched skills and only when at most ``compact_threshold``
skills are active; the read_skill footer; a truncation note when anything was left
out; then the read_skill hint, dropping whole pieces from the end to make room for it.
Every piece is kept whole or left out, so the text is whole lines and a slug is never
cut; under a budget too tight for any skill entry the intro line, then the hint, give
way, and when not even the ``[Skills]`` header and one entry fit the text is empty with
a diagnostic (docs/hooks-and-sections.md, "Skills Runtime"). Every length check counts
UTF-8 bytes; a budget of 0 counts as 1. The words come from
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
    "MAX_FRONT_MATTER",
    "MAX_NESTING",
    "MAX_SKILLS_PER_SOURCE",
    "READ_SKILL_MAX_CHARS",
    "SKILLS_MAX_CHARS",
    "SKILL_FILE",
    "ActivationReason",
    "ActiveSkill",
    "ExclusionReason",
    "Skill",
    "SkillDiscovery",
    "SkillOutcome",
    "SkillResolution",
    "SkillSource",
    "SkillStatus",
    "SkillsPrompt",
    "build_skills_prompt",
    "discover_skills",
    "match_path",
    "parse_skill",
    "resolve_skill_outcomes",
    "resolve_skills",
]

TEMPLATE = "renderers/skills.md.j2"
SKILLS_MAX_CHARS = 24_000
COMPACT_MODE_THRESHOLD = 6

SkillSource = Literal["system", "user", "registry"]
ActivationReason = Literal["explicit", "path_match", "implicit"]
#: What the resolver decided for a skill: active, excluded because model invocation is
#: disabled, or left out because nothing activates it and it is not implicitly invocable.
SkillStatus = Literal["resolved", "disabled", "non_implicit"]
#: Why a skill was left out: ``disable_model_invocation`` (only an explicit request
#: activates it), ``implicit_off`` (the turn does not allow implicit skills) or
#: ``not_user_invocable`` (implicit skills are allowed, but not this one).
ExclusionReason = Literal["disable_model_invocation", "implicit_off", "not_user_invocable"]


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
    """The built text, whether anything was left out, the skill ids concerned, and why
    the text is empty when the budget could not hold any skill entry."""

    text: str
    truncated: bool
    omitted: tuple[str, ...]
    diagnostics: tuple[str, ...] = ()


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class _Piece:
    """One whole piece of the text; ``skill`` names the skill a block or body belongs to."""

    text: str
    size: int
    skill: str | None = None
    block: bool = False


class _Pieces:
    """Every piece the text can hold, each rendered once."""

    def __init__(self, env: jinja2.Environment, active: Sequence[ActiveSkill],
                 compact_threshold: int, hint: bool) -> None:
        def piece(macro: str, *args: object, lead: str = "", skill: str | None = None,
                  block: bool = False) -> _Piece:
            text = lead + call_macro(env, TEMPLATE, macro, *args) + "\n"
            return _Piece(text, _size(text), skill, block)

        intro = piece("intro").text
        first, _, rest = intro.partition("\n")
        self.header = _Piece(first + "\n", _size(first + "\n"))
        self.intro = _Piece(rest, _size(rest)) if rest else None
        self.blocks = [piece("block", a.skill.name, a.skill.skill_id, a.skill.directory,
                             a.skill.description.strip(), skill=a.skill.skill_id, block=True)
                       for a in active]
        self.bodies: list[_Piece] = []
        #: Skills omitted whatever the budget: above the threshold no body is shown.
        self.always_omitted: list[str] = []
        if len(active) <= compact_threshold:
            matched = sorted((a.skill for a in active if a.reason == "path_match"),
                             key=lambda s: s.slug)
            self.bodies = [piece("body", s.skill_id, s.directory, s.body.strip(), lead="\n",
                                 skill=s.skill_id) for s in matched]
        else:
            self.always_omitted = [a.skill.skill_id for a in active]
        self.footer = piece("footer")
        self.note = piece("truncation_note")
        self.hint = piece("hint") if hint else None


def _pack(pieces: _Pieces, limit: int, intro: bool,
          hint: bool) -> tuple[list[_Piece], list[str], bool]:
    """The pieces that fit in ``limit`` bytes, the skills omitted, and whether the hint
    is in; the header (and the intro, when asked) stay in front."""
    placed = [pieces.header]
    size = pieces.header.size
    omitted: list[str] = []

    def add(piece: _Piece) -> bool:
        nonlocal size
        if size + piece.size > limit:
            return False
        placed.append(piece)
        size += piece.size
        return True

    if intro and pieces.intro is not None:
        add(pieces.intro)
    frame = len(placed)
    for piece in (*pieces.blocks, *pieces.bodies):
        if not add(piece) and piece.skill is not None:
            omitted.append(piece.skill)
    omitted.extend(pieces.always_omitted)
    add(pieces.footer)
    if omitted:
        add(pieces.note)
    hinted = False
    if hint and pieces.hint is not None:
        frame_size = sum(p.size for p in placed[:frame])
        if frame_size + pieces.hint.size <= limit:
            # Whole pieces give way from the end, so the text stays whole lines.
            while size + pieces.hint.size > limit:
                dropped = placed.pop()
                size -= dropped.size
                if dropped.skill is not None:
                    omitted.append(dropped.skill)
            hinted = add(pieces.hint)
    return placed, omitted, hinted


def build_skills_prompt(
    active: Sequence[ActiveSkill],
    env: jinja2.Environment,
    *,
    max_chars: int = SKILLS_MAX_CHARS,
    compact_threshold: int = COMPACT_MODE_THRESHOLD,
    include_read_skill_hint: bool = True,
) -> SkillsPrompt:
    """Build the ``[Skills]`` text for ``active`` within ``max_chars`` UTF-8 bytes.

    The first arrangement that keeps at least one skill entry wins: the header, intro
    and hint around the entries; then without the intro line; then without the hint.
    When none keeps an entry, the text is empty, every skill is omitted, and
    ``diagnostics`` says how many bytes one entry would need.
    """
    if not active:
        return SkillsPrompt("", False, ())
    limit = max(1, max_chars)
    pieces = _Pieces(env, active, compact_threshold, include_read_skill_hint)
    hint = pieces.hint is not None
    for intro, with_hint in dict.fromkeys([(True, hint), (False, hint), (False, False)]):
        placed, omitted, hinted = _pack(pieces, limit, intro, with_hint)
        if any(p.block for p in placed):
            cut = (pieces.intro is not None and pieces.intro not in placed) or hint != hinted
            return SkillsPrompt("".join(p.text for p in placed), bool(omitted) or cut,
                                tuple(dict.fromkeys(omitted)))
    need = pieces.header.size + min(p.size for p in pieces.blocks)
    message = (f"the [Skills] text was left out: its budget of {limit} bytes cannot hold "
               f"the [Skills] header and one skill entry (the smallest needs {need} bytes)")
    return SkillsPrompt("", True, tuple(dict.fromkeys(a.skill.skill_id for a in active)),
                        (message,))


SKILL_FILE = "SKILL.md"
READ_SKILL_MAX_CHARS = 72_000
MAX_SKILLS_PER_SOURCE = 256
#: Characters of front matter a SKILL.md may have (its keys are a name, a description and
#: a few globs).
MAX_FRONT_MATTER = 16_384
#: Lists and mappings front matter may nest (the top-level mapping is one).
MAX_NESTING = 16
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


def _check_front_matter(source: str, file: str) -> None:
    """Refuse, from PyYAML's event stream and before it builds a single value, what would
    make it build far more than it reads: an alias (each can copy a whole structure, so a
    few hundred bytes expand past any memory) and nesting deeper than ``MAX_NESTING``."""
    depth = 0
    for event in yaml.parse(source, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise InputError(Problem(
                f"an alias (*{event.anchor}) is not allowed in front matter; write the value "
                "out (YAML front matter)", file=file, line=event.start_mark.line + 2))
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_NESTING:
                raise InputError(Problem(
                    f"front matter nests deeper than {MAX_NESTING} lists or mappings "
                    "(YAML front matter)", file=file, line=event.start_mark.line + 2))
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


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
    front = "\n".join(lines[1:end])
    if len(front) > MAX_FRONT_MATTER:
        raise InputError(Problem(f"front matter is {len(front)} characters long; at most "
                                 f"{MAX_FRONT_MATTER} are read", file=file, line=2))
    try:
        _check_front_matter(front, file)
        meta = yaml.safe_load(front) or {}
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


@dataclass(frozen=True, slots=True)
class SkillOutcome:
    """What the resolver decided for one skill: ``resolved`` with its activation reason,
    or ``disabled`` / ``non_implicit`` with the reason it was left out."""

    skill: Skill
    status: SkillStatus
    reason: ActivationReason | ExclusionReason


@dataclass(frozen=True, slots=True)
class SkillResolution:
    """The skills active for a turn, and the outcome for every skill considered."""

    #: Active skills, sorted by reason, then skill id.
    active: tuple[ActiveSkill, ...]
    #: Every skill given to the resolver: the active ones in that order, then the rest
    #: by skill id.
    outcomes: tuple[SkillOutcome, ...]


def resolve_skill_outcomes(
    skills: Iterable[Skill],
    *,
    explicit: Sequence[str] = (),
    touched_paths: Sequence[str] = (),
    allow_implicit: bool = False,
) -> SkillResolution:
    """Decide every skill of ``skills`` for a turn.

    ``explicit`` names skills by skill id (``user:workspace/weather``) or slug. A skill
    that disables model invocation is only ever active when named explicitly; one that
    is neither named nor matched by a touched path is active only when ``allow_implicit``
    and it is user-invocable.
    """
    named = set(explicit)
    active: list[ActiveSkill] = []
    left_out: list[SkillOutcome] = []
    for skill in skills:
        if skill.skill_id in named or skill.slug in named:
            active.append(ActiveSkill(skill, "explicit"))
        elif skill.disable_model_invocation:
            left_out.append(SkillOutcome(skill, "disabled", "disable_model_invocation"))
        elif any(match_path(g, p) for g in skill.paths for p in touched_paths):
            active.append(ActiveSkill(skill, "path_match"))
        elif allow_implicit and skill.user_invocable:
            active.append(ActiveSkill(skill, "implicit"))
        else:
            why: ExclusionReason = "not_user_invocable" if allow_implicit else "implicit_off"
            left_out.append(SkillOutcome(skill, "non_implicit", why))
    active.sort(key=lambda a: (_RANK[a.reason], a.skill.skill_id))
    left_out.sort(key=lambda o: o.skill.skill_id)
    outcomes = [SkillOutcome(a.skill, "resolved", a.reason) for a in active]
    return SkillResolution(tuple(active), (*outcomes, *left_out))


def resolve_skills(
    skills: Iterable[Skill],
    *,
    explicit: Sequence[str] = (),
    touched_paths: Sequence[str] = (),
    allow_implicit: bool = False,
) -> list[ActiveSkill]:
    """The skills active for a turn, sorted by reason, then skill id (the active list of
    :func:`resolve_skill_outcomes`)."""
    return list(resolve_skill_outcomes(skills, explicit=explicit, touched_paths=touched_paths,
                                       allow_implicit=allow_implicit).active)
