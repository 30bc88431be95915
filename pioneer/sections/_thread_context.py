"""Thread Context: snippets recalled from earlier in the thread, with their provenance.

Data in (:class:`ThreadSnippet` values, best first), text out
(:func:`render_thread_context`, or ``None`` when nothing remains). Each snippet is one
entry ``- [thread:<thread>/<turn>/<item>/<chunk>, role=..., context=..., score=0.00] text``; the
section keeps at most 5 entries and 2400 characters, dropping whole entries
(docs/hooks-and-sections.md, "Built-in structured sections"). A snippet's artifact refs
are scoped to it: they follow its text under ``Available artifacts for <source id>:``
inside the same entry, never as a loose list. The words come from
``templates/renderers/thread_context.md.j2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import jinja2

from ..history.artifacts import ArtifactRef, escape_controls, ref_line, unique_refs
from ..hooks.models import PromptContextContribution, SourceRef
from ._caps import take_lines
from ._macros import call_macro

__all__ = [
    "CONTRIBUTION_ID",
    "MAX_CHARS",
    "MAX_LINES",
    "PRIORITY",
    "RenderedThreadContext",
    "SnippetContext",
    "SnippetRole",
    "ThreadSnippet",
    "render_thread_context",
    "snippet_artifacts",
    "thread_context_contribution",
]

TEMPLATE = "renderers/thread_context.md.j2"
MAX_LINES = 5
MAX_CHARS = 2400
CONTRIBUTION_ID = "memory.active_recall.thread_context"
PRIORITY = 480

SnippetRole = Literal["user", "assistant", "task_summary", "generated_summary"]
SnippetContext = Literal[
    "user_visible_thread_item",
    "user_visible_task_summary",
    "thread_compaction_summary",
    "hidden_prompt",
    "reasoning_trace",
    "raw_tool_output",
    "raw_task_runtime",
    "internal_hook_runtime",
    "system_prompt",
    "developer_prompt",
    "unknown",
]


@dataclass(frozen=True, slots=True)
class ThreadSnippet:
    """One recalled chunk of an earlier turn of thread ``thread_id``."""

    turn_id: str
    item_id: str
    chunk_id: str
    role: SnippetRole
    context: SnippetContext
    score: float
    text: str
    #: Artifact refs that belong to this snippet (see :func:`snippet_artifacts`).
    artifacts: Sequence[ArtifactRef] = ()
    #: The thread the turn belongs to (keyword only, so that no positional call can shift it).
    thread_id: str = field(kw_only=True)

    @property
    def source_id(self) -> str:
        """``thread:<thread>/<turn>/<item>/<chunk>``."""
        return f"thread:{self.thread_id}/{self.turn_id}/{self.item_id}/{self.chunk_id}"


@dataclass(frozen=True, slots=True)
class RenderedThreadContext:
    """The section body and what it kept."""

    text: str
    kept: tuple[ThreadSnippet, ...]
    omitted: int
    artifact_ref_count: int


def snippet_artifacts(
    role: SnippetRole,
    item_id: str,
    user_refs: Sequence[ArtifactRef],
    assistant_refs: Sequence[ArtifactRef],
) -> tuple[ArtifactRef, ...]:
    """The refs of a snippet's turn that belong to the snippet itself.

    A user snippet looks in the turn's user refs, every other role in the assistant
    refs. Refs bound to the snippet's item (by turn item id or message id) win; when none
    is, user and assistant snippets take their whole side, summaries take nothing.
    """
    bucket = user_refs if role == "user" else assistant_refs
    exact = [ref for ref in bucket if item_id in (ref.turn_item_id, ref.message_id)]
    if exact:
        return unique_refs(exact)
    return unique_refs(bucket) if role in ("user", "assistant") else ()


def _entry_text(snippet: ThreadSnippet) -> tuple[str, int]:
    text = snippet.text.strip()
    refs = unique_refs(snippet.artifacts)
    if not refs:
        return text, 0
    block = f"Available artifacts for {escape_controls(snippet.source_id)}:" + "".join(
        "\n" + ref_line(ref) for ref in refs
    )
    return (f"{text}\n\n{block}" if text else block), len(refs)


def render_thread_context(
    snippets: Sequence[ThreadSnippet], env: jinja2.Environment
) -> RenderedThreadContext | None:
    """The Thread Context body for ``snippets`` (best first), or ``None`` if none fits."""
    entries: list[tuple[ThreadSnippet, str, int]] = []
    for snippet in snippets:
        text, ref_count = _entry_text(snippet)
        if text:
            line = call_macro(env, TEMPLATE, "entry", escape_controls(snippet.source_id),
                              snippet.role, snippet.context, snippet.score, text)
            entries.append((snippet, line, ref_count))
    kept, omitted = take_lines([e[1] for e in entries], max_items=MAX_LINES, max_chars=MAX_CHARS)
    if not kept:
        return None
    chosen, position = [], 0
    for entry in entries:  # kept lines are a subsequence of the entries, in order
        if position < len(kept) and entry[1] is kept[position]:
            chosen.append(entry)
            position += 1
    return RenderedThreadContext(
        text=call_macro(env, TEMPLATE, "section", kept, omitted),
        kept=tuple(e[0] for e in chosen),
        omitted=omitted,
        artifact_ref_count=sum(e[2] for e in chosen),
    )


def thread_context_contribution(
    snippets: Sequence[ThreadSnippet], env: jinja2.Environment
) -> PromptContextContribution | None:
    """The ``thread_context`` contribution a recall hook returns, or ``None``."""
    rendered = render_thread_context(snippets, env)
    if rendered is None:
        return None
    return PromptContextContribution(
        contribution_id=CONTRIBUTION_ID,
        domain="thread_context",
        priority=PRIORITY,
        content=rendered.text,
        truncated=rendered.omitted > 0,
        artifact_ref_count=rendered.artifact_ref_count,
        source_refs=[
            SourceRef(kind="thread_episodic", id=s.source_id, label=f"{s.role} {s.source_id}")
            for s in rendered.kept
        ],
    )
