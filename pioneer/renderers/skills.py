"""Skills: the ``[Skills]`` text of the Skills Runtime section.

Data in (the active skills, in resolver order), text out (:class:`SkillsPrompt`). The
builder follows REFERENCE §11.1: a compact block per skill with its exact ``read_skill``
slug; full bodies only for path-matched skills and only when at most
``compact_threshold`` skills are active; the read_skill footer; a truncation note when
anything was left out; then the read_skill hint, cutting the text to make room for it.
Every length check counts UTF-8 bytes, as the reference does; a budget of 0 counts as 1.
The words come from ``templates/renderers/skills.md.j2``. Finding skills on disk and
choosing the active ones is :mod:`pioneer.skills`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import jinja2

from ._macros import call_macro

__all__ = [
    "COMPACT_MODE_THRESHOLD",
    "SKILLS_MAX_CHARS",
    "ActivationReason",
    "ActiveSkill",
    "Skill",
    "SkillSource",
    "SkillsPrompt",
    "build_skills_prompt",
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
