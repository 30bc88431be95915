"""Hostile replies through the runner with each provider's shape: arguments of any depth a
JSON parser accepts, thousands of parallel calls, huge call ids. Each is read (or its call
answered with an error) without a raw ``RecursionError`` and in time linear in its size."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_replies import reply, sdk_response

from pioneer import Agent, PioneerSettings, ensure_runtime_home
from pioneer.documents import MAX_DEPTH
from pioneer.providers import read_response
from pioneer.providers.replies import MAX_CALL_ID_CHARS
from pioneer.text import REPLACEMENT, scrub
from pioneer.turn import ProviderName

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import agent_loop
import fanout_bench

PROVIDERS: list[ProviderName] = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def nested(depth: int) -> dict[str, Any]:
    """An arguments object ``depth`` levels deep (the outer object is level 1)."""
    value: dict[str, Any] = {"path": "notes.md"}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nested_json(depth: int) -> str:
    """The same as JSON text, written without ``json.dumps`` (which recurses)."""
    return '{"a":' * (depth - 1) + '{"path":"notes.md"}' + "}" * (depth - 1)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    ensure_runtime_home(Path("home"))
    return Path("home")


@pytest.fixture
def agents(home: Path) -> Iterator[dict[str, Agent]]:
    # A window as large as the 10,000 calls and their results need (the models' own are
    # 200,000 tokens to 1,000,000).
    settings = PioneerSettings(max_context_tokens=4_000_000)
    made = {provider: Agent(f"{provider}.db", provider=provider,
                            model=agent_loop.MODELS[provider], tools=[agent_loop.READ_FILE],
                            compile_input={"workspace_root": home}, settings=settings)
            for provider in PROVIDERS}
    yield made
    for agent in made.values():
        agent.close()


def _calls_reply(provider: str, calls: tuple[tuple[str, str, Any], ...]) -> dict[str, Any]:
    return reply(provider, calls=calls)


# -- depth -------------------------------------------------------------------------------

TOO_DEEP = (f"the arguments nest more than {MAX_DEPTH} levels deep "
            f"(at a.a.a.a.a.a.a.a..., {MAX_DEPTH} levels down)")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("depth", [600, 100_000])
def test_arguments_of_any_depth_are_answered_with_an_error_not_a_crash(
    agents: dict[str, Agent], provider: ProviderName, depth: int,
) -> None:
    # OpenAI sends arguments as JSON text, the others as an object.
    arguments: Any = nested_json(depth) if provider.startswith("openai") else nested(depth)
    turn = agents[provider].turn("deep", "Read the notes")
    turn.next_body()
    step = turn.receive(_calls_reply(provider, (
        ("call_deep", "read_file", arguments), ("call_ok", "read_file", {"path": "a.md"}))))
    deep, fine = step.outcomes
    assert (deep.verdict, fine.verdict) == ("invalid", "run")
    assert step.reply.tool_calls[0].arguments == {}
    said = step.reply.argument_errors["call_deep"]
    if provider.startswith("openai") and depth == 100_000:  # past json.loads' own limit
        assert said == "the arguments are not valid JSON (nested too deeply)"
    else:
        assert said == TOO_DEEP
    assert deep.result is not None and deep.result.is_error
    turn.add_tool_result("call_ok", "notes")
    body = turn.next_body()
    assert "call_deep" in json.dumps(body)  # the call and its error result go back
    assert turn.receive(reply(provider, text="Done.")).done
    assert turn.finish().entry.assistant_text == "Done."


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sdk_objects_with_deep_arguments_are_read(provider: str) -> None:
    arguments: Any = nested(600)
    found = read_response(provider, sdk_response(
        provider, reply(provider, calls=(("call_1", "read_file", arguments),))))
    assert found.argument_errors == {"call_1": TOO_DEEP}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_arguments_at_the_depth_limit_are_read_and_sent_back(
    agents: dict[str, Agent], provider: ProviderName,
) -> None:
    turn = agents[provider].turn("limit", "Read the notes")
    turn.next_body()
    step = turn.receive(_calls_reply(provider, (("call_1", "read_file", nested(MAX_DEPTH)),)))
    assert step.reply.argument_errors == {}
    assert step.calls[0].arguments == nested(MAX_DEPTH)
    for call in step.runnable:
        turn.add_tool_result(call.id, "notes")
    sent = json.dumps(turn.next_body())
    assert sent.count('{"a": ') + sent.count('{\\"a\\": ') == MAX_DEPTH - 1


def test_scrub_walks_any_depth() -> None:
    deep: Any = ["\ud800", ("x",)]
    for _ in range(100_000):
        deep = {"k": [deep]}
    out = scrub(deep)
    for _ in range(100_000):
        [[out]] = out.values()
    assert out == [REPLACEMENT, ("x",)]


# -- fan-out -----------------------------------------------------------------------------

#: A guard against work that grows with the square of the calls (10,000 calls once took
#: 44 s in add_tool_result alone, and a 10 MB id 42 s in next_body), not a speed target:
#: the machine running the tests may be busy (docs/failure-behaviour.md has the figures).
GUARD_SECONDS = 20.0
#: CPU seconds 10,000 parallel calls may take from the reply to their last result
#: (``receive`` and ``add_tool_result``): about 0.2 measured on a 2-core machine
#: (``benchmarks/fanout_bench.py``), so room for a busy or slower one.
CALLS_SECONDS = 1.0
#: CPU seconds the same may take with the next body over them (``next_body``: the window,
#: the body, the record with its cache plan of 20,000 new blocks): 1.0 to 1.2 measured
#: there, a quarter of it the tokenizer counting the new blocks.
ROUND_SECONDS = 3.0
#: 10,000 calls cost at most this many times what 2,000 do, so the test guards the growth
#: whatever the machine's speed: linear time is 5 (4.1 to 6.5 measured on a busy 2-core
#: machine, the 2,000 calls' single run being a fifth of a second), work that grows with
#: the square of the calls 25.
FAN_OUT_RATIO = 10.0


def _fan_out(agent: Agent, count: int) -> dict[str, float]:
    """CPU seconds ``count`` parallel calls take through each step, as the fan-out bench
    times them: the process's own time, which other processes on the machine change
    little, with the objects alive before left out of the collector's passes."""
    return fanout_bench.one_run(agent, agent.provider, count, f"test{count}", floor=False)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ten_thousand_parallel_calls_cost_linear_time(
    agents: dict[str, Agent], provider: ProviderName,
) -> None:
    small = _fan_out(agents[provider], 2_000)["total"]
    large = _fan_out(agents[provider], 10_000)
    calls, whole = large["receive"] + large["results"], large["total"]
    assert calls < CALLS_SECONDS, large
    assert whole < ROUND_SECONDS, large
    assert whole < FAN_OUT_RATIO * small, (small, large)


# -- long ids ----------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_ten_megabyte_call_id_is_mapped_to_a_short_one(
    agents: dict[str, Agent], provider: ProviderName,
) -> None:
    huge = "id-" + os.urandom(5 << 20).hex()  # 10 MB of hex
    other = "x" * (MAX_CALL_ID_CHARS + 1)
    turn = agents[provider].turn("ids", "Read the notes")
    turn.next_body()
    started = time.perf_counter()
    step = turn.receive(_calls_reply(provider, (
        (huge, "read_file", {"path": "a.md"}), (other, "read_file", {"path": "b.md"}))))
    first, second = (call.id for call in step.calls)
    assert len(first) == len(second) == 40
    assert first.startswith("id-") and second.startswith("x" * 15 + "_")
    assert first != second
    turn.add_tool_result(first, "a")
    turn.add_tool_result(second, "b")
    body = json.dumps(turn.next_body())
    assert time.perf_counter() - started < GUARD_SECONDS
    assert huge[:100] not in body and body.count(first) >= 2
    kept = "y" * MAX_CALL_ID_CHARS  # at the limit: kept as sent (by this reader)
    found = read_response(provider, reply(provider, calls=((kept, "read_file", {}),)))
    assert found.tool_calls[0].id == kept
