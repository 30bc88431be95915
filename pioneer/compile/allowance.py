"""The render allowance: one size limit for everything a template builds.

A render (a section's template, a ``when`` condition, a renderer macro called from
Python) runs inside :func:`render_scope`, which holds one :class:`Allowance`. Every
value the template builds is charged to it: text it prints, text it captures (``{% set
%}`` blocks, macros, ``caller()``, blocks, imported modules), and the results of its
operations (calls, filters, ``+``, ``*``, ``%``, ``~``). The limit is
:data:`MAX_OUTPUT` characters plus :data:`INPUT_COPIES` times the text the render was
handed, so a template can pass its input through a few filters, capture and print it,
but cannot make text of its own beyond the fixed part (making a value and printing it
both count). Lists count their items.

Operations whose result size follows from their arguments (a width, a repeat count, the
text form of a nested list) are measured *before* they run and refused when they would
pass the limit, so nothing that large is ever built: see :func:`text_length` and the
checks in :mod:`pioneer.compile.sandbox`.

A render is bounded in time the same way, by **steps**: every loop iteration and every
call (a function, a method, a filter, a macro, ``caller()``, a block) is one step, and a
call or filter handed a list or a long text is charged for the work it does on it (see
:mod:`pioneer.compile.sandbox`). A render that would pass its step limit
(:data:`MAX_STEPS` by default, the ``render_step_limit`` setting) stops with a
:class:`TemplateLimitError` where it is. Counting is deterministic: the same render
stops at the same step on any machine. docs/failure-behaviour.md says what this
guarantees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

from ..settings import RENDER_STEP_LIMIT

__all__ = [
    "CURRENT",
    "INPUT_COPIES",
    "MAX_DEPTH",
    "MAX_INT_BITS",
    "MAX_OUTPUT",
    "MAX_STEPS",
    "Allowance",
    "TemplateLimitError",
    "current",
    "render_scope",
    "text_length",
    "text_size",
]

#: The fixed part of a render's allowance, in characters (or list items). Making a value
#: and printing it both count, so a template can print about half of it of its own.
MAX_OUTPUT = 2_000_000
#: The steps (loop iterations and calls) one render may take by default: the
#: ``render_step_limit`` setting.
MAX_STEPS = RENDER_STEP_LIMIT
#: How many times over a render may build the text it was handed.
INPUT_COPIES = 4
#: The largest integer (in bits) ``**`` and ``*`` may build.
MAX_INT_BITS = 100_000
#: Nesting a value may have when it is turned into text.
MAX_DEPTH = 100


class TemplateLimitError(SecurityError):
    """A template would build more than its render allows."""


class Allowance:
    """What one render has built so far and the steps it took, and their limits (the
    size limit measured only when needed).

    ``given`` is the size of the text handed to the render, or a function that measures
    it: measuring walks the whole context, so it runs only once a render has built more
    than :data:`MAX_OUTPUT`, which almost none do. ``steps`` is the most steps the render
    may take.
    """

    __slots__ = ("_given", "_limit", "spent", "step_limit", "steps")

    def __init__(self, given: int | Callable[[], int] = 0, steps: int = MAX_STEPS):
        self.spent = 0
        self._given = given
        self._limit: int | None = None
        self.steps = 0
        self.step_limit = steps

    def step(self, count: int = 1) -> None:
        """Count ``count`` more steps taken; refuse past the step limit."""
        self.steps += count
        if self.steps > self.step_limit:
            raise TemplateLimitError(
                f"the render ran past its limit of {self.step_limit} steps (each loop "
                f"iteration and each call is one, a call handed a long list or text more; "
                f"the render_step_limit setting)"
            )

    def limit(self) -> int:
        """The most this render may build, in characters or items."""
        if self._limit is None:
            given = self._given() if callable(self._given) else self._given
            self._limit = MAX_OUTPUT + INPUT_COPIES * given
        return self._limit

    def charge(self, size: int) -> None:
        """Count ``size`` more characters (or items) built; refuse past the limit."""
        self.spent += size
        if self.spent > MAX_OUTPUT and self.spent > self.limit():
            raise TemplateLimitError(
                f"the render built more than its limit of {self.limit()} characters "
                f"(printed, captured and computed text all count: {MAX_OUTPUT} plus "
                f"{INPUT_COPIES} times the text it is given)"
            )

    def check(self, size: int, what: str, unit: str = "characters") -> None:
        """Refuse, before it is built, one result of ``size`` over the limit."""
        if size > MAX_OUTPUT and size > self.limit():
            raise TemplateLimitError(
                f"{what} would build {size} {unit}; templates may build at most {self.limit()}"
            )

    def measure(self, value: Any) -> int:
        """:func:`text_length` of ``value``, up to just past the limit."""
        size = text_length(value, MAX_OUTPUT)
        if size > MAX_OUTPUT:
            size = text_length(value, self.limit())
        return size

    def check_text(self, value: Any, what: str) -> None:
        """Refuse to turn ``value`` into text when that text would pass the limit."""
        if type(value) is not str and self.measure(value) > self.limit():
            raise TemplateLimitError(
                f"{what} would build more than {self.limit()} characters of text; "
                f"templates may build at most {self.limit()}"
            )


#: The allowance of the render running in this context (``render_scope`` sets it;
#: ``sandbox.render_parts`` sets it directly, saving a frame per render).
CURRENT: ContextVar[Allowance | None] = ContextVar("pioneer_render_allowance", default=None)


def current() -> Allowance:
    """The allowance of the render running in this thread (a fresh one outside any)."""
    return CURRENT.get() or Allowance()


class render_scope:
    """Run a render against a new :class:`Allowance` (a class, not a generator: it is
    entered on every render of every turn)."""

    __slots__ = ("_token", "allowance")

    def __init__(self, given: int | Callable[[], int] = 0, steps: int = MAX_STEPS):
        self.allowance = Allowance(given, steps)

    def __enter__(self) -> Allowance:
        self._token = CURRENT.set(self.allowance)
        return self.allowance

    def __exit__(self, *_: object) -> None:
        CURRENT.reset(self._token)


class _Over(Exception):
    """The text being measured already passed the cap."""


def text_length(value: Any, cap: int) -> int:
    """About ``len(str(value))``, without building it; ``cap + 1`` once it passes ``cap``.

    A list can hold the same object many times, so its text can be far longer than the
    memory it takes (``[["x" * 10**6]] * 1000``); every container is measured once, by
    identity, so the walk costs what the distinct values cost, not what their text would.
    """
    if type(value) is str:
        return len(value)
    try:
        return _measure(value, cap, {}, 0, True)
    except _Over:
        return cap + 1


def _measure(value: Any, cap: int, seen: dict[int, int], depth: int, top: bool) -> int:
    if isinstance(value, str):
        return len(value) if top else len(value) + 2  # repr: quotes
    if isinstance(value, (bytes, bytearray)):
        return len(value) + 3
    if value is None or isinstance(value, (bool, int, float)):
        return _scalar_length(value)
    known = seen.get(id(value))
    if known is not None:
        return known
    if depth >= MAX_DEPTH:
        raise TemplateLimitError(
            f"a value nested more than {MAX_DEPTH} levels deep cannot be turned into text"
        )
    items: Iterable[Any]
    if isinstance(value, Mapping) and hasattr(type(value), "__len__"):
        items = (part for pair in value.items() for part in pair)
        extra = 2 + 2 * len(value) + 2 * max(len(value) - 1, 0)  # {k: v, ...}
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
        extra = 2 + 2 * max(len(value) - 1, 0)  # [a, b, ...]
    elif isinstance(value, Namespace):  # its attributes live in a mangled dict, not __dict__
        items = (part for pair in object.__getattribute__(value, "_Namespace__attrs").items()
                 for part in pair)
        extra = 16
    elif isinstance(value, Mapping):  # jinja2's Context (``self`` holds it): short text
        return 0
    elif hasattr(value, "__dict__") and not callable(value):
        items = vars(value).values()
        extra = len(type(value).__name__) + 2 + 4 * len(vars(value))
    else:
        return 0  # a function, a type, a jinja2 helper: their text is short
    total = extra
    for item in items:
        total += _measure(item, cap, seen, depth + 1, False)
        if total > cap:
            raise _Over
    seen[id(value)] = total
    return total


def _scalar_length(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() * 3 // 10 + 2  # decimal digits, and a sign
    return 24


def text_size(values: Iterable[Any], depth: int = 3) -> int:
    """Characters of the strings in ``values``, looking into lists and models a few levels."""
    total = 0
    for value in values:
        if isinstance(value, str):
            total += len(value)
        elif depth and isinstance(value, (list, tuple)):
            total += text_size(value, depth - 1)
        elif depth and isinstance(value, Mapping):
            total += text_size(value.values(), depth - 1)
        elif depth and hasattr(value, "__dict__"):
            total += text_size(vars(value).values(), depth - 1)
        elif depth and hasattr(value, "__slots__"):
            slots = (value.__slots__,) if isinstance(value.__slots__, str) else value.__slots__
            total += text_size((getattr(value, slot, None) for slot in slots), depth - 1)
    return total
