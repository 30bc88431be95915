"""History budgeting: keep under 80%, summarise at 80%, truncate when summarising fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer.history import (
    ArtifactRef,
    HistoryBudgeter,
    HistoryCut,
    HistoryEntry,
    HistoryLimits,
    HistoryMessage,
    HistoryWindow,
    SqliteStore,
    SummaryRequest,
    ThreadRecord,
    ThreadSummary,
    keep_newest,
)
from pioneer.history.budget import window_tokens

SUMMARY = "Summary of earlier conversation:\n"


class Scripted:
    """A summarizer that replies with a fixed text or raises, recording each request."""

    def __init__(self, reply: str = "", error: BaseException | None = None) -> None:
        self.reply = reply
        self.error = error
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return self.reply


def limits_at(threshold: int) -> HistoryLimits:
    """The smallest budget whose 80% threshold is exactly ``threshold``."""
    limits = HistoryLimits.from_tokens(-(-threshold * 10_000 // 8_000), 0)
    assert limits.threshold == threshold
    return limits


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "history.db") as opened:
        opened.ensure_thread("t1", model="thread-model")
        yield opened


def add_turns(store: SqliteStore, texts: list[tuple[str, str]], start: int = 0) -> None:
    for n, (user, reply) in enumerate(texts, start=start):
        store.add_turn("t1", user_text=user, assistant_text=reply, turn_id=f"turn-{n}")


TURNS = [
    ("What database should the store use?", "SQLite in WAL mode, one file per deployment."),
    ("How are token counts kept?", "Counted once when a turn is written, then stored."),
    ("And when history grows?", "Past 80% of the budget it is summarised."),
]


def total(store: SqliteStore) -> int:
    return window_tokens(store.get_history_window("t1"))


def test_default_limits() -> None:
    assert HistoryLimits.from_tokens(128_000, 16_000) == HistoryLimits(
        112_000, 89_600, 11_200, 67_200)
    assert HistoryLimits.from_tokens(100, 200) == HistoryLimits(0, 0, 0, 0)
    assert HistoryLimits(1000, 800, 100).low_water_tokens == 600


def test_one_token_under_the_threshold_keeps_everything(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    summarizer = Scripted("never used")
    limits = limits_at(total(store) + 1)
    decision = HistoryBudgeter(store, limits, summarizer=summarizer).build("t1")
    assert decision.mode == "keep"
    assert summarizer.requests == []
    assert decision.messages == tuple(
        HistoryMessage(role, text)
        for user, reply in TURNS for role, text in (("user", user), ("assistant", reply))
    )
    assert decision.sent_tokens == decision.total_tokens == total(store)
    assert decision.reason == f"{total(store)} tokens is under the threshold of {total(store) + 1}"


def test_exactly_at_the_threshold_summarises(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    at = total(store)
    summarizer = Scripted("  Uses SQLite; counts stored; summaries past 80%.  ")
    decision = HistoryBudgeter(store, limits_at(at), summarizer=summarizer).build("t1")
    assert decision.mode == "summarise"
    assert decision.messages == (
        HistoryMessage("system", SUMMARY + "Uses SQLite; counts stored; summaries past 80%."),
    )
    stored = store.get_thread_summary("t1")
    assert stored is not None
    assert stored.text == "Uses SQLite; counts stored; summaries past 80%."
    assert (stored.turn_count, stored.through_turn_id) == (3, "turn-2")
    assert decision.sent_tokens == stored.tokens
    assert decision.message_tokens == (stored.tokens,)
    assert (decision.summary_stored, decision.summary_turn_count, decision.turns_sent) == (
        True, 3, 0)
    assert decision.reason == (
        f"{at} tokens reached the threshold of {at}; summarised 3 turns into {stored.tokens} tokens"
    )


def test_summary_request_carries_model_target_and_transcript(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    limits = limits_at(total(store))
    summarizer = Scripted("short")
    HistoryBudgeter(store, limits, summarizer=summarizer).build("t1")
    (request,) = summarizer.requests
    assert request.model == "thread-model"
    assert request.target_tokens == limits.target
    assert request.previous_summary is None
    assert request.transcript[:2] == (HistoryMessage("user", TURNS[0][0]),
                                      HistoryMessage("assistant", TURNS[0][1]))
    assert len(request.transcript) == 6


def test_summary_model_setting_wins_over_thread_model(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    summarizer = Scripted("short")
    HistoryBudgeter(store, limits_at(total(store)), summarizer=summarizer,
                    summary_model="summary-model").build("t1")
    assert summarizer.requests[0].model == "summary-model"


def test_summary_is_reused_and_later_turns_load_after_its_coverage(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    summarizer = Scripted("first summary")
    limits = limits_at(total(store))
    budgeter = HistoryBudgeter(store, limits, summarizer=summarizer)
    budgeter.build("t1")
    store.add_turn("t1", user_text="Next question?", assistant_text="Next answer.",
                   turn_id="turn-3")
    decision = budgeter.build("t1")
    assert decision.mode == "keep"
    assert decision.messages == (
        HistoryMessage("system", SUMMARY + "first summary"),
        HistoryMessage("user", "Next question?"),
        HistoryMessage("assistant", "Next answer."),
    )
    assert (decision.turns_loaded, decision.summary_turn_count) == (1, 3)
    assert len(summarizer.requests) == 1

    add_turns(store, TURNS * 3, start=4)
    summarizer.reply = "second summary"
    decision = budgeter.build("t1")
    assert decision.mode == "summarise"
    second = summarizer.requests[1]
    assert second.previous_summary == "first summary"
    assert second.transcript[:2] == (HistoryMessage("user", "Next question?"),
                                     HistoryMessage("assistant", "Next answer."))
    assert len(second.transcript) == 2 * 10
    stored = store.get_thread_summary("t1")
    assert stored is not None
    assert (stored.text, stored.turn_count, stored.through_turn_id) == (
        "second summary", 13, "turn-12")


# -- truncation fallback ---------------------------------------------------------------

FAILURES = {
    "raises": (Scripted(error=RuntimeError("boom")), "summarizer failed: boom"),
    "times-out": (Scripted(error=TimeoutError("no reply in 5s")),
                  "summarizer failed: no reply in 5s"),
    "empty": (Scripted(""), "summarizer returned an empty reply"),
    "blank": (Scripted(" \n\t "), "summarizer returned an empty reply"),
}

TRUNCATION_TURNS = [
    ("covered question", "covered answer"),
    ("short one", "short reply"),
    ("short two", "short reply two"),
    ("a long question " * 30, "a long answer " * 40),
    ("question four", "answer four"),
    ("question five", "answer five"),
]


@pytest.fixture
def summarised(store: SqliteStore) -> ThreadSummary:
    add_turns(store, TRUNCATION_TURNS)
    return store.set_thread_summary("t1", "what came before", through_turn_id="turn-0")


@pytest.mark.parametrize("case", FAILURES, ids=list(FAILURES))
def test_failed_summary_keeps_newest_turns_that_fit(
    store: SqliteStore, summarised: ThreadSummary, case: str
) -> None:
    summarizer, why = FAILURES[case]
    summarizer.requests.clear()
    entries = {e.turn_id: e for e in store.get_history_window("t1").entries}
    # Room for the summary, turns 5 and 4, and exactly turn 2, which is never tried: the
    # walk stops at turn 3, the first that does not fit. The low-water mark is the whole
    # budget here, so the cut keeps as much as fits.
    budget = (summarised.tokens + entries["turn-5"].tokens + entries["turn-4"].tokens
              + entries["turn-2"].tokens)
    assert entries["turn-3"].tokens > entries["turn-2"].tokens
    limits = HistoryLimits.from_tokens(budget, 0, low_water=1.0)
    loaded = total(store)  # before the pass: its cut leaves the older turns unread
    assert loaded >= limits.threshold
    decision = HistoryBudgeter(store, limits, summarizer=summarizer).build("t1")
    assert len(summarizer.requests) == 1
    assert decision.mode == "truncate"
    assert decision.messages == (
        HistoryMessage("system", SUMMARY + "what came before"),
        HistoryMessage("user", "question four"),
        HistoryMessage("assistant", "answer four"),
        HistoryMessage("user", "question five"),
        HistoryMessage("assistant", "answer five"),
    )
    assert decision.reason == (
        f"{loaded} tokens reached the threshold of {limits.threshold}; {why}; "
        f"the kept turns reached the budget of {budget}: cut to the low-water mark of "
        f"{budget}, keeping the newest 2 of 5 turns"
    )
    assert (decision.cut_turn_id, decision.cut_stored) == ("turn-4", True)
    assert store.get_thread_summary("t1") == summarised
    assert (decision.summary_sent, decision.summary_stored) == (True, False)


def test_truncation_drops_a_summary_that_does_not_fit(
    store: SqliteStore, summarised: ThreadSummary
) -> None:
    limits = HistoryLimits.from_tokens(summarised.tokens, 0)
    decision = HistoryBudgeter(store, limits, summarizer=Scripted("")).build("t1")
    assert decision.mode == "truncate"
    assert not decision.summary_sent
    assert all(message.role != "system" for message in decision.messages)
    assert decision.sent_tokens <= limits.budget
    assert decision.messages[-2:] == (HistoryMessage("user", "question five"),
                                      HistoryMessage("assistant", "answer five"))


def test_summary_just_under_the_budget_is_kept(
    store: SqliteStore, summarised: ThreadSummary
) -> None:
    limits = HistoryLimits.from_tokens(summarised.tokens + 1, 0)
    decision = HistoryBudgeter(store, limits).build("t1")
    assert decision.messages == (HistoryMessage("system", SUMMARY + "what came before"),)
    assert decision.reason.endswith("no summarizer configured; kept the newest 0 of 5 turns")


def test_a_summary_longer_than_the_budget_is_a_failure(
    store: SqliteStore, summarised: ThreadSummary
) -> None:
    limits = HistoryLimits.from_tokens(summarised.tokens + 2, 0)
    decision = HistoryBudgeter(store, limits, summarizer=Scripted("word " * 500)).build("t1")
    assert decision.mode == "truncate"
    assert "does not fit the budget of" in decision.reason
    assert store.get_thread_summary("t1") == summarised


def test_nothing_new_to_summarise_truncates(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    summary = store.set_thread_summary("t1", "everything so far", through_turn_id="turn-2")
    summarizer = Scripted("unused")
    limits = HistoryLimits.from_tokens(summary.tokens + 1, 0)
    decision = HistoryBudgeter(store, limits, summarizer=summarizer).build("t1")
    assert summarizer.requests == []
    assert decision.mode == "truncate"
    assert decision.reason.endswith("no new turns to summarise; kept the newest 0 of 0 turns")
    assert decision.messages == (summary.message,)


def test_excluded_turn_is_not_loaded(store: SqliteStore) -> None:
    add_turns(store, TURNS)
    decision = HistoryBudgeter(store, HistoryLimits.from_tokens(10_000, 0)).build(
        "t1", exclude_turn_id="turn-2")
    assert decision.turns_loaded == 2
    assert decision.messages[-1] == HistoryMessage("assistant", TURNS[1][1])


def test_artifact_refs_reach_the_messages(store: SqliteStore) -> None:
    ref = ArtifactRef("a-1", "chart.png", "image", version_id="v-1", mime_type="image/png",
                      size_bytes=862208, role="assistant")
    store.add_turn("t1", user_text="draw it", assistant_text="Here it is.",
                   assistant_artifacts=[ref, ref])
    decision = HistoryBudgeter(store, HistoryLimits.from_tokens(10_000, 0)).build("t1")
    assert decision.artifact_ref_count == 1
    assert decision.messages[1] == HistoryMessage(
        "assistant",
        "Here it is.\n\nAvailable artifacts from this assistant message:\n"
        '- artifactId=a-1, versionId=v-1, name="chart.png", kind=image, mime=image/png, '
        "size=842 KB, role=assistant.",
    )


def test_decision_to_dict(store: SqliteStore) -> None:
    store.add_turn("t1", user_text="hi", assistant_text="hello", turn_id="turn-0")
    data = HistoryBudgeter(store, HistoryLimits.from_tokens(1_000, 0)).build("t1").to_dict()
    assert data == {
        "thread_id": "t1", "mode": "keep", "reason": "10 tokens is under the threshold of 800",
        "budget": 1000, "threshold": 800, "summary_target": 100, "total_tokens": 10,
        "sent_tokens": 10, "turns_loaded": 1, "turns_sent": 1, "summary_sent": False,
        "summary_stored": False, "summary_turn_count": 0, "artifact_ref_count": 0,
        "cut_turn_id": None, "cut_stored": False,
        "messages": [{"role": "user", "content": "hi", "tokens": 5},
                     {"role": "assistant", "content": "hello", "tokens": 5}],
    }


# -- properties over synthetic windows (no database) -----------------------------------

THREAD = ThreadRecord("p", "m", "2024-01-01T00:00:00.000+00:00")


def synthetic_window(sizes: list[tuple[int, int]], summary_tokens: int | None) -> HistoryWindow:
    entries = tuple(
        HistoryEntry(seq=n + 1, turn_id=f"turn-{n}", thread_id="p", user_item_id=f"u{n}",
                     assistant_item_id=f"a{n}", user_text=f"user {n}",
                     assistant_text=f"assistant {n}", user_tokens=user, assistant_tokens=reply)
        for n, (user, reply) in enumerate(sizes)
    )
    summary = (None if summary_tokens is None
               else ThreadSummary("s", summary_tokens, 1, 0, "turn-x"))
    return HistoryWindow(THREAD, summary, entries)


class WindowStore:
    """Just enough of a store to hand the budgeter a fixed window and take its cut."""

    def __init__(self, window: HistoryWindow) -> None:
        self.window = window

    def get_history_window(self, thread_id: str, limit: int = 200, *,
                           exclude_turn_id: str | None = None) -> HistoryWindow:
        return self.window

    def set_history_cut(self, thread_id: str, *, first_turn_id: str) -> HistoryCut:
        seq = next(e.seq for e in self.window.entries if e.turn_id == first_turn_id)
        return HistoryCut(seq, first_turn_id)


sizes = st.lists(st.tuples(st.integers(5, 400), st.integers(5, 400)), max_size=25)
summaries = st.none() | st.integers(5, 600)


@settings(max_examples=150, deadline=None)
@given(sizes=sizes, summary_tokens=summaries, budget=st.integers(0, 5000))
def test_keep_newest_takes_a_suffix_that_fits(
    sizes: list[tuple[int, int]], summary_tokens: int | None, budget: int
) -> None:
    window = synthetic_window(sizes, summary_tokens)
    summary, kept = keep_newest(window, budget)
    assert (summary is not None) == (summary_tokens is not None and summary_tokens < budget)
    used = (summary.tokens if summary else 0) + sum(entry.tokens for entry in kept)
    assert used <= budget
    assert kept == window.entries[len(window.entries) - len(kept):]
    if len(kept) < len(window.entries):
        next_older = window.entries[len(window.entries) - len(kept) - 1]
        assert used + next_older.tokens > budget


@settings(max_examples=100, deadline=None)
@given(sizes=sizes, summary_tokens=summaries, budget=st.integers(0, 5000))
def test_a_user_message_is_never_separated_from_its_reply(
    sizes: list[tuple[int, int]], summary_tokens: int | None, budget: int
) -> None:
    window = synthetic_window(sizes, summary_tokens)
    budgeter = HistoryBudgeter(
        WindowStore(window),  # type: ignore[arg-type]
        HistoryLimits.from_tokens(budget, 0),
        summarizer=Scripted(error=RuntimeError("down")),
    )
    decision = budgeter.build("p")
    turns = [m for m in decision.messages if m.role != "system"]
    assert len(turns) % 2 == 0
    numbers = []
    for user, reply in zip(turns[::2], turns[1::2], strict=True):
        assert user.role == "user" and reply.role == "assistant"
        assert user.content.split()[-1] == reply.content.split()[-1]
        numbers.append(int(user.content.split()[-1]))
    assert numbers == sorted(numbers)
    assert decision.sent_tokens <= max(budget, decision.total_tokens)
    if decision.mode == "truncate":
        assert decision.sent_tokens <= budget
