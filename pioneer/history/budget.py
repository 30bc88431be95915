"""History budgeting: keep everything, summarise, or keep the newest turns that fit.

Takes a store, the token limits and an optional :class:`Summarizer`; returns a
:class:`HistoryDecision` (mode, totals, limits, the messages to send). Counts come from
the store, computed when each turn was written, so a pass only sums integers. Below 80%
of the budget every loaded turn is kept after the stored summary; at 80% or more the
summarizer compresses the summary and the turns into one system message, stored with
its coverage so later passes load only newer turns (with ``keep_recent_tokens``, the
newest turns stay out of the summary and are sent verbatim after it). When it fails
(raises, replies with nothing or with something that is not text or does not fit, or
misses its deadline) or there is none, truncation keeps the turns from the cut stored on
the thread while they fit the budget, so each request's history is the previous one plus
a turn; once they no longer fit, the oldest turns are dropped down to the low-water mark
(60% of the budget by default) and that cut is stored. A turn is kept or dropped whole,
so a user message never loses its reply. The turn count has the same low-water cut: past
``max_turns`` turns the window drops to a lower count and stores that cut. A pass reads
the turns from the stored cut on, never the whole thread. The rules are written down in
docs/history.md, "Budgeting" and "Cache-aware retention".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import InputError, Problem, counted
from ..hooks.deadline import run_with_deadline
from ..settings import PioneerSettings
from ..tokens import TokenCounter, default_counter, message_tokens
from .models import (
    HistoryCut,
    HistoryEntry,
    HistoryMessage,
    HistoryWindow,
    ThreadRecord,
    ThreadSummary,
    summary_message_text,
)
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
    "keep_from_cut",
    "keep_newest",
    "window_tokens",
]

Mode = Literal["keep", "summarise", "truncate"]

#: Basis points of the budget (out of 10 000) at which summarising starts, and its target.
THRESHOLD_BP = 8000
SUMMARY_TARGET_BP = 1000
#: Basis points of the budget truncation cuts back to when the kept turns fill it.
LOW_WATER_BP = 6000
_BP = 10_000


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    """The history budget and the numbers derived from it.

    ``low_water`` is where truncation cuts back to once the kept turns reach the budget
    (60% unless given), so the following turns append to the same kept turns instead of
    sliding the window one turn per turn.
    """

    budget: int
    threshold: int
    target: int
    low_water: int | None = None

    @property
    def low_water_tokens(self) -> int:
        """The low-water mark in tokens."""
        if self.low_water is not None:
            return self.low_water
        return self.budget * LOW_WATER_BP // _BP

    @property
    def low_water_share(self) -> float:
        """The low-water mark as a share of the budget."""
        return self.low_water_tokens / self.budget if self.budget else LOW_WATER_BP / _BP

    @classmethod
    def for_budget(cls, budget: int, *, low_water: float = LOW_WATER_BP / _BP) -> HistoryLimits:
        """A history budget of ``budget`` tokens (never negative), 80% threshold, 10%
        target, ``low_water`` (a share of the budget, 60% by default) as the truncation
        cut."""
        budget = max(0, budget)
        return cls(budget, budget * THRESHOLD_BP // _BP, budget * SUMMARY_TARGET_BP // _BP,
                   int(budget * low_water))

    @classmethod
    def from_tokens(
        cls, max_context_tokens: int, response_reserve_tokens: int, *,
        low_water: float = LOW_WATER_BP / _BP,
    ) -> HistoryLimits:
        """``budget = max_context - reserve`` (never negative), 80% threshold, 10% target,
        ``low_water`` (a share of the budget, 60% by default) as the truncation cut."""
        return cls.for_budget(max_context_tokens - response_reserve_tokens, low_water=low_water)

    @classmethod
    def from_settings(cls, settings: PioneerSettings, *,
                      context_window: int | None = None) -> HistoryLimits:
        """Limits from the window (the ``max_context_tokens`` setting when set, else
        ``context_window``: the model's), ``response_reserve_tokens`` and
        ``truncate_low_water``. The turn runner subtracts the rest of the request too
        (docs/history.md, "Budgeting")."""
        window = settings.max_context_tokens or context_window
        if window is None:
            raise InputError(Problem(
                "no context window: max_context_tokens is not set; give the model's window "
                "as context_window= (pioneer.providers.window.context_window reads it from "
                "the model table)", path="HistoryLimits.from_settings"))
        return cls.from_tokens(window, settings.response_reserve_tokens,
                               low_water=settings.truncate_low_water)


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
    #: The first turn the history sends when it starts at a cut (stored on the thread, or
    #: made by this pass: truncation or the turn-count window), else None.
    cut_turn_id: str | None = None
    #: Whether this pass moved the cut (the kept turns had reached the budget).
    cut_stored: bool = False
    #: Whether this pass moved the cut but did not store it (``store_cut=False``).
    cut_pending: bool = False
    #: The summary sent (None: none) and the turns sent, oldest first: what a cut made
    #: later in the turn (:meth:`HistoryBudgeter.cut_to`) starts from.
    summary: ThreadSummary | None = None
    entries: tuple[HistoryEntry, ...] = ()

    @property
    def cut_state(self) -> Literal["stored", "kept", "not_stored"]:
        """stored: this pass moved the cut; kept: it stayed; not_stored: it would move."""
        return "stored" if self.cut_stored else "not_stored" if self.cut_pending else "kept"

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
            "cut_turn_id": self.cut_turn_id,
            "cut_stored": self.cut_stored,
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


def keep_from_cut(
    window: HistoryWindow, budget: int, low_water: int
) -> tuple[ThreadSummary | None, tuple[HistoryEntry, ...], HistoryEntry | None]:
    """Cache-aware truncation: the summary if it fits, then the turns from the cut on.

    While the summary and the turns from the stored cut (``window.cut``; every loaded
    turn when there is none) fit ``budget`` they are all kept and the cut stays where it
    is, so the request's history is the previous one plus the newest turn. Once they no
    longer fit, the oldest whole turns are dropped until what is kept fits ``low_water``;
    the third value is then the new first turn, for the caller to store as the cut (None
    when the cut does not move). When not even the newest turn fits ``low_water``, it is
    kept alone if it fits ``budget`` (and nothing is kept if it does not).
    """
    summary = window.summary if window.summary and window.summary.tokens < budget else None
    used = summary.tokens if summary is not None else 0
    start = window.cut.first_seq if window.cut is not None else 0
    kept = tuple(entry for entry in window.entries if entry.seq >= start)
    if used + sum(entry.tokens for entry in kept) <= budget:
        return summary, kept, None
    newest: list[HistoryEntry] = []
    for entry in reversed(kept):
        if used + entry.tokens > low_water:
            break
        used += entry.tokens
        newest.append(entry)
    newest.reverse()
    if not newest:  # the newest turn alone is past the low-water mark
        last = kept[-1]
        if used + last.tokens <= budget:
            return summary, (last,), last
        return summary, (), None
    return summary, tuple(newest), newest[0]


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


@dataclass(frozen=True, slots=True)
class _CountCut:
    """A cut the turn-count window made."""

    first_turn_id: str
    stored: bool
    pending: bool
    note: str


class HistoryBudgeter:
    """Builds each turn's history from a store: keep, summarise or truncate.

    The history never carries more than ``max_turns`` turns: when the turns from the
    stored cut pass that count, the window is cut back to ``turn_low_water`` of it and the
    cut stored, as truncation does with tokens, so the requests of a long thread of small
    turns still start with the history of the one before.
    """

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
        keep_recent_tokens: int = 0,
        store_cut: bool = True,
        turn_low_water: float = LOW_WATER_BP / _BP,
    ) -> None:
        self.store = store
        self.limits = limits
        self.summarizer = summarizer
        self.summary_model = summary_model
        #: The turn-count window: a history never carries more turns than this.
        self.max_turns = max_turns
        #: Share of ``max_turns`` the window cuts back to when the count passes it.
        self.turn_low_water = turn_low_water
        #: Seconds a summarizer gets before the pass falls back to truncation (None: no limit).
        self.summary_deadline = summary_deadline
        #: Tokens of the newest turns a new summary leaves out and sends verbatim after it.
        self.keep_recent_tokens = keep_recent_tokens
        #: Store a new truncation cut on the thread (False: report it only, as a read does).
        self.store_cut = store_cut
        self._counter = counter

    @classmethod
    def from_settings(
        cls, store: CrudStore, settings: PioneerSettings, *, summarizer: Summarizer | None = None,
        context_window: int | None = None,
    ) -> HistoryBudgeter:
        """A budgeter with the settings' limits (the window: ``max_context_tokens`` when
        set, else ``context_window``), summary model, summary timeout,
        ``keep_recent_tokens`` and low-water share (for tokens and turns alike)."""
        return cls(
            store, HistoryLimits.from_settings(settings, context_window=context_window),
            summarizer=summarizer,
            summary_model=settings.summary_model, summary_deadline=settings.summary_timeout,
            keep_recent_tokens=settings.keep_recent_tokens,
            turn_low_water=settings.truncate_low_water,
        )

    def build(self, thread_id: str, *, exclude_turn_id: str | None = None) -> HistoryDecision:
        """Load the thread's window and decide what history the next request carries.

        ``exclude_turn_id`` leaves out a turn already stored for the request being built.
        """
        # One turn more than the window holds is read, to see that the count passed it.
        window = self.store.get_history_window(
            thread_id, self.max_turns + 1, exclude_turn_id=exclude_turn_id
        )
        window, counted = self._count_window(window)
        decision = self._decide(window)
        if counted is None:
            return decision
        if decision.cut_stored or decision.cut_pending:
            # Truncation cut again, later than the count did: that cut is the one sent.
            return replace(decision, reason=f"{decision.reason}; {counted.note}")
        return replace(decision, reason=f"{decision.reason}; {counted.note}",
                       cut_turn_id=counted.first_turn_id, cut_stored=counted.stored,
                       cut_pending=counted.pending)

    def cut_to(self, decision: HistoryDecision, budget: int, why: str) -> HistoryDecision:
        """``decision`` cut to ``budget`` tokens, for the rest of a turn whose own rounds
        left the history less room: the summary stays while it fits, and the oldest whole
        turns are dropped down to the low-water mark of ``budget`` and that cut stored, as
        truncation does. A decision that fits is returned as it is."""
        if decision.sent_tokens <= budget:
            return decision
        limits = HistoryLimits.for_budget(budget, low_water=self.limits.low_water_share)
        window = HistoryWindow(ThreadRecord(decision.thread_id, None, ""), decision.summary,
                               decision.entries)
        summary, kept, first = keep_from_cut(window, limits.budget, limits.low_water_tokens)
        stored = pending = False
        cut_id = decision.cut_turn_id
        if first is not None and not self.store_cut:
            pending, cut_id = True, first.turn_id
        elif first is not None:
            cut = self.store.set_history_cut(decision.thread_id, first_turn_id=first.turn_id)
            # A concurrent pass may have stored a later cut; the store keeps that one.
            kept = tuple(entry for entry in kept if entry.seq >= cut.first_seq)
            stored, cut_id = cut.first_turn_id == first.turn_id, cut.first_turn_id
        messages, tokens = _messages(summary, kept)
        dropped = "" if summary is not None or decision.summary is None else \
            ", the summary left out"
        return replace(
            decision, mode="truncate", limits=limits,
            reason=f"{decision.reason}; {why}: cut to the low-water mark of "
                   f"{limits.low_water_tokens} of the history's {budget}, keeping the newest "
                   f"{len(kept)} of {len(decision.entries)} turns{dropped}",
            sent_tokens=sum(tokens), turns_sent=len(kept), summary_sent=summary is not None,
            summary_turn_count=summary.turn_count if summary else 0,
            artifact_ref_count=sum(entry.artifact_count for entry in kept),
            messages=messages, message_tokens=tokens,
            turn_ids=tuple(entry.turn_id for entry in kept), cut_turn_id=cut_id,
            cut_stored=decision.cut_stored or stored,
            cut_pending=decision.cut_pending or pending, summary=summary, entries=kept)

    def _count_window(self, window: HistoryWindow) -> tuple[HistoryWindow, _CountCut | None]:
        """The window, cut back to the low-water count when it holds more turns than
        ``max_turns``: the oldest turns are dropped whole and the cut is stored, so the
        following turns append to the same turns until the count is passed again."""
        if len(window.entries) <= self.max_turns:
            return window, None
        keep = max(1, int(self.max_turns * self.turn_low_water))
        entries = window.entries[-keep:]
        first = entries[0]
        stored = pending = False
        if self.store_cut:
            cut = self.store.set_history_cut(window.thread.thread_id,
                                             first_turn_id=first.turn_id)
            # A concurrent pass may have stored a later cut; the store keeps that one.
            entries = tuple(entry for entry in entries if entry.seq >= cut.first_seq)
            stored = cut.first_turn_id == first.turn_id
        else:
            cut, pending = HistoryCut(first.seq, first.turn_id), True
        note = (f"the window passed {self.max_turns} turns: cut to the newest "
                f"{counted(len(entries), 'turn')}")
        return replace(window, entries=entries, cut=cut), _CountCut(
            cut.first_turn_id, stored, pending, note)

    def _decide(self, window: HistoryWindow) -> HistoryDecision:
        """Keep, summarise or truncate the turns of ``window``."""
        total = window_tokens(window)
        limits = self.limits
        if total < limits.threshold:
            cut = window.cut.first_turn_id if window.cut is not None else None
            since = f"; kept every turn from the cut at {cut}" if cut else ""
            decision = self._decision(
                window, total, "keep",
                f"{total} tokens is under the threshold of {limits.threshold}{since}",
                *keep_all(window),
            )
            return replace(decision, cut_turn_id=cut)
        over = f"{total} tokens reached the threshold of {limits.threshold}"
        recent = self._recent(window.entries)
        older = window.entries[:len(window.entries) - len(recent)]
        outcome = self._summarise(window, older)
        if isinstance(outcome, str):
            return self._truncate(window, total, f"{over}; {outcome}")
        # A concurrent pass may have stored a summary covering more; the store keeps that
        # one and returns it, and it is the better summary to send.
        kept = tuple(entry for entry in recent if entry.seq > outcome.through_seq)
        verbatim = f", kept the newest {counted(len(kept), 'turn')} verbatim" if kept else ""
        return self._decision(
            window, total, "summarise",
            f"{over}; summarised {len(older)} turns into {outcome.tokens} tokens{verbatim}",
            outcome, kept, stored=outcome.through_seq == older[-1].seq,
        )

    def _recent(self, entries: Sequence[HistoryEntry]) -> tuple[HistoryEntry, ...]:
        """The newest whole turns within ``keep_recent_tokens``, oldest first."""
        if self.keep_recent_tokens <= 0:
            return ()
        used = 0
        recent: list[HistoryEntry] = []
        for entry in reversed(entries):
            if used + entry.tokens > self.keep_recent_tokens:
                break
            used += entry.tokens
            recent.append(entry)
        return tuple(reversed(recent))

    def _truncate(self, window: HistoryWindow, total: int, why: str) -> HistoryDecision:
        """Keep the turns from the stored cut; cut again, to the low-water mark, when full."""
        limits = self.limits
        summary, kept, first = keep_from_cut(window, limits.budget, limits.low_water_tokens)
        stored = pending = False
        cut_id: str | None = None
        if first is not None and not self.store_cut:
            pending, cut_id = True, first.turn_id
        elif first is not None:
            cut = self.store.set_history_cut(window.thread.thread_id,
                                             first_turn_id=first.turn_id)
            # A concurrent pass may have stored a later cut; the store keeps that one.
            kept = tuple(entry for entry in kept if entry.seq >= cut.first_seq)
            stored, cut_id = cut.first_turn_id == first.turn_id, cut.first_turn_id
        if first is not None:
            kept_what = (f"the kept turns reached the budget of {limits.budget}: cut to the "
                         f"low-water mark of {limits.low_water_tokens}, keeping the newest "
                         f"{len(kept)} of {len(window.entries)} turns")
        elif window.cut is not None:
            cut_id = window.cut.first_turn_id
            kept_what = (f"kept the {counted(len(kept), 'turn')} from the cut at {cut_id} "
                         f"({len(window.entries)} loaded)")
        else:
            kept_what = f"kept the newest {len(kept)} of {len(window.entries)} turns"
        decision = self._decision(window, total, "truncate", f"{why}; {kept_what}", summary,
                                  kept)
        return replace(decision, cut_turn_id=cut_id, cut_stored=stored, cut_pending=pending)

    def _summarise(
        self, window: HistoryWindow, entries: Sequence[HistoryEntry]
    ) -> ThreadSummary | str:
        """The stored new summary of the summary and ``entries``, or why there is none."""
        if not entries:
            return "no new turns to summarise"
        if self.summarizer is None:
            return "no summarizer configured"
        request = SummaryRequest(
            model=self.summary_model or window.thread.model,
            target_tokens=self.limits.target,
            previous_summary=window.summary.text if window.summary else None,
            transcript=tuple(m for entry in entries for m in entry.messages()),
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
            window.thread.thread_id, text, through_turn_id=entries[-1].turn_id
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
            summary=summary,
            entries=entries,
        )
