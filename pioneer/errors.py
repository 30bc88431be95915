"""Errors: one root, structured fields, rendered in one place.

Every failure a user can cause is a :class:`PioneerError`. Each carries one or more
:class:`Problem` values (file, line, column, JSON path, message) so callers can act on
them, and ``str(error)`` renders them location-first, one per line, the way compilers do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BudgetError",
    "HookError",
    "InputError",
    "LockError",
    "PioneerError",
    "Problem",
    "ProfileError",
    "ProfileSyntaxError",
    "StoreError",
    "TemplateError",
    "counted",
    "format_path",
    "json_problem",
    "read_json",
    "toml_problem",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One located problem: where it is and what was expected."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    path: str | None = None
    context: str | None = None

    def render(self) -> str:
        location = self.file or ""
        if self.file and self.line is not None:
            location += f":{self.line}"
            if self.column is not None:
                location += f":{self.column}"
        head = f"{self.path}: {self.message}" if self.path else self.message
        text = f"{location}: {head}" if location else head
        if self.context:
            text += f"\n  {self.context}"
        return text


def format_path(parts: Iterable[str | int], labels: dict[int, str] | None = None) -> str:
    """Render a JSON path as ``sections[3] (id "soul_core") → max_chars``.

    ``labels`` maps the position of a list index in ``parts`` to a label shown after it.
    """
    out: list[str] = []
    labels = labels or {}
    for position, part in enumerate(parts):
        if isinstance(part, int):
            piece = f"[{part}]"
            if position in labels:
                piece += f" ({labels[position]})"
            if out:
                out[-1] += piece
            else:
                out.append(piece)
        else:
            out.append(str(part))
    return " → ".join(out)


_TOML_POSITION = re.compile(
    r"^(?P<msg>.*?) \((?:at line (?P<line>\d+), column (?P<col>\d+)|(?P<end>at end of document))\)$"
)


def toml_problem(error: Exception, file: str) -> Problem:
    """A located problem from a ``tomllib.TOMLDecodeError``."""
    match = _TOML_POSITION.match(str(error))
    if not match:
        return Problem(f"{error} (TOML syntax)", file=file)
    message = match["msg"][:1].lower() + match["msg"][1:]
    if match["end"]:
        return Problem(f"{message} at end of document (TOML syntax)", file=file)
    return Problem(
        f"{message} (TOML syntax)", file=file, line=int(match["line"]), column=int(match["col"])
    )


class PioneerError(Exception):
    """Root of every error pioneer raises on purpose."""

    def __init__(self, problems: Problem | str | Sequence[Problem], *, summary: str | None = None):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.summary = summary
        super().__init__(self.render())

    def render(self) -> str:
        lines = [p.render() for p in self.problems]
        if self.summary:
            lines.append(self.summary)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class ProfileError(PioneerError, ValueError):
    """A profile is invalid: schema, ids, ordering, references."""


class ProfileSyntaxError(ProfileError):
    """A profile file is not valid TOML."""


class TemplateError(PioneerError, ValueError):
    """A template is missing, does not parse, needs unknown variables or fails to render."""


class InputError(PioneerError, ValueError):
    """The compile input (or another user-supplied document) is invalid."""


class BudgetError(PioneerError, ValueError):
    """A compiled prompt exceeds a declared budget."""


class LockError(PioneerError, ValueError):
    """Prompt sources differ from the lock file, or the lock file is unusable."""


class StoreError(PioneerError, RuntimeError):
    """The conversation store failed or holds inconsistent data."""


class HookError(PioneerError, RuntimeError):
    """A fail-closed hook failed."""


def json_problem(error: json.JSONDecodeError, file: str) -> Problem:
    """A located problem from a ``json.JSONDecodeError``."""
    return Problem(f"{error.msg} (JSON syntax)", file=file, line=error.lineno,
                   column=error.colno)


def read_json(path: Path, what: str) -> Any:
    """The parsed JSON of ``path``; an :class:`InputError` naming the file (and the line
    and column of a syntax error) when it cannot be read or parsed. ``what`` names the
    file's role in the message: ``cannot read {what}: ...``."""
    name = str(path)
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(Problem(f"cannot read {what}: {error}", file=name)) from None
    except json.JSONDecodeError as error:
        raise InputError(json_problem(error, name)) from None


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one: ``2 problems``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
