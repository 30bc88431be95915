"""Where the built-in profiles, templates, schemas and model table live.

In a wheel they are copied into ``pioneer/_data/``; in a source checkout (or an
editable install) they are the top-level ``profiles/``, ``templates/``, ``schemas/`` and
``models/`` folders of the repository. This module is the only place that knows both layouts.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["builtin_dir", "load_schema"]

_PACKAGE = Path(__file__).resolve().parent


@cache
def builtin_dir(kind: str) -> Path:
    """Return the folder of built-in ``profiles``, ``templates``, ``schemas`` or ``models``."""
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"built-in {kind}/ folder is missing from the pioneer installation")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Load a JSON Schema shipped in ``schemas/`` by file name."""
    data: dict[str, Any] = json.loads((builtin_dir("schemas") / name).read_text("utf-8"))
    return data
