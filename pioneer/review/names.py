"""The names a template can read: the reference part of docs/templates.md, made from the code.

Takes the names the template check allows for each source kind of section and for a
``when`` condition (:data:`~pioneer.compile.compiler.PROVIDED_NAMES`,
:data:`~pioneer.compile.compiler.CONDITION_NAMES`), the compile input's models, the record
a bootstrap section's ``file`` is once made plain data, the sandbox environment's globals,
filters and tests, and the methods the sandbox allows on each plain type; returns the
page's generated part as Markdown (:func:`render`). Every name the check allows must be
described here (:func:`describe` raises for one that is not), and the generated part is
compared with the page by ``tests/test_docs.py``, so the page cannot drift from the code.
``python -m pioneer.review.names`` rewrites it.
"""

from __future__ import annotations

import re
import sys
import tomllib
import types
import typing
from collections.abc import MappingView
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel

from ..compile.bootstrap import BootstrapFile
from ..compile.compiler import CONDITION_NAMES, PROVIDED_NAMES
from ..compile.declared import InputSpec, shown_value
from ..compile.inputs import PromptCompileInput
from ..compile.profile import ProfileSpec
from ..compile.readonly import FrozenDict, FrozenList, plain
from ..compile.sandbox import PLAIN_METHODS
from ..compile.templates import build_environment

__all__ = ["INPUT_MARKERS", "KINDS", "MARKERS", "describe", "render", "render_inputs",
           "rewrite"]

#: The source kinds of a section, in the order the page's columns show them.
KINDS = ("text", "bootstrap", "input", "contribution", "slot")
#: Where the generated part of docs/templates.md starts and ends.
MARKERS = ("<!-- generated: template-names -->", "<!-- end: template-names -->")

#: Where a generated list of one profile's declared inputs starts (the profile's file
#: after the colon) and ends.
INPUT_MARKERS = ("<!-- generated: inputs of ", "<!-- end: inputs -->")

#: The names a section's template reads beyond the compile input, by name.
_OWN = {
    "profile": ("text", "The name of the profile being compiled (`full`, or a deployment's)."),
    "section": ("record", "The section being rendered: `section.id` and `section.title`."),
    "file": ("record", "The identity file the section shows (`file.*` below)."),
    "reminder": ("true/false", "The section's `reminder` key: whether to add the evolution "
                 "reminder."),
    "content": ("text", "input: the compile-input field the section names (`field`), "
                "stripped; contribution: the contribution's text; slot: the text of each "
                "contribution no other section claims, one render each."),
    "inputs": ("record", "The inputs the profile declares (`[inputs.NAME]`), read as "
               "`inputs.NAME`: the value the compile input gave, else the declared default. "
               "Reading an input the profile does not declare is an error."),
    "artifact_refs": ("integer", "The artifact ref lines the prompt carries, with those of "
                      "the history passed as history= (counted by the compiler)."),
}
#: The fields of the records the page describes that have no model to describe them.
_RECORDS = {
    "section": {
        "id": "The section's id; for a contribution or slot section, the contribution's id.",
        "title": "The `##` heading: the section's title, or the contribution's.",
    },
    "file": {
        "name": "The file's name (`SOUL.md`).",
        "path": "Where it was read, as the runtime home names it.",
        "content": "Its text, cut to the budgets.",
        "original_chars": "Its length before any cut.",
        "truncated": "Whether a budget cut it.",
        "heading_path": "`path` with the user's home folded to `~`, as block headings show "
                        "it (the same on every node).",
    },
}
#: How the page names each plain type the sandbox allows methods on.
_TYPE_NAMES = {str: "text", bytes: "bytes", int: "integer (and true/false)",
               float: "number", FrozenList: "list (read-only: the changing methods refuse)",
               list: "list", tuple: "tuple",
               FrozenDict: "record (read-only: the changing methods refuse)", dict: "dict",
               frozenset: "frozenset", set: "set", range: "range",
               MappingView: "`items()`, `keys()`, `values()`"}


def describe(name: str) -> tuple[str, str]:
    """(kind of value, what it holds) for a name a template or condition may read."""
    if name in _OWN:
        return _OWN[name]
    field = PromptCompileInput.model_fields.get(name)
    if field is None:
        raise KeyError(f"{name}: a template may read it, but docs/templates.md does not say "
                       "what it is (add it to pioneer/review/names.py)")
    return _kind(field.annotation), f"Compile input: {field.description}"


def _kind(annotation: Any) -> str:
    """A type annotation in the page's words, as a template sees the value."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = " or ".join(_kind(arg) for arg in args)
        return f"{kinds} or none" if type(None) in typing.get_args(annotation) else kinds
    if typing.get_origin(annotation) is typing.Annotated:
        return _kind(args[0])
    if typing.get_origin(annotation) is list:
        return f"list of {_kind(args[0])}s"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "record"
        if issubclass(annotation, PurePath):
            return "text"  # a path is handed over as its text
        return {str: "text", bool: "true/false", int: "integer", float: "number"}.get(
            annotation, annotation.__name__)
    return str(annotation)


def _model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model(arg)
        if found is not None:
            return found
    return None


def _records() -> dict[str, dict[str, str]]:
    """Each record a template can read, by how it is reached, with its fields described."""
    sample = plain(BootstrapFile(name="SOUL.md", path="SOUL.md", content="", original_chars=0,
                                 truncated=False), "file")
    if set(sample) != set(_RECORDS["file"]):
        raise KeyError(f"file: a template sees {sorted(sample)}, the page describes "
                       f"{sorted(_RECORDS['file'])} (update pioneer/review/names.py)")
    records = {"section": _RECORDS["section"], "file": _RECORDS["file"]}
    for name, field in PromptCompileInput.model_fields.items():
        model = _model(field.annotation)
        if model is not None:
            shown = f"{name}[]" if typing.get_origin(field.annotation) is list else name
            records[shown] = {key: str(info.description)
                              for key, info in model.model_fields.items()}
    return records


def render() -> str:
    """The generated part of docs/templates.md, markers included."""
    names = sorted(set().union(*PROVIDED_NAMES.values()) | CONDITION_NAMES)
    lines = [MARKERS[0], "",
             f"| name | {' | '.join(KINDS)} | `when` | value | what it holds |",
             f"|---|{'---|' * len(KINDS)}---|---|---|"]
    for name in names:
        kind, holds = describe(name)
        marks = [("✓" if name in PROVIDED_NAMES[k] else "") for k in KINDS]
        marks.append("✓" if name in CONDITION_NAMES else "")
        lines.append(f"| `{name}` | {' | '.join(marks)} | {kind} | {holds} |")
    for record, fields in _records().items():
        lines += ["", f"`{record}`:", ""]
        lines += [f"- `{record}.{key}`: {text}" for key, text in fields.items()]
    env = build_environment([])
    lines += ["", "Globals: " + ", ".join(f"`{name}`" for name in sorted(env.globals)) + ".",
              "", "Filters: " + ", ".join(f"`{name}`" for name in sorted(env.filters)) + ".",
              "", "Tests (`is ...`): " + ", ".join(f"`{name}`" for name in sorted(env.tests))
              + ".", "", "| value | methods and attributes |", "|---|---|"]
    for plain_type, methods in PLAIN_METHODS:
        shown = ", ".join(f"`{name}`" for name in sorted(methods)) or "none (iterate it)"
        lines.append(f"| {_TYPE_NAMES.get(plain_type, plain_type.__name__)} | {shown} |")
    return "\n".join([*lines, "", MARKERS[1]])


def render_inputs(spec: ProfileSpec) -> str:
    """A table of the inputs ``spec`` declares: name, type, how often it changes, its
    default, what it may be, and its description."""
    lines = ["| input | type | changes | default | allowed | description |",
             "|---|---|---|---|---|---|"]
    for name, declared in spec.inputs.items():
        allowed = []
        if declared.enum is not None:
            allowed.append("one of " + ", ".join(f"`{shown_value(v)}`" for v in declared.enum))
        for word, value in (("at least", declared.minimum), ("at most", declared.maximum)):
            if value is not None:
                allowed.append(f"{word} {value}")
        if declared.max_length is not None:
            allowed.append(f"at most {declared.max_length} characters")
        if declared.pattern is not None:
            allowed.append(f"matching `{declared.pattern}`")
        default = "required" if declared.default is None else f"`{shown_value(declared.default)}`"
        lines.append(f"| `{name}` | {' or '.join(declared.types)} | {declared.changes} | "
                     f"{default} | {'; '.join(allowed) or 'any'} | {declared.description} |")
    return "\n".join(lines)


def _inputs_blocks(text: str, root: Path) -> str:
    """``text`` with each generated list of a profile's inputs made again from the
    profile file its marker names (relative to ``root``)."""
    pattern = re.compile(re.escape(INPUT_MARKERS[0]) + r"(?P<file>[^ ]+) -->\n.*?"
                         + re.escape(INPUT_MARKERS[1]), re.S)

    def block(found: re.Match[str]) -> str:
        data = tomllib.loads((root / found["file"]).read_text("utf-8"))
        spec = ProfileSpec.model_construct(
            name=str(data.get("name", "")), sections=[],
            inputs={k: InputSpec.model_validate(v) for k, v in data.get("inputs", {}).items()})
        return (f"{INPUT_MARKERS[0]}{found['file']} -->\n\n{render_inputs(spec)}\n\n"
                f"{INPUT_MARKERS[1]}")

    return pattern.sub(block, text)


def rewrite(page: Path) -> bool:
    """Replace the generated parts of ``page``; whether it changed."""
    text = page.read_text("utf-8")
    start, end = text.index(MARKERS[0]), text.index(MARKERS[1]) + len(MARKERS[1])
    new = _inputs_blocks(text[:start] + render() + text[end:], page.resolve().parent.parent)
    if new == text:
        return False
    page.write_text(new, "utf-8")
    return True


if __name__ == "__main__":  # pragma: no cover - run by hand: python -m pioneer.review.names
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/templates.md")
    print(f"{target}: {'rewritten' if rewrite(target) else 'unchanged'}")
