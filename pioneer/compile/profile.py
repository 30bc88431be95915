"""Profiles: find, parse and validate the TOML that declares a prompt.

A profile is data: its ordered sections (id, title, stability, template, condition,
content source, budget), the bootstrap budgets and the contribution pools. Loading goes
TOML → ``schemas/profile.schema.json`` → structural rules, and every problem found is
reported at once with the file, the line where it can be found and the JSON path (a
:class:`Locator` maps a path to them; :mod:`pioneer.compile._extends` resolves derived profiles
first and supplies one that points into whichever file of the chain wrote a value).
Template checks need the template environment and live in :mod:`pioneer.compile.templates`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from ..documents import TomlLines
from ..errors import Problem, ProfileError, did_you_mean, format_path, row_labels, schema_message
from ..files import builtin_dir, load_schema
from ..text import EDGE_CONFIG
from .declared import InputName, InputSpec, declaration_problems
from .ids import ID_PATTERN, ID_RULE, PROFILE_ALIASES, id_problem

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "BUILTIN_PREFIX",
    "BudgetSpec",
    "ContributionSpec",
    "Locator",
    "PoolSpec",
    "ProfileSpec",
    "SectionSpec",
    "TextLocator",
    "display_path",
    "find_profile",
    "is_profile_path",
    "list_profiles",
    "profile_candidates",
    "schema_problems",
    "structural_problems",
    "unknown_profile",
]

#: File and template names: anything a file system can hold, so no NUL character.
_NAME_PATTERN = r"^[^\x00]+$"
#: How a failed ``pattern`` is worded, by pattern.
_PATTERN_WORDS = {ID_PATTERN: ID_RULE, _NAME_PATTERN: "must not contain a NUL character"}


class SectionSpec(BaseModel):
    """One declared section."""

    model_config = EDGE_CONFIG
    id: str = Field(pattern=ID_PATTERN, description="Manifest id (a contribution id for "
                    "source = \"contribution\").")
    title: str = Field(min_length=1, description="The ## heading.")
    stability: Literal["stable", "dynamic"] = Field(
        description="stable sections form the cached prefix; all come before dynamic ones."
    )
    template: str = Field(min_length=1, pattern=_NAME_PATTERN,
                          description="Template file under templates/.")
    source: Literal["text", "bootstrap", "input", "contribution", "slot"] = Field(
        default="text",
        description="text: built-in prose; bootstrap: a file of the runtime home; input: a "
        "compile-input field; contribution: the runtime/hook contribution with this id; "
        "slot: every contribution no other section claims, in pool order.",
    )
    when: str | None = Field(
        default=None, min_length=1, description="jinja2 expression over the compile context."
    )
    file: str | None = Field(default=None, min_length=1, pattern=_NAME_PATTERN,
                             description="bootstrap: the file name.")
    keep_empty: bool = Field(
        default=False, description="bootstrap: keep the section for an empty file."
    )
    reminder: bool = Field(default=False, description="bootstrap: add the evolution reminder.")
    field: str | None = Field(
        default=None, min_length=1, description="input: the compile-input field."
    )
    max_chars: int | None = Field(
        default=None, ge=0, description="Cap on the rendered body."
    )
    refuse: list[str] | None = Field(
        default=None, description="slot: contribution ids this section never places (each "
        "is left out with a diagnostic, e.g. a tool catalog in a tool-less profile)."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Budget gate: `pioneer check` fails when the rendered section "
        "(each contribution, for a slot) has more cl100k tokens.",
    )


class PoolSpec(BaseModel):
    """A contribution pool: total characters and a section count."""

    model_config = EDGE_CONFIG
    max_chars: int = Field(ge=0, description="Characters the pool may hold.")
    max_sections: int = Field(ge=0, description="Sections the pool may hold.")


class ContributionSpec(BaseModel):
    """Defaults for one known contribution id."""

    model_config = EDGE_CONFIG
    id: str = Field(pattern=ID_PATTERN, description="Contribution id.")
    title: str | None = Field(default=None, min_length=1, description="Default title.")
    max_chars: int = Field(
        default=8000, ge=0, description="Per-section cap (callers may lower it)."
    )
    sort_key: int = Field(default=9, description="Runtime-pool order key (lower first).")


class BudgetSpec(BaseModel):
    """Bootstrap and contribution budgets."""

    model_config = EDGE_CONFIG
    max_chars_per_file: int = Field(default=20_000, ge=0, description="Per bootstrap file.")
    max_chars_total: int = Field(default=150_000, ge=0, description="All bootstrap files together.")
    runtime_pool: PoolSpec = Field(
        default_factory=lambda: PoolSpec(max_chars=24_000, max_sections=16),
        description="Runtime contribution pool.",
    )
    hook_pool: PoolSpec = Field(
        default_factory=lambda: PoolSpec(max_chars=16_000, max_sections=16),
        description="Hook contribution pool.",
    )
    contribution_max_chars: int = Field(default=8000, ge=0, description="Default per-section cap.")
    contribution_sort_key: int = Field(default=9, description="Default runtime-pool order key.")
    max_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Budget gate: `pioneer check` fails when stable + dynamic text "
        "has more cl100k tokens.",
    )


class ProfileSpec(BaseModel):
    """A whole profile."""

    model_config = EDGE_CONFIG
    name: str = Field(pattern=ID_PATTERN, description="Profile name.")
    description: str = Field(default="", description="What the profile is for.")
    budgets: BudgetSpec = Field(default_factory=BudgetSpec, description="Budgets.")
    contributions: list[ContributionSpec] = Field(
        default_factory=list, description="Known contribution ids: titles, caps, order."
    )
    sections: list[SectionSpec] = Field(min_length=1, description="Ordered sections.")
    inputs: dict[InputName, InputSpec] = Field(
        default_factory=dict, description="Declared inputs by name: typed values a compile "
        "input gives (`inputs`), read by templates and conditions as `inputs.NAME`.")

    def contribution_specs(self) -> dict[str, ContributionSpec]:
        """Known contribution ids mapped to their spec."""
        return {spec.id: spec for spec in self.contributions}


def list_profiles(search: Sequence[Path]) -> dict[str, Path]:
    """Every profile name visible on the search path (earlier folders win)."""
    found: dict[str, Path] = {}
    for folder in [*search, builtin_dir("profiles")]:
        if folder.is_dir():
            for path in sorted(folder.glob("*.toml")):
                found.setdefault(path.stem, path)
    return found


#: How messages and the lock file name a file shipped in the package.
BUILTIN_PREFIX = "<built-in>/"


def display_path(path: Path) -> str:
    """How a profile file is named in messages and locks: a built-in one as
    ``<built-in>/profiles/NAME.toml`` (it is not in the deployment's folder)."""
    try:
        relative = path.resolve().relative_to(builtin_dir('profiles')).as_posix()
    except ValueError:
        return str(path)
    return f"{BUILTIN_PREFIX}profiles/{relative}"


def is_profile_path(name: str) -> bool:
    """Whether a profile reference names a file (``x.toml``, ``dir/x``) rather than a name."""
    return name.endswith(".toml") or "/" in name or "\\" in name


def is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file; ``False`` for a name no file system can hold
    (too long, a NUL byte), where :meth:`Path.is_file` would raise."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def profile_candidates(name: str, search: Sequence[Path]) -> list[Path]:
    """Every ``NAME.toml`` on the search path, deployment folders first, built-ins last."""
    return [folder / f"{name}.toml" for folder in [*search, builtin_dir("profiles")]
            if is_file(folder / f"{name}.toml")]


def shown_name(name: str, limit: int = 80) -> str:
    """A name as a message shows it: at most ``limit`` characters, control characters
    escaped."""
    text = name if len(name) <= limit else f"{name[:limit]}… ({len(name)} characters)"
    return text if text.isprintable() else repr(text)[1:-1]


def unknown_profile(name: str, search: Sequence[Path]) -> str:
    """The message for a profile name found nowhere on the search path."""
    known = sorted(list_profiles(search))
    return f'unknown profile "{shown_name(name)}"{did_you_mean(name, known)} ' \
        f'(known: {", ".join(known) or "none"})'


def find_profile(name: str, search: Sequence[Path]) -> Path:
    """Resolve a profile name (or a path to a .toml file) on the search path."""
    name = PROFILE_ALIASES.get(name, name)
    if is_profile_path(name):
        path = Path(name)
        if is_file(path):
            return path
        raise ProfileError(Problem("profile file not found", file=shown_name(name, 200)))
    found = profile_candidates(name, search)
    if not found:
        raise ProfileError(Problem(unknown_profile(name, search)))
    return found[0]


class Locator(Protocol):
    """Maps a JSON path of profile data to the file, line and path a message shows."""

    def where(self, parts: Sequence[str | int]) -> tuple[str, int | None, str]:
        """(file, line, rendered path) for ``parts``."""
        ...

    def problem(self, parts: Sequence[str | int], message: str) -> Problem:
        """A problem located at ``parts``."""
        ...


class TextLocator:
    """Locates paths inside one TOML file."""

    def __init__(self, file: str, text: str, data: Any):
        self.file, self.text, self.data = file, text, data
        self.lines = TomlLines(text)  # indexed when a first problem is located

    def where(self, parts: Sequence[str | int]) -> tuple[str, int | None, str]:
        """(file, line, rendered path) for ``parts``."""
        path = format_path(parts, row_labels(self.data, parts, _section_label)) or "(root)"
        return self.file, self.lines.line(parts), path

    def problem(self, parts: Sequence[str | int], message: str) -> Problem:
        """A problem located at ``parts``."""
        file, line, path = self.where(parts)
        return Problem(message, file=file, line=line, path=path)


def _section_label(row: dict[str, Any]) -> str | None:
    section_id = row.get("id")
    if not isinstance(section_id, str):
        return None
    # An id that breaks the rules is shown with its escapes, never as it would look.
    return f'id "{section_id}"' if id_problem(section_id) is None else \
        f"id {json.dumps(section_id)}"


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "pattern" and error.validator_value == ID_PATTERN \
            and isinstance(error.instance, str):
        return id_problem(error.instance) or ID_RULE  # the character that breaks the rule
    return schema_message(error, patterns=_PATTERN_WORDS)


def schema_problems(data: Any, where: Locator, model: type[BaseModel]) -> Iterator[Problem]:
    """Every schema violation of parsed (or resolved) profile data, in document order.

    ``model`` is the pydantic model the schema is generated from (a test keeps the two
    equal): when it accepts the data in strict mode (no type coercion, as JSON Schema
    has none) the data is valid, and jsonschema, slow to import, is needed only to
    locate and word the problems of invalid data.
    """
    try:
        model.model_validate(data, strict=True)
    except ValidationError as error:
        pydantic_errors = error.errors()
    else:
        return
    import jsonschema

    validator = jsonschema.Draft202012Validator(load_schema("profile.schema.json"))
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    problems: list[Problem] = []
    for found in errors:
        if found.validator == "additionalProperties" and isinstance(found.instance, dict):
            # each unknown key at its own line, with the name it was probably meant to be
            allowed = list((found.schema or {}).get("properties", {}))
            for key in sorted(set(found.instance) - set(allowed)):
                hint = did_you_mean(key, allowed) or f" (known: {', '.join(allowed)})"
                problems.append(where.problem([*found.absolute_path, key], f"unknown key{hint}"))
            continue
        problems.append(where.problem(list(found.absolute_path), _describe(found)))
    # A rule of the model the schema cannot say; and an id the schema's regex let through
    # (Python's ``$`` also matches before a final newline: ``"soul\n"``).
    reported = {tuple(map(str, found.absolute_path)) for found in errors}
    for item in pydantic_errors:
        value = item.get("input")
        bad_id = id_problem(value) if item["type"] == "string_pattern_mismatch" \
            and item.get("ctx", {}).get("pattern") == ID_PATTERN and isinstance(value, str) \
            else None
        if not errors or (bad_id and tuple(map(str, item["loc"])) not in reported):
            problems.append(where.problem(list(item["loc"]), bad_id or str(item["msg"])))
    yield from sorted(problems, key=lambda problem: problem.line or 0)


_SOURCE_NEEDS = {"bootstrap": "file", "input": "field"}


def structural_problems(
    profile: ProfileSpec, where: Locator, *, input_fields: Sequence[str]
) -> Iterator[Problem]:
    """Rules the schema cannot say: unique ids, order, source fields, one slot."""
    seen: dict[str, int] = {}
    slots = 0
    order: dict[int, list[Problem]] = {}
    for index, found in _order_problems(profile.sections, where):
        order.setdefault(index, []).append(found)
    for index, section in enumerate(profile.sections):

        def problem(key: str, message: str, index: int = index) -> Problem:
            return where.problem(["sections", index, key], message)

        if section.id in seen:
            first = seen[section.id]
            yield problem("id", f"duplicate section id (first used at sections[{first}])")
        seen.setdefault(section.id, index)
        yield from order.get(index, ())
        needed = _SOURCE_NEEDS.get(section.source)
        if needed and getattr(section, needed) is None:
            yield problem("source", f'source "{section.source}" needs key "{needed}"')
        for key in ("file", "field"):
            if key != needed and getattr(section, key) is not None:
                yield problem(key, f'key "{key}" only applies to source "{_source_of(key)}"')
        if section.source != "bootstrap":
            for key in ("keep_empty", "reminder"):
                if key in section.model_fields_set:
                    yield problem(key, f'key "{key}" only applies to source "bootstrap"')
        if section.source == "input" and section.field and section.field not in input_fields:
            yield problem(
                "field", f'"{section.field}" is not a compile-input field'
            )
        if section.refuse is not None and section.source != "slot":
            yield problem("refuse", 'key "refuse" only applies to source "slot"')
        if section.source == "slot":
            slots += 1
            if slots > 1:
                yield problem("source", "only one slot section is allowed")
            if section.stability != "dynamic":
                yield problem("stability", "a slot section must be dynamic")
        if section.source == "contribution" and section.stability != "dynamic":
            yield problem("stability", "a contribution section must be dynamic")
    for name, spec in profile.inputs.items():
        for parts, message in declaration_problems(spec):
            yield where.problem(["inputs", name, *parts], message)


def _order_problems(sections: Sequence[SectionSpec],
                    where: Locator) -> Iterator[tuple[int, Problem]]:
    """Every stable section must come before every dynamic one. In a derived profile the
    problem is said once, at the entry of the file nearest to the one asked for that put
    a section out of order (its ``before``/``after`` or ``stability``), naming the
    sections it stands next to; otherwise at each stable section after a dynamic one."""
    kinds = [section.stability for section in sections]
    if "dynamic" not in kinds or "stable" not in kinds:
        return
    first_dynamic = kinds.index("dynamic")
    last_stable = len(kinds) - 1 - kinds[::-1].index("stable")
    if last_stable < first_dynamic:
        return
    early = [i for i in range(first_dynamic, last_stable) if kinds[i] == "dynamic"]
    late = [i for i in range(first_dynamic + 1, last_stable + 1) if kinds[i] == "stable"]
    decided = getattr(where, "decided", None)
    chosen = {i: decided(i) for i in (*early, *late)} if decided is not None else {}
    nearest = min((depth for depth, _ in chosen.values()), default=0)
    if len({depth for depth, _ in chosen.values()}) < 2:  # one file put them all there
        for index in late:
            before = next(sections[i].id for i in range(index) if kinds[i] == "dynamic")
            yield index, where.problem(["sections", index, "stability"],
                                       f'stable section after dynamic section "{before}"; '
                                       "every stable section must come first")
        return
    placed = sorted(i for i, (depth, _) in chosen.items() if depth == nearest)
    others = [i for i in range(len(sections)) if i not in placed]
    last = max((i for i in others if kinds[i] == "stable"), default=last_stable)
    first = min((i for i in others if kinds[i] == "dynamic"), default=first_dynamic)
    for index in placed:
        key = chosen[index][1]
        section = sections[index]
        wanted = "stable" if section.stability == "dynamic" else "dynamic"
        if key == "after" or (key == "id" and index > 0):
            neighbour, side = sections[index - 1], "after"
        elif key == "before" and index + 1 < len(sections):
            neighbour, side = sections[index + 1], "before"
        else:
            neighbour, side = sections[index], ""
        if neighbour.stability != wanted:  # the nearest section that is
            if section.stability == "dynamic":
                neighbour, side = next(s for s in sections[index + 1:]
                                       if s.stability == "stable"), "before"
            else:
                neighbour, side = next(s for s in reversed(sections[:index])
                                       if s.stability == "dynamic"), "after"
        said = "is made dynamic here but comes" if key == "stability" and (
            section.stability == "dynamic") else "is placed"
        if section.stability == "dynamic":
            rule = (f"a dynamic section must come after every stable one: put it after "
                    f"{sections[last].id} or later")
        else:
            rule = (f"a stable section must come before every dynamic one: put it before "
                    f"{sections[first].id} or earlier")
        yield index, where.problem(["sections", index, key], (
            f'{section.stability} section "{section.id}" {said} {side} {neighbour.id}, '
            f"which is {wanted}; {rule}"))


def _source_of(key: str) -> str:
    return next(source for source, needed in _SOURCE_NEEDS.items() if needed == key)
