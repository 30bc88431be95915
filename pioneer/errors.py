"""Errors: one root, structured fields, rendered in one place.

Every failure a user can cause is a :class:`PioneerError`. Each carries one or more
:class:`Problem` values (file, line, column, JSON path, message) so callers can act on
them, and ``str(error)`` renders them location-first, one per line, the way compilers do.
Reading a document and finding the line of a problem in it is :mod:`pioneer.documents`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_SHOWN",
    "BudgetError",
    "ContextWindowError",
    "HookError",
    "InputError",
    "LockError",
    "PioneerError",
    "Problem",
    "ProfileError",
    "ProfileSyntaxError",
    "ProviderError",
    "StoreError",
    "TemplateError",
    "ThreadConflictError",
    "UsageError",
    "counted",
    "describe_exception",
    "did_you_mean",
    "format_path",
    "problem_summary",
    "quoted_key",
    "report_lines",
    "row_labels",
    "schema_message",
    "wrong_field",
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
        head = f"{_shown_path(self.path)}: {self.message}" if self.path else self.message
        text = f"{location}: {head}" if location else head
        if self.context:
            text += f"\n  {self.context}"
        return text


#: How much of a problem's path a message shows: a key of megabytes is not echoed whole.
MAX_SHOWN_PATH = 300


def _shown_path(path: str) -> str:
    """``path``, its middle left out past :data:`MAX_SHOWN_PATH` characters."""
    if len(path) <= MAX_SHOWN_PATH:
        return path
    left = len(path) - MAX_SHOWN_PATH
    return f"{path[:200]}…({left:,} characters left out)…{path[-100:]}"


def row_labels(data: Any, parts: Sequence[str | int],
               label: Callable[[dict[str, Any]], str | None]) -> dict[int, str]:
    """The labels :func:`format_path` shows after list indexes: for each index in
    ``parts`` that reaches a table of ``data``, what ``label`` names it by (a section's
    id, a model row's name), where it names one."""
    labels: dict[int, str] = {}
    node = data
    for position, part in enumerate(parts):
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(part, int) and isinstance(node, dict):
            found = label(node)
            if found is not None:
                labels[position] = found
    return labels


def problem_summary(problems: Sequence[Problem], file: str) -> str:
    """The closing line of a report of ``problems`` found in ``file``."""
    return f"error: {counted(len(problems), 'problem')} in {file}"


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


#: A report shows this many problems; one closing line counts the rest (every one of
#: them stays in :attr:`PioneerError.problems` and in ``check --format json``).
MAX_SHOWN = 100


def report_lines(problems: Sequence[Problem], limit: int = MAX_SHOWN) -> list[str]:
    """Each problem rendered, the first ``limit`` of them, then ``and N more problems``."""
    lines = [problem.render() for problem in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"and {counted(len(problems) - limit, 'more problem')}")
    return lines


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
        lines = report_lines(self.problems)
        if self.summary:
            lines.append(self.summary)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


class UsageError(PioneerError):
    """The command line is wrong: an unknown option or command, a missing or conflicting
    argument (exit 2, where bad input is exit 1)."""


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


class ThreadConflictError(StoreError):
    """Another turn of the thread was stored after this turn loaded its history window.

    The turn was not stored as finished (its answer was written for a history that is no
    longer the thread's); its rounds are kept as an abandoned turn, so nothing is lost.
    Retry by running the turn again as a new turn:
    ``agent.turn(error.thread_id, error.user_text)``, which loads the window with
    ``error.conflicting`` in it.
    """

    def __init__(self, problems: Problem | str | Sequence[Problem], *, thread_id: str,
                 turn_id: str, user_text: str, assistant_text: str | None = None,
                 conflicting: Sequence[str] = ()) -> None:
        self.thread_id = thread_id
        #: The turn that was not stored as finished (its record is kept as abandoned).
        self.turn_id = turn_id
        #: What the user asked: the input of the retry.
        self.user_text = user_text
        #: What the turn would have stored as its answer.
        self.assistant_text = assistant_text
        #: The turns of the thread stored after this one loaded its window, oldest first.
        self.conflicting: tuple[str, ...] = tuple(conflicting)
        super().__init__(problems)


class HookError(PioneerError, RuntimeError):
    """A fail-closed hook failed."""


class ProviderError(PioneerError, ValueError):
    """A provider's response is not the API's shape (the path says where)."""


class ContextWindowError(PioneerError):
    """A request cannot fit the model's context window even with no history and every
    older tool result of the turn cleared; raised before anything is sent.

    The counts are the provider's tokens as estimated (with the safety margin):
    ``needed_tokens`` is the smallest request the turn could build, ``reserve_tokens``
    what is kept for the reply and ``context_window`` the window it must fit.
    """

    def __init__(self, problems: Problem | str | Sequence[Problem], *, context_window: int,
                 reserve_tokens: int, needed_tokens: int) -> None:
        self.context_window = context_window
        self.reserve_tokens = reserve_tokens
        self.needed_tokens = needed_tokens
        super().__init__(problems)


def wrong_field(owner: str, name: str, expected: str, value: object) -> Problem:
    """A constructor argument of the wrong type: ``Owner → name: expected ... (got int)``."""
    return Problem(f"expected {expected} (got {type(value).__name__})", path=f"{owner} → {name}")


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is one: ``2 problems``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def did_you_mean(name: str, known: Iterable[str], *, cutoff: float = 0.6) -> str:
    """`` (did you mean "x"?)`` for the known name closest to ``name``, or ``""``.

    difflib's similarity of two names is ``2 * M / T``, ``M`` the characters they match
    and ``T`` their lengths together. A known name that cannot reach ``cutoff`` by a
    cheaper bound on ``M`` is left out before difflib compares the rest: ``M`` is at most
    each name's length less one for every distinct character the other lacks. That gives
    the answer difflib would give over every name, and most unknown names are like none.
    """
    word = name[:200]
    size, chars = len(word), frozenset(word)
    close_enough = [
        k for k in known
        if k != name and (total := size + len(k)) and 2.0 * min(
            size - len(chars.difference(k)), len(k) - len(set(k).difference(chars))
        ) / total >= cutoff
    ]
    if not close_enough:
        return ""
    import difflib  # only when a name is close to one

    close = difflib.get_close_matches(word, sorted(close_enough), n=1, cutoff=cutoff)
    return f' (did you mean "{close[0]}"?)' if close else ""


def describe_exception(error: BaseException) -> str:
    """``Type: message`` for an exception (just ``Type`` when it has no message): how an
    error pioneer did not raise itself is named in a problem or a diagnostic."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


#: How long a key may be when a message names it.
_KEY_CAP = 40


def quoted_key(name: str) -> str:
    """A key as a message names it: JSON-quoted, at most 40 characters."""
    shown = name if len(name) <= _KEY_CAP else name[: _KEY_CAP - 3] + "..."
    return json.dumps(shown, ensure_ascii=False)


def schema_message(error: Any, *, show_values: bool = True,
                   patterns: dict[str, str] | None = None) -> str:
    """What a ``jsonschema.ValidationError`` says, in pioneer's words: ``expected string
    (got 3)``, ``missing key "id"``, ``unknown key "colour"``, ``must be ≥ 0 (got -5)``.

    The one place a schema failure is worded, for profiles and for the memory extractor's
    replies. ``show_values=False`` leaves out the offending value (a model's reply is not
    echoed); ``patterns`` words a failed ``pattern`` by the pattern.
    """
    value = error.instance
    got = ""
    if show_values:
        shown = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
        got = f" (got {shown})"
    schema = error.schema if isinstance(error.schema, dict) else {}
    expected = error.validator_value
    if error.validator in ("anyOf", "oneOf") and error.context:
        specific = [sub for sub in error.context if sub.validator != "type"]
        if specific:
            return schema_message(specific[0], show_values=show_values, patterns=patterns)
        kinds: list[str] = []
        for sub in error.context:
            kinds += [sub.validator_value] if isinstance(sub.validator_value, str) else list(
                sub.validator_value)
        return f"expected {' or '.join(dict.fromkeys(kinds))}{got}"
    match error.validator:
        case "minimum":
            return f"must be ≥ {expected}{got}"
        case "maximum":
            return f"must be ≤ {expected}{got}"
        case "type":
            kinds = [expected] if isinstance(expected, str) else list(expected)
            return f"expected {' or '.join(kinds)}{got}"
        case "enum" | "const":
            options = schema.get("enum") or [schema.get("const")]
            return "expected one of " + ", ".join(f'"{o}"' for o in options) + got
        case "required":
            missing = [key for key in expected if key not in value]
            return "missing key " + ", ".join(quoted_key(key) for key in missing)
        case "additionalProperties":
            extra = sorted(set(value) - set(schema.get("properties", {})))
            return "unknown key " + ", ".join(quoted_key(key) for key in extra)
        case "pattern":
            return (patterns or {}).get(str(expected), "has the wrong form") + got
        case "minLength":
            return f"must not be empty{got}"
        case "maxLength":
            return f"longer than {expected} characters"
        case "minItems":
            return "must not be empty"
        case "maxItems":
            return f"more than {expected} items"
    return str(error.message)
