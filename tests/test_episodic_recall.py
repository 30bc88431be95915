"""The recall hook in a turn: Thread Context from the index, exclusions, deadline, failures."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreTarget
from doc_pages import example
from stores import make_store
from support import compile_round

from pioneer import HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.compile.manifest import CompiledPromptPayload
from pioneer.episodic import (
    HISTORY_KEY,
    EpisodicIndex,
    Retained,
    SearchResult,
    episodic_recall_subscription,
)
from pioneer.history import ArtifactRef, HistoryBudgeter, HistoryLimits
from pioneer.history.sql_store import SqlStore
from pioneer.hooks.registry import TurnContext

GOLDENS = Path(__file__).parent / "goldens" / "episodic"
HOOK = "thread_episodic.context_recall"

EARLIER = [
    ("We need the quarterly billing export for Frankfurt.",
     "I built the billing export; the Frankfurt totals are in the spreadsheet."),
    ("Can you help me plan the week?", "Sure, let us start with Monday."),
    ("What should I cook tonight?", "A simple pasta would do."),
    ("Remind me to call my sister.", "I will keep that in mind for later."),
    ("How long is the walk to the station?", "About twenty minutes."),
    ("Is it going to rain today?", "Probably in the afternoon."),
    ("Summarise the meeting notes please.", "The team agreed to ship on Friday."),
    ("Any good books lately?", "Try a short novel for the weekend."),
]
EXPORT = ArtifactRef("art-7", "billing export.xlsx", "spreadsheet", version_id="v2",
                     size_bytes=86_016, role="assistant", turn_item_id="turn-0-a")




@pytest.fixture
def attached(store_target: StoreTarget) -> Iterator[tuple[SqlStore, EpisodicIndex]]:
    """A store (SQLite or PostgreSQL) with an index subscribed to its writes, holding the
    EARLIER turns."""
    with make_store(store_target.target) as opened, EpisodicIndex(opened) as index:
        opened.ensure_thread("t1")
        for n, (user, reply) in enumerate(EARLIER):
            opened.add_turn(
                "t1", user_text=user, assistant_text=reply, turn_id=f"turn-{n}",
                user_item_id=f"turn-{n}-u", assistant_item_id=f"turn-{n}-a",
                assistant_artifacts=[EXPORT] if n == 0 else [],
            )
        yield opened, index


@pytest.fixture
def store(attached: tuple[SqlStore, EpisodicIndex]) -> SqlStore:
    return attached[0]


@pytest.fixture
def index(attached: tuple[SqlStore, EpisodicIndex]) -> EpisodicIndex:
    return attached[1]


@pytest.fixture
def base(home: Path) -> PromptCompileInput:
    return PromptCompileInput(workspace_root=home, profile="full")


def run_turn(compiler: PromptCompiler, base: PromptCompileInput, index: EpisodicIndex,
             text: str, **data: Any) -> CompiledPromptPayload:
    hooks = HookRegistry()
    hooks.add(episodic_recall_subscription(index))
    return compile_round(compiler, base, hooks,
                        turn=TurnContext(thread_id="t1", user_text=text, data=data))


def thread_context(payload: CompiledPromptPayload) -> str | None:
    return next((s.text for s in payload.sections if s.id == "thread_context"), None)


def hook_diagnostics(payload: CompiledPromptPayload) -> list[Any]:
    return [d for d in payload.manifest.diagnostics if d.hook_source is not None]


def keep_only_recent(store: SqlStore, count: int) -> Any:
    """A history decision that sends the newest ``count`` turns (a tight budget, cut at
    the whole budget so truncation keeps all that fits)."""
    entries = store.get_thread_conversation_history("t1")
    budget = sum(entry.tokens for entry in entries[-count:])
    limits = HistoryLimits.from_tokens(budget, 0, low_water=1.0)
    decision = HistoryBudgeter(store, limits).build("t1")
    assert decision.mode == "truncate" and decision.turns_sent == count
    return decision


def test_subscription_matches_the_reference(index: EpisodicIndex) -> None:
    subscription = episodic_recall_subscription(index)
    assert (subscription.hook_id, subscription.subscription_id, subscription.phase,
            subscription.priority, subscription.deadline_ms, subscription.failure) == (
        HOOK, "thread_episodic.context_recall.default", "turn.pre_prompt_context", -10, 1500,
        "best_effort",
    )


def test_recalled_snippets_become_the_thread_context_section(
    compiler: PromptCompiler, base: PromptCompileInput, index: EpisodicIndex,
    store: SqlStore, golden: Callable[[Path, str], None],
) -> None:
    decision = keep_only_recent(store, 3)
    payload = run_turn(compiler, base, index, "Where did the Frankfurt billing numbers end up?",
                       **{HISTORY_KEY: decision})
    text = thread_context(payload)
    assert text is not None
    # The same snippets on both stores; the scores printed are each store's own.
    name = "thread-context-section" + ("" if index.dialect == "sqlite" else "-postgresql")
    golden(GOLDENS / f"{name}.txt", text + "\n")
    assert "- [thread:t1/turn-0/turn-0-u/c0, role=user, context=user_visible_thread_item, " in text
    assert "Available artifacts for thread:t1/turn-0/turn-0-a/c0:" in text
    assert "artifact_references" in payload.manifest.section_ids  # the refs count
    (entry,) = [e for e in payload.manifest.hook_sources if e.source.hook_id == HOOK]
    assert (entry.section_id, entry.contribution_kind, entry.source_count, entry.truncation) == (
        "thread_context", "thread_context", 2, "none")
    assert entry.source.contribution_id == "memory.active_recall.thread_context"


def test_no_hit_no_section(compiler: PromptCompiler, base: PromptCompileInput,
                           index: EpisodicIndex, store: SqlStore) -> None:
    decision = keep_only_recent(store, 3)
    payload = run_turn(compiler, base, index, "Tell me about volcanoes in Iceland.",
                       **{HISTORY_KEY: decision})
    assert thread_context(payload) is None
    assert "thread_context" not in payload.manifest.section_ids
    assert [e for e in payload.manifest.hook_sources if e.source.hook_id == HOOK] == []
    assert hook_diagnostics(payload) == []


@pytest.mark.parametrize("turn", [TurnContext(user_text="billing"),
                                  TurnContext(thread_id="t1", user_text="  ")])
def test_no_thread_or_no_text_no_section(compiler: PromptCompiler, base: PromptCompileInput,
                                         index: EpisodicIndex, turn: TurnContext) -> None:
    hooks = HookRegistry()
    hooks.add(episodic_recall_subscription(index))
    payload = compile_round(compiler, base, hooks, turn=turn)
    assert thread_context(payload) is None


def test_turns_the_history_sends_are_not_recalled(compiler: PromptCompiler,
                                                  base: PromptCompileInput,
                                                  index: EpisodicIndex,
                                                  store: SqlStore) -> None:
    everything = keep_only_recent(store, len(EARLIER))
    payload = run_turn(compiler, base, index, "Frankfurt billing export?",
                       **{HISTORY_KEY: everything})
    assert thread_context(payload) is None  # turn-0 is already in the history


def test_without_a_decision_the_keep_window_is_left_out(
    compiler: PromptCompiler, base: PromptCompileInput, index: EpisodicIndex,
    store: SqlStore,
) -> None:
    text = "Frankfurt billing export?"
    assert thread_context(run_turn(compiler, base, index, text)) is None
    store.set_thread_summary("t1", "Started with billing work, then planned the week.",
                             through_turn_id="turn-2")
    recalled = thread_context(run_turn(compiler, base, index, text))
    assert recalled is not None
    assert "thread:t1/turn-0/turn-0-u/c0" in recalled
    assert "role=generated_summary" not in recalled  # the summary is in the history


def test_a_slow_query_misses_the_deadline_and_the_turn_goes_on(
    compiler: PromptCompiler, base: PromptCompileInput, db: Path, store: SqlStore,
) -> None:
    release = threading.Event()
    finished = threading.Event()

    class SlowIndex(EpisodicIndex):
        def search(self, *args: Any, **kwargs: Any) -> SearchResult:
            release.wait(timeout=60)  # a query stuck far past the 1500 ms deadline
            try:
                return super().search(*args, **kwargs)
            finally:
                finished.set()

    with SlowIndex(db) as slow:
        try:
            payload = run_turn(compiler, base, slow, "Frankfurt billing export?")
            assert not release.is_set()  # the turn was compiled while the query hung
        finally:
            release.set()
        assert finished.wait(timeout=60)  # the abandoned hook ends cleanly afterwards
    assert thread_context(payload) is None
    assert payload.manifest.section_ids[:2] == ["identity_base", "assistant_safety"]
    (diagnostic,) = hook_diagnostics(payload)
    assert (diagnostic.code, diagnostic.hook_source, diagnostic.message) == (
        "hook_best_effort_failed", HOOK,
        f"hook `{HOOK}` at turn.pre_prompt_context missed its 1500 ms deadline; "
        "the turn went on without it",
    )
    (entry,) = payload.manifest.hook_sources
    assert (entry.source.hook_id, entry.contribution_kind) == (HOOK, "runtime_failure")


def test_a_failing_index_is_a_diagnostic(compiler: PromptCompiler, base: PromptCompileInput,
                                         index: EpisodicIndex) -> None:
    index.close()
    payload = run_turn(compiler, base, index, "Frankfurt billing export?")
    assert thread_context(payload) is None
    (diagnostic,) = hook_diagnostics(payload)
    assert diagnostic.code == "hook_best_effort_failed"
    assert "the episodic index is closed" in diagnostic.message


def test_recall_hits_below_the_threshold_make_no_section(
    compiler: PromptCompiler, base: PromptCompileInput, index: EpisodicIndex,
    store: SqlStore,
) -> None:
    decision = keep_only_recent(store, 3)
    hooks = HookRegistry()
    hooks.add(episodic_recall_subscription(index, min_score=1000.0))
    payload = compile_round(compiler, base, hooks, turn=TurnContext(
        thread_id="t1", user_text="Frankfurt billing export?", data={HISTORY_KEY: decision}))
    assert thread_context(payload) is None
    candidates = index.search("t1", "Frankfurt billing export?",
                              retained=Retained.from_decision(decision)).candidates
    assert [c.source_id for c in candidates][:2] == [
        "thread:t1/turn-0/turn-0-u/c0", "thread:t1/turn-0/turn-0-a/c0"]


def test_docs_example_prints_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, printed = example("recall", "recall.md")
    assert printed is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/recall.md", "exec"), {})
    assert capsys.readouterr().out == printed
