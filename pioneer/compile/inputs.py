"""The compile input: everything a caller hands the compiler for one turn.

``PromptCompileInput`` is validated at the edge (pydantic, frozen, ``extra="forbid"``);
:func:`load_compile_input` reads one from a JSON or TOML file and turns validation
failures into an :class:`~pioneer.errors.InputError` naming the file and JSON path.
Lone surrogates in any text become U+FFFD (:mod:`pioneer.text`); a ``workspace_root``
that no file system can hold (a NUL byte, an unencodable character) is refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, Strict, ValidationError, WithJsonSchema

from ..documents import STDIN_NAME, TomlLines, json_lines, parse_document, read_text
from ..errors import InputError, Problem, counted, format_path
from ..text import EDGE_CONFIG, CheckedModel, EdgeModel, unknown_field
from .ids import ID_SCHEMA, PROFILE_ALIASES, check_dynamic_id, check_runtime_id

__all__ = [
    "DynamicSectionInput",
    "InputText",
    "PromptCompileInput",
    "PromptLimits",
    "RuntimeSectionInput",
    "SectionInput",
    "load_compile_input",
    "parse_compile_input",
    "read_compile_input",
]



#: The edge configuration, strict: a value of the wrong JSON type is refused, never
#: converted (``"2"`` is not a count), as JSON Schema would refuse it.
_STRICT = ConfigDict(**EDGE_CONFIG, strict=True)


class SectionInput(EdgeModel):
    """A contribution section handed to the compiler."""

    model_config = _STRICT
    id: str = Field(description="Section id.")
    title: str | None = Field(
        default=None, description="Heading; a default title is used when blank."
    )
    content: str = Field(description="Section body; blank content is omitted.")
    max_chars: int | None = Field(
        default=None, ge=0, description="Lower the per-section cap (never raises it)."
    )
    truncated: bool = Field(default=False, description="The producer already cut the content.")


class RuntimeSectionInput(SectionInput):
    """A runtime section: a built-in runtime id or a dynamic id."""

    id: Annotated[str, AfterValidator(check_runtime_id)] = Field(
        description="Section id.", json_schema_extra=ID_SCHEMA)


class DynamicSectionInput(SectionInput):
    """A hook (dynamic) section: always a dynamic id."""

    id: Annotated[str, AfterValidator(check_dynamic_id)] = Field(
        description="Section id.", json_schema_extra=ID_SCHEMA)


class PromptLimits(CheckedModel):
    """Bootstrap budgets for one compile; they can only lower the profile's."""

    model_config = _STRICT
    max_chars_per_file: int | None = Field(
        default=None, ge=0, description="Per-file character cap."
    )
    max_chars_total: int | None = Field(default=None, ge=0, description="Total character budget.")


def _canonical_profile(value: str) -> str:
    return PROFILE_ALIASES.get(value, value)


def _file_system_path(path: Path) -> Path:
    # A NUL byte or a character the file system encoding cannot hold would make every
    # later stat or open raise; refuse the path here, where the error names the field.
    try:
        encoded = os.fsencode(path)
    except UnicodeEncodeError:
        raise ValueError("not a valid file-system path (a character cannot be encoded)") from None
    if b"\0" in encoded:
        raise ValueError("not a valid file-system path (it holds a NUL byte)")
    return path


#: A declared input's value: checked against the profile's declaration when compiled
#: (the compile input does not know the profile's), so any JSON value is taken here.
_InputValue = Annotated[Any, WithJsonSchema(
    {"type": ["string", "integer", "number", "boolean"]})]


class PromptCompileInput(EdgeModel):
    """One turn's compile input."""

    model_config = _STRICT
    raw_fields = frozenset({"workspace_root"})
    # A path is written as a string in JSON and TOML: the one field not strict.
    workspace_root: Annotated[
        Path, Strict(False), AfterValidator(_file_system_path)
    ] | None = Field(
        default=None,
        description="Folder holding the bootstrap files; defaults to the runtime home.",
    )
    profile: Annotated[str, AfterValidator(_canonical_profile)] = Field(
        default="full", min_length=1, description="Profile name (assistant_* aliases accepted)."
    )
    skills_prompt: str | None = Field(
        default=None, description="Pre-rendered skills text."
    )
    retry_instruction: str | None = Field(default=None, description="Retry instruction text.")
    include_tool_recovery_policy: bool = Field(
        default=False, description="Add Tool Recovery Policy."
    )
    include_task_orchestration_policy: bool = Field(
        default=False, description="Add Task Orchestration."
    )
    continue_generation_hint: bool = Field(default=False, description="Add Recovery Continuation.")
    runtime_sections: list[RuntimeSectionInput] = Field(
        default_factory=list, description="Runtime contributions (sorted by sort key)."
    )
    dynamic_sections: list[DynamicSectionInput] = Field(
        default_factory=list, description="Hook contributions (kept in order)."
    )
    artifact_ref_count: int = Field(
        default=0, ge=0, description="Deprecated and ignored (an input_ignored diagnostic): "
        "the compiler counts the artifact refs of the sections and of the history passed "
        "as history= itself."
    )
    dynamic_context: str | None = Field(default=None, description="Per-turn context text.")
    extra_system: str | None = Field(default=None, description="Extra system text.")
    limits: PromptLimits = Field(default_factory=PromptLimits, description="Budget overrides.")
    inputs: dict[str, _InputValue] = Field(
        default_factory=dict, description="Values of the inputs the profile declares "
        "(`[inputs.NAME]`), by name; checked against the declarations when compiled.")


def _problems_from(
    error: ValidationError, file: str | None,
    lines: Callable[[list[list[str | int]]], list[int | None]],
) -> list[Problem]:
    problems = []
    items = error.errors()
    locs = [[part for part in item["loc"] if not isinstance(part, str) or part]
            for item in items]
    for item, loc, line in zip(items, locs, lines(locs), strict=True):
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = unknown_field(PromptCompileInput, loc)
        problems.append(Problem(message, file=file, line=line,
                                path=format_path(loc) or "(root)"))
    return problems


def parse_compile_input(
    data: Mapping[str, Any], *, file: str | None = None, text: str | None = None,
    kind: Literal["json", "toml"] = "json",
) -> PromptCompileInput:
    """Validate a mapping as compile input, reporting every problem at once; with the
    ``text`` it was parsed from, each problem names its line."""
    try:
        return PromptCompileInput.model_validate(data)
    except ValidationError as error:
        def lines(locs: list[list[str | int]]) -> list[int | None]:
            if text is None:
                return [None] * len(locs)
            if kind == "json":
                return json_lines(text, locs)
            return list(map(TomlLines(text).line, locs))

        problems = sorted(_problems_from(error, file, lines), key=lambda p: p.line or 0)
        raise InputError(problems, summary=_summary(len(problems), file)) from None


def _summary(count: int, file: str | None) -> str:
    where = f" in {file}" if file else ""
    return f"error: {counted(count, 'problem')}{where}"


@dataclass(frozen=True, slots=True)
class InputText:
    """The file a compile input was read from, to locate a later problem in it."""

    file: str
    text: str
    kind: Literal["json", "toml"]

    def line(self, parts: list[str | int]) -> int | None:
        """The line of the value at ``parts``, when the file has it."""
        if self.kind == "json":
            return json_lines(self.text, [parts])[0]
        return TomlLines(self.text).line(parts)


def load_compile_input(path: str | os.PathLike[str]) -> PromptCompileInput:
    """Read a compile input from a ``.json`` or ``.toml`` file (``-``: JSON or TOML from
    standard input, told apart by its first character)."""
    return read_compile_input(path)[0]


def read_compile_input(path: str | os.PathLike[str]) -> tuple[PromptCompileInput, InputText]:
    """:func:`load_compile_input`, and the text it was read from."""
    raw, name = read_text(path, "input")
    toml = Path(os.fspath(path)).suffix.lower() == ".toml" or (
        name == STDIN_NAME and not raw.lstrip().startswith(("{", "["))
    )
    data = parse_document(raw, name, "toml" if toml else "json")
    if not isinstance(data, dict):
        raise InputError(Problem("expected a JSON object at the top level", file=name))
    kind: Literal["json", "toml"] = "toml" if toml else "json"
    return parse_compile_input(data, file=name, text=raw, kind=kind), InputText(name, raw, kind)
