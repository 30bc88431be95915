"""Templates: the sandboxed jinja2 environment and the checks a profile's templates pass.

One environment per compiler, built once: :class:`~pioneer.compile.sandbox.Sandbox` (jinja2's
``SandboxedEnvironment`` with limits on what an expression may build: templates are
untrusted code), ``StrictUndefined`` (a missing variable is an error, not an empty
string), ``autoescape=False`` (the output is Markdown, not HTML), ``trim_blocks`` and
``lstrip_blocks`` on (block tags do not leave blank lines or indentation behind) and
``keep_trailing_newline`` on (the compiler trims bodies itself). Input text is only ever
passed in as variables, never compiled as template source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from ..errors import Problem
from ..resources import builtin_dir
from .sandbox import MAX_OUTPUT, Sandbox

__all__ = [
    "DirectTemplate",
    "TemplateSet",
    "build_environment",
    "render_direct",
]


def build_environment(search: Sequence[Path]) -> SandboxedEnvironment:
    """The sandboxed environment over deployment template folders, then the built-in one."""
    loader = jinja2.FileSystemLoader([*map(str, search), str(builtin_dir("templates"))])
    return Sandbox(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )


class TemplateSet:
    """Compiled templates and condition expressions, loaded once and reused every turn."""

    def __init__(self, env: SandboxedEnvironment):
        self.env = env
        self._templates: dict[str, jinja2.Template] = {}
        self._sources: dict[str, tuple[str, str]] = {}
        self._conditions: dict[str, Callable[..., Any]] = {}
        self._asts: dict[str, Any] = {}
        self._reads: dict[str, frozenset[str] | None] = {}
        self._direct: dict[str, DirectTemplate | None] = {}
        self._fields: dict[type, frozenset[str]] = {}

    def template(self, name: str) -> jinja2.Template:
        """A compiled template (loaded by :meth:`check_template` first)."""
        return self._templates[name]

    def condition(self, expression: str) -> Callable[..., Any]:
        """A compiled ``when`` expression."""
        return self._conditions[expression]

    def check_template(
        self, name: str, provided: frozenset[str], *, context: str
    ) -> Iterator[Problem]:
        """Load, parse and compile a template; report what is wrong with it."""
        if name in self._templates:
            yield from self._undeclared(name, provided, context=context)
            return
        try:
            source, filename, _ = self.env.loader.get_source(self.env, name)  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            yield Problem(f'template "{name}" not found', context=context)
            return
        except (OSError, UnicodeDecodeError) as error:
            yield Problem(f"cannot be read: {_reason(error)}", file=self._locate(name),
                          context=context)
            return
        display = _display(filename)
        try:
            ast = self.env.parse(source, name, filename)
            template = self.env.get_template(name)
        except jinja2.TemplateSyntaxError as error:
            yield Problem(
                error.message or "syntax error", file=display, line=error.lineno, context=context
            )
            return
        except Exception as error:  # RecursionError: nested too deeply for the parser
            yield Problem(f"cannot compile: {_reason(error)}", file=display, context=context)
            return
        self._templates[name] = template
        self._sources[name] = (source, display)
        self._asts[name] = ast
        yield from self._undeclared(name, provided, context=context)

    def _locate(self, name: str) -> str:
        """Where the loader finds ``name`` (for a file it could not read)."""
        for folder in getattr(self.env.loader, "searchpath", ()):
            path = Path(folder) / name
            if path.exists():
                return _display(str(path))
        return name

    def _undeclared(
        self, name: str, provided: frozenset[str], *, context: str
    ) -> Iterator[Problem]:
        source, display = self._sources[name]
        for variable in sorted(meta.find_undeclared_variables(self._asts[name]) - provided):
            yield Problem(
                f'"{variable}" is undefined (not in the compile context)',
                file=display,
                line=_line_of(source, variable),
                context=context,
            )

    def names_read(self, name: str) -> frozenset[str] | None:
        """Context names a template reads, through everything it includes or imports.

        ``None`` means the set cannot be known (a template name computed at render
        time), so a caller must assume the template may read any name.
        """
        if name not in self._reads:
            self._reads[name] = self._collect_reads(name)
        return self._reads[name]

    def _collect_reads(self, name: str) -> frozenset[str] | None:
        names: set[str] = set()
        pending, seen = [name], set()
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            ast = self._asts.get(current)
            if ast is None:
                try:
                    source, filename, _ = self.env.loader.get_source(  # type: ignore[union-attr]
                        self.env, current
                    )
                    ast = self.env.parse(source, current, filename)
                except jinja2.TemplateNotFound:  # an ``ignore missing`` include renders nothing
                    continue
                except Exception:  # unreadable or invalid: rendering reports it
                    return None
            names |= meta.find_undeclared_variables(ast)
            for referenced in meta.find_referenced_templates(ast):
                if referenced is None:
                    return None
                pending.append(referenced)
        return frozenset(names)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``obj.attribute`` as a template reads it: the sandbox's ``getattr``, or a plain
        read of a dataclass instance's public field holding a plain value, which the
        sandbox always allows (a name without a leading ``_`` on an object that is no
        function, method, type, code, frame, traceback or generator) and gives unchanged."""
        kind = type(obj)
        fields = self._fields.get(kind)
        if fields is None:
            fields = frozenset(
                name for name in getattr(kind, "__dataclass_fields__", ())
                if not name.startswith("_")
            ) if not isinstance(obj, type) else frozenset()
            if len(self._fields) >= _FIELD_TYPES:
                self._fields.clear()  # made-up classes must not pile up here
            self._fields[kind] = fields
        if attribute in fields:
            value = getattr(obj, attribute, _ABSENT)
            if type(value) in _PLAIN:
                return value
        return self.env.getattr(obj, attribute)  # anything else: the sandbox decides

    def direct(self, name: str) -> DirectTemplate | None:
        """The template as a :data:`DirectTemplate` when it is made only of text,
        ``{{ name }}`` / ``{{ name.attr }}`` prints and ``{% if %}`` / ``{% elif %}`` /
        ``{% else %}`` blocks testing such a name; ``None`` for any other template.

        Such a template (``content.md.j2`` and ``bootstrap_file.md.j2`` are two) can be
        filled in by :func:`render_direct` without starting the template engine.
        """
        if name not in self._direct:
            self._direct[name] = _direct_program(self._asts.get(name))
        return self._direct[name]

    def condition_names(self, expression: str) -> frozenset[str]:
        """Context names a ``when`` expression reads."""
        ast = self.env.parse("{% if " + expression + " %}{% endif %}")
        return frozenset(meta.find_undeclared_variables(ast))

    def check_condition(
        self,
        expression: str,
        provided: frozenset[str],
        *,
        file: str,
        line: int | None,
        path: str,
    ) -> Iterator[Problem]:
        """Compile a ``when`` expression and check the names it uses."""
        if expression in self._conditions:
            return
        try:
            ast = self.env.parse("{% if " + expression + " %}{% endif %}")
            compiled = self.env.compile_expression(expression)
        except jinja2.TemplateSyntaxError as error:
            yield Problem(f"invalid condition: {error.message}", file=file, line=line, path=path)
            return
        except Exception as error:  # RecursionError: nested too deeply for the parser
            yield Problem(f"invalid condition: {_reason(error)}", file=file, line=line, path=path)
            return
        unknown = sorted(meta.find_undeclared_variables(ast) - provided)
        for variable in unknown:
            yield Problem(
                f'"{variable}" is undefined (not in the compile context)',
                file=file,
                line=line,
                path=path,
            )
        if not unknown:
            self._conditions[expression] = compiled


class _Value(NamedTuple):
    """A context name and the attributes read from it, in order: ``file.name``."""

    name: str
    attrs: tuple[str, ...]


class _Print(NamedTuple):
    name: str
    attrs: tuple[str, ...]


class _If(NamedTuple):
    """``{% if %}``, its ``{% elif %}`` branches and its ``{% else %}`` body."""

    branches: tuple[tuple[_Value, DirectTemplate], ...]
    otherwise: DirectTemplate


#: A template reduced to literal text (``str``), prints and if blocks.
DirectTemplate: TypeAlias = tuple["str | _Print | _If", ...]


def _direct_program(ast: Any) -> DirectTemplate | None:
    if not isinstance(ast, nodes.Template):
        return None
    try:
        program = _direct_body(ast.body)
    except _NotDirect:
        return None
    if _literal_size(program) > MAX_OUTPUT:
        return None  # the engine's output limit would refuse it: let the engine say so
    return program


class _NotDirect(Exception):
    """The template uses something :func:`render_direct` does not do."""


def _direct_body(body: Sequence[nodes.Node]) -> DirectTemplate:
    program: list[str | _Print | _If] = []
    for node in body:
        if isinstance(node, nodes.Output):
            for child in node.nodes:
                if isinstance(child, nodes.TemplateData):
                    program.append(child.data)
                else:
                    program.append(_Print(*_direct_value(child)))
        elif isinstance(node, nodes.If):
            branches = [(_direct_value(node.test), _direct_body(node.body))]
            for branch in node.elif_:
                branches.append((_direct_value(branch.test), _direct_body(branch.body)))
            program.append(_If(tuple(branches), _direct_body(node.else_)))
        else:
            raise _NotDirect
    return tuple(program)


def _direct_value(node: nodes.Node) -> _Value:
    attrs: list[str] = []
    while isinstance(node, nodes.Getattr) and node.ctx == "load":
        attrs.append(node.attr)
        node = node.node
    if not isinstance(node, nodes.Name) or node.ctx != "load" or node.name == "self":
        raise _NotDirect  # ``self`` is the template itself, whatever the context holds
    return _Value(node.name, tuple(reversed(attrs)))


def _literal_size(program: DirectTemplate) -> int:
    size = 0
    for node in program:
        if isinstance(node, str):
            size += len(node)
        elif isinstance(node, _If):
            size += sum(_literal_size(body) for _, body in node.branches)
            size += _literal_size(node.otherwise)
    return size


def render_direct(
    program: DirectTemplate,
    getattr: Callable[[Any, str], Any],
    *scopes: Mapping[str, Any],
) -> list[str] | None:
    """The output of a :data:`DirectTemplate`, in pieces, as the template engine would
    give it: each name taken from the first of ``scopes`` that has it (as a context built
    from them, later ones first, would resolve it), each attribute read through
    ``getattr`` (the environment's, so the sandbox decides what may be read).

    ``None`` when a name is missing, an attribute read gives an undefined value, a
    printed value is not a plain ``str`` or the output would pass ``MAX_OUTPUT``: the
    engine then renders the template, and reports what is wrong (or applies its output
    limit) as it should.
    """
    out: list[str] = []
    try:
        done = _run(program, getattr, scopes, out)
    except Exception:  # an attribute that raised: the engine reports it in its own words
        return None
    if not done or sum(map(len, out)) > MAX_OUTPUT:
        return None
    return out


def _run(program: DirectTemplate, getattr: Callable[[Any, str], Any],
         scopes: tuple[Mapping[str, Any], ...], out: list[str]) -> bool:
    for node in program:
        if type(node) is str:
            out.append(node)
        elif type(node) is _Print:  # the lookup of _resolve, inlined: most nodes are prints
            name, attrs = node
            for scope in scopes:
                value = scope.get(name, _ABSENT)
                if value is not _ABSENT:
                    break
            else:
                return False
            if attrs:
                value = _attributes(value, attrs, getattr)
            if type(value) is not str:
                return False
            out.append(value)
        else:
            assert isinstance(node, _If)
            chosen = node.otherwise
            for test, body in node.branches:
                value = _resolve(test, getattr, scopes)
                if type(value) not in _TESTABLE:
                    return False  # missing, or a value whose truth is its own code's
                if value:
                    chosen = body
                    break
            if not _run(chosen, getattr, scopes, out):
                return False
    return True


def _resolve(value: _Value, getattr: Callable[[Any, str], Any],
             scopes: tuple[Mapping[str, Any], ...]) -> Any:
    found: Any = _ABSENT
    for scope in scopes:
        found = scope.get(value.name, _ABSENT)
        if found is not _ABSENT:
            break
    else:
        return _ABSENT
    return _attributes(found, value.attrs, getattr) if value.attrs else found


def _attributes(found: Any, attrs: tuple[str, ...], getattr: Callable[[Any, str], Any]) -> Any:
    for attr in attrs:
        found = getattr(found, attr)
        if isinstance(found, jinja2.Undefined):
            return _ABSENT
    return found


_ABSENT = object()
_TESTABLE = frozenset({str, bool, int, float, type(None), list, tuple, dict})
#: Types whose public fields TemplateSet.getattr remembers before it starts again.
_FIELD_TYPES = 256
#: Values the sandbox hands back exactly as read (it wraps only ``str.format`` methods).
_PLAIN = frozenset({str, bool, int, float, type(None)})


def _reason(error: BaseException) -> str:
    if isinstance(error, UnicodeDecodeError):
        return "not valid UTF-8"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _display(filename: str | None) -> str:
    if not filename:
        return "<template>"
    path = Path(filename)
    builtin = builtin_dir("templates")
    try:
        return f"templates/{path.relative_to(builtin).as_posix()}"
    except ValueError:
        return str(path)


def _line_of(source: str, variable: str) -> int | None:
    pattern = re.compile(rf"\b{re.escape(variable)}\b")
    for number, line in enumerate(source.splitlines(), start=1):
        if pattern.search(line):
            return number
    return None
