"""A turn opens hidden tool domains up front (the preflight selection): their tools are in
the first body, no request_tools round is needed, and explain says the application
granted them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pioneer import Agent, InputError, ensure_runtime_home
from pioneer.audit.explain import explain_turn, render_text

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    home = tmp_path / "home"
    ensure_runtime_home(home)
    made = Agent(tmp_path / "p.db", provider="anthropic", model="claude-sonnet-4-5",
                 tools=[agent_loop.READ_FILE, *agent_loop.MEMORY_TOOLS],
                 compile_input={"workspace_root": home}, recall=False, runtime_facts=False)
    yield made
    made.close()


def _names(body: dict[str, object]) -> list[str]:
    tools = body.get("tools", [])
    assert isinstance(tools, list)
    return sorted(tool["name"] for tool in tools)


def test_visible_domains_open_from_the_first_round(agent: Agent) -> None:
    hidden = agent.turn("t", "Hello", turn_id="t1")
    assert _names(hidden.next_body()) == ["read_file", "request_tools"]
    with pytest.warns(ResourceWarning):
        hidden.close()
    turn = agent.turn("t", "What do you remember?", turn_id="t2", visible_domains=["memory"])
    body = turn.next_body()
    assert _names(body) == ["memory_get", "memory_search", "read_file"]
    assert "Hidden Tool Domains" not in json.dumps(body)
    step = turn.receive(agent_loop.response(
        "anthropic", agent.model, "", [agent_loop.ToolCall(id="c1", name="memory_search",
                                                           arguments={"query": "x"})],
        agent_loop.usage("anthropic", turn.rounds[0].cache, 5)))
    assert [c.id for c in step.runnable] == ["c1"]  # callable in round 1, no request_tools
    turn.add_tool_result("c1", "nothing found")
    turn.next_body()
    turn.receive(agent_loop.response("anthropic", agent.model, "Nothing.", [],
                                     agent_loop.usage("anthropic", turn.rounds[1].cache, 5)))
    record = turn.finish().record
    assert record.tools is not None
    assert [(t.name, t.granted_by) for t in record.tools] == [
        ("read_file", None), ("memory_search", "application"), ("memory_get", "application")]
    assert record.rounds[0].hidden_domains == []
    explained = explain_turn(record)
    [tools] = [s for s in explained.steps if s.name == "tools"]
    assert tools.data["granted_by_application"] == ["memory"]
    assert "granted by the application before round 1: memory" in render_text(explained)
    stored = agent.records.get("t2")
    assert stored is not None and stored.tools == record.tools


def test_visible_domains_are_checked(agent: Agent) -> None:
    with pytest.raises(InputError, match=r"visible_domains\[0\]: unknown tool domain "
                       r"'memroy' \(did you mean \"memory\"\?\) \(known: memory, task"):
        agent.turn("t", "Hello", visible_domains=["memroy"])
    with pytest.raises(InputError, match=r"expected a list of domain names \(got 'memory'\)"):
        agent.turn("t", "Hello", visible_domains="memory")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="a chat turn offers no tools, so it opens no domain"):
        agent.turn("t", "Hello", mode="chat", visible_domains=["memory"])
    turn = agent.turn("t", "Hello", visible_domains=["task"])  # no task tools: nothing opens
    assert _names(turn.next_body()) == ["read_file", "request_tools"]
    with pytest.warns(ResourceWarning):
        turn.close()
