"""``pioneer schema NAME``: print one of the JSON Schemas that ship with pioneer.

The schemas are the committed files of ``schemas/`` (generated from the edge models by
:mod:`pioneer.review.schemas`), printed as they are, so an editor validating a profile,
a compile input or ``pioneer.toml`` against them checks what pioneer checks. Names are
the file names without ``.schema.json``, with hyphens: ``profile``, ``compile-input``,
``manifest``, ``deployment`` (``pioneer.toml``) and the others (docs/profiles.md,
"Editor support").
"""

from __future__ import annotations

import argparse
from typing import TextIO

from ..resources import builtin_dir

NAME = "schema"
HELP = "print a JSON Schema (profile, compile-input, manifest, deployment, ...) for editors"
_SUFFIX = ".schema.json"


def schema_names() -> list[str]:
    """The names ``pioneer schema`` takes, one per shipped schema file, sorted."""
    return sorted(path.name[: -len(_SUFFIX)].replace("_", "-")
                  for path in builtin_dir("schemas").glob(f"*{_SUFFIX}"))


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``schema``."""
    parser.add_argument("name", metavar="NAME", choices=schema_names(),
                        help=f"the schema to print: {', '.join(schema_names())}")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the schema file as it ships."""
    path = builtin_dir("schemas") / (args.name.replace("-", "_") + _SUFFIX)
    out.write(path.read_text("utf-8"))
    return 0
