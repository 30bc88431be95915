"""The template sandbox: jinja2's ``SandboxedEnvironment`` plus limits on what it builds.

jinja2's sandbox refuses attribute walks to Python internals (``__class__``,
``__globals__``, ``__subclasses__``, ...), including those hidden in ``str.format``
fields, and caps ``range`` at ``MAX_RANGE`` items. It does not limit how much one
expression may build, so ``"x" * 10**10`` or ``"{:>9999999999}".format(1)`` would ask for
gigabytes. :class:`Sandbox` refuses, before building anything, every operation that
would make a string or list longer than :data:`MAX_BUILD` or an integer longer than
:data:`MAX_INT_BITS`: ``*``, ``**``, ``%`` formatting, ``str.format`` widths and
precisions, the padding methods (``center``, ``ljust``, ``rjust``, ``zfill``,
``expandtabs``), ``replace``, ``join``, ``int.to_bytes`` and the ``format``, ``center``,
``indent``, ``replace`` and ``join`` filters; ``lipsum`` is not offered.
:func:`render_parts` streams a render and stops once it emits more than its limit.

What is left: a template can still spend time in nested loops, or double a string in a
loop (``{% set ns.s = ns.s ~ ns.s %}``) until memory runs out; Python cannot stop a
running render. Refusals raise :class:`TemplateLimitError`, a jinja2 ``SecurityError``,
which the compiler reports as a ``TemplateError`` with the template and line.
"""

from __future__ import annotations

import re
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from string import Formatter
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

__all__ = [
    "MAX_BUILD",
    "MAX_INT_BITS",
    "MAX_OUTPUT",
    "Sandbox",
    "TemplateLimitError",
    "render_parts",
    "text_size",
]

#: The longest string (in characters) or list (in items) one template operation may build.
MAX_BUILD = 1_000_000
#: The largest integer (in bits) ``**`` may build.
MAX_INT_BITS = 100_000
#: What a section's template may emit beyond the text it was handed (see render_parts).
MAX_OUTPUT = 1_000_000

# One printf conversion: %[(key)][flags][width][.precision][length]type
_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.)", re.DOTALL)
_DIGITS = re.compile(r"\d+")


class TemplateLimitError(SecurityError):
    """A template operation would build more than the sandbox allows."""


def _refuse(what: str, size: int, limit: int = MAX_BUILD, unit: str = "characters") -> None:
    if size > limit:
        raise TemplateLimitError(
            f"{what} would build {size} {unit}; templates may build at most {limit}"
        )


def _length(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def _check_repeat(left: Any, right: Any) -> None:
    for sequence, count in ((left, right), (right, left)):
        if isinstance(count, int) and isinstance(sequence, (str, bytes, list, tuple)):
            _refuse("repeating a sequence", len(sequence) * max(count, 0))
            if isinstance(sequence, (list, tuple)):
                chars = sum(len(item) for item in sequence if isinstance(item, str))
                _refuse("repeating a list of strings", chars * max(count, 0))


def _check_power(base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        _refuse("a power", base.bit_length() * exponent, MAX_INT_BITS, "bits")


def _check_printf(template: Any, values: Any) -> None:
    """``%`` formatting: every width and precision is a literal within MAX_BUILD."""
    if not isinstance(template, str):
        return
    for match in _PRINTF.finditer(template):
        width, precision, _ = match.groups()
        if "*" in (width, precision):
            raise TemplateLimitError("a '*' width or precision in % formatting is not allowed "
                                     "in templates; write the number")
        _refuse("a % format width", int(width or 0))
        _refuse("a % format precision", int(precision or 0))


def _check_format(template: str) -> None:
    """``str.format``: no nested fields in a spec; every number in it within MAX_BUILD."""
    for _, field, spec, _ in Formatter().parse(template):
        if field is None or not spec:
            continue
        if "{" in spec:
            raise TemplateLimitError("a replacement field inside a format spec is not allowed "
                                     "in templates; write the number")
        for number in _DIGITS.findall(spec):
            _refuse("a format width or precision", int(number))


def _check_replace(text: Any, old: Any, new: Any, count: Any = -1) -> None:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return
    if len(new) <= len(old):
        return
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    _refuse("replace", len(text) + found * (len(new) - len(old)))


def _check_join(separator: Any, items: Any) -> None:
    if isinstance(items, (str, list, tuple)) and isinstance(separator, str):
        chars = len(items) if isinstance(items, str) else sum(
            len(item) for item in items if isinstance(item, str))
        _refuse("join", chars + len(separator) * max(len(items) - 1, 0))


def _argument(args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _width(args: Sequence[Any], kwargs: Mapping[str, Any], name: str = "width") -> int:
    value = _argument(args, kwargs, 0, name)
    return value if isinstance(value, int) else 0


def _check_method(method: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Bound methods of str and int that can build far more than they are given."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if isinstance(owner, str):
        if name in ("center", "ljust", "rjust", "zfill"):
            _refuse(f"str.{name}", _width(args, kwargs))
        elif name == "expandtabs":
            tabsize = _width(args, kwargs, "tabsize")
            _refuse("str.expandtabs", len(owner) + owner.count("\t") * max(tabsize, 0))
        elif name == "replace":
            _check_replace(owner, _argument(args, kwargs, 0, "old"),
                           _argument(args, kwargs, 1, "new"), _argument(args, kwargs, 2, "count"))
        elif name == "join" and args:
            _check_join(owner, args[0])
    elif isinstance(owner, int) and name == "to_bytes":
        length = _argument(args, kwargs, 0, "length")
        _refuse("int.to_bytes", length if isinstance(length, int) else 0, unit="bytes")


def _checked_filter(
    filters: dict[str, Callable[..., Any]], name: str, check: Callable[..., None]
) -> None:
    original = filters[name]

    def checked(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return original(*args, **kwargs)

    # Keep jinja2's pass_eval_context marker (replace and join take the eval context).
    checked.__dict__.update(getattr(original, "__dict__", {}))
    filters[name] = checked


def _format_filter(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_printf(value, args or kwargs)


def _center_filter(value: Any, width: Any = 80) -> None:
    _refuse("the center filter", width if isinstance(width, int) else 0)


def _indent_filter(value: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    if isinstance(width, int):
        lines = str(value).count("\n") + 1
        _refuse("the indent filter", len(str(value)) + lines * max(width, 0))


def _replace_filter(eval_ctx: Any, value: Any, old: Any, new: Any, count: Any = None) -> None:
    _check_replace(str(value), old, new, -1 if count is None else count)


def _join_filter(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> None:
    if attribute is None:
        _check_join(d, value)


class Sandbox(SandboxedEnvironment):
    """jinja2's sandbox, refusing operations that would build more than MAX_BUILD."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.globals.pop("lipsum", None)  # n paragraphs of filler text: nothing a prompt needs
        for name, check in (
            ("format", _format_filter),
            ("center", _center_filter),
            ("indent", _indent_filter),
            ("replace", _replace_filter),
            ("join", _join_filter),
        ):
            _checked_filter(self.filters, name, check)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any,
                   right: Any) -> Any:
        """``*``, ``**`` and ``%``, refused when the result would be too large."""
        if operator == "*":
            _check_repeat(left, right)
        elif operator == "**":
            _check_power(left, right)
        elif operator == "%":
            _check_printf(left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any,
             *args: Any, **kwargs: Any) -> Any:
        """A call from template code, refused when it would build too much."""
        _check_method(__obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` and ``format_map``, with their specs checked first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        _check_format(value.__self__)
        return wrapped


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


def render_parts(
    template: jinja2.Template,
    context: Mapping[str, Any],
    *,
    given: int | Callable[[], int] | None = None,
) -> list[str]:
    """Render ``template``; refuse once it emits MAX_OUTPUT characters beyond its input.

    The limit grows with the text handed in, so passing a long input through is never
    refused; a template that makes text of its own (a loop, a repeat) is. ``given`` is the
    size of that input (default ``text_size(context.values())``), or a function that
    measures it: it is only needed once a render passes MAX_OUTPUT, which almost none do,
    so the compiler hands in a function and the measuring is skipped on every normal turn.
    """
    limit: int | None = None
    parts: list[str] = []
    size = 0
    for part in template.root_render_func(_new_context(template, context)):
        size += len(part)
        if size > MAX_OUTPUT:
            if limit is None:
                if given is None:
                    given = text_size(context.values())
                limit = MAX_OUTPUT + (given() if callable(given) else given)
            if size > limit:
                raise TemplateLimitError(
                    f"the rendered text went over its limit of {limit} characters (a "
                    f"template may emit at most {MAX_OUTPUT} beyond the text it is given)"
                )
        parts.append(part)
    return parts


def _new_context(template: jinja2.Template, context: Mapping[str, Any]) -> jinja2.runtime.Context:
    """What ``Template.generate`` builds, without reading the globals' ChainMap twice.

    A template's globals are a ``ChainMap`` of its own over the environment's; jinja2
    copies it into the context and collects its keys through ChainMap's Python-level
    iteration on every render. Flattening the maps into a dict first (read fresh each
    time, so later changes to the globals still show) gives the same context for a
    fraction of the cost.
    """
    scopes = template.globals
    flat: dict[str, Any] = {}
    if isinstance(scopes, ChainMap):
        for scope in reversed(scopes.maps):
            flat.update(scope)
    else:
        flat.update(scopes)
    environment = template.environment
    return environment.context_class(
        environment, {**flat, **context}, template.name, template.blocks, globals=flat
    )
