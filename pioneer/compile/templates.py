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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from ..errors import Problem, TemplateError, describe_exception, did_you_mean
from ..files import builtin_dir
from .allowance import MAX_STEPS
from .declared import input_uses
from .sandbox import Sandbox

__all__ = [
    "TemplateSet",
    "build_environment",
    "describe",
    "display_name",
    "load_problem",
    "not_found",
    "pass_through",
    "render_error",
    "render_problem",
    "undefined",
]


class _ReadOnce(jinja2.FileSystemLoader):
    """A file loader that reads each template once and hands out those same bytes from
    then on: the check, the lock's hash, the compiled code and every include rendered
    later see one text, even when the file is replaced in between (``compile --locked``
    would otherwise hash one read and compile another)."""

    def __init__(self, searchpath: Sequence[str]):
        super().__init__(searchpath)
        #: By name: (source, filename), or the message of a template not found.
        self._read: dict[str, tuple[str, str] | str] = {}

    def get_source(self, environment: jinja2.Environment,
                   template: str) -> tuple[str, str, Callable[[], bool]]:
        found = self._read.get(template)
        if found is None:
            try:
                source, filename, _ = super().get_source(environment, template)
                found = (source, filename)
            except jinja2.TemplateNotFound as error:
                found = str(error.message)
            # setdefault: threads reading at once all keep the first text stored.
            found = self._read.setdefault(template, found)
        if isinstance(found, str):
            raise jinja2.TemplateNotFound(template, found)
        return found[0], found[1], _always_current


def _always_current() -> bool:
    return True


def build_environment(search: Sequence[Path], step_limit: int = MAX_STEPS) -> SandboxedEnvironment:
    """The sandboxed environment over deployment template folders, then the built-in one;
    each render may take ``step_limit`` steps."""
    loader = _ReadOnce([*map(str, search), str(builtin_dir("templates"))])
    env = Sandbox(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    env.step_limit = step_limit
    return env


class TemplateSet:
    """Compiled templates and condition expressions, loaded once and reused every turn."""

    def __init__(self, env: SandboxedEnvironment):
        self.env = env
        self._templates: dict[str, jinja2.Template] = {}
        self._sources: dict[str, tuple[str, str]] = {}
        self._conditions: dict[str, Callable[..., Any]] = {}
        self._asts: dict[str, Any] = {}
        self._reads: dict[str, frozenset[str] | None] = {}
        self._names: dict[str, frozenset[str]] = {}  # the names a template reads itself
        self._input_uses: dict[str, tuple[tuple[str | None, str, int], ...]] = {}
        #: Templates that print one name between fixed text (``{{ content }}`` and its
        #: newline): (text before, name, text after). With a plain string for that name
        #: the output is those three pieces, so the compiler takes them without running
        #: the template (``pass_through``).
        self.pass_through: dict[str, tuple[str, str, str]] = {}

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
            ast = self.env.parse(source, name, filename)
            template = self.env.get_template(name)
        except Exception as error:  # template code is untrusted: any failure is its error
            yield load_problem(error, self.env, name, context=context)
            return
        display = display_name(filename)
        computed = list(self._computed_names(name, ast, display, context))
        if computed:
            yield from computed
            return
        self._templates[name] = template
        self._sources[name] = (source, display)
        self._asts[name] = ast
        pieces = pass_through(ast)
        if pieces is not None:
            self.pass_through[name] = pieces
        yield from self._undeclared(name, provided, context=context)

    def _computed_names(
        self, name: str, ast: nodes.Template, display: str, context: str
    ) -> Iterator[Problem]:
        """Every ``include``, ``import``, ``from`` or ``extends`` whose template name is
        not written as a literal, in the template and in all it reaches.

        The lock, the fingerprint and the plan's record of what a section reads all come
        from the names a template references; a name computed at render time would reach
        a template none of them know about, so it is refused here (docs/failure-behaviour.md).
        """
        pending, seen = [(name, ast, display)], {name}
        while pending:
            _, tree, where = pending.pop()
            for node in tree.find_all(_REFERENCES):
                targets = _literal_names(node.template)  # type: ignore[attr-defined]
                if targets is None:
                    tag = type(node).__name__.lower().replace("fromimport", "from")
                    yield Problem(
                        f"the template name of {{% {tag} %}} must be a literal string (a "
                        "computed name cannot be checked or locked)",
                        file=where, line=node.lineno, context=context,
                    )
                    continue
                for target in targets:
                    if target in seen:
                        continue
                    seen.add(target)
                    try:
                        source, filename, _ = self.env.loader.get_source(  # type: ignore[union-attr]
                            self.env, target)
                        pending.append((target, self.env.parse(source, target, filename),
                                        display_name(filename)))
                    except Exception:  # missing or broken: rendering reports it
                        continue

    def _undeclared(
        self, name: str, provided: frozenset[str], *, context: str
    ) -> Iterator[Problem]:
        source, display = self._sources[name]
        names = self._names.get(name)
        if names is None:  # a template's own, however many sections use it
            names = self._names[name] = frozenset(meta.find_undeclared_variables(self._asts[name]))
        for variable in sorted(names - provided):
            yield Problem(
                undefined(variable, provided),
                file=display,
                line=_line_of(source, variable),
                context=context,
            )

    def names_read(self, name: str) -> frozenset[str] | None:
        """Context names a template reads, through everything it includes or imports.

        ``None`` means the set cannot be known (a referenced template that cannot be
        read or parsed), so a caller must assume the template may read any name. A
        template name computed at render time is refused when the template is checked.
        """
        if name not in self._reads:
            self._reads[name] = self._collect_reads(name)
        return self._reads[name]

    def _collect_reads(self, name: str) -> frozenset[str] | None:
        names: set[str] = set()
        for reached in self._reached(name):
            if reached is None:  # unreadable, invalid or computed: it may read any name
                return None
            names |= meta.find_undeclared_variables(reached[0])
        return frozenset(names)

    def _reached(self, name: str) -> Iterator[tuple[nodes.Template, str] | None]:
        """Template ``name`` and every template it includes, imports or extends, each once
        (a cycle ends): its tree and its file as messages name it.

        A template not found is passed over (an ``ignore missing`` include renders
        nothing). ``None`` stands for what cannot be followed: a template that cannot be
        read or parsed, or a reference whose name is computed at render time (rendering
        or the template's check reports either).
        """
        pending, seen = [name], set()
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in self._asts:  # checked: its tree and its file are kept
                ast, display = self._asts[current], self._sources[current][1]
            else:
                try:
                    source, filename, _ = self.env.loader.get_source(  # type: ignore[union-attr]
                        self.env, current)
                    ast = self.env.parse(source, current, filename)
                except jinja2.TemplateNotFound:
                    continue
                except Exception:
                    yield None
                    continue
                display = display_name(filename)
            yield ast, display
            for referenced in meta.find_referenced_templates(ast):
                if referenced is None:
                    yield None
                else:
                    pending.append(referenced)

    def is_builtin(self, name: str) -> bool:
        """Whether template ``name`` is read from the built-in templates (shipped in the
        package), not from a deployment folder; ``True`` for one not found."""
        try:
            filename = self.env.loader.get_source(self.env, name)[1]  # type: ignore[union-attr]
        except Exception:  # not found or unreadable: its check says so
            return True
        return filename is None or Path(filename).resolve().is_relative_to(
            builtin_dir("templates"))

    def input_uses(self, name: str) -> tuple[tuple[str | None, str, int], ...]:
        """Every read of ``inputs`` in a template and what it includes or imports:
        (the input's name, or ``None`` for the whole record; the template file as messages
        name it; the line). A template that cannot be read or parsed reads nothing here
        (its own check reports it)."""
        found = self._input_uses.get(name)
        if found is not None:
            return found
        uses: list[tuple[str | None, str, int]] = []
        for reached in self._reached(name):
            if reached is not None:  # what cannot be followed: its own check says so
                ast, display = reached
                uses += [(input_name, display, line) for input_name, line in input_uses(ast)]
        self._input_uses[name] = found = tuple(uses)
        return found

    def condition_input_uses(self, expression: str) -> tuple[tuple[str | None, str, int], ...]:
        """The reads of ``inputs`` in a ``when`` expression, as :meth:`input_uses` gives
        them (file ``""``, line 1)."""
        try:
            ast = self.env.parse("{% if " + expression + " %}{% endif %}")
        except Exception:  # the condition's own check reports it
            return ()
        return tuple((input_name, "", 1) for input_name, _ in input_uses(ast))

    def condition_names(self, expression: str) -> frozenset[str]:
        """Context names a ``when`` expression reads."""
        ast = self.env.parse("{% if " + expression + " %}{% endif %}")
        return frozenset(meta.find_undeclared_variables(ast))

    def check_condition(
        self,
        expression: str,
        provided: frozenset[str],
        *,
        locate: Callable[[], tuple[str, int | None, str]],
    ) -> Iterator[Problem]:
        """Compile a ``when`` expression and check the names it uses; ``locate`` gives the
        (file, line, path) of the expression, asked only when there is a problem."""
        if expression in self._conditions:
            return
        try:
            ast = self.env.parse("{% if " + expression + " %}{% endif %}")
            # An undefined result (a missing or unsafe attribute) must fail, not read as
            # false: undefined_to_none would hide it.
            compiled = self.env.compile_expression(expression, undefined_to_none=False)
        except Exception as error:  # RecursionError: nested too deeply for the parser
            file, line, path = locate()
            yield Problem(f"invalid condition: {describe(error)}", file=file, line=line,
                          path=path)
            return
        unknown = sorted(meta.find_undeclared_variables(ast) - provided)
        for variable in unknown:
            file, line, path = locate()
            yield Problem(
                undefined(variable, provided),
                file=file,
                line=line,
                path=path,
            )
        if not unknown:
            self._conditions[expression] = compiled


# -- jinja2 failures as located problems (the one place that translates them) ----------


_REFERENCES = (nodes.Extends, nodes.FromImport, nodes.Import, nodes.Include)


def _literal_names(node: nodes.Expr) -> list[str] | None:
    """The template names a reference node names literally; ``None`` when computed."""
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, nodes.Const) and isinstance(node.value, (list, tuple)):
        values = list(node.value)
    elif isinstance(node, (nodes.List, nodes.Tuple)):
        values = []
        for item in node.items:
            if not (isinstance(item, nodes.Const) and isinstance(item.value, str)):
                return None
            values.append(item.value)
    else:
        return None
    return values if all(isinstance(value, str) for value in values) else None


def describe(error: BaseException) -> str:
    """What went wrong, in one line: jinja2's own message, else ``Type: text``."""
    if isinstance(error, jinja2.TemplateError) and error.message:
        return error.message
    if isinstance(error, UnicodeDecodeError):
        return "not valid UTF-8"
    return describe_exception(error)  # ZeroDivisionError, OverflowError from range, ...


def load_problem(
    error: BaseException, env: jinja2.Environment, name: str, *, context: str | None = None
) -> Problem:
    """A failure to find, read, parse or compile the template ``name``."""
    if isinstance(error, jinja2.TemplateNotFound):
        return Problem(not_found(env, name), context=context)
    if isinstance(error, jinja2.TemplateSyntaxError):
        return Problem(describe(error), file=display_name(error.filename) if error.filename
                       else _locate(env, name), line=error.lineno, context=context)
    if isinstance(error, (OSError, UnicodeDecodeError)):
        return Problem(f"cannot be read: {describe(error)}", file=_locate(env, name),
                       context=context)
    # RecursionError: nested too deeply for the parser
    return Problem(f"cannot compile: {describe(error)}", file=_locate(env, name),
                   context=context)


def render_problem(
    error: BaseException, *, context: str | None = None, template: jinja2.Template | None = None
) -> Problem:
    """A failure while a template ran, located at the innermost template line it passed.

    jinja2's generated code runs with the template in its globals, so walking the
    traceback finds each template frame and maps its Python line back to the template's
    (an included or imported template is named itself, not the one that included it).
    ``template`` is the one that was rendered, named when no template line is involved (a
    limit the renderer itself enforces).
    """
    if isinstance(error, jinja2.TemplateSyntaxError) and error.filename:
        return Problem(describe(error), file=display_name(error.filename), line=error.lineno,
                       context=context)
    file = display_name(template.filename) if template is not None else None
    env = template.environment if template is not None else None
    line = None
    traceback = error.__traceback__
    while traceback is not None:
        template = traceback.tb_frame.f_globals.get("__jinja_template__")
        if isinstance(template, jinja2.Template):
            file = display_name(template.filename)
            line = template.get_corresponding_lineno(traceback.tb_lineno)
        traceback = traceback.tb_next
    message = describe(error)
    if isinstance(error, jinja2.TemplateNotFound):
        message = not_found(env, str(error.name))
    return Problem(message, file=file, line=line, context=context)


def undefined(name: str, known: frozenset[str]) -> str:
    """What is said of a name a template or condition reads that the compile context does
    not hold: the close name it was probably meant to be, else every name it may read."""
    hint = did_you_mean(name, known)
    if hint:
        return f'"{name}" is undefined{hint} (not in the compile context)'
    return (f'"{name}" is undefined (not in the compile context, which holds '
            f'{", ".join(sorted(known))})')


def not_found(env: jinja2.Environment | None, name: str) -> str:
    """What is said of a template that is not on the search path: the closest names
    there are and the folders that were searched."""
    message = f'template "{name}" not found on the template search path'
    loader = env.loader if env is not None else None
    if not isinstance(loader, jinja2.FileSystemLoader):
        return message
    import difflib  # only when a name is wrong

    try:
        known = loader.list_templates()
    except OSError:  # a folder that cannot be listed: nothing to suggest from it
        known = []
    # Compared without their extensions, which every name shares (".md.j2").
    stems: dict[str, list[str]] = {}
    for candidate in known:
        stems.setdefault(candidate.split(".", 1)[0], []).append(candidate)
    close = [candidate for stem in difflib.get_close_matches(name[:200].split(".", 1)[0],
                                                             list(stems), n=3, cutoff=0.6)
             for candidate in stems[stem]][:3]
    if close:
        quoted = [f'"{candidate}"' for candidate in close]
        message += f" (did you mean {' or '.join(quoted)}?)"
    builtin = str(builtin_dir("templates"))
    folders = ["the built-in templates" if folder == builtin else f"{folder.rstrip('/')}/"
               for folder in loader.searchpath]
    return f"{message}; searched {', '.join(folders)}"


def render_error(
    error: BaseException, *, context: str | None = None, template: jinja2.Template | None = None
) -> TemplateError:
    """:func:`render_problem` as the error to raise."""
    return TemplateError(render_problem(error, context=context, template=template))


def _locate(env: jinja2.Environment, name: str) -> str:
    """Where the loader finds ``name`` (for a file it could not read or parse)."""
    for folder in getattr(env.loader, "searchpath", ()):
        path = Path(folder) / name
        if path.exists():
            return display_name(str(path))
    return name


def display_name(filename: str | None) -> str:
    """How messages name a template file: ``<built-in>/templates/NAME`` when it ships in
    the package (a deployment's own ``templates/`` folder is not it), else its path."""
    if not filename:
        return "<template>"
    path = Path(filename)
    builtin = builtin_dir("templates")
    try:
        return f"<built-in>/templates/{path.relative_to(builtin).as_posix()}"
    except ValueError:
        return str(path)


def _line_of(source: str, variable: str) -> int | None:
    pattern = re.compile(rf"\b{re.escape(variable)}\b")
    for number, line in enumerate(source.splitlines(), start=1):
        if pattern.search(line):
            return number
    return None


def pass_through(ast: nodes.Template) -> tuple[str, str, str] | None:
    """(text before, name, text after) when all a template does is print one name
    between fixed text; ``None`` for anything else (a filter, an attribute, a test, a
    second value, a tag). Given a plain ``str`` for that name, jinja2 outputs exactly
    those pieces: the sandbox's ``finalize`` hands a ``str`` back unchanged and the
    text passed in always fits the render's allowance."""
    if len(ast.body) != 1 or not isinstance(output := ast.body[0], nodes.Output):
        return None
    values = [at for at, node in enumerate(output.nodes) if type(node) is not nodes.TemplateData]
    if len(values) != 1:
        return None
    at = values[0]
    printed = output.nodes[at]
    # ``self`` is the template itself, whatever the context holds.
    if not isinstance(printed, nodes.Name) or printed.name == "self":
        return None
    fixed: list[str] = [getattr(node, "data", "") for node in output.nodes]
    return "".join(fixed[:at]), printed.name, "".join(fixed[at + 1:])
