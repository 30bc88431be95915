"""Permissions pioneer decides are enforced: a tool the profile forbids is in no body's
``tools`` and a call to it is refused by the runner, never runnable; checked through each
official SDK over an in-process transport."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from sdk_wire import send

from pioneer import Agent, ToolSpec, Turn, ensure_runtime_home
from pioneer.providers import ToolCall
from pioneer.sections import PermissionProfile
from pioneer.tools import forbidden_tools
from pioneer.tools.visibility import ToolCatalog
from pioneer.turn import ProviderName

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

PROVIDERS: list[ProviderName] = ["anthropic", "openai-chat", "openai-responses", "gemini"]
SHELL = ToolSpec(name="shell", description="Run a shell command.",
                 parameters={"type": "object", "properties": {"command": {"type": "string"}}})
TASK_CREATE = ToolSpec(name="task_create", description="Start a background task.")
TOOLS = [agent_loop.READ_FILE, SHELL, TASK_CREATE]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    ensure_runtime_home(Path("home"))
    return Path("home")


def _reply(turn: Turn, text: str, calls: list[ToolCall]) -> dict[str, Any]:
    provider = turn.agent.provider
    plan = turn.rounds[-1].cache
    assert plan is not None
    return agent_loop.response(provider, turn.agent.model, text, calls,
                               agent_loop.usage(provider, plan, 40))


def _names(provider: str, body: dict[str, Any]) -> list[str]:
    """The tool names of a body as the SDK sent it."""
    tools = body.get("tools", [])
    if provider == "gemini":
        return [d["name"] for t in tools for d in t["functionDeclarations"]]
    if provider == "openai-chat":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


def _result_sent(provider: str, body: dict[str, Any], call_id: str) -> str:
    """The text of the tool result for ``call_id`` in a body as the SDK sent it."""
    if provider == "anthropic":
        return next(json.dumps(b["content"]) for m in body["messages"]
                    if isinstance(m["content"], list) for b in m["content"]
                    if b.get("type") == "tool_result" and b["tool_use_id"] == call_id)
    if provider == "openai-chat":
        return next(m["content"] for m in body["messages"]
                    if m["role"] == "tool" and m["tool_call_id"] == call_id)
    if provider == "openai-responses":
        return next(json.dumps(item["output"]) for item in body["input"]
                    if item.get("type") == "function_call_output"
                    and item["call_id"] == call_id)
    return next(json.dumps(p["functionResponse"]["response"]) for c in body["contents"]
                for p in c["parts"]
                if "functionResponse" in p and p["functionResponse"]["id"] == call_id)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_denied_tool_is_never_offered_and_its_call_is_refused(
    home: Path, provider: ProviderName,
) -> None:
    profile = PermissionProfile(mode="workspace_write", denied_tools=("shell",),
                                task_subagent="deny")
    sent: list[dict[str, Any]] = []
    with Agent("p.db", provider=provider, model=agent_loop.MODELS[provider], tools=TOOLS,
               permissions=profile, compile_input={"workspace_root": home}) as agent:
        turn = agent.turn("thread-p", "Clean up the build folder.")
        script = [
            [ToolCall(id="c1", name="shell", arguments={"command": "rm -rf build"}),
             ToolCall(id="c2", name="read_file", arguments={"path": "Makefile"}),
             ToolCall(id="c3", name="task_create", arguments={})],
            [ToolCall(id="c4", name="shell", arguments={"command": "make clean"})],
            [],
        ]
        steps = []
        for calls in script:
            body = turn.next_body()
            sdk_reply, wire = send(provider, body, _reply(turn, "" if calls else "Done.", calls))
            sent.append(wire)
            step = turn.receive(sdk_reply)
            steps.append(step)
            for call in step.runnable:
                turn.add_tool_result(call.id, "all: build")
        record = turn.finish().record
    for wire in sent:
        assert "read_file" in _names(provider, wire)
        assert not {"shell", "task_create"} & set(_names(provider, wire))
    # Not listed as a hidden domain either, nor described anywhere (later bodies hold the
    # model's own calls; Current Permissions names the denied tool).
    assert "task_create" not in json.dumps(sent[0])
    assert "Run a shell command" not in json.dumps(sent[0])
    assert [[c.id for c in s.runnable] for s in steps] == [["c2"], [], []]
    verdicts = [(c.call_id, c.verdict) for r in record.rounds for c in r.calls]
    assert verdicts == [("c1", "refused"), ("c2", "run"), ("c3", "refused"), ("c4", "refused")]
    refusal = _result_sent(provider, sent[1], "c1")
    assert "is not available in this round: the permission profile forbids it " \
           "(denied_tools lists it)" in refusal and "shell" in refusal
    assert "task_subagent is deny" in _result_sent(provider, sent[1], "c3")
    assert [t.name for t in record.tools or []] == ["read_file"]
    # The section says what the runner enforced, and what is left to the application.
    text = json.dumps(sent[0])
    assert ("Tools in denied_tools, or of the task domain (task_subagent is deny) are not in "
            "your tool list, and a call to one is refused.") in text
    assert "The application that runs your tools checks every other rule" in text


def test_allowed_tools_leaves_every_other_tool_out(home: Path) -> None:
    profile = PermissionProfile(allowed_tools=("read_file",))
    with Agent("p.db", provider="anthropic", model="claude-sonnet-4-5", tools=TOOLS,
               hooks=agent_loop.hooks(), permissions=profile,
               compile_input={"workspace_root": home}) as agent:
        turn = agent.turn("thread-a", "Hi")
        body = turn.next_body()
    # The memory tools a hook registers are outside allowed_tools too: no hidden domain
    # is left, so request_tools is not offered either.
    assert [t["name"] for t in body["tools"]] == ["read_file"]
    assert "Hidden Tool Domains" not in json.dumps(body)


def test_forbidden_tools_names_the_rule_of_each() -> None:
    catalog = ToolCatalog.build([*TOOLS, ToolSpec(name="memory_get")])
    profile = PermissionProfile(denied_tools=("shell", "nothing"), allowed_tools=(
        "read_file", "shell", "task_create"), task_subagent="deny")
    assert forbidden_tools(profile, catalog) == {
        "shell": "denied_tools lists it", "task_create": "task_subagent is deny",
        "memory_get": "allowed_tools does not list it"}
    assert forbidden_tools(PermissionProfile(task_subagent="ask"), catalog) == {}
    assert forbidden_tools(None, catalog) == {}
