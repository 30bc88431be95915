"""The store's write hooks: what a subscriber sees, and that it writes in the store's
transaction (its rows commit with the turn, or neither does). On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import StoreTarget
from stores import make_store

from pioneer import StoreError
from pioneer.audit import TurnRecord, TurnRecords
from pioneer.history.sql_store import SqlStore
from pioneer.history.store import StoreEvent, StoreTransaction, TurnWritten
from pioneer.turn import TurnAudit


def _store(where: StoreTarget) -> SqlStore:
    store = make_store(where.target)
    store.ensure_thread("t1")
    return store


def _count(store: SqlStore, table: str) -> int:
    return int(store.read(lambda tx: tx.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]))


def test_a_hook_sees_each_turn_and_each_summary_that_moved_coverage(
    store_target: StoreTarget,
) -> None:
    seen: list[tuple[str, str]] = []

    def hook(tx: StoreTransaction, event: StoreEvent) -> None:
        assert tx.dialect == store_target.dialect
        if isinstance(event, TurnWritten):
            seen.append(("turn", event.entry.turn_id))
        else:
            seen.append(("summary", event.summary.through_turn_id))

    with _store(store_target) as store:
        unsubscribe = store.subscribe(hook)
        store.add_turn("t1", user_text="one", assistant_text="1", turn_id="turn-1")
        store.add_turn("t1", user_text="two", assistant_text="2", turn_id="turn-2")
        store.set_thread_summary("t1", "through two", through_turn_id="turn-2")
        store.set_thread_summary("t1", "through one", through_turn_id="turn-1")  # kept back
        unsubscribe()
        store.add_turn("t1", user_text="three", assistant_text="3", turn_id="turn-3")
    assert seen == [("turn", "turn-1"), ("turn", "turn-2"), ("summary", "turn-2")]


def test_a_hook_that_raises_rolls_the_turn_back(store_target: StoreTarget) -> None:
    def refuse(tx: StoreTransaction, event: StoreEvent) -> None:
        tx.execute("INSERT INTO episodic_task_summaries (thread_id, turn_id, item_id, text) "
                   "VALUES ('t1', 'turn-1', 'i', 'written by the hook')")
        raise StoreError("the index is full")

    with _store(store_target) as store:
        store.subscribe(refuse)
        with pytest.raises(StoreError, match="the index is full"):
            store.add_turn("t1", user_text="one", assistant_text="1", turn_id="turn-1")
        assert store.get_thread_conversation_history("t1") == ()
        assert _count(store, "episodic_task_summaries") == 0


def test_a_record_expected_with_its_turn_commits_with_it(store_target: StoreTarget) -> None:
    with _store(store_target) as store, TurnRecords(store) as records:
        good, bad = _records()
        with records.expecting(good):
            store.add_turn("t1", user_text="Hi", assistant_text="Hello", turn_id="turn-1")
        assert records.get("turn-1") == good
        with records.expecting(bad), pytest.raises(StoreError) as raised:
            store.add_turn("t1", user_text="Hi", assistant_text="Hello", turn_id="turn-2")
        assert str(raised.value) == (f"{store.where}: turn 'turn-2' is in thread 't1', "
                                     "not 'elsewhere'")
        # The record was refused, so its turn was not stored either.
        assert [e.turn_id for e in store.get_thread_conversation_history("t1")] == ["turn-1"]
        store.add_turn("t1", user_text="later", assistant_text="ok", turn_id="turn-3")
        assert records.get("turn-3") is None  # only inside the block


def _records() -> tuple[TurnRecord, TurnRecord]:
    from pioneer import PromptCompileInput, PromptCompiler
    from pioneer.providers import ChatMessage, ChatRequest, build_request_body

    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=Path("/nonexistent"),
                                                          profile="none"))
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    out: list[TurnRecord] = []
    for turn_id, thread_id in (("turn-1", "t1"), ("turn-2", "elsewhere")):
        audit = TurnAudit(turn_id, thread_id, "chat")
        audit.add_round(payload.manifest, request, "anthropic",
                        build_request_body("anthropic", request))
        out.append(audit.record())
    return out[0], out[1]
