"""pioneer: a declarative prompt compiler for LLM agents.

Profiles (TOML) declare the sections, jinja2 templates render them, and
:class:`PromptCompiler` turns one turn's :class:`PromptCompileInput` into stable,
dynamic and full system text plus an auditable :class:`PromptManifest`.

The public names are listed once, in ``__init__.pyi``: type checkers read that stub,
and at run time each name is imported from its stage on first use, so ``import
pioneer`` and the CLI load only the stages they touch.
"""

from __future__ import annotations

from typing import Any

import lazy_loader

_getattr, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__all__ = [*__all__, "__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from ._version import VERSION

        return VERSION
    try:
        return _getattr(name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
