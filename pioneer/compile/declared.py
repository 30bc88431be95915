"""Declared inputs: the typed variables a profile's author names in ``[inputs.NAME]``.

A profile declares each input with JSON Schema keywords (``type``, ``enum``, ``default``,
``description``, ``examples``, ``minimum``/``maximum``, ``maxLength``, ``pattern``) and how
often its value changes (``changes``: ``deployment``, ``thread`` or ``turn``). This module
holds the declaration's model (:class:`InputSpec`), the checks of a declaration against
itself (:func:`declaration_problems`), of a given value against its declaration
(:func:`value_problem`), the resolution of one compile's values (:func:`resolve_inputs`:
what was given, the defaults for the rest, every problem located under ``inputs``), a
``--var NAME=VALUE`` text read by the declared type (:func:`parse_var`), the sha256 a
manifest keeps of a value (:func:`value_sha256`) and which inputs a template or condition
reads (:func:`input_uses`, from jinja2's AST: ``inputs.NAME`` and ``inputs["NAME"]``).
Templates and conditions see the resolved values as one read-only record, ``inputs``
(docs/profiles.md, "Declared inputs").
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Literal

from jinja2 import nodes
from pydantic import BaseModel, Field, StringConstraints

from ..errors import InputError, Problem, counted, did_you_mean, format_path
from ..text import EDGE_CONFIG

__all__ = [
    "INPUT_NAME_PATTERN",
    "InputName",
    "InputSpec",
    "InputValue",
    "declaration_problems",
    "input_schema",
    "input_uses",
    "inputs_error",
    "not_declared",
    "parse_var",
    "resolve_inputs",
    "shown_value",
    "value_problem",
    "value_sha256",
]

#: An input's name: an ASCII identifier of at most 64 characters, so a template reads it
#: as ``inputs.NAME``.
INPUT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
InputName = Annotated[str, StringConstraints(pattern=INPUT_NAME_PATTERN)]
InputType = Literal["string", "integer", "number", "boolean"]
#: A value an input can hold: text, a whole number, a number, true or false.
InputValue = str | bool | int | float
#: How many enum values and examples ``check`` renders an input with, at most.
TRIAL_VALUES = 16


class InputSpec(BaseModel):
    """One declared input: its type, its constraints and how often it changes."""

    model_config = EDGE_CONFIG
    type: InputType | list[InputType] = Field(
        description="string, integer, number or boolean, or a list of those (any of them)."
    )
    description: str = Field(default="", description="What the input holds.")
    enum: list[InputValue] | None = Field(
        default=None, min_length=1, description="The only values it may take."
    )
    default: InputValue | None = Field(
        default=None, description="The value when none is given (else it must be given)."
    )
    examples: list[InputValue] | None = Field(
        default=None, min_length=1,
        description="Values `pioneer check` renders the templates with.",
    )
    minimum: int | float | None = Field(default=None, description="Smallest number allowed.")
    maximum: int | float | None = Field(default=None, description="Largest number allowed.")
    max_length: int | None = Field(default=None, ge=0, alias="maxLength",
                                   description="Most characters a string may have.")
    pattern: str | None = Field(default=None, min_length=1,
                                description="A regular expression a string must contain a "
                                "match of (Python's re.search).")
    changes: Literal["deployment", "thread", "turn"] = Field(
        default="turn", description="How often the value changes: once per deployment, per "
        "thread or per turn. A stable section should read only the first two.")

    @property
    def types(self) -> tuple[str, ...]:
        """The declared types, as a tuple."""
        return tuple(self.type) if isinstance(self.type, list) else (self.type,)

    def trial_values(self) -> list[InputValue]:
        """The values ``check`` renders with: the examples, the default, the enum (each
        once, at most :data:`TRIAL_VALUES`), else one value of the first type."""
        values: list[InputValue] = []
        for value in [*(self.examples or ()), *([self.default] if self.default is not None
                                                else []), *(self.enum or ())]:
            if not any(_same(value, seen) for seen in values):
                values.append(value)
        if not values:
            values.append(_SAMPLE[self.types[0]])
        return values[:TRIAL_VALUES]


_SAMPLE: dict[str, InputValue] = {"string": "text", "integer": 1, "number": 1.5,
                                  "boolean": True}


def _kind(value: object) -> str:
    """A value's JSON type, as the messages name it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _same(a: object, b: object) -> bool:
    """Equal as JSON values of the same kind (``true`` is not ``1``)."""
    numbers = ("integer", "number")
    kinds = _kind(a), _kind(b)
    return a == b and (kinds[0] == kinds[1] or (kinds[0] in numbers and kinds[1] in numbers))


def shown_value(value: object, limit: int = 60) -> str:
    """A value as a message shows it: JSON, cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = type(value).__name__
    text = text if text.isprintable() else json.dumps(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _expected_type(spec: InputSpec) -> str:
    return " or ".join(spec.types)


def _type_ok(spec: InputSpec, value: object) -> bool:
    kind = _kind(value)
    return kind in spec.types or (kind == "integer" and "number" in spec.types)


def value_problem(spec: InputSpec, value: object) -> str | None:
    """What is wrong with ``value`` for ``spec`` (``expected ..., got ...``), or None."""
    if not _type_ok(spec, value):
        return f"expected {_expected_type(spec)}, got {_kind(value)} {shown_value(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value}"
    if spec.enum is not None and not any(_same(value, item) for item in spec.enum):
        allowed = ", ".join(shown_value(item) for item in spec.enum)
        return f"expected one of {allowed}, got {shown_value(value)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if spec.minimum is not None and value < spec.minimum:
            return f"expected at least {spec.minimum}, got {value}"
        if spec.maximum is not None and value > spec.maximum:
            return f"expected at most {spec.maximum}, got {value}"
    if isinstance(value, str):
        if spec.max_length is not None and len(value) > spec.max_length:
            return (f"expected at most {spec.max_length} characters, got {len(value)}")
        if spec.pattern is not None:
            try:
                matched = re.search(spec.pattern, value) is not None
            except re.error:  # reported where the profile declares it
                matched = True
            if not matched:
                return (f"expected text matching the pattern {shown_value(spec.pattern)}, "
                        f"got {shown_value(value)}")
    return None


def declaration_problems(spec: InputSpec) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """What is wrong with a declaration itself, as (path inside it, message): a pattern
    that is not a regular expression, a keyword of another type, bounds the wrong way
    round, an enum value, the default or an example that the declaration refuses."""
    numeric = {"integer", "number"} & set(spec.types)
    if spec.pattern is not None:
        try:
            re.compile(spec.pattern)
        except re.error as error:
            yield ("pattern",), f"not a regular expression: {error}"
    for key, value in (("minimum", spec.minimum), ("maximum", spec.maximum)):
        if value is not None and not numeric:
            yield (key,), f"{key} applies only to type integer or number (type is " \
                f"{_expected_type(spec)})"
    for key, given in (("maxLength", spec.max_length is not None),
                       ("pattern", spec.pattern is not None)):
        if given and "string" not in spec.types:
            yield (key,), f"{key} applies only to type string (type is {_expected_type(spec)})"
    if spec.minimum is not None and spec.maximum is not None and spec.minimum > spec.maximum:
        yield ("maximum",), f"maximum {spec.maximum} is below minimum {spec.minimum}"
    unconstrained = spec.model_copy(update={"enum": None})
    for index, item in enumerate(spec.enum or ()):
        wrong = value_problem(unconstrained, item)
        if wrong:
            yield ("enum", index), wrong
    if spec.default is not None:
        wrong = value_problem(spec, spec.default)
        if wrong:
            yield ("default",), f"the default does not fit the declaration: {wrong}"
    for index, item in enumerate(spec.examples or ()):
        wrong = value_problem(spec, item)
        if wrong:
            yield ("examples", index), f"the example does not fit the declaration: {wrong}"


#: Where a given input was written: (file, line, path) for its name (``None``: it was
#: not given, so the file as a whole).
Locate = Callable[[str | None], tuple[str | None, int | None, str]]


def _at_path(name: str | None) -> tuple[str | None, int | None, str]:
    return None, None, format_path(["inputs", name] if name is not None else ["inputs"])


def resolve_inputs(
    declared: Mapping[str, InputSpec], given: Mapping[str, Any], *, profile: str,
    locate: Locate = _at_path,
) -> tuple[dict[str, InputValue], list[Problem]]:
    """The value of each declared input for one compile (given, else its default) and
    every problem: an undeclared name (with the closest declared one), a value the
    declaration refuses, a missing input without a default. Each problem is located by
    ``locate`` (by default at the path ``inputs → NAME``)."""
    problems: list[Problem] = []
    values: dict[str, InputValue] = {}

    def problem(name: str | None, message: str) -> None:
        file, line, path = locate(name)
        problems.append(Problem(message, file=file, line=line, path=path))

    for name in given:
        if name not in declared:
            problem(name, not_declared(name, declared, profile))
    for name, spec in declared.items():
        if name in given:
            value = given[name]
            wrong = value_problem(spec, value)
            if wrong:
                problem(name, f'input "{name}" of profile "{profile}": {wrong}')
            else:
                values[name] = value
        elif spec.default is not None:
            values[name] = spec.default
        else:
            file, line, _ = locate(None)
            problems.append(Problem(
                f'input "{name}" of profile "{profile}" is missing: expected '
                f"{_expected_type(spec)}, got nothing (it has no default)", file=file,
                line=line, path=format_path(["inputs", name])))
    return values, problems


def not_declared(name: str, declared: Mapping[str, InputSpec], profile: str) -> str:
    """What is said of a given input the profile does not declare: the closest declared
    name, else every one."""
    hint = did_you_mean(str(name), declared) or f" (it declares {', '.join(declared) or 'none'})"
    return f'input "{name}" is not declared by profile "{profile}"{hint}'


def inputs_error(problems: list[Problem], profile: str) -> InputError:
    """The error for the problems of one compile's inputs."""
    return InputError(problems, summary=f"error: {counted(len(problems), 'problem')} in the "
                      f'inputs of profile "{profile}"')


def parse_var(spec: InputSpec, name: str, text: str) -> InputValue:
    """A ``--var NAME=VALUE`` text as a value of the declared type (string last: ``5``
    is a number for ``["string", "integer"]``); ``ValueError`` saying what was expected."""
    for kind in sorted(spec.types, key=lambda kind: kind == "string"):
        if kind == "boolean" and text in ("true", "false"):
            return text == "true"
        if kind == "integer" and re.fullmatch(r"[+-]?[0-9]+", text):
            return int(text)
        if kind == "number":
            try:
                number = float(text)
            except ValueError:
                continue
            if math.isfinite(number) and not re.search(r"[a-zA-Z]", text.replace("e", "")):
                return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else number
        if kind == "string":
            return text
    raise ValueError(f'input "{name}": expected {_expected_type(spec)}, got "{text}"')


def value_sha256(value: InputValue) -> str:
    """sha256 of a value's canonical JSON (UTF-8, no spaces): what a manifest keeps."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: An input a template reads (``None``: the whole ``inputs`` record) and its line.
InputUse = tuple[str | None, int]


def input_uses(tree: nodes.Node) -> list[InputUse]:
    """Every read of ``inputs`` in a parsed template or expression: ``inputs.NAME`` and
    ``inputs["NAME"]`` name one input; any other use (``inputs | tojson``, a loop over it)
    reads them all."""
    uses: list[InputUse] = []
    named: set[int] = set()
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        target = getattr(node, "node", None)
        if isinstance(target, nodes.Name) and target.name == "inputs" and target.ctx == "load":
            if isinstance(node, nodes.Getattr):
                uses.append((node.attr, node.lineno))
            elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and (
                    isinstance(node.arg.value, str)):
                uses.append((node.arg.value, node.lineno))
            else:
                continue
            named.add(id(target))
    for name in tree.find_all(nodes.Name):
        if name.name == "inputs" and name.ctx == "load" and id(name) not in named:
            uses.append((None, name.lineno))
    return uses



def input_schema(declared: Mapping[str, InputSpec], profile: str) -> dict[str, Any]:
    """The JSON Schema of a compile input's ``inputs`` for a profile that declares
    ``declared``: one property per input with its keywords, no other name, and each
    input without a default required."""
    properties: dict[str, Any] = {}
    for name, spec in declared.items():
        schema: dict[str, Any] = {"type": spec.type}
        if spec.description:
            schema["description"] = spec.description
        schema |= spec.model_dump(by_alias=True, exclude_none=True,
                                  exclude={"type", "description", "changes"})
        properties[name] = schema
    return {"type": "object", "description": f'The inputs profile "{profile}" declares.',
            "properties": properties, "additionalProperties": False,
            "required": [name for name, spec in declared.items() if spec.default is None]}
