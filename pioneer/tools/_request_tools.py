"""``request_tools``: the one tool that makes a hidden tool domain visible.

Takes the domains still hidden in a provider round; gives the tool definition
(:class:`~pioneer.providers.ToolSpec` with its JSON Schema) and the argument check. The
arguments are ``{"domains": [...], "reason": "..."}``: ``domains`` a non-empty list
drawn from the hidden domains, ``reason`` a non-blank string of at most 512 characters,
no other keys (docs/explain.md, "`request_tools`, rounds and refusals"). The enum lists
only the domains still hidden in the round, so the model cannot ask for one it already
has; the schema changes only when the visible tool list changes too, which breaks any
tools cache anyway.

Arguments are checked with jsonschema against that same schema, and every problem is
reported at once, each naming its field (``arguments → domains[1]``), in words a model
can act on: a table maps each schema keyword to its message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema

from ..errors import PioneerError, Problem, counted, format_path
from ..providers.request import ToolSpec

__all__ = [
    "REASON_MAX_CHARS",
    "REQUEST_TOOLS",
    "RequestTools",
    "RequestedDomains",
    "ToolArgumentsError",
    "request_tools_for",
]

REQUEST_TOOLS = "request_tools"
REASON_MAX_CHARS = 512
_FIELDS = ("domains", "reason")


class ToolArgumentsError(PioneerError, ValueError):
    """A tool call's arguments do not match the tool's JSON Schema."""


@dataclass(frozen=True, slots=True)
class RequestedDomains:
    """Valid ``request_tools`` arguments: the domains (in order, once each) and why."""

    domains: tuple[str, ...]
    reason: str


def _schema(hidden: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "domains": {
                "type": "array",
                "minItems": 1,
                "items": {"enum": list(hidden)},
                "description": "Hidden tool domains to make visible.",
            },
            "reason": {
                "type": "string",
                "pattern": r"\S",
                "maxLength": REASON_MAX_CHARS,
                "description": "Why this turn needs them, in one sentence.",
            },
        },
        "required": list(_FIELDS),
        "additionalProperties": False,
    }


_DESCRIPTION = (
    "Make hidden tool domains visible for the rest of this turn. Their tools can be "
    "called from the next model request on."
)


@dataclass(frozen=True, slots=True)
class RequestTools:
    """The ``request_tools`` tool for one set of hidden domains."""

    hidden: tuple[str, ...]
    spec: ToolSpec
    validator: jsonschema.protocols.Validator

    def parse(self, arguments: object) -> RequestedDomains:
        """Check the arguments against the schema; raise :class:`ToolArgumentsError`."""
        problems = sorted(
            {p: None for e in self.validator.iter_errors(arguments) for p in _problems(self, e)},
            key=_order,
        )
        if problems:
            count = len(problems)
            raise ToolArgumentsError(problems, summary=(
                f"{REQUEST_TOOLS}: {counted(count, 'problem')} in the arguments; "
                "nothing was made visible"
            ))
        assert isinstance(arguments, Mapping)
        domains = tuple(dict.fromkeys(arguments["domains"]))
        return RequestedDomains(domains, arguments["reason"].strip())


@lru_cache(maxsize=64)
def request_tools_for(hidden: tuple[str, ...]) -> RequestTools:
    """The tool for these hidden domains (built once per distinct set)."""
    if not hidden:
        raise ValueError("request_tools needs at least one hidden domain")
    schema = _schema(hidden)
    spec = ToolSpec(name=REQUEST_TOOLS, description=_DESCRIPTION, parameters=schema)
    return RequestTools(hidden, spec, jsonschema.Draft202012Validator(schema))


# -- messages, one per schema keyword --------------------------------------------------


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _where(path: Sequence[str | int]) -> str:
    return format_path(["arguments", *path])


def _required(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    present = error.instance if isinstance(error.instance, Mapping) else {}
    wanted = {"domains": "a non-empty list of hidden tool domains",
              "reason": "a short reason"}
    for name in _FIELDS:
        if name not in present:
            yield Problem(f"missing; expected {wanted[name]}", path=_where([name]))


def _additional(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    assert isinstance(error.instance, Mapping)
    for key in error.instance:
        if key not in _FIELDS:
            yield Problem(f'unknown key; {REQUEST_TOOLS} takes only "domains" and "reason"',
                          path=_where([str(key)]))


def _type(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    expected = {"object": "an object", "array": "a list of domain names", "string": "a string"}
    yield Problem(f"expected {expected[str(error.validator_value)]}, got {_shown(error.instance)}",
                  path=_where(list(error.absolute_path)))


def _min_items(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    yield Problem("must name at least one domain", path=_where(list(error.absolute_path)))


def _enum(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    hidden = ", ".join(tool.hidden)
    yield Problem(f"{_shown(error.instance)} is not a hidden tool domain (hidden now: {hidden})",
                  path=_where(list(error.absolute_path)))


def _pattern(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    yield Problem("must not be blank", path=_where(list(error.absolute_path)))


def _max_length(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    yield Problem(f"must be at most {REASON_MAX_CHARS} characters (got {len(error.instance)})",
                  path=_where(list(error.absolute_path)))


_MESSAGES: dict[str, Callable[[RequestTools, jsonschema.ValidationError], Iterator[Problem]]] = {
    "required": _required,
    "additionalProperties": _additional,
    "type": _type,
    "minItems": _min_items,
    "enum": _enum,
    "pattern": _pattern,
    "maxLength": _max_length,
}


def _problems(tool: RequestTools, error: jsonschema.ValidationError) -> Iterator[Problem]:
    yield from _MESSAGES[str(error.validator)](tool, error)


def _order(problem: Problem) -> tuple[int, list[int], str]:
    # The argument object first, then the fields in schema order (list items by index),
    # then unknown keys by name.
    path = problem.path or ""
    parts = path.split(" → ")
    if len(parts) == 1:
        return (0, [], "")
    field = parts[1].split("[", 1)[0]
    rank = _FIELDS.index(field) + 1 if field in _FIELDS else len(_FIELDS) + 1
    return (rank, [int(index) for index in re.findall(r"\[(\d+)\]", path)], path)
