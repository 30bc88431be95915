"""Conversation history: the store, token counts, budgeting and summarisation.

The stages, in the order a turn uses them: :mod:`.sqlite_store` (threads and turns with
their token counts, behind the :class:`CrudStore` protocol), :mod:`.budget` (keep,
summarise or truncate), :mod:`.summarizer` (the protocol and an OpenAI-compatible HTTP
client) and :mod:`.artifacts` (reference blocks on messages). The result a provider
adapter consumes is a tuple of :class:`HistoryMessage` values.
"""

from __future__ import annotations

from .artifacts import ArtifactRef, render_message
from .budget import HistoryBudgeter, HistoryDecision, HistoryLimits, keep_newest
from .calibration import Calibrator, TokenRatio
from .migrations import MIGRATIONS, Migration
from .models import (
    SUMMARY_PREFIX,
    HistoryCut,
    HistoryEntry,
    HistoryMessage,
    HistoryWindow,
    ThreadRecord,
    ThreadSummary,
    TokenCalibration,
)
from .sqlite_store import SqliteStore
from .store import MAX_TURNS, CrudStore
from .summarizer import OpenAIChatSummarizer, Summarizer, SummarizerError, SummaryRequest

__all__ = [
    "MAX_TURNS",
    "MIGRATIONS",
    "SUMMARY_PREFIX",
    "ArtifactRef",
    "Calibrator",
    "CrudStore",
    "HistoryBudgeter",
    "HistoryCut",
    "HistoryDecision",
    "HistoryEntry",
    "HistoryLimits",
    "HistoryMessage",
    "HistoryWindow",
    "Migration",
    "OpenAIChatSummarizer",
    "SqliteStore",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "ThreadRecord",
    "ThreadSummary",
    "TokenCalibration",
    "TokenRatio",
    "keep_newest",
    "render_message",
]
