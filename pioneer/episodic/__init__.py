"""Thread episodic recall: past turns indexed with SQLite FTS5, recalled into the prompt.

The stages: :mod:`.chunks` (a completed turn's texts as snippets with stable
provenance), :mod:`._terms` (the indexed search text and safe FTS5 queries),
:mod:`.writer` (snippets written in the store's own transaction when a turn or summary
is stored), :mod:`.index` (search, task summaries, re-indexing), :mod:`.recall` (the
``thread_episodic.context_recall`` hook feeding the Thread Context section) and
:mod:`.extractor` (the post-turn memory extractor prompt and its strict JSON reply).
"""

from __future__ import annotations

from ._terms import fts_query, search_form
from .chunks import CHUNK_CHARS, Snippet, split_text
from .extractor import (
    ExtractionError,
    MemoryExtraction,
    MemoryFact,
    MemorySink,
    memory_extraction_prompt,
    parse_memory_extraction,
    store_extraction,
)
from .index import MAX_CANDIDATES, SMALL_INDEX, EpisodicIndex, Retained, SearchResult
from .recall import (
    DEADLINE_MS,
    HISTORY_KEY,
    MIN_SCORE,
    MIN_SHARE_OF_BEST,
    Recall,
    episodic_recall_subscription,
    recall,
)

__all__ = [
    "CHUNK_CHARS",
    "DEADLINE_MS",
    "HISTORY_KEY",
    "MAX_CANDIDATES",
    "MIN_SCORE",
    "MIN_SHARE_OF_BEST",
    "SMALL_INDEX",
    "EpisodicIndex",
    "ExtractionError",
    "MemoryExtraction",
    "MemoryFact",
    "MemorySink",
    "Recall",
    "Retained",
    "SearchResult",
    "Snippet",
    "episodic_recall_subscription",
    "fts_query",
    "memory_extraction_prompt",
    "parse_memory_extraction",
    "recall",
    "search_form",
    "split_text",
    "store_extraction",
]
