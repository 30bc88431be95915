"""Calling the macros of a renderer template from Python.

Each renderer template under ``templates/renderers/`` holds only macros: the renderer
chooses what fits its caps in Python and lets the template say it. Macros run in the
compiler's sandboxed environment (data goes in as arguments, never as template source),
and any jinja2 failure becomes a :class:`~pioneer.errors.TemplateError` naming the
template file and line.
"""

from __future__ import annotations

from typing import Any

import jinja2

from ..errors import Problem, TemplateError

__all__ = ["call_macro"]


def call_macro(env: jinja2.Environment, template: str, macro: str, /, *args: Any) -> str:
    """Render one macro; surrounding newlines are dropped (callers add the separators)."""
    display = f"templates/{template}"
    context = f'while rendering macro "{macro}"'
    loaded: jinja2.Template | None = None
    try:
        loaded = env.get_template(template)
        function = getattr(loaded.module, macro, None)
        if function is None:
            raise TemplateError(Problem(f'macro "{macro}" is not defined', file=display))
        text = str(function(*args))
    except jinja2.TemplateNotFound:
        raise TemplateError(
            Problem(f'template "{template}" not found on the template search path')
        ) from None
    except jinja2.TemplateError as error:
        line = getattr(error, "lineno", None)
        traceback = error.__traceback__
        while traceback is not None:  # runtime errors: the frame of the template file
            if loaded is not None and traceback.tb_frame.f_code.co_filename == loaded.filename:
                line = traceback.tb_lineno
            traceback = traceback.tb_next
        message = getattr(error, "message", None) or str(error)
        raise TemplateError(Problem(message, file=display, line=line, context=context)) from None
    return text.strip("\n")
