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
import json
from typing import TextIO

from ..errors import UsageError
from ..files import builtin_dir
from ._common import add_config_option, make_settings

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
    parser.add_argument("--profile", metavar="NAME",
                        help="compile-input only: describe the inputs this profile (a name on "
                        "the deployment's profile_path, or a path) declares")
    add_config_option(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the schema file as it ships (with ``--profile``, the compile input's with
    that profile's declared inputs)."""
    path = builtin_dir("schemas") / (args.name.replace("-", "_") + _SUFFIX)
    text = path.read_text("utf-8")
    if args.profile is not None:
        if args.name != "compile-input":
            raise UsageError("--profile goes with the compile-input schema only")
        from ..compile._extends import resolve_profile
        from ..compile.declared import input_schema
        from ..compile.profile import find_profile

        # The profile's own files only: its templates need not be there to describe it.
        search = make_settings(args).profile_path
        spec = resolve_profile(find_profile(args.profile, search), search).spec
        schema = json.loads(text)
        schema["properties"]["inputs"] = input_schema(spec.inputs, spec.name)
        text = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    out.write(text)
    return 0
