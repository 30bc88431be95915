"""Memory Recall: the policy, the memory tools on offer and the recalled items, as text.

Data in (:class:`MemoryRecall`), text out (:func:`render_memory_recall`, or ``None``
when no memory tool is available, so the turn gets no section). Each block of items
keeps at most 5 items and 1500 characters, counting the newlines between them and
dropping whole items; each item's text is cut to 280 characters followed by ``...``
(docs/hooks-and-sections.md, "Built-in structured sections"). The words come from
``templates/renderers/memory_recall.md.j2``; recalled text is framed there as context,
never as instructions. Memory ids and scores are never shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import jinja2

from ..errors import InputError, Problem, wrong_field
from ..text import texts
from ._caps import take_lines
from ._macros import call_macro

__all__ = [
    "BLOCK_MAX_CHARS",
    "BLOCK_MAX_ITEMS",
    "ITEM_MAX_CHARS",
    "MemoryItem",
    "MemoryPolicy",
    "MemoryRecall",
    "render_memory_recall",
]

TEMPLATE = "renderers/memory_recall.md.j2"
BLOCK_MAX_ITEMS = 5
BLOCK_MAX_CHARS = 1500
ITEM_MAX_CHARS = 280
MemoryPolicy = Literal["full", "read_only", "forget_only"]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One remembered item."""

    #: Scope label such as ``user:42``; only the part before the first ``:`` is shown.
    scope: str
    #: Category label such as ``long_term_preference``.
    category: str
    content: str

    def __post_init__(self) -> None:
        problems = [wrong_field("MemoryItem", name, "a string", getattr(self, name))
                    for name in ("scope", "category", "content")
                    if not isinstance(getattr(self, name), str)]
        if problems:
            raise InputError(problems)


@dataclass(frozen=True, slots=True)
class MemoryRecall:
    """Everything the Memory Recall section says for one turn."""

    policy: MemoryPolicy = "full"
    tools: Sequence[str] = ()
    recalled: Sequence[MemoryItem] = ()
    active: Sequence[MemoryItem] = ()
    task: Sequence[MemoryItem] = ()

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        if self.policy not in get_args(MemoryPolicy):
            problems.append(Problem(f"expected one of {', '.join(get_args(MemoryPolicy))} "
                                    f"(got {self.policy!r:.40})", path="MemoryRecall → policy"))
        if texts(self.tools) is None:
            problems.append(wrong_field("MemoryRecall", "tools", "a list of tool names",
                                        self.tools))
        for name in ("recalled", "active", "task"):
            items = getattr(self, name)
            if isinstance(items, str | bytes | MemoryItem) or not isinstance(items, Sequence) \
                    or not all(isinstance(item, MemoryItem) for item in items):
                problems.append(wrong_field("MemoryRecall", name, "a list of MemoryItem", items))
        if problems:
            raise InputError(problems)


def _unique_tools(tools: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in tools if name.strip()))


def _one_line(text: str) -> str:
    # One item is one line (beyond): line breaks become spaces, so the whole-line cap is
    # exact and remembered text cannot pose as a header of its own.
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ").strip()


def _item_parts(item: MemoryItem) -> tuple[str, str, str] | None:
    content = _one_line(item.content)
    if not content:
        return None
    if len(content) > ITEM_MAX_CHARS:
        content = content[:ITEM_MAX_CHARS] + "..."
    scope = _one_line(item.scope.split(":", 1)[0].replace("_", " "))
    category = _one_line(item.category.replace("_", " "))
    return scope, category, content


def render_memory_recall(recall: MemoryRecall, env: jinja2.Environment) -> str | None:
    """The Memory Recall section body, or ``None`` when no memory tool is available."""
    tools = _unique_tools(recall.tools)
    if not tools:
        return None
    blocks: list[dict[str, Any]] = []
    if recall.policy != "forget_only":
        for kind, items in (("recalled", recall.recalled), ("active", recall.active),
                            ("task", recall.task)):
            parts = [p for p in map(_item_parts, items) if p is not None]
            if not parts:
                continue
            lines = [call_macro(env, TEMPLATE, "item", *p) for p in parts]
            kept, omitted = take_lines(lines, max_items=BLOCK_MAX_ITEMS, max_chars=BLOCK_MAX_CHARS)
            blocks.append({"kind": kind, "lines": kept, "omitted": omitted})
    return call_macro(env, TEMPLATE, "section", recall.policy, tools, blocks)
