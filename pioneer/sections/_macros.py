"""Calling the macros of a renderer template from Python.

Each renderer template under ``templates/renderers/`` holds only macros: the renderer
chooses what fits its caps in Python and lets the template say it. Macros run in the
compiler's sandboxed environment (data goes in as arguments, never as template source),
and any jinja2 failure becomes a :class:`~pioneer.errors.TemplateError` naming the
template file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from ..errors import Problem, TemplateError
from ..resources import builtin_dir

__all__ = ["call_macro"]


def _display(name: str, filename: str | None) -> str:
    if not filename:
        return f"templates/{name}"
    try:
        return f"templates/{Path(filename).relative_to(builtin_dir('templates')).as_posix()}"
    except ValueError:
        return filename


def _describe(error: Exception) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _template_line(error: BaseException, template: jinja2.Template) -> int | None:
    # Macros called from Python skip jinja's traceback rewriting: map the generated
    # code's line back to the template line ourselves.
    line = None
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == template.filename:
            line = template.get_corresponding_lineno(traceback.tb_lineno)
        traceback = traceback.tb_next
    return line


def call_macro(env: jinja2.Environment, template: str, macro: str, /, *args: Any) -> str:
    """Render one macro; surrounding newlines are dropped (callers add the separators)."""
    context = f'while rendering macro "{macro}"'
    try:
        loaded = env.get_template(template)
    except jinja2.TemplateNotFound:
        raise TemplateError(
            Problem(f'template "{template}" not found on the template search path')
        ) from None
    except jinja2.TemplateSyntaxError as error:
        raise TemplateError(Problem(error.message or "syntax error",
                                    file=_display(template, error.filename),
                                    line=error.lineno, context=context)) from None
    except Exception as error:  # not UTF-8, unreadable, or nested too deeply to parse
        raise TemplateError(Problem(f'template "{template}" cannot be loaded: '
                                    f"{_describe(error)}", context=context)) from None
    try:
        function = getattr(loaded.module, macro, None)
        if function is None:
            raise TemplateError(Problem(f'macro "{macro}" is not defined',
                                        file=_display(template, loaded.filename)))
        text = str(function(*args))
    except TemplateError:
        raise
    except Exception as error:  # template code is untrusted: any failure is its error
        message = getattr(error, "message", None) or _describe(error)
        raise TemplateError(Problem(message, file=_display(template, loaded.filename),
                                    line=_template_line(error, loaded), context=context)) from None
    return text.strip("\n")
