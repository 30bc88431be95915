"""``history_tool_rounds``: ``drop`` (the default) stores a turn's user message and final
answer only; ``keep`` stores its tool calls and results too and sends them on later turns
in each API's own shape, counted in the history budget and cut with their turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreTarget
from sdk_wire import send

from pioneer import Agent, InputError, PioneerSettings, StoreError, Turn
from pioneer.history import HistoryBudgeter, HistoryLimits, HistoryMessage
from pioneer.history.models import StoredCall
from pioneer.history.open import open_store
from pioneer.history.summarizer import SummaryRequest
from pioneer.providers import ToolCall
from pioneer.turn import ProviderName

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

PROVIDERS: list[ProviderName] = ["anthropic", "openai-chat", "openai-responses", "gemini"]
THREAD = "thread-k"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from pioneer import ensure_runtime_home

    monkeypatch.chdir(tmp_path)
    ensure_runtime_home(Path("home"))
    return Path("home")


def _agent(store: Any, home: Path, provider: ProviderName, **options: Any) -> Agent:
    options.setdefault("runtime_facts", False)  # the history part is compared as sent
    return Agent(store, provider=provider, model=agent_loop.MODELS[provider],
                 tools=[agent_loop.READ_FILE], compile_input={"workspace_root": home},
                 **options)


def _reply(turn: Turn, text: str, calls: list[ToolCall]) -> dict[str, Any]:
    provider = turn.agent.provider
    plan = turn.rounds[-1].cache
    assert plan is not None
    return agent_loop.response(provider, turn.agent.model, text, calls,
                               agent_loop.usage(provider, plan, 40))


def _run(agent: Agent, number: int, script: list[list[ToolCall]],
         wires: list[dict[str, Any]]) -> None:
    """One turn through the provider's SDK; a result whose path says "missing" is an error."""
    provider = agent.provider
    turn = agent.turn(THREAD, f"Question {number}", turn_id=f"turn-{number}")
    for calls in script:
        body = turn.next_body()
        sdk_reply, wire = send(provider, body,
                               _reply(turn, "" if calls else f"Answer {number}.", calls))
        wires.append(wire)
        step = turn.receive(sdk_reply)
        for call in step.runnable:
            missing = "missing" in call.arguments.get("path", "")
            turn.add_tool_result(call.id, "no such file" if missing else f"text of {call.id}",
                                 is_error=missing)
    turn.finish()


def _calls(number: int) -> list[list[ToolCall]]:
    """Gemini numbers each turn's calls from call_1: the same ids in every turn."""
    return [[ToolCall(id="call_1", name="read_file", arguments={"path": f"notes-{number}.md"}),
             ToolCall(id="call_2", name="read_file", arguments={"path": "missing.md"})],
            [ToolCall(id="call_1", name="read_file", arguments={"path": "more.md"})], []]


def _history_part(provider: str, wire: dict[str, Any]) -> list[Any]:
    """The conversation of a body as sent, up to its last user text (the history)."""
    key = {"anthropic": "messages", "openai-chat": "messages", "openai-responses": "input",
           "gemini": "contents"}[provider]
    return list(wire[key])


def _sent_calls(provider: str, wire: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, result text) of every tool result a body carries, in order."""
    found: list[tuple[str, str]] = []
    for item in _history_part(provider, wire):
        if provider == "anthropic":
            found += [(b["tool_use_id"], json.dumps(b["content"])) for b in item["content"]
                      if isinstance(item["content"], list) and b.get("type") == "tool_result"]
        elif provider == "openai-chat":
            if item["role"] == "tool":
                found.append((item["tool_call_id"], json.dumps(item["content"])))
        elif provider == "openai-responses":
            if item.get("type") == "function_call_output":
                found.append((item["call_id"], json.dumps(item["output"])))
        else:
            found += [(p["functionResponse"]["id"], json.dumps(p["functionResponse"]["response"]))
                      for p in item["parts"] if "functionResponse" in p]
    return found


@pytest.mark.parametrize("provider", PROVIDERS)
def test_keep_sends_the_earlier_turns_tool_rounds_through_the_sdk(
    home: Path, provider: ProviderName, store_target: StoreTarget,
) -> None:
    wires: list[dict[str, Any]] = []
    with _agent(store_target.target, home, provider, history_tool_rounds="keep") as agent:
        for number in (1, 2, 3):
            _run(agent, number, _calls(number), wires)
    turn_3 = wires[6]  # the first body of turn 3: turns 1 and 2 are its history
    results = _sent_calls(provider, turn_3)
    # Each turn's ids repeat (call_1, call_2): a call whose id the history holds gets a
    # suffix when it is made, and is stored with it.
    assert [call_id for call_id, _ in results] == [
        "call_1", "call_2", "call_1_r2", "call_1_r1", "call_2_r1", "call_1_r2_2"]
    assert "text of call_1" in results[0][1] and "no such file" in results[1][1]
    if provider == "anthropic":
        result = next(b for m in turn_3["messages"] if isinstance(m["content"], list)
                      for b in m["content"] if b.get("tool_use_id") == "call_2")
        assert result["is_error"] is True
        uses = [b for m in turn_3["messages"] if m["role"] == "assistant"
                for b in m["content"] if b["type"] == "tool_use"]
        assert uses[0] == {"type": "tool_use", "id": "call_1", "name": "read_file",
                           "input": {"path": "notes-1.md"}}
    elif provider == "openai-chat":
        calls = [c for m in turn_3["messages"] for c in m.get("tool_calls", [])]
        assert calls[0]["function"] == {"name": "read_file",
                                        "arguments": '{"path": "notes-1.md"}'}
    elif provider == "openai-responses":
        calls = [i for i in turn_3["input"] if i.get("type") == "function_call"]
        assert (calls[0]["call_id"], json.loads(calls[0]["arguments"])) == (
            "call_1", {"path": "notes-1.md"})
    else:
        calls = [p for c in turn_3["contents"] for p in c["parts"] if "functionCall" in p]
        assert calls[0]["functionCall"]["args"] == {"path": "notes-1.md"}
    # Turn 3's history starts with turn 2's history, byte for byte: a stable prefix.
    turn_2 = _history_part(provider, wires[3])
    assert _history_part(provider, turn_3)[:len(turn_2) - 1] == turn_2[:-1]
    with open_store(store_target.target) as store:
        [first, *_] = store.get_thread_conversation_history(THREAD)
    assert [m.role for m in first.messages()] == [
        "user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    assert first.tokens == first.user_tokens + first.assistant_tokens + sum(
        first.tool_round_tokens) and len(first.tool_round_tokens) == 5


@pytest.mark.parametrize("provider", PROVIDERS)
def test_drop_sends_the_user_message_and_the_answer_only(
    home: Path, provider: ProviderName,
) -> None:
    wires: list[dict[str, Any]] = []
    with _agent("p.db", home, provider) as agent:
        assert agent.history_tool_rounds == "drop"
        for number in (1, 2):
            _run(agent, number, _calls(number), wires)
    assert _sent_calls(provider, wires[3]) == []
    assert "notes-1.md" not in json.dumps(wires[3]) and "Answer 1." in json.dumps(wires[3])
    with open_store("p.db") as store:
        [first, _] = store.get_thread_conversation_history(THREAD)
    assert first.tool_rounds == () and [m.role for m in first.messages()] == [
        "user", "assistant"]


def test_the_setting_chooses_and_the_agent_argument_wins(home: Path) -> None:
    settings = PioneerSettings(history_tool_rounds="keep")
    with Agent("p.db", provider="anthropic", model="m", settings=settings) as agent:
        assert agent.history_tool_rounds == "keep"
    with Agent("p.db", provider="anthropic", model="m", settings=settings,
               history_tool_rounds="drop") as agent:
        assert agent.history_tool_rounds == "drop"
    with pytest.raises(InputError, match=r"^Agent → history_tool_rounds: expected one of "
                       r"drop, keep \(got 'all'\)$"):
        Agent("p.db", provider="anthropic", model="m",
              history_tool_rounds="all")  # type: ignore[arg-type]


def test_kept_rounds_count_in_the_budget_and_are_cut_with_their_turn(home: Path) -> None:
    big = [[ToolCall(id="c1", name="read_file", arguments={"path": "big.md"})], []]
    with _agent("k.db", home, "anthropic", history_tool_rounds="keep") as agent:
        for number in range(1, 5):
            turn = agent.turn(THREAD, f"Question {number}", turn_id=f"turn-{number}")
            for calls in big:
                turn.next_body()
                step = turn.receive(_reply(turn, "" if calls else "Done.", calls))
                for call in step.runnable:
                    turn.add_tool_result(call.id, "word " * 300)
            turn.finish()
        entries = agent.store.get_thread_conversation_history(THREAD)
        per_turn = entries[0].tokens
        assert per_turn > 300  # the result's tokens are the turn's
        limits = HistoryLimits.from_tokens(int(per_turn * 2.5), 0, low_water=0.5)
        decision = HistoryBudgeter(agent.store, limits, store_cut=False).build(THREAD)
    assert decision.mode == "truncate" and decision.turns_sent == 1
    assert [m.role for m in decision.messages] == ["user", "assistant", "tool", "assistant"]
    assert decision.sent_tokens == per_turn


def test_a_damaged_tool_rounds_column_names_the_turn(
    home: Path, store_target: StoreTarget,
) -> None:
    rounds = (HistoryMessage("assistant", "", (StoredCall("c1", "read_file", "{}"),)),
              HistoryMessage("tool", "text", call_id="c1"))
    with open_store(store_target.target) as store:
        store.ensure_thread(THREAD)
        with pytest.raises(StoreError, match=r"turn 'bad': tool_rounds: calls c1 have no "
                           r"result$"):
            store.add_turn(THREAD, turn_id="bad", user_text="q", assistant_text="a",
                           tool_rounds=rounds[:1])
        stored = store.add_turn(THREAD, turn_id="t1", user_text="q", assistant_text="a",
                                tool_rounds=rounds)
        assert stored.tool_rounds == rounds
    store_target.sql("UPDATE turns SET tool_rounds = '[{\"role\": \"user\"}]'")
    with open_store(store_target.target) as store, pytest.raises(
            StoreError, match=r"turn 't1': column tool_rounds is not a list of tool-round "
            r"messages"):
        store.get_thread_conversation_history(THREAD)


def test_the_summarizer_reads_the_tool_rounds() -> None:
    request = SummaryRequest(model="m", target_tokens=100, previous_summary=None, transcript=(
        HistoryMessage("user", "Read my notes."),
        HistoryMessage("assistant", "", (StoredCall("c1", "read_file", '{"path": "n.md"}'),)),
        HistoryMessage("tool", "ENOENT", call_id="c1", is_error=True),
        HistoryMessage("assistant", "They are gone."),
    ))
    assert request.prompt().endswith(
        'User: Read my notes.\n\nAssistant: read_file({"path": "n.md"})\n\n'
        "Tool result (error): ENOENT\n\nAssistant: They are gone.")


def test_call_ids_two_stored_turns_share_are_told_apart() -> None:
    from pioneer.turn._history import call_ids, conversation

    def turn(n: int) -> list[HistoryMessage]:
        return [HistoryMessage("user", f"Q{n}"),
                HistoryMessage("assistant", "", (StoredCall("c1", "read_file", "{}"),)),
                HistoryMessage("tool", f"R{n}", call_id="c1"),
                HistoryMessage("assistant", f"A{n}")]

    messages, used = conversation([*turn(1), *turn(2), *turn(3)])
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [m.tool_result.call_id for m in messages if m.tool_result is not None]
    assert calls == results == ["c1", "c1_h2", "c1_h3"] and used == set(calls)
    assert call_ids([*turn(1), *turn(2), *turn(3)]) == used  # without making the messages
