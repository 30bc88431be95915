"""History budgeting: keep everything, summarise, or keep the newest turns that fit.

Takes a store, the token limits and an optional :class:`Summarizer`; returns a
:class:`HistoryDecision` (mode, totals, limits, the messages to send). Counts come from
the store, computed when each turn was written, so a pass only sums integers. Below 80%
of the budget every loaded turn is kept after the stored summary; at 80% or more the
summarizer compresses the summary and the turns into one system message, stored with
its coverage so later passes load only newer turns; when it fails (raises, replies with
nothing or with something that is not text or does not fit, or misses its deadline) the
newest whole turns that fit the budget are kept. A turn is kept or dropped whole, so a
user message never loses its reply. The rules are written down in docs/history.md,
"Budgeting".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..deadline import run_with_deadline
from ..settings_values import SettingsValues
from ..tokens import TokenCounter, default_counter, message_tokens
from .models import HistoryEntry, HistoryMessage, HistoryWindow, ThreadSummary, summary_message_text
from .store import MAX_TURNS, CrudStore
from .summarizer import Summarizer, SummaryRequest

__all__ = [
    "SUMMARY_TARGET_BP",
    "THRESHOLD_BP",
    "HistoryBudgeter",
    "HistoryDecision",
    "HistoryLimits",
    "Mode",
    "keep_all",
    "keep_newest",
    "window_tokens",
]

Mode = Literal["keep", "summarise", "truncate"]

#: Basis points of the budget (out of 10 000) at which summarising starts, and its target.
THRESHOLD_BP = 8000
SUMMARY_TARGET_BP = 1000
_BP = 10_000


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    """The history budget and the two numbers derived from it."""

    budget: int
    threshold: int
    target: int

    @classmethod
    def from_tokens(cls, max_context_tokens: int, response_reserve_tokens: int) -> HistoryLimits:
        """``budget = max_context - reserve`` (never negative), 80% threshold, 10% target."""
        budget = max(0, max_context_tokens - response_reserve_tokens)
        return cls(budget, budget * THRESHOLD_BP // _BP, budget * SUMMARY_TARGET_BP // _BP)

    @classmethod
    def from_settings(cls, settings: SettingsValues) -> HistoryLimits:
        """Limits from ``max_context_tokens`` and ``response_reserve_tokens``."""
        return cls.from_tokens(settings.max_context_tokens, settings.response_reserve_tokens)


@dataclass(frozen=True, slots=True)
class HistoryDecision:
    """What one budgeting pass decided and the messages it produced."""

    thread_id: str
    mode: Mode
    reason: str
    limits: HistoryLimits
    total_tokens: int
    sent_tokens: int
    turns_loaded: int
    turns_sent: int
    summary_sent: bool
    summary_stored: bool
    summary_turn_count: int
    artifact_ref_count: int
    messages: tuple[HistoryMessage, ...]
    message_tokens: tuple[int, ...]
    #: The turns whose messages are sent, oldest first (episodic recall leaves them out).
    turn_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (for ``pioneer history --json`` and turn records)."""
        return {
            "thread_id": self.thread_id,
            "mode": self.mode,
            "reason": self.reason,
            "budget": self.limits.budget,
            "threshold": self.limits.threshold,
            "summary_target": self.limits.target,
            "total_tokens": self.total_tokens,
            "sent_tokens": self.sent_tokens,
            "turns_loaded": self.turns_loaded,
            "turns_sent": self.turns_sent,
            "summary_sent": self.summary_sent,
            "summary_stored": self.summary_stored,
            "summary_turn_count": self.summary_turn_count,
            "artifact_ref_count": self.artifact_ref_count,
            "messages": [
                {**message.to_dict(), "tokens": tokens}
                for message, tokens in zip(self.messages, self.message_tokens, strict=True)
            ],
        }


def window_tokens(window: HistoryWindow) -> int:
    """Stored tokens of the summary message and every loaded turn."""
    summary = window.summary.tokens if window.summary else 0
    return summary + sum(entry.tokens for entry in window.entries)


def keep_all(window: HistoryWindow) -> tuple[ThreadSummary | None, tuple[HistoryEntry, ...]]:
    """The summary and every loaded turn."""
    return window.summary, window.entries


def keep_newest(
    window: HistoryWindow, budget: int
) -> tuple[ThreadSummary | None, tuple[HistoryEntry, ...]]:
    """The truncation fallback: the summary if it fits, then the newest whole turns.

    Turns are taken newest first while the running total stays within ``budget``; the
    first turn that does not fit ends the walk (older turns are not tried).
    """
    used = 0
    summary = window.summary if window.summary and window.summary.tokens < budget else None
    if summary is not None:
        used = summary.tokens
    kept: list[HistoryEntry] = []
    for entry in reversed(window.entries):
        if used + entry.tokens > budget:
            break
        used += entry.tokens
        kept.append(entry)
    kept.reverse()
    return summary, tuple(kept)


def _messages(
    summary: ThreadSummary | None, entries: Sequence[HistoryEntry]
) -> tuple[tuple[HistoryMessage, ...], tuple[int, ...]]:
    messages: list[HistoryMessage] = []
    tokens: list[int] = []
    if summary is not None:
        messages.append(summary.message)
        tokens.append(summary.tokens)
    for entry in entries:
        messages.extend(entry.messages())
        tokens.extend(entry.message_tokens())
    return tuple(messages), tuple(tokens)


class HistoryBudgeter:
    """Builds each turn's history from a store: keep, summarise or truncate."""

    def __init__(
        self,
        store: CrudStore,
        limits: HistoryLimits,
        *,
        summarizer: Summarizer | None = None,
        summary_model: str | None = None,
        counter: TokenCounter | None = None,
        max_turns: int = MAX_TURNS,
        summary_deadline: float | None = None,
    ) -> None:
        self.store = store
        self.limits = limits
        self.summarizer = summarizer
        self.summary_model = summary_model
        self.max_turns = max_turns
        #: Seconds a summarizer gets before the pass falls back to truncation (None: no limit).
        self.summary_deadline = summary_deadline
        self._counter = counter

    @classmethod
    def from_settings(
        cls, store: CrudStore, settings: SettingsValues, *, summarizer: Summarizer | None = None
    ) -> HistoryBudgeter:
        """A budgeter with the settings' limits, summary model and summary timeout."""
        return cls(
            store, HistoryLimits.from_settings(settings), summarizer=summarizer,
            summary_model=settings.summary_model, summary_deadline=settings.summary_timeout,
        )

    def build(self, thread_id: str, *, exclude_turn_id: str | None = None) -> HistoryDecision:
        """Load the thread's window and decide what history the next request carries.

        ``exclude_turn_id`` leaves out a turn already stored for the request being built.
        """
        window = self.store.get_history_window(
            thread_id, self.max_turns, exclude_turn_id=exclude_turn_id
        )
        total = window_tokens(window)
        limits = self.limits
        if total < limits.threshold:
            return self._decision(
                window, total, "keep",
                f"{total} tokens is under the threshold of {limits.threshold}",
                *keep_all(window),
            )
        over = f"{total} tokens reached the threshold of {limits.threshold}"
        outcome = self._summarise(window)
        if isinstance(outcome, str):
            summary, kept = keep_newest(window, limits.budget)
            return self._decision(
                window, total, "truncate",
                f"{over}; {outcome}; kept the newest {len(kept)} of {len(window.entries)} turns",
                summary, kept,
            )
        # A concurrent pass may have stored a summary covering more; the store keeps that
        # one and returns it, and it is the better summary to send.
        return self._decision(
            window, total, "summarise",
            f"{over}; summarised {len(window.entries)} turns into {outcome.tokens} tokens",
            outcome, (), stored=outcome.through_seq == window.entries[-1].seq,
        )

    def _summarise(self, window: HistoryWindow) -> ThreadSummary | str:
        """The stored new summary, or why there is none."""
        if not window.entries:
            return "no new turns to summarise"
        if self.summarizer is None:
            return "no summarizer configured"
        request = SummaryRequest(
            model=self.summary_model or window.thread.model,
            target_tokens=self.limits.target,
            previous_summary=window.summary.text if window.summary else None,
            transcript=tuple(m for entry in window.entries for m in entry.messages()),
        )
        summarizer = self.summarizer
        # Run by the one deadline runner: a late call is abandoned and its reply dropped,
        # so it is never stored; any failure but the user stopping the process falls back.
        outcome = run_with_deadline(lambda: summarizer.summarize(request),
                                    self.summary_deadline, name="pioneer-summarizer")
        if outcome.late:
            return f"summarizer gave no reply within {self.summary_deadline:g} s"
        if outcome.error is not None:
            return f"summarizer failed: {outcome.error}"
        reply: object = outcome.value
        if not isinstance(reply, str):
            return f"summarizer returned {type(reply).__name__}, not text"
        text = reply.strip()
        if not text:
            return "summarizer returned an empty reply"
        tokens = message_tokens(self._counter or default_counter(), summary_message_text(text))
        if tokens >= self.limits.budget:
            return f"summary of {tokens} tokens does not fit the budget of {self.limits.budget}"
        return self.store.set_thread_summary(
            window.thread.thread_id, text, through_turn_id=window.entries[-1].turn_id
        )

    def _decision(
        self,
        window: HistoryWindow,
        total: int,
        mode: Mode,
        reason: str,
        summary: ThreadSummary | None,
        entries: tuple[HistoryEntry, ...],
        *,
        stored: bool = False,
    ) -> HistoryDecision:
        messages, tokens = _messages(summary, entries)
        return HistoryDecision(
            thread_id=window.thread.thread_id,
            mode=mode,
            reason=reason,
            limits=self.limits,
            total_tokens=total,
            sent_tokens=sum(tokens),
            turns_loaded=len(window.entries),
            turns_sent=len(entries),
            summary_sent=summary is not None,
            summary_stored=stored,
            summary_turn_count=summary.turn_count if summary else 0,
            artifact_ref_count=sum(entry.artifact_count for entry in entries),
            messages=messages,
            message_tokens=tokens,
            turn_ids=tuple(entry.turn_id for entry in entries),
        )
