"""Fuzzing the history budgeter: any turns, any limits, any summarizer behaviour.

Whatever the stored text (control characters, lone surrogates, huge turns), the limits
and the summarizer do (reply, reply with nothing, raise, reply with something that is
not text or does not fit, miss the deadline), a pass raises nothing but ``PioneerError``
subclasses and its decision keeps the invariants: the mode follows the threshold, what
is sent fits the budget when truncating, a turn is never split, messages stay in order
and every message's token count is its own.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import PioneerError, StoreError
from pioneer.history import HistoryBudgeter, HistoryLimits, SqliteStore, SummaryRequest
from pioneer.history.budget import HistoryDecision
from pioneer.history.models import summary_message_text
from pioneer.tokens import MESSAGE_OVERHEAD, default_counter

FUZZ = settings(max_examples=int(os.environ.get("PIONEER_FUZZ_EXAMPLES", "100")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ANY_CHAR = st.characters(codec=None, exclude_categories=())
TEXT = st.text(ANY_CHAR, max_size=60) | st.sampled_from(
    ["", " ", "\ud800", "a\udfffb", "\x00\x1b", "<|endoftext|>", "word " * 3000])
TURN = st.tuples(TEXT | st.none(), TEXT | st.none())
BEHAVIOURS = ["none", "ok", "empty", "blank", "raises", "pioneer-error", "not-text", "huge",
              "surrogate", "late"]
NUMBERS = itertools.count()
#: The deadline of a summarizer that answers: it returns at once, and however busy the
#: machine (the call is handed to a worker thread, which builds the prompt) it is in time.
IN_TIME = 60.0
#: The deadline of the "late" summarizer, which waits for an event the test sets only
#: after the decision, so it misses the deadline whatever the machine's speed.
LATE = 0.05


def deadline(behaviour: str) -> float:
    """The summary deadline a pass with this summarizer gets."""
    return LATE if behaviour == "late" else IN_TIME


class Summarizer:
    """A summarizer that does what it is told."""

    def __init__(self, behaviour: str, hold: threading.Event | None = None) -> None:
        self.behaviour = behaviour
        #: "late" waits for ``hold`` and sets ``returned`` once it gives up.
        self.hold = hold
        self.returned = threading.Event()

    def summarize(self, request: SummaryRequest) -> Any:
        request.prompt()  # building the prompt from any transcript must work too
        match self.behaviour:
            case "ok":
                return "Decisions so far: keep going."
            case "empty":
                return ""
            case "blank":
                return " \n\t "
            case "raises":
                raise RuntimeError("model unavailable")
            case "pioneer-error":
                raise PioneerError("upstream said no")
            case "not-text":
                return {"content": "a dict"}
            case "huge":
                return "summary " * 20_000
            case "surrogate":
                return "kept \ud800 text"
            case "late":
                assert self.hold is not None
                self.hold.wait(30)
                self.returned.set()
                return "too late"
        raise AssertionError(self.behaviour)


@pytest.fixture(scope="module")
def store() -> Iterator[SqliteStore]:
    with tempfile.TemporaryDirectory() as folder, \
            SqliteStore(Path(folder) / "fuzz.db") as opened:
        yield opened


def check_decision(decision: HistoryDecision, turns: int) -> None:
    """What every budgeting pass promises."""
    counter = default_counter()
    limits = decision.limits
    assert decision.sent_tokens == sum(decision.message_tokens)
    for message, tokens in zip(decision.messages, decision.message_tokens, strict=True):
        message.content.encode("utf-8")  # nothing a provider cannot send
        assert tokens == counter.count(message.content) + MESSAGE_OVERHEAD
    roles = [m.role for m in decision.messages]
    if decision.summary_sent:
        assert roles[0] == "system" and "system" not in roles[1:]
    else:
        assert "system" not in roles
    assert decision.turns_sent <= decision.turns_loaded <= turns
    if decision.mode == "keep":
        assert decision.total_tokens < limits.threshold
        assert decision.turns_sent == decision.turns_loaded
    elif decision.mode == "truncate":
        assert decision.total_tokens >= limits.threshold
        assert decision.sent_tokens <= limits.budget
    else:
        assert decision.mode == "summarise" and decision.total_tokens >= limits.threshold
        assert roles == ["system"] and decision.turns_sent == 0
        assert decision.sent_tokens < limits.budget


@FUZZ
@given(
    turns=st.lists(TURN, max_size=12),
    max_context=st.integers(0, 400) | st.integers(0, 200_000),
    reserve=st.integers(0, 100) | st.integers(0, 200_000),
    behaviour=st.sampled_from([*BEHAVIOURS, "ok", "ok", "ok", "ok"]),
    again=st.lists(TURN, max_size=3),
)
def test_any_history_is_budgeted_or_a_pioneer_error(
    store: SqliteStore, turns: list[tuple[str | None, str | None]], max_context: int,
    reserve: int, behaviour: str, again: list[tuple[str | None, str | None]],
) -> None:
    thread = f"fuzz-{next(NUMBERS)}"
    store.ensure_thread(thread, model="m")
    for user, assistant in turns:
        store.add_turn(thread, user_text=user, assistant_text=assistant)
    hold = threading.Event()  # a late summarizer answers only after both passes
    budgeter = HistoryBudgeter(
        store, HistoryLimits.from_tokens(max_context, reserve),
        summarizer=None if behaviour == "none" else Summarizer(behaviour, hold),
        summary_deadline=deadline(behaviour),
    )
    try:
        first = budgeter.build(thread)
        check_decision(first, len(turns))
        for user, assistant in again:  # the next pass loads only what a summary left out
            store.add_turn(thread, user_text=user, assistant_text=assistant)
        second = budgeter.build(thread)
    finally:
        hold.set()
    check_decision(second, len(turns) + len(again))
    if first.mode == "summarise" and first.summary_stored:
        assert second.turns_loaded == len(again)
    if behaviour in ("empty", "blank", "raises", "pioneer-error", "not-text", "late"):
        assert first.mode != "summarise"


@pytest.mark.parametrize(("behaviour", "reason"), [
    ("empty", "summarizer returned an empty reply"),
    ("blank", "summarizer returned an empty reply"),
    ("raises", "summarizer failed: model unavailable"),
    ("pioneer-error", "summarizer failed: upstream said no"),
    ("not-text", "summarizer returned dict, not text"),
    ("huge", "summary of 20009 tokens does not fit the budget of 60"),
    ("late", f"summarizer gave no reply within {LATE:g} s"),
])
def test_each_summarizer_failure_falls_back_to_the_newest_turns(
    store: SqliteStore, behaviour: str, reason: str
) -> None:
    thread = f"fallback-{behaviour}"
    store.ensure_thread(thread, model="m")
    for n in range(6):
        store.add_turn(thread, user_text=f"question {n}", assistant_text=f"answer {n}")
    hold = threading.Event()  # the late summarizer answers only after the decision
    budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(60, 0),
                               summarizer=Summarizer(behaviour, hold),
                               summary_deadline=deadline(behaviour))
    try:
        decision = budgeter.build(thread)
    finally:
        hold.set()
    assert decision.mode == "truncate"
    assert f"; {reason}; the kept turns reached the budget of 60: cut to the low-water " \
        "mark of 36, keeping the newest " in decision.reason
    assert decision.messages[-1].content == "answer 5"
    assert store.get_thread_summary(thread) is None
    check_decision(decision, 6)


def test_a_late_summary_is_never_stored(store: SqliteStore) -> None:
    store.ensure_thread("late-store", model="m")
    for n in range(6):
        store.add_turn("late-store", user_text=f"question {n}", assistant_text=f"answer {n}")
    hold = threading.Event()
    late = Summarizer("late", hold)
    budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(60, 0),
                               summarizer=late, summary_deadline=LATE)
    assert budgeter.build("late-store").mode == "truncate"
    hold.set()  # now the abandoned call returns its summary, which its worker drops
    assert late.returned.wait(30)
    give_up = time.monotonic() + 30  # the worker takes its pool name back after the call
    while any(worker.name == "pioneer-summarizer" for worker in threading.enumerate()):
        assert time.monotonic() < give_up
        time.sleep(0.01)
    assert store.get_thread_summary("late-store") is None


def test_a_surrogate_in_a_summary_is_stored_as_the_replacement_character(
    store: SqliteStore,
) -> None:
    store.ensure_thread("surrogate", model="m")
    for n in range(6):
        store.add_turn("surrogate", user_text=f"q{n} \ud800", assistant_text=f"a{n}")
    decision = HistoryBudgeter(store, HistoryLimits.from_tokens(40, 0),
                               summarizer=Summarizer("surrogate")).build("surrogate")
    assert decision.mode == "summarise"
    assert decision.messages[0].content == summary_message_text("kept \ufffd text")
    assert store.get_thread_conversation_history("surrogate")[0].user_text == "q0 \ufffd"


def test_a_surrogate_in_an_id_is_a_store_error(store: SqliteStore) -> None:
    with pytest.raises(StoreError) as info:
        store.ensure_thread("thread-\ud800")
    assert str(info.value).endswith(
        ": text that is not valid Unicode (a lone surrogate) cannot be stored")
