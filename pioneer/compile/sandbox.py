"""The template sandbox: jinja2's ``SandboxedEnvironment`` plus limits on what it builds.

jinja2's sandbox refuses attribute walks to Python internals (``__class__``,
``__globals__``, ``__subclasses__``, ...), including those hidden in ``str.format``
fields, and caps ``range`` at ``MAX_RANGE`` items. It does not limit how much a template
may build. :class:`Sandbox` charges everything to the render's
:class:`~pioneer.compile.allowance.Allowance`, through jinja2's documented extension
points only:

- ``call`` (every call from template code), ``call_binop`` (``*``, ``**``, ``%``,
  ``+``), ``wrap_str_format`` and every filter: arguments that fix the size of the
  result (widths, counts, separators, the text form of a value) are measured first and
  the call refused when the result would pass the limit; the result is then charged;
- ``finalize`` (every printed value) and the code generator's ``~`` and output buffers
  (``{% set %}`` blocks, macros, ``caller()``, ``{% filter %}``), and ``concat`` (blocks
  called as ``self.name()`` or ``super()``): printed and captured text is charged;
- ``template_class``: an imported template's module is built anew for every import, so
  nothing a template sets survives into another render, and its text is charged too.

**Plain data only.** What a render is handed is turned into plain data first
(:func:`render_context`, :func:`evaluate`, and the renderer macros' arguments): strings,
numbers, booleans, ``None`` and read-only lists and mappings of them
(:func:`~pioneer.compile.readonly.plain`). And the sandbox allows an attribute or a call
only from an allow-list, never by default: the plain types' own safe methods
(``str.upper``, ``dict.items``, ...), jinja2's own helpers (``loop``, macros,
``namespace``, ``cycler``, ``joiner``, ``self`` and blocks) and the environment's
globals. Anything else a template reaches is refused, whatever its name, so a value
with methods of its own (a path, a model, a settings object) gives a template nothing
to call even if one got in (docs/failure-behaviour.md, "The sandbox: plain data only").

``lipsum``, ``random`` and ``pprint`` are not offered (filler text, non-determinism,
output that grows with nesting). Refusals raise
:class:`~pioneer.compile.allowance.TemplateLimitError` (a jinja2 ``SecurityError``); the
compiler reports it as a ``TemplateError`` with the template and line.

**Steps.** The time a render takes is bounded by its steps
(:meth:`~pioneer.compile.allowance.Allowance.step`): the code generator wraps every ``for``
loop's iterable in :meth:`Sandbox.counted`, which charges one step per item (a recursive
loop's ``loop(children)`` too), and every call from template code (``call``: functions,
methods, macros, ``caller()``, blocks), every filter and every test is one step plus the
work it is handed (:func:`_work`: a list's items, a text's kilobytes). A comparison's
operands and a slice are charged for the text or list they walk
(:meth:`Sandbox.weighed`), arithmetic for the digits of long integers. No thread, signal
or clock is involved: a render stops at the same step wherever it runs
(docs/failure-behaviour.md).
"""

from __future__ import annotations

import re
import types
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, MappingView, Sequence
from numbers import Number
from string import Formatter
from typing import Any

import jinja2
from jinja2.compiler import CodeGenerator, Frame, operators
from jinja2.environment import TemplateModule
from jinja2.filters import make_attrgetter
from jinja2.runtime import BlockReference, LoopContext, Macro, TemplateReference, Undefined
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import Cycler, Joiner, Namespace

from ..errors import did_you_mean
from .allowance import (
    CURRENT,
    INPUT_COPIES,
    MAX_INT_BITS,
    MAX_OUTPUT,
    MAX_STEPS,
    Allowance,
    TemplateLimitError,
    current,
    text_size,
)
from .readonly import FrozenDict, FrozenList, plain

__all__ = [
    "INPUT_COPIES",
    "JINJA_HELPERS",
    "MAX_INT_BITS",
    "MAX_OUTPUT",
    "PLAIN_METHODS",
    "Sandbox",
    "TemplateLimitError",
    "evaluate",
    "plain_methods",
    "render_context",
    "render_parts",
    "text_size",
]

# One printf conversion: %[(key)][flags][width][.precision][length]type
_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.)", re.DOTALL)
_DIGITS = re.compile(r"\d+")
_SEQUENCES = (str, bytes, list, tuple)


def _size(value: Any) -> int:
    """What a result counts against the allowance: its characters, bytes or items."""
    kind = type(value)
    if kind is str or kind is list or kind is tuple or kind is bytes or kind is dict:
        return len(value)
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


#: Filters that take the same time whatever they are handed (one step each).
_CONSTANT_FILTERS = frozenset({
    "abs", "attr", "count", "d", "default", "e", "escape", "first", "float", "int",
    "length", "round", "safe",
})
#: Methods of a list or tuple that walk it (a step per item); the others (``append``,
#: ``pop()``, ``get``, ``items``, ...) take the same time whatever its length.
_WALKING_METHODS = frozenset({"copy", "count", "index", "insert", "remove", "reverse", "sort"})


def _work(value: Any) -> int:
    """Steps beyond the first for handing ``value`` to a filter or a call: one per item of
    a list, mapping, set or range, one per 1,024 characters (or bytes) of a text (C code
    runs through a kilobyte in about the time a template loop takes for one step)."""
    kind = type(value)
    if kind is str or kind is bytes:
        return len(value) >> 10
    if kind is int or kind is bool or value is None:
        return 0
    if isinstance(value, (list, tuple, Mapping, set, frozenset, range, MappingView)):
        return len(value)
    return 0


def _scan_work(value: Any) -> int:
    """:func:`_work` of a value a comparison or a test walks: a text or a list (a mapping
    or a set is looked up by hash, whatever its size)."""
    kind = type(value)
    if kind is str or kind is bytes:
        return len(value) >> 10
    if isinstance(value, (list, tuple)):
        return len(value)
    return 0


def _call_work(obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """:func:`_work` of what a call is handed: its arguments, and the text or list a
    method walks (a list or mapping grown by ``append``, ``extend``, ... is charged to the
    size allowance instead)."""
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, (list, dict, set)) and obj.__name__ in _MUTATORS:
        return 0
    work = 0
    for arg in args:
        work += _work(arg)
    if kwargs:
        for arg in kwargs.values():
            work += _work(arg)
    if owner is not None:
        if isinstance(owner, (str, bytes)):
            work += len(owner) >> 10
        elif isinstance(owner, (list, tuple)) and obj.__name__ in _WALKING_METHODS:
            work += len(owner)
    return work


def _largest_text(values: Iterable[Any], allowance: Allowance) -> int:
    """The longest text form among ``values`` (what one format field can print)."""
    return max(map(allowance.measure, values), default=0)


# -- operators ----------------------------------------------------------------------


def _check_repeat(allowance: Allowance, left: Any, right: Any) -> None:
    for sequence, count in ((left, right), (right, left)):
        if isinstance(count, int) and isinstance(sequence, _SEQUENCES):
            count = max(count, 0)
            allowance.check(len(sequence) * count, "repeating a sequence")
            if isinstance(sequence, (list, tuple)) and count > 1:
                allowance.check(allowance.measure(sequence) * count,
                                "repeating a list of strings")


def _check_product(allowance: Allowance, left: Any, right: Any) -> None:
    if type(left) is int and type(right) is int:
        bits = left.bit_length() + right.bit_length()
        if bits > MAX_INT_BITS:
            raise TemplateLimitError(f"a product would build {bits} bits; templates may "
                                     f"build at most {MAX_INT_BITS}")


def _check_power(base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        bits = base.bit_length() * exponent
        if bits > MAX_INT_BITS:
            raise TemplateLimitError(
                f"a power would build {bits} bits; templates may build at most {MAX_INT_BITS}")


def _check_printf(allowance: Allowance, template: Any, values: Any) -> None:
    """``%`` formatting: literal widths, and no more text than the limit in all."""
    if isinstance(template, bytes):
        template = template.decode("latin-1")
    if not isinstance(template, str):
        return
    conversions = 0
    padding = 0
    for match in _PRINTF.finditer(template):
        width, precision, kind = match.groups()
        if "*" in (width, precision):
            raise TemplateLimitError("a '*' width or precision in % formatting is not allowed "
                                     "in templates; write the number")
        allowance.check(int(width or 0), "a % format width")
        allowance.check(int(precision or 0), "a % format precision")
        if kind != "%":
            conversions += 1
            padding += max(int(width or 0), int(precision or 0))
    if not conversions:
        return
    if isinstance(values, Mapping):
        items: Iterable[Any] = values.values()
    elif isinstance(values, tuple):
        items = values
    else:
        items = (values,)
    allowance.check(len(template) + padding + conversions * _largest_text(items, allowance),
                    "% formatting")


def _format_spec(template: str) -> tuple[int, int]:
    """``str.format``: the number of fields and the sum of their widths and precisions."""
    fields = padding = 0
    for _, field, spec, _ in Formatter().parse(template):
        if field is None:
            continue
        fields += 1
        if spec and "{" in spec:
            raise TemplateLimitError("a replacement field inside a format spec is not allowed "
                                     "in templates; write the number")
        numbers = [int(number) for number in _DIGITS.findall(spec or "")]
        for number in numbers:
            current().check(number, "a format width or precision")
        padding += sum(numbers)
    return fields, padding


# -- methods ------------------------------------------------------------------------


def _argument(args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _replace_size(text: Any, old: Any, new: Any, count: Any = -1) -> int:
    if not (isinstance(text, (str, bytes)) and type(old) is type(text)
            and type(new) is type(text)):
        return 0
    if len(new) <= len(old):
        return 0
    found = text.count(old) if old else len(text) + 1  # type: ignore[arg-type]
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


def _join_size(allowance: Allowance, separator: Any, items: Sequence[Any]) -> int:
    if isinstance(separator, bytes):
        chars = sum(len(item) for item in items if isinstance(item, (bytes, bytearray)))
    else:
        chars = sum(map(allowance.measure, items))
    return chars + len(separator) * max(len(items) - 1, 0)


def _translate_size(text: str, table: Any) -> int:
    if isinstance(table, Mapping):
        pairs: Iterable[tuple[Any, Any]] = table.items()
    elif isinstance(table, (list, tuple)):
        pairs = enumerate(table)
    else:
        raise TemplateLimitError("str.translate takes a dict or a list in templates")
    size = len(text)
    for key, value in pairs:
        if isinstance(key, int) and isinstance(value, str) and len(value) > 1:
            try:
                size += text.count(chr(key)) * (len(value) - 1)
            except (ValueError, OverflowError):
                continue
    return size


_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add"})


def _check_method(allowance: Allowance, method: Any, args: tuple[Any, ...],
                  kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """Bound methods that can build far more than they are given; returns the arguments
    (an iterable a size depends on is read into a list first)."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if isinstance(owner, (str, bytes)):
        kind = type(owner).__name__
        if name in ("center", "ljust", "rjust", "zfill"):
            allowance.check(_int(_argument(args, kwargs, 0, "width")), f"{kind}.{name}")
        elif name == "expandtabs":
            tabsize = _int(_argument(args, kwargs, 0, "tabsize"))
            tab = "\t" if isinstance(owner, str) else b"\t"
            allowance.check(len(owner) + owner.count(tab) * max(tabsize, 0),  # type: ignore[arg-type]
                            f"{kind}.expandtabs")
        elif name == "replace":
            allowance.check(_replace_size(owner, _argument(args, kwargs, 0, "old"),
                                          _argument(args, kwargs, 1, "new"),
                                          _argument(args, kwargs, 2, "count")), "replace")
        elif name == "join" and args:
            items = args[0] if isinstance(args[0], (list, tuple)) else list(args[0])
            allowance.check(_join_size(allowance, owner, items), "join")
            return (items, *args[1:])
        elif name == "translate" and args and isinstance(owner, str):
            allowance.check(_translate_size(owner, args[0]), "str.translate")
    elif isinstance(owner, int) and name == "to_bytes":
        allowance.check(_int(_argument(args, kwargs, 0, "length")), "int.to_bytes", "bytes")
    elif isinstance(owner, (list, dict, set)) and name in _MUTATORS and args:
        added = args[-1] if name in ("extend", "update") else None
        if added is not None and not hasattr(added, "__len__"):
            added = list(added)
            args = (*args[:-1], added)
        allowance.charge(len(added) if added is not None else 1)
    return args


# -- filters ------------------------------------------------------------------------

#: Filters that never turn their value into text (the others are measured first).
_NOT_TEXT = frozenset({
    "abs", "attr", "batch", "count", "d", "default", "dictsort", "first", "float",
    "groupby", "int", "items", "last", "length", "list", "map", "max", "min", "reject",
    "rejectattr", "reverse", "round", "select", "selectattr", "slice", "sort", "sum",
    "unique", "join", "format", "tojson",
})
#: Not offered: filler text, a random pick, and output that grows with nesting.
_REMOVED_FILTERS = ("random", "pprint")


def _center_filter(a: Allowance, value: Any, width: Any = 80, *_: Any) -> None:
    a.check(_int(width), "the center filter")


def _indent_filter(a: Allowance, value: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    per_line = len(width) if isinstance(width, str) else max(_int(width), 0)
    text = str(value)
    a.check(len(text) + (text.count("\n") + 1) * per_line, "the indent filter")


def _wordwrap_filter(a: Allowance, value: Any, width: Any = 79, _long: Any = True,
                     wrapstring: Any = None, *_: Any, **__: Any) -> None:
    if isinstance(wrapstring, str) and len(wrapstring) > 1:
        text = str(value)
        lines = len(text) // max(_int(width), 1) + text.count("\n") + 1
        a.check(len(text) + lines * len(wrapstring), "the wordwrap filter")


def _urlize_filter(a: Allowance, value: Any, *args: Any, **kwargs: Any) -> None:
    extra = sum(len(v) for v in (*args, *kwargs.values()) if isinstance(v, str))
    if extra:
        text = str(value)
        a.check(3 * len(text) + (len(text.split()) + 1) * (extra + 40), "the urlize filter")


def _replace_filter(a: Allowance, value: Any, old: Any = "", new: Any = "",
                    count: Any = None) -> None:
    a.check(_replace_size(str(value), old, new, -1 if count is None else count), "replace")


def _format_filter(a: Allowance, value: Any, /, *args: Any, **kwargs: Any) -> None:
    # Positional-only: the template's own keywords (``format(a=...)``) are its mapping.
    _check_printf(a, value, kwargs or args)


def _tojson_filter(a: Allowance, value: Any, indent: Any = None) -> None:
    a.check_text(value, "the tojson filter")
    if _int(indent) > 0:
        a.check(a.measure(value) * (1 + _int(indent)), "the tojson filter")


def _batch_filter(a: Allowance, value: Any, linecount: Any = 1, fill_with: Any = None) -> None:
    if fill_with is not None:
        a.check(_int(linecount), "the batch filter", "items")


def _slice_filter(a: Allowance, value: Any, slices: Any = 1, fill_with: Any = None) -> None:
    a.check(_int(slices), "the slice filter", "items")


_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "center": _center_filter,
    "indent": _indent_filter,
    "wordwrap": _wordwrap_filter,
    "urlize": _urlize_filter,
    "replace": _replace_filter,
    "format": _format_filter,
    "tojson": _tojson_filter,
    "batch": _batch_filter,
    "slice": _slice_filter,
}


def _items(environment: jinja2.Environment, value: Any, attribute: Any) -> list[Any]:
    items = list(value)
    if attribute is not None:
        getter = make_attrgetter(environment, attribute)
        items = [getter(item) for item in items]
    return items


def _keep_markers(new: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """Copy jinja2's markers (pass_eval_context, pass_environment, async variants)."""
    new.__dict__.update(getattr(original, "__dict__", {}))
    return new


def _join_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    def join(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
        allowance = current()
        allowance.step(1 + _work(value))
        items = _items(eval_ctx.environment, value, attribute)
        allowance.check(_join_size(allowance, d, items), "join")
        result = original(eval_ctx, items, d)
        allowance.charge(_size(result))
        return result

    return _keep_markers(join, original)


def _sum_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    """``sum`` over numbers as jinja2 does it; over lists or tuples in one pass (Python's
    ``sum`` copies the total at every step), refused past the limit before it is built."""

    def total(environment: jinja2.Environment, iterable: Any, attribute: Any = None,
              start: Any = 0) -> Any:
        current().step(1 + _work(iterable))
        if isinstance(start, Number):
            return original(environment, iterable, attribute, start)
        items = _items(environment, iterable, attribute)
        if not isinstance(start, (list, tuple)):
            return original(environment, items, None, start)
        allowance = current()
        kind = type(start)
        for item in items:
            if not isinstance(item, kind):
                raise TypeError(f'can only concatenate {kind.__name__} (not '
                                f'"{type(item).__name__}") to {kind.__name__}')
        allowance.check(len(start) + sum(map(len, items)), "the sum filter", "items")
        out = list(start)
        for item in items:
            out.extend(item)
        allowance.charge(len(out))
        return out if kind is list else tuple(out)

    return _keep_markers(total, original)


def _guarded_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, its value measured before it is turned into text, its size
    arguments checked, its result charged."""
    offset = 1 if getattr(original, "jinja_pass_arg", None) is not None else 0
    check = _FILTER_CHECKS.get(name)
    text = name not in _NOT_TEXT
    constant = name in _CONSTANT_FILTERS

    def guarded(*args: Any, **kwargs: Any) -> Any:
        allowance = current()
        if len(args) > offset:
            value = args[offset]
            allowance.step(1 if constant else 1 + _work(value))
            if text and type(value) is not str:
                allowance.check_text(value, f"the {name} filter")
            if check is not None:
                check(allowance, *args[offset:], **kwargs)
        result = original(*args, **kwargs)
        allowance.charge(_size(result))
        return result

    return _keep_markers(guarded, original)


def _counted_test(original: Callable[..., Any]) -> Callable[..., Any]:
    """A test (``is divisibleby``, ``is in``, ...), one step and the work it is handed."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        work = 1
        for arg in args:
            work += _scan_work(arg)
        current().step(work)
        return original(*args, **kwargs)

    return _keep_markers(counted, original)


# -- the code generator: capture, ``~`` and counted loops ---------------------------


class _Buffer(list):  # type: ignore[type-arg]
    """A capture buffer (``{% set %}`` block, macro, ``caller()``) that charges every
    piece as it is added, so a capture stops at the limit instead of growing past it."""

    __slots__ = ("_allowance",)

    def __init__(self, allowance: Allowance):
        super().__init__()
        self._allowance = allowance

    def append(self, piece: Any) -> None:
        self._allowance.charge(len(piece))
        list.append(self, piece)

    def extend(self, pieces: Iterable[Any]) -> None:
        for piece in pieces:
            self.append(piece)


class _CodeGenerator(CodeGenerator):
    """jinja2's code generator with counted capture buffers, a measured ``~`` and
    counted loops."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The iterables of the ``for`` loops being written, innermost last.
        self._loops: list[jinja2.nodes.Node] = []

    def visit_For(self, node: jinja2.nodes.For, frame: Frame) -> None:
        self._loops.append(node.iter)
        try:
            super().visit_For(node, frame)
        finally:
            self._loops.pop()

    def visit(self, node: jinja2.nodes.Node, *args: Any, **kwargs: Any) -> Any:
        """jinja2's visit; a ``for`` loop's iterable is written as
        ``environment.counted(iterable)`` (jinja2 allows no node types of our own)."""
        if self._loops and node is self._loops[-1]:
            self.write("environment.counted(")
            super().visit(node, *args, **kwargs)
            self.write(")")
            return None
        return super().visit(node, *args, **kwargs)

    def buffer(self, frame: Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.capture_buffer()")

    def visit_Compare(self, node: jinja2.nodes.Compare, frame: Frame) -> None:
        # Python's own chained comparison, each operand charged as it is evaluated.
        self.write("(environment.weighed(")
        self.visit(node.expr, frame)
        self.write(")")
        for operand in node.ops:
            self.write(f" {operators[operand.op]} environment.weighed(")
            self.visit(operand.expr, frame)
            self.write(")")
        self.write(")")

    def visit_Getitem(self, node: jinja2.nodes.Getitem, frame: Frame) -> None:
        # jinja2 writes a slice as Python's own subscript: the copy is charged as weighed.
        if isinstance(node.arg, jinja2.nodes.Slice):
            self.write("environment.weighed(")
            super().visit_Getitem(node, frame)
            self.write(")")
        else:
            super().visit_Getitem(node, frame)

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Frame) -> None:
        if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super().visit_Concat(node, frame)
            return
        self.write("environment.joined((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Template(jinja2.Template):
    """A template whose module is built anew on every import, its text charged.

    jinja2 keeps an imported template's module on the template object, so a list it
    sets (``{% set seen = [] %}``) would be shared by every later render that imports
    it, in any compile: one tenant's text could reach another's prompt.
    """

    def _get_default_module(self, ctx: jinja2.runtime.Context | None = None) -> TemplateModule:
        if ctx is not None:
            keys = ctx.globals_keys - self.globals.keys()
            if keys:
                return self.make_module({k: ctx.parent[k] for k in keys})
        return self.make_module()

    def make_module(self, vars: dict[str, Any] | None = None, shared: bool = False,
                    locals: Mapping[str, Any] | None = None) -> TemplateModule:
        context = self.new_context(vars, shared, locals)
        allowance = current()
        body = []
        for piece in self.root_render_func(context):
            allowance.charge(len(piece))
            body.append(piece)
        return TemplateModule(self, context, body)


def _printable(value: Any) -> Any:
    """``finalize``: a printed value whose text would pass the limit is refused first."""
    if type(value) is not str:
        current().check_text(value, "printing a value")
    return value


# -- the allow-list -------------------------------------------------------------------

_TEXT_METHODS = frozenset(
    "capitalize center count endswith expandtabs find index isalnum isalpha isascii "
    "isdigit islower isspace istitle isupper join ljust lower lstrip partition "
    "removeprefix removesuffix replace rfind rindex rjust rpartition rsplit rstrip split "
    "splitlines startswith strip swapcase title translate upper zfill".split()
)
_SEQUENCE_METHODS = frozenset({"count", "index"})
_LIST_METHODS = _SEQUENCE_METHODS | frozenset(
    {"append", "clear", "copy", "extend", "insert", "pop", "remove", "reverse", "sort"})
_DICT_METHODS = frozenset(
    {"clear", "copy", "get", "items", "keys", "pop", "popitem", "setdefault", "update",
     "values"})
_SET_READ = frozenset(
    {"copy", "difference", "intersection", "isdisjoint", "issubset", "issuperset",
     "symmetric_difference", "union"})
_NUMBER_METHODS = frozenset({"as_integer_ratio", "conjugate", "imag", "is_integer", "real"})

#: The plain types and the attributes a template may use on each: their own methods that
#: only read or build plain data (a view's changers refuse with ``ReadOnlyError``). The
#: first type an object is an instance of decides (``bool`` before ``int``).
PLAIN_METHODS: tuple[tuple[type, frozenset[str]], ...] = (
    (str, _TEXT_METHODS | frozenset(
        {"casefold", "encode", "format", "format_map", "isdecimal", "isidentifier",
         "isnumeric", "isprintable"})),
    (bytes, _TEXT_METHODS | frozenset({"decode", "hex"})),
    (int, _NUMBER_METHODS | frozenset(
        {"bit_count", "bit_length", "denominator", "numerator", "to_bytes"})),
    (float, _NUMBER_METHODS | frozenset({"hex"})),
    (FrozenList, _LIST_METHODS),
    (list, _LIST_METHODS),
    (tuple, _SEQUENCE_METHODS),
    (FrozenDict, _DICT_METHODS),
    (dict, _DICT_METHODS),
    (frozenset, _SET_READ),
    (set, _SET_READ | frozenset(
        {"add", "clear", "difference_update", "discard", "intersection_update", "pop",
         "remove", "symmetric_difference_update", "update"})),
    (range, _SEQUENCE_METHODS | frozenset({"start", "step", "stop"})),
    # ``items()``, ``keys()`` and ``values()``: to iterate, nothing more (not ``.mapping``)
    (MappingView, frozenset()),
)

#: jinja2's own objects a template works with: the loop, macros and ``caller``, blocks and
#: ``self``, imported templates, ``namespace()``, ``cycler()`` and ``joiner()``, and
#: undefined values. Their public attributes are allowed as jinja2's sandbox allows them.
JINJA_HELPERS: tuple[type, ...] = (
    LoopContext, Macro, BlockReference, TemplateReference, TemplateModule, Namespace,
    Cycler, Joiner, Undefined,
)


def plain_methods(obj: Any) -> frozenset[str] | None:
    """The attributes a template may use on ``obj`` when it is plain data; ``None`` when
    it is not. A named tuple (``groupby``'s groups) adds its fields."""
    for kind, names in PLAIN_METHODS:
        if isinstance(obj, kind):
            fields = getattr(type(obj), "_fields", None) if kind is tuple else None
            if fields is not None:
                return names | frozenset(fields)
            return names
    return None


def render_context(values: Mapping[str, Any]) -> dict[str, Any]:
    """What a template or a condition is handed: ``values`` as plain data, each value
    named as the template calls it (the one place values enter a render)."""
    return {name: plain(value, name) for name, value in values.items()}


def evaluate(expression: Callable[..., Any], values: Mapping[str, Any]) -> Any:
    """A compiled ``when`` expression's value against ``values``, made plain data."""
    return expression(render_context(values))


def _missing_key(obj: FrozenDict, key: Any) -> str:
    """``a` has no attribute `b` (did you mean ...); `a` has `x`, `y``: a missing key of a
    record, in the template's own names."""
    name = obj._name or "the value"
    keys = [str(k) for k in obj]
    known = ", ".join(f"`{k}`" for k in keys) or "no keys"
    return (f"`{name}` has no attribute `{key}`{did_you_mean(str(key), keys)}; "
            f"`{name}` has {known}")


def _json_default(value: Any) -> Any:
    """``tojson``'s fallback: a read-only mapping as a dict, anything else refused."""
    if type(value) is FrozenDict:
        return value.copy()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class Sandbox(SandboxedEnvironment):
    """jinja2's sandbox, charging everything a template builds to its render's allowance."""

    intercepted_binops = frozenset({"*", "**", "%", "+", "-", "/", "//"})
    code_generator_class = _CodeGenerator
    template_class = _Template
    #: The most steps one render may take (the ``render_step_limit`` setting).
    step_limit: int = MAX_STEPS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("finalize", _printable)
        super().__init__(*args, **kwargs)
        self.globals.pop("lipsum", None)
        for name in _REMOVED_FILTERS:
            self.filters.pop(name, None)
        originals = dict(self.filters)
        for name, original in originals.items():
            self.filters[name] = _guarded_filter(name, original)
        for name, test in list(self.tests.items()):
            self.tests[name] = _counted_test(test)  # type: ignore[arg-type]
        self.filters["join"] = _join_filter(originals["join"])
        self.filters["sum"] = _sum_filter(originals["sum"])
        # ``tojson`` writes a read-only mapping as the object it is a view of.
        self.policies["json.dumps_kwargs"] = {"sort_keys": True, "default": _json_default}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """Only from the allow-list: a plain type's own methods (:data:`PLAIN_METHODS`) and
        the public attributes of jinja2's helpers; never anything else, whatever its name."""
        if attr.startswith("_"):
            return False
        names = plain_methods(obj)
        if names is not None:
            return attr in names
        if isinstance(obj, JINJA_HELPERS):
            return super().is_safe_attribute(obj, attr, value)
        return False

    def is_safe_callable(self, obj: Any) -> bool:
        """Only a plain value's allowed method, jinja2's helpers, the environment's globals
        and the sandbox's own checked ``str.format``."""
        if isinstance(obj, (Macro, BlockReference, LoopContext, Joiner, Undefined)):
            return True  # calling an undefined value raises its own error
        if isinstance(obj, (types.BuiltinMethodType, types.MethodType)):
            owner = obj.__self__
            if isinstance(owner, type):  # a class method: int.from_bytes, str.maketrans
                return False
            names = plain_methods(owner)
            if names is not None:
                return obj.__name__ in names
            return isinstance(owner, JINJA_HELPERS) and not obj.__name__.startswith("_")
        if any(obj is value for value in self.globals.values()):
            return True
        return type(obj) is types.FunctionType and getattr(obj, "_checked_format", False)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """jinja2's sandboxed lookup; a missing key of a record is named in the
        template's own words."""
        if type(obj) is FrozenDict and attribute not in obj and not hasattr(obj, attribute):
            return self.undefined(hint=_missing_key(obj, attribute), obj=obj, name=attribute)
        if isinstance(obj, type):  # a global class: ``dict.x`` would fall back to dict["x"]
            return self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        """jinja2's sandboxed subscript; a missing key of a record named as in
        :meth:`getattr`."""
        if type(obj) is FrozenDict and isinstance(argument, str) and argument not in obj \
                and not hasattr(obj, argument):
            return self.undefined(hint=_missing_key(obj, argument), obj=obj, name=argument)
        if isinstance(obj, type):  # dict["x"] is a generic alias, not data
            return self.unsafe_undefined(obj, str(argument))
        return super().getitem(obj, argument)

    def capture_buffer(self) -> list[str]:
        """A new capture buffer charging the current render."""
        return _Buffer(current())

    def joined(self, parts: tuple[Any, ...]) -> str:
        """``a ~ b``: measured before it is joined, then charged."""
        allowance = current()
        size = 0
        for part in parts:
            size += len(part) if type(part) is str else allowance.measure(part)
        allowance.check(size, "joining text with ~")
        allowance.charge(size)
        return "".join([part if type(part) is str else str(part) for part in parts])

    def concat(self, pieces: Iterable[str]) -> str:
        """Joining a capture buffer (already charged) or a block's output (charged here)."""
        if type(pieces) is _Buffer:
            return "".join(pieces)
        allowance = current()
        out = []
        for piece in pieces:
            allowance.charge(len(piece))
            out.append(piece)
        return "".join(out)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any,
                   right: Any) -> Any:
        """Arithmetic: ``*``, ``**``, ``%`` and ``+`` refused when the result would be too
        large; every operator charged for the long numbers, text or list it makes."""
        allowance = current()
        if operator == "*":
            _check_repeat(allowance, left, right)
            _check_product(allowance, left, right)
        elif operator == "**":
            _check_power(left, right)
        elif operator == "%":
            _check_printf(allowance, left, right)
        if type(left) is int and type(right) is int:  # long arithmetic: digits by digits
            allowance.step((left.bit_length() * right.bit_length()) >> 20)
        result = super().call_binop(context, operator, left, right)
        allowance.charge(_size(result))
        if type(result) is int:
            allowance.step((result.bit_length() ** 2) >> 20)
        else:
            allowance.step(_scan_work(result))
        return result

    def weighed(self, value: Any) -> Any:
        """A compared value (``==``, ``<``, ``in``, ...) or a slice, charged for the text
        or list a comparison may walk or a slice copied."""
        work = _scan_work(value)
        if work:
            current().step(work)
        return value

    def counted(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """A ``for`` loop's items, one step each."""
        step = current().step
        for item in iterable:
            step()
            yield item

    def call(__self, __context: jinja2.runtime.Context, __obj: Any,
             *args: Any, **kwargs: Any) -> Any:
        """A call from template code, one step (and the work it is handed), refused when
        it would build too much."""
        allowance = current()
        if isinstance(__obj, (Macro, BlockReference)):  # their output is charged as made
            allowance.step()
            return super().call(__context, __obj, *args, **kwargs)
        if type(__obj) is LoopContext and args:  # a recursive loop's ``loop(children)``
            args = (__self.counted(args[0]), *args[1:])
            allowance.step()
        else:
            allowance.step(1 + _call_work(__obj, args, kwargs))
        args = _check_method(allowance, __obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        allowance.charge(_size(result))
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` and ``format_map``, their specs checked first and their
        output measured before it is built."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        template: str = value.__self__
        fields, padding = _format_spec(template)
        is_map = value.__name__ == "format_map"

        def checked(*args: Any, **kwargs: Any) -> str:
            allowance = current()
            if is_map and args and isinstance(args[0], Mapping):
                values: Iterable[Any] = args[0].values()
            else:
                values = (*args, *kwargs.values())
            allowance.check(len(template) + padding + fields * _largest_text(values, allowance),
                            "str.format")
            return wrapped(*args, **kwargs)

        checked._checked_format = True  # type: ignore[attr-defined]  # is_safe_callable
        return checked


def render_parts(
    template: jinja2.Template,
    context: Mapping[str, Any],
    *,
    given: int | Callable[[], int] | None = None,
) -> list[str]:
    """Render ``template`` against a new allowance; refuse once it builds too much.

    The limit grows with the text handed in, so passing a long input through is never
    refused; a template that makes text of its own (a loop, a repeat) is. ``given`` is the
    size of that input (default ``text_size(context.values())``), or a function that
    measures it: it is only needed once a render passes MAX_OUTPUT, which almost none do,
    so the compiler hands in a function and the measuring is skipped on every normal turn.
    """
    if given is None:
        given = lambda: text_size(context.values())  # noqa: E731
    parts: list[str] = []
    allowance = Allowance(given, template.environment.step_limit)  # type: ignore[attr-defined]
    token = CURRENT.set(allowance)  # render_scope's work, without its frames
    try:
        values = render_context(context)
        for part in template.root_render_func(_new_context(template, values)):
            allowance.spent += len(part)
            if allowance.spent > MAX_OUTPUT:
                allowance.charge(0)
            parts.append(part)
    finally:
        CURRENT.reset(token)
    return parts


def _new_context(template: jinja2.Template, context: Mapping[str, Any]) -> jinja2.runtime.Context:
    """What ``Template.generate`` builds, without reading the globals' ChainMap each time.

    A template's globals are a ``ChainMap`` of its own over the environment's; jinja2
    copies it into the context and collects its keys through ChainMap's Python-level
    iteration on every render. The maps are flattened into a dict once per template and
    kept with it (the sandbox's globals are settled when it is made, before any template
    loads, and nothing changes them after), which gives the same context for a fraction
    of the cost.
    """
    flat: dict[str, Any] | None = template.__dict__.get("_pioneer_globals")
    if flat is None:
        scopes = template.globals
        flat = {}
        if isinstance(scopes, ChainMap):
            for scope in reversed(scopes.maps):
                flat.update(scope)
        else:
            flat.update(scopes)
        template.__dict__["_pioneer_globals"] = flat
    environment = template.environment
    return environment.context_class(
        environment, {**flat, **context}, template.name, template.blocks, globals=flat
    )
