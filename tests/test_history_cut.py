"""Cache-aware history: truncation cuts to a low-water mark and keeps that cut.

Driven through the real SQLite store: turns are appended one by one and the history is
budgeted after each, as an agent loop does. Without a summarizer the window's start
(the cut) moves only when the kept turns no longer fit the budget; then it moves to
the low-water mark, so the turns after it stay a stable prefix for the following turns.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import StoreTarget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer.history import HistoryBudgeter, HistoryLimits, SqliteStore, SummaryRequest
from pioneer.history.open import open_store


def _text(tokens: int, n: int) -> str:
    return f"turn {n}: " + "word " * tokens


class Scripted:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self.reply


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(10, 250), min_size=5, max_size=40),
    budget=st.integers(300, 2500),
    low_water=st.sampled_from([0.4, 0.6, 0.8]),
    reopen_at=st.integers(0, 40),
)
def test_the_window_start_moves_only_when_the_budget_is_reached(
    sizes: list[int], budget: int, low_water: float, reopen_at: int
) -> None:
    limits = HistoryLimits.from_tokens(budget, 0, low_water=low_water)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cut.db"
        store = SqliteStore(path)
        store.ensure_thread("t")
        sent: list[str] = []  # the turn ids the previous request carried
        stored: list[str] = []
        try:
            for n, size in enumerate(sizes):
                if n == reopen_at:  # the cut is on the thread, not in the budgeter
                    store.close()
                    store = SqliteStore(path, create=False)
                entry = store.add_turn("t", turn_id=f"turn-{n}", user_text=_text(size, n),
                                       assistant_text=_text(size // 2, n))
                stored.append(entry.turn_id)
                decision = HistoryBudgeter(store, limits).build("t")
                kept = list(decision.turn_ids)
                # Whole turns, a suffix of the thread, never over the budget (unless not
                # even the newest turn fits, when nothing is sent).
                assert kept == stored[len(stored) - len(kept):]
                assert decision.sent_tokens <= budget
                assert len(decision.messages) == 2 * len(kept)
                if sent and kept == [*sent, entry.turn_id]:
                    # Only appended: no new cut was made.
                    assert not decision.cut_stored
                elif kept and sent:
                    # The start moved: only because what was kept no longer fitted, and
                    # then down to the low-water mark (or the newest turn that fits).
                    previous = sum(e.tokens for e in store.get_thread_conversation_history(
                        "t", len(stored)) if e.turn_id in sent)
                    assert previous + entry.tokens > budget
                    assert decision.cut_stored
                    assert decision.sent_tokens <= limits.low_water_tokens or len(kept) == 1
                    assert decision.cut_turn_id == kept[0]
                sent = kept
        finally:
            store.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "cut.db") as opened:
        opened.ensure_thread("t")
        yield opened


def test_the_cut_survives_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "cut.db"
    limits = HistoryLimits.from_tokens(1000, 0)  # low-water mark 600
    with SqliteStore(path) as store:
        store.ensure_thread("t")
        for n in range(12):
            store.add_turn("t", turn_id=f"turn-{n}", user_text=_text(60, n),
                           assistant_text=_text(30, n))
        first = HistoryBudgeter(store, limits).build("t")
        assert first.cut_stored and first.sent_tokens <= 600
        store.add_turn("t", turn_id="turn-12", user_text=_text(60, 12),
                       assistant_text=_text(30, 12))
    with SqliteStore(path, create=False) as reopened:
        again = HistoryBudgeter(reopened, limits).build("t")
    assert again.turn_ids == (*first.turn_ids, "turn-12")
    assert (again.cut_turn_id, again.cut_stored) == (first.cut_turn_id, False)
    # Read from the cut, the history is back under the threshold: kept whole.
    assert (again.mode, again.turns_loaded) == ("keep", len(again.turn_ids))
    assert again.reason == (f"{again.total_tokens} tokens is under the threshold of 800; "
                            f"kept every turn from the cut at {first.cut_turn_id}")


def test_a_read_only_pass_reports_the_cut_without_storing_it(store: SqliteStore) -> None:
    for n in range(12):
        store.add_turn("t", turn_id=f"turn-{n}", user_text=_text(60, n),
                       assistant_text=_text(30, n))
    limits = HistoryLimits.from_tokens(1000, 0)
    looked = HistoryBudgeter(store, limits, store_cut=False).build("t")
    assert looked.cut_state == "not_stored" and looked.cut_turn_id is not None
    assert store.get_history_window("t").cut is None
    written = HistoryBudgeter(store, limits).build("t")
    assert written.cut_state == "stored"
    assert written.turn_ids == looked.turn_ids


def test_a_summary_keeps_the_newest_turns_verbatim_with_keep_recent_tokens(
    store: SqliteStore,
) -> None:
    for n in range(10):
        store.add_turn("t", turn_id=f"turn-{n}", user_text=_text(60, n),
                       assistant_text=_text(30, n))
    entries = store.get_history_window("t").entries
    recent = entries[-1].tokens + entries[-2].tokens
    summarizer = Scripted("The user asked ten questions.")
    budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(1000, 0), summarizer=summarizer,
                               keep_recent_tokens=recent)
    decision = budgeter.build("t")
    assert decision.mode == "summarise"
    assert decision.turn_ids == ("turn-8", "turn-9")
    assert decision.messages[0].content == (
        "Summary of earlier conversation:\nThe user asked ten questions.")
    assert [m.role for m in decision.messages] == ["system"] + ["user", "assistant"] * 2
    # The summary covers turns 0-7 only; the next pass loads 8 and 9 again, after it.
    assert len(summarizer.requests[0].transcript) == 16
    summary = store.get_thread_summary("t")
    assert summary is not None and summary.through_turn_id == "turn-7"
    assert decision.reason.endswith("summarised 8 turns into "
                                    f"{summary.tokens} tokens, kept the newest 2 turns verbatim")
    store.add_turn("t", turn_id="turn-10", user_text="and now?", assistant_text="this.")
    after = HistoryBudgeter(store, HistoryLimits.from_tokens(1000, 0)).build("t")
    assert after.mode == "keep"
    assert after.turn_ids == ("turn-8", "turn-9", "turn-10")
    assert after.messages[:5] == decision.messages  # the same prefix, one turn appended


def test_the_count_window_cuts_to_a_low_water_count_and_appends(
    store_target: StoreTarget,
) -> None:
    """400 small turns, under the token threshold: past the 200-turn window the history
    drops to 120 turns and appends again, so it is the previous one plus a turn on at
    least 90% of the turns; the cut lives on the thread, so reopening the store (SQLite
    or PostgreSQL) changes nothing."""
    limits = HistoryLimits.from_tokens(1_000_000, 0)
    store = open_store(store_target.target)
    store.ensure_thread("t")
    previous: tuple[str, ...] = ()
    appended = cuts = 0
    try:
        for n in range(400):
            if n in (150, 260):
                store.close()
                store = open_store(store_target.target, create=False)
            entry = store.add_turn("t", turn_id=f"turn-{n}", user_text=f"question {n}",
                                   assistant_text=f"answer {n}")
            decision = HistoryBudgeter(store, limits).build("t")
            assert decision.mode == "keep"
            assert len(decision.turn_ids) <= 200
            assert decision.turn_ids[-1] == entry.turn_id
            if decision.turn_ids == (*previous, entry.turn_id):
                appended += 1
                assert not decision.cut_stored
            else:
                cuts += 1
                assert decision.cut_stored and len(decision.turn_ids) == 120
                assert decision.cut_turn_id == decision.turn_ids[0]
                assert decision.reason.endswith(
                    "; the window passed 200 turns: cut to the newest 120 turns")
            previous = decision.turn_ids
    finally:
        store.close()
    assert appended >= 0.9 * 400
    assert cuts == 3  # at turns 200, 281 and 362


def test_a_pass_reads_only_the_turns_from_the_cut(tmp_path: Path) -> None:
    """However large the window, a pass loads the turns from the stored cut, not the thread."""
    with SqliteStore(tmp_path / "long.db") as store:
        store.ensure_thread("t")
        for n in range(600):
            store.add_turn("t", turn_id=f"turn-{n}", user_text="q", assistant_text="a")
        store.set_history_cut("t", first_turn_id="turn-590")
        budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(1_000_000, 0),
                                   max_turns=10**9)
        decision = budgeter.build("t")
        assert decision.turns_loaded == 10
        assert decision.turn_ids == tuple(f"turn-{n}" for n in range(590, 600))
        assert len(store.get_history_window("t", 10**9).entries) == 10
