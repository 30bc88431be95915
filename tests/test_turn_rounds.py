"""Each round of a turn is compiled from that round's inputs: Retry Instruction after an
error result, the final answer at ``max_rounds``, the continuation hint, Task Orchestration
while a task tool is visible; the stable fingerprint never changes between rounds."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from sdk_wire import send

from pioneer import Agent, InputError, ToolSpec, Turn, ensure_runtime_home
from pioneer.audit import RoundRecord
from pioneer.providers import ToolCall
from pioneer.turn import ProviderName
from pioneer.turn._rounds import FAILURES_LISTED

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

PROVIDERS: list[ProviderName] = ["anthropic", "openai-chat", "openai-responses", "gemini"]
THREAD = "thread-rounds"
READ_FILE = agent_loop.READ_FILE
TASK_CREATE = ToolSpec(name="task_create", description="Start a background task.",
                       parameters={"type": "object", "properties": {"goal": {"type": "string"}}})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    ensure_runtime_home(Path("home"))
    return Path("home")


def _agent(home: Path, provider: ProviderName = "anthropic", **options: Any) -> Agent:
    options.setdefault("tools", [READ_FILE])
    options.setdefault("runtime_facts", False)  # the bodies are read as text below
    return Agent("p.db", provider=provider, model=agent_loop.MODELS[provider],
                 compile_input={"workspace_root": home}, **options)


def _reply(turn: Turn, text: str, calls: list[ToolCall], *,
           stop: str | None = None) -> dict[str, Any]:
    provider = turn.agent.provider
    plan = turn.rounds[-1].cache
    assert plan is not None
    data = agent_loop.response(provider, turn.agent.model, text, calls,
                               agent_loop.usage(provider, plan, 40))
    if stop is not None:  # Anthropic's stop reason when the output limit cut the reply
        data["stop_reason"] = stop
    return data


def _section(round_: RoundRecord, section_id: str) -> str | None:
    """The text of a section of the round's prompt, from its record (None: absent)."""
    found = [s for s in round_.manifest.sections if s.id == section_id]
    return found[0].id if found else None


def _call(number: int, name: str = "read_file", **arguments: Any) -> ToolCall:
    return ToolCall(id=f"c{number}", name=name, arguments=arguments or {"path": "notes.md"})


# -- Retry Instruction ---------------------------------------------------------------------


def test_an_error_result_brings_a_retry_instruction_into_the_next_round_only(home: Path) -> None:
    with _agent(home) as agent:
        turn = agent.turn(THREAD, "Read my notes.")
        bodies = [turn.next_body()]
        step = turn.receive(_reply(turn, "", [_call(1)]))
        turn.add_tool_result(step.runnable[0].id, "ENOENT: notes.md does not exist",
                             is_error=True)
        bodies.append(turn.next_body())
        step = turn.receive(_reply(turn, "", [_call(2, path="Notes.md")]))
        turn.add_tool_result(step.runnable[0].id, "The notes.")
        bodies.append(turn.next_body())
        turn.receive(_reply(turn, "Here they are.", []))
        rounds = turn.finish().record.rounds
    ids = [[s.id for s in r.manifest.sections] for r in rounds]
    assert ["retry_runtime_instruction" in one for one in ids] == [False, True, False]
    sent = [json.dumps(body) for body in bodies]
    assert "A tool call failed." in sent[1] and "- tool: read_file" in sent[1]
    assert "- error: ENOENT: notes.md does not exist" in sent[1]
    assert "A tool call failed." not in sent[0] + sent[2]
    assert len({r.manifest.fingerprint_stable for r in rounds}) == 1
    dynamic = [r.manifest.fingerprint_dynamic for r in rounds]
    assert dynamic[0] == dynamic[2] != dynamic[1]


def test_only_the_applications_error_results_ask_for_a_retry(home: Path) -> None:
    """A call the runner refused carries its own reason; it adds no Retry Instruction."""
    with _agent(home) as agent:
        turn = agent.turn(THREAD, "Search my memory.")
        turn.next_body()
        step = turn.receive(_reply(turn, "", [_call(1, "memory_search", query="x")]))
        assert step.runnable == () and step.outcomes[0].verdict == "refused"
        turn.next_body()
        assert _section(turn.rounds[-1], "retry_runtime_instruction") is None


def _retry_text(body: dict[str, Any]) -> str:
    """The Retry Instruction's text in a body (its section, up to the next heading)."""
    sent = json.loads(json.dumps(body))  # every text of the body, at any depth
    texts: list[str] = []
    stack: list[Any] = [sent]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    [found] = [text for text in texts if "## Retry Instruction\n" in text]
    return found.split("## Retry Instruction\n", 1)[1].split("\n\n## ", 1)[0]


def test_calls_that_fail_alike_are_one_paragraph_with_their_count(home: Path) -> None:
    with _agent(home) as agent:
        turn = agent.turn(THREAD, "Read my notes.")
        turn.next_body()
        step = turn.receive(_reply(turn, "", [_call(n, path=f"n{n}.md") for n in range(1, 6)]))
        errors = {"c1": "ENOENT", "c2": "EACCES", "c3": "ENOENT", "c5": "ENOENT"}
        for call in step.runnable:
            turn.add_tool_result(call.id, errors.get(call.id, "The notes."),
                                 is_error=call.id in errors)
        text = _retry_text(turn.next_body())
    paragraphs = text.split("\n\n")
    assert [p.count("A tool call failed.") for p in paragraphs] == [1, 1]
    assert paragraphs[0].endswith("- error: ENOENT\n- failed calls: 3")
    assert paragraphs[1].endswith("- error: EACCES")


def test_past_the_listed_failures_the_rest_are_counted_in_one_line(home: Path) -> None:
    calls = FAILURES_LISTED + 30
    with _agent(home) as agent:
        turn = agent.turn(THREAD, "Read every file.")
        turn.next_body()
        step = turn.receive(_reply(turn, "", [_call(n, path=f"n{n}.md")
                                               for n in range(1, calls + 1)]))
        for number, call in enumerate(step.runnable):  # the first 30 distinct, then alike
            turn.add_tool_result(call.id, f"no file {min(number, 29)}", is_error=True)
        text = _retry_text(turn.next_body())
    assert text.count("A tool call failed.") == FAILURES_LISTED
    assert f"- error: no file {FAILURES_LISTED - 1}\n" in text + "\n"
    # Errors 20 to 28 once each, error 29 by the last 21 calls.
    assert text.endswith("\n\n30 more failed calls, with other errors, are not listed here: "
                         "each error is in its call's result.")


def test_a_long_error_is_quoted_by_its_head(home: Path) -> None:
    with _agent(home) as agent:
        turn = agent.turn(THREAD, "Read it.")
        turn.next_body()
        step = turn.receive(_reply(turn, "", [_call(1)]))
        turn.add_tool_result(step.runnable[0].id, "x" * 5000, is_error=True)
        body = json.dumps(turn.next_body())
    quoted = body.split("- error: ")[1].split('"')[0]
    assert quoted == "x" * 499 + "\\u2026"


# -- the final answer at max_rounds ----------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_last_round_asks_for_the_answer_and_lets_the_model_call_nothing(
    home: Path, provider: ProviderName,
) -> None:
    with _agent(home, provider, max_rounds=2) as agent:
        turn = agent.turn(THREAD, "Read my notes.")
        first = turn.next_body()
        sdk_reply, wire = send(provider, first, _reply(turn, "", [_call(1)]))
        step = turn.receive(sdk_reply)
        assert not step.done and [c.id for c in step.runnable] == ["c1"]
        turn.add_tool_result("c1", "The notes.")
        last = turn.next_body()
        # The model calls a tool anyway: refused, and the turn can finish.
        sdk_reply, wire = send(provider, last, _reply(turn, "What I have.", [_call(2)]))
        step = turn.receive(sdk_reply)
        assert step.done and step.runnable == ()
        assert [o.verdict for o in step.outcomes] == ["refused"]
        assert step.outcomes[0].result is not None
        assert "the turn's last request" in step.outcomes[0].result.content
        with pytest.raises(InputError, match=r"has had its 2 round\(s\) \(max_rounds\)"):
            turn.next_body()
        finished = turn.finish()
    assert finished.entry.assistant_text == "What I have."
    first_round, last_round = finished.record.rounds
    assert first_round.visible_tools == ["read_file"] and last_round.visible_tools == []
    assert _section(first_round, "retry_runtime_instruction") is None
    assert _section(last_round, "retry_runtime_instruction") is not None
    assert "Stop calling tools now." in json.dumps(last)
    assert "this is request 2 of at most 2 in this turn" in json.dumps(last)
    assert first_round.manifest.fingerprint_stable == last_round.manifest.fingerprint_stable
    # The tools stay in the body (the cached prefix, and Anthropic needs them next to
    # tool calls); the tool choice says none may be called.
    choice = {"anthropic": {"type": "none"}, "openai-chat": "none",
              "openai-responses": "none"}
    if provider == "gemini":
        assert wire["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
        assert "toolConfig" not in first
    else:
        assert wire["tool_choice"] == choice[provider] and "tool_choice" not in first
    assert last["tools"] == first["tools"] and wire["tools"]


def test_a_limit_of_one_round_closes_the_first(home: Path) -> None:
    with _agent(home, max_rounds=5) as agent:
        turn = agent.turn(THREAD, "Hi", max_rounds=1)
        body = turn.next_body()
        assert body["tool_choice"] == {"type": "none"} and turn.rounds[0].visible_tools == []
        turn.receive(_reply(turn, "Hello.", []))
        assert turn.finish().entry.assistant_text == "Hello."


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "3"])
def test_a_round_limit_is_a_whole_number_of_at_least_one(home: Path, value: object) -> None:
    with pytest.raises(InputError, match=r"^Agent → max_rounds: expected a whole number of "
                       r"at least 1 \(got "):
        _agent(home, max_rounds=value)
    with _agent(home) as agent, pytest.raises(InputError, match=r"^Agent.turn → max_rounds: "):
        agent.turn(THREAD, "Hi", max_rounds=value)  # type: ignore[arg-type]


# -- Task Orchestration ----------------------------------------------------------------------


def test_task_orchestration_while_a_task_tool_is_visible(home: Path) -> None:
    request = ToolCall(id="c1", name="request_tools",
                       arguments={"domains": ["task"], "reason": "delegate the long part"})
    with _agent(home, tools=[READ_FILE, TASK_CREATE]) as agent:
        turn = agent.turn(THREAD, "Plan the trip.")
        turn.next_body()
        turn.receive(_reply(turn, "", [request]))
        body = turn.next_body()
        assert "task_create" in [t["name"] for t in body["tools"]]
        turn.receive(_reply(turn, "Done.", []))
        rounds = turn.finish().record.rounds
    assert [_section(r, "task_orchestration_policy") for r in rounds] == [
        None, "task_orchestration_policy"]
    assert "read the skills `system:pioneer/subagents`" in json.dumps(body)
    assert rounds[0].manifest.fingerprint_stable == rounds[1].manifest.fingerprint_stable


def test_no_task_orchestration_without_a_task_tool(home: Path) -> None:
    request = ToolCall(id="c1", name="request_tools",
                       arguments={"domains": ["memory"], "reason": "recall"})
    with _agent(home, tools=[READ_FILE], hooks=agent_loop.hooks()) as agent:
        turn = agent.turn(THREAD, "Plan the trip.")
        turn.next_body()
        turn.receive(_reply(turn, "", [request]))
        turn.next_body()
        turn.receive(_reply(turn, "Done.", []))
        rounds = turn.finish().record.rounds
    assert "memory_search" in rounds[1].visible_tools
    assert [_section(r, "task_orchestration_policy") for r in rounds] == [None, None]


# -- the continuation hint -------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cut_reply_is_continued_and_stored_whole(home: Path, provider: ProviderName) -> None:
    with _agent(home, provider) as agent:
        turn = agent.turn(THREAD, "Write the packing list.")
        with pytest.raises(InputError, match="there is no reply to continue yet"):
            turn.next_body(continue_generation=True)
        sdk_reply, _ = send(provider, turn.next_body(), _reply(turn, "Boots, tent, ", []))
        assert turn.receive(sdk_reply).done
        body = turn.next_body(continue_generation=True)
        sdk_reply, wire = send(provider, body, _reply(turn, "stove.", []))
        turn.receive(sdk_reply)
        finished = turn.finish()
    assert finished.entry.assistant_text == "Boots, tent, stove."
    first, second = finished.record.rounds
    assert _section(first, "recovery_continuation") is None
    assert _section(second, "recovery_continuation") == "recovery_continuation"
    assert first.manifest.fingerprint_stable == second.manifest.fingerprint_stable
    text = json.dumps(wire)
    assert "Your previous reply was cut off by the output limit." in text
    assert text.index("Boots, tent, ") < text.rindex("Continue.")


def test_a_continuation_sent_again_is_still_a_continuation(home: Path) -> None:
    with _agent(home) as agent:
        turn = agent.turn(THREAD, "Write the packing list.")
        turn.next_body()
        assert turn.receive(_reply(turn, "Boots, tent, ", [])).done
        first = json.dumps(turn.next_body(continue_generation=True))
        again = json.dumps(turn.next_body())  # a retry: the same round, built again
        turn.receive(_reply(turn, "stove.", []))
        finished = turn.finish()
    assert finished.entry.assistant_text == "Boots, tent, stove."
    for body in (first, again):
        assert "Your previous reply was cut off by the output limit." in body
    assert _section(finished.record.rounds[-1], "recovery_continuation") == \
        "recovery_continuation"



@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_changed_tool_choice_breaks_the_message_prefix_on_anthropic_only(
    provider: ProviderName,
) -> None:
    """Anthropic keeps the tools and system entries across a change of tool_choice, not
    the messages': the cache plan's digests say so."""
    from pioneer.audit.cache_report import request_blocks
    from pioneer.providers import ChatMessage, ChatRequest, build_request_body

    request = ChatRequest(model=agent_loop.MODELS[provider], tools=[READ_FILE], messages=[
        ChatMessage.user("Read my notes."),
        ChatMessage.assistant("", tool_calls=[_call(1)]),
        ChatMessage.tool("c1", "The notes.")])
    closed = request.model_copy(update={"tool_choice": "none"})
    digests = [[b.digest for b in request_blocks(provider, r, build_request_body(provider, r))]
               for r in (request, closed)]
    assert digests[0][0] == digests[1][0]  # the tools
    assert (digests[0][1:] == digests[1][1:]) == (provider != "anthropic")
