"""Calling the macros of a renderer template from Python.

Each renderer template under ``templates/renderers/`` holds only macros: the renderer
chooses what fits its caps in Python and lets the template say it. Macros run in the
compiler's sandboxed environment (data goes in as arguments, made plain data, never as
template source),
each call runs against one render allowance (docs/failure-behaviour.md),
and any jinja2 failure becomes a :class:`~pioneer.errors.TemplateError` naming the
template file and line.
"""

from __future__ import annotations

from typing import Any

import jinja2

from ..compile.allowance import MAX_STEPS, render_scope, text_size
from ..compile.readonly import plain
from ..compile.templates import display_name, load_problem, render_error
from ..errors import Problem, TemplateError

__all__ = ["call_macro"]


def call_macro(env: jinja2.Environment, template: str, macro: str, /, *args: Any) -> str:
    """Render one macro; surrounding newlines are dropped (callers add the separators)."""
    context = f'while rendering macro "{macro}"'
    try:
        loaded = env.get_template(template)
    except Exception as error:  # missing, unreadable, or does not parse
        raise TemplateError(load_problem(error, env, template, context=context)) from None
    try:
        with render_scope(lambda: text_size(args), getattr(env, "step_limit", MAX_STEPS)):
            function = getattr(loaded.module, macro, None)  # a new module on every call
            if function is None:
                raise TemplateError(Problem(f'macro "{macro}" is not defined',
                                            file=display_name(loaded.filename)))
            # Arguments enter the render as plain data, as a section's context does.
            names = getattr(function, "arguments", ())
            text = str(function(*(plain(arg, names[i] if i < len(names) else f"argument {i}")
                                  for i, arg in enumerate(args))))
    except TemplateError:
        raise
    except Exception as error:  # template code is untrusted: any failure is its error
        raise render_error(error, context=context) from None
    return text.strip("\n")
