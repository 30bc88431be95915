"""Snippets of a completed turn: which texts are indexed, split into stable chunks.

Takes a turn's user and assistant texts (or a thread summary, or a task summary) and
returns :class:`Snippet` values, each with its provenance (turn, item, chunk id), role
and context label. Long texts are split by :func:`split_text`, a pure function of the
text: the same text always gives the same chunks, so re-indexing a thread reproduces the
same provenance ids ``thread:<thread_id>/<turn_id>/<item_id>/c<n>``. A chunk is at most
:data:`CHUNK_CHARS` characters, cut at the last paragraph break, line break, sentence end
or space that leaves it at least half full, and hard-cut only inside one long word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..sections._thread_context import SnippetContext, SnippetRole

__all__ = [
    "CHUNK_CHARS",
    "SUMMARY_ITEM_ID",
    "Snippet",
    "split_text",
    "summary_snippets",
    "task_summary_snippets",
    "turn_snippets",
]

#: Longest chunk. Five recalled lines with their provenance prefix (about 120 chars)
#: then fit the Thread Context cap of 2400 characters.
CHUNK_CHARS = 360
#: Item id of a thread's compaction summary (it belongs to no message).
SUMMARY_ITEM_ID = "summary"

CONTEXTS: dict[SnippetRole, SnippetContext] = {
    "user": "user_visible_thread_item",
    "assistant": "user_visible_thread_item",
    "task_summary": "user_visible_task_summary",
    "generated_summary": "thread_compaction_summary",
}

# Preferred cut points, best first: each pattern marks where a chunk may end.
_BREAKS = (
    re.compile(r"\n\s*\n"),
    re.compile(r"\n"),
    re.compile("[.!?]\\s|[\u3002\uff01\uff1f]"),  # sentence ends, ideographic ones too
    re.compile(r"\s"),
)


@dataclass(frozen=True, slots=True)
class Snippet:
    """One indexed chunk and where it came from."""

    thread_id: str
    turn_id: str
    item_id: str
    chunk_id: str
    role: SnippetRole
    #: The turn's store position (for a summary: the last turn it covers).
    seq: int
    text: str

    @property
    def context(self) -> SnippetContext:
        """The context label of the snippet's role."""
        return CONTEXTS[self.role]

    @property
    def source_id(self) -> str:
        """``thread:<thread>/<turn>/<item>/<chunk>``."""
        return f"thread:{self.thread_id}/{self.turn_id}/{self.item_id}/{self.chunk_id}"


def _cut(text: str, limit: int) -> int:
    """Where the first chunk of ``text`` ends (an index within ``limit``)."""
    window = text[: limit + 1]
    floor = limit // 2
    for pattern in _BREAKS:
        ends = [m.end() for m in pattern.finditer(window) if floor <= m.start() < limit]
        if ends:
            return min(ends[-1], limit)
    return limit


def split_text(text: str, limit: int = CHUNK_CHARS) -> tuple[str, ...]:
    """``text`` trimmed and split into chunks of at most ``limit`` characters."""
    if limit < 1:
        raise ValueError("chunk limit must be at least 1")
    rest = text.strip()
    chunks: list[str] = []
    while len(rest) > limit:
        end = _cut(rest, limit)
        chunk = rest[:end].strip()
        if chunk:
            chunks.append(chunk)
        rest = rest[end:].strip()
    if rest:
        chunks.append(rest)
    return tuple(chunks)


def _snippets(
    thread_id: str, turn_id: str, item_id: str | None, role: SnippetRole, seq: int,
    text: str | None,
) -> list[Snippet]:
    if item_id is None or not text:
        return []
    return [
        Snippet(thread_id, turn_id, item_id, f"c{n}", role, seq, chunk)
        for n, chunk in enumerate(split_text(text))
    ]


def turn_snippets(
    thread_id: str, turn_id: str, seq: int, *,
    user_item_id: str | None, user_text: str | None,
    assistant_item_id: str | None, assistant_text: str | None,
) -> list[Snippet]:
    """The user message's chunks, then the reply's."""
    return [
        *_snippets(thread_id, turn_id, user_item_id, "user", seq, user_text),
        *_snippets(thread_id, turn_id, assistant_item_id, "assistant", seq, assistant_text),
    ]


def summary_snippets(thread_id: str, through_turn_id: str, seq: int, text: str) -> list[Snippet]:
    """A compaction summary's chunks, filed under the last turn it covers."""
    return _snippets(thread_id, through_turn_id, SUMMARY_ITEM_ID, "generated_summary", seq, text)


def task_summary_snippets(
    thread_id: str, turn_id: str, item_id: str, seq: int, text: str
) -> list[Snippet]:
    """A task summary's chunks, filed under the turn that ran the task."""
    return _snippets(thread_id, turn_id, item_id, "task_summary", seq, text)

