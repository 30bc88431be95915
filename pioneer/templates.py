"""Templates: the sandboxed jinja2 environment and the checks a profile's templates pass.

One environment per compiler, built once: :class:`~pioneer.sandbox.Sandbox` (jinja2's
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
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from .errors import Problem
from .resources import builtin_dir
from .sandbox import MAX_OUTPUT, Sandbox

__all__ = [
    "TemplateSet",
    "build_environment",
    "render_print_only",
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
        self._print_only: dict[str, tuple[tuple[bool, str], ...] | None] = {}

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

    def print_only(self, name: str) -> tuple[tuple[bool, str], ...] | None:
        """A template made only of literal text and bare ``{{ variable }}`` prints, as
        ``(is_variable, text_or_name)`` pieces; ``None`` for any other template.

        Such a template (``content.md.j2`` is one) renders every variable with ``str``
        and the text as written, so :func:`render_print_only` can produce its output
        without starting the template engine.
        """
        if name not in self._print_only:
            self._print_only[name] = _print_pieces(self._asts.get(name))
        return self._print_only[name]

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


def _print_pieces(ast: Any) -> tuple[tuple[bool, str], ...] | None:
    if not isinstance(ast, nodes.Template):
        return None
    pieces: list[tuple[bool, str]] = []
    for node in ast.body:
        if not isinstance(node, nodes.Output):
            return None
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                pieces.append((False, child.data))
            elif isinstance(child, nodes.Name) and child.ctx == "load":
                pieces.append((True, child.name))
            else:
                return None
    if sum(len(text) for is_name, text in pieces if not is_name) > MAX_OUTPUT:
        return None  # the engine's output limit would refuse it: let the engine say so
    return tuple(pieces)


def render_print_only(
    pieces: tuple[tuple[bool, str], ...], *scopes: Mapping[str, Any]
) -> list[str] | None:
    """The output of a print-only template (:meth:`TemplateSet.print_only`), in pieces,
    each variable taken from the first of ``scopes`` that has it (as a context built
    from them, later ones first, would give it); ``None`` when a variable is missing or
    not a plain ``str`` (the template engine then renders it, and reports a missing
    variable as it should)."""
    out: list[str] = []
    for is_name, text in pieces:
        if is_name:
            value: Any = _ABSENT
            for scope in scopes:
                value = scope.get(text, _ABSENT)
                if value is not _ABSENT:
                    break
            if type(value) is not str:
                return None
            out.append(value)
        else:
            out.append(text)
    return out


_ABSENT = object()


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
