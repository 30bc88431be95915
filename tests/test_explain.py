"""Turn records end to end: a real agent-loop turn stored in SQLite, then `pioneer explain`."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from doc_pages import example
from support import compile_round

from pioneer import HistoryLimits, HookRegistry, PromptCompileInput, PromptCompiler, ToolSpec
from pioneer.audit import (
    ExecutionSecurity,
    HistorySnapshot,
    ReportedUsage,
    SkillsSnapshot,
    ToolRecord,
    TurnRecord,
    TurnRecords,
)
from pioneer.audit.explain import explain_turn, render_json
from pioneer.cli import main
from pioneer.errors import InputError
from pioneer.history import HistoryBudgeter, SqliteStore
from pioneer.hooks.models import PromptSectionContribution, SourceRef
from pioneer.hooks.registry import HookContext
from pioneer.providers import ChatMessage, ChatRequest, ToolCall, build_request_body
from pioneer.sections import (
    MemoryItem,
    MemoryRecall,
    PermissionProfile,
    Skill,
    build_skills_prompt,
    render_memory_recall,
)
from pioneer.sections.skills import resolve_skill_outcomes
from pioneer.tools import ToolCatalog, TurnTools
from pioneer.turn import TurnAudit

GOLDENS = Path(__file__).parent / "goldens" / "explain"
STEPS = ["mode", "history", "manifest", "skills", "memory", "tools", "permissions",
         "provider", "changes"]



@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder to run in, so paths in the record (and the golden) are relative."""
    monkeypatch.chdir(tmp_path)
    Path("home").mkdir()
    Path("home", "SOUL.md").write_text("Curious and calm.\n", encoding="utf-8")
    return tmp_path


def _hooks() -> HookRegistry:
    registry = HookRegistry()

    @registry.hook("acme.memory", phase="turn.pre_prompt_context")
    def memory(context: HookContext) -> PromptSectionContribution | None:
        text = render_memory_recall(MemoryRecall(
            policy="read_only", tools=["memory_search"],
            recalled=[MemoryItem("user:7", "preference", "Likes tables.")],
        ), context.env)
        if text is None:
            return None
        return PromptSectionContribution(
            contribution_id="acme.memory.recall", section_id="memory_recall", domain="memory",
            priority=500, content=text, source_refs=[SourceRef(kind="memory", id="m-1")],
        )

    @registry.hook("acme.index", phase="turn.post_preflight_prompt_context",
                   failure="best_effort")
    def index(context: HookContext) -> None:
        raise ConnectionError("index unavailable")

    return registry


@dataclass(frozen=True)
class StoredTurn:
    db: Path
    record: TurnRecord


def _agent_turn(compiler: PromptCompiler, provider: str,
                replies: Sequence[Sequence[ToolCall]]) -> StoredTurn:
    """One agent turn: a scripted model makes ``replies`` (one list of calls per round)."""
    db = Path("pioneer.db")
    with SqliteStore(db) as store:
        store.ensure_thread("thread-1", model="m")
        for number in range(4):
            store.add_turn("thread-1", turn_id=f"old-{number}",
                           user_text=f"question {number} " * 50,
                           assistant_text=f"answer {number} " * 80)
        limits = HistoryLimits.from_tokens(1400, 400, low_water=1.0)  # keep all that fits
        decision = HistoryBudgeter(store, limits).build("thread-1")
        skills = [
            Skill("workspace/weather", "Weather", "Forecasts for a city.", "skills/weather",
                  paths=("**/*.csv",)),
            Skill("workspace/deploy", "Deploy", "Ship a release.", "skills/deploy",
                  paths=("**/*.csv",), disable_model_invocation=True),
            Skill("workspace/notes", "Notes", "Keep notes.", "skills/notes"),
        ]
        resolution = resolve_skill_outcomes(skills, touched_paths=["data/oslo.csv"])
        skills_prompt = build_skills_prompt(resolution.active, compiler.templates.env)
        permissions = PermissionProfile(mode="workspace_write", network="ask")
        security = ExecutionSecurity.from_profile(permissions, source="workspace policy",
                                                  sandbox="workspace container")
        catalog = ToolCatalog.build([
            ToolSpec(name="read_file", description="Read a file."),
            ToolSpec(name="memory_search", description="Search memories."),
            ToolSpec(name="memory_get", description="Get one memory."),
            ToolSpec(name="task_create", description="Start a task."),
        ])
        tools = TurnTools(catalog)
        audit = TurnAudit("turn-5", "thread-1", "agent",
                          history=HistorySnapshot.from_decision(decision),
                          security=security,
                          skills=SkillsSnapshot.from_resolution(resolution, skills_prompt),
                          tools=ToolRecord.from_catalog(catalog))
        compile_input = PromptCompileInput(workspace_root=Path("home"),
                                           skills_prompt=skills_prompt.text)
        messages = [ChatMessage(role=m.role, content=m.content) for m in decision.messages]
        messages.append(ChatMessage.user("What do I like?"))
        for calls in [*replies, []]:
            round_ = tools.next_round()
            payload = compile_round(compiler, compile_input, _hooks(), permissions=permissions,
                                   hidden_tool_domains=round_.hidden)
            request = round_.apply(ChatRequest(model="m", compiled_prompt=payload,
                                               messages=messages))
            audit.add_round(payload.manifest, request, provider,
                            build_request_body(provider, request), round_)
            # What the scripted provider reports for the round, in its own token counts.
            audit.report_usage(round_.number, ReportedUsage.from_response(
                provider, REPORTED[provider][round_.number - 1]))
            if not calls:
                break
            messages.append(ChatMessage.assistant(tool_calls=calls))
            for call in calls:
                outcome = tools.decide(call)
                result = outcome.result
                messages.append(ChatMessage.tool(call.id, "Likes tables.") if result is None
                                else ChatMessage(role="tool", tool_result=result))
        store.add_turn("thread-1", turn_id="turn-5", user_text="What do I like?",
                       assistant_text="You like tables.")
        record = audit.record(tools.calls)
        TurnRecords(store).save(record)
    return StoredTurn(db, record)


#: The usage the scripted provider reports per round (its own tokenizer's counts).
REPORTED: dict[str, list[dict[str, Any]]] = {
    "anthropic": [
        {"input_tokens": 9, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 1498,
         "output_tokens": 40},
        {"input_tokens": 9, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 1721,
         "output_tokens": 35},
        {"input_tokens": 9, "cache_read_input_tokens": 1721, "cache_creation_input_tokens": 146,
         "output_tokens": 20},
    ],
    "openai-chat": [
        {"prompt_tokens": 1490, "completion_tokens": 40,
         "prompt_tokens_details": {"cached_tokens": 0}},
        {"prompt_tokens": 1700, "completion_tokens": 40,
         "prompt_tokens_details": {"cached_tokens": 0}},
    ],
}

MEMORY_ROUNDS = [
    [ToolCall(id="c1", name="request_tools",
              arguments={"domains": ["memory"], "reason": "recall a preference"}),
     ToolCall(id="c2", name="memory_search", arguments={"query": "likes"})],
    [ToolCall(id="c3", name="memory_search", arguments={"query": "likes"}),
     ToolCall(id="c4", name="request_tools", arguments={"domains": ["task"], "reason": " "})],
]


def _explain(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["explain", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_stored_turn_explained_end_to_end(workspace: Path, compiler: PromptCompiler,
                                          golden: Callable[[Path, str], None]) -> None:
    turn = _agent_turn(compiler, "anthropic", MEMORY_ROUNDS)
    code, out, err = _explain("turn-5", "--db", str(turn.db))
    assert (code, err) == (0, "")
    golden(GOLDENS / "agent-turn.txt", out)
    numbered = [line.split(". ", 1)[1] for line in out.splitlines() if line[:1].isdigit()]
    assert numbered == STEPS


def test_record_reads_back_unchanged_from_a_new_connection(workspace: Path,
                                                           compiler: PromptCompiler) -> None:
    turn = _agent_turn(compiler, "anthropic", MEMORY_ROUNDS)
    with SqliteStore(turn.db, create=False) as store:
        assert TurnRecords(store).get("turn-5") == turn.record
        assert TurnRecords(store).get("old-1") is None


def test_each_step_is_answered_from_the_record(workspace: Path,
                                               compiler: PromptCompiler) -> None:
    record = _agent_turn(compiler, "anthropic", MEMORY_ROUNDS).record
    steps = {step.name: step for step in explain_turn(record).steps}
    assert steps["history"].data["history"]["mode"] == "truncate"
    assert steps["history"].lines[0].startswith("truncated: ")
    assert [r["visible_tools"] for r in steps["tools"].data["rounds"]] == [
        ["read_file", "request_tools"],
        ["read_file", "memory_search", "memory_get", "request_tools"],
        ["read_file", "memory_search", "memory_get", "request_tools"],
    ]
    verdicts = [(c["call_id"], c["verdict"]) for r in steps["tools"].data["rounds"]
                for c in r["calls"]]
    assert verdicts == [("c1", "granted"), ("c2", "refused"), ("c3", "run"), ("c4", "invalid")]
    assert steps["permissions"].data["rendered_in_rounds"] == [1, 2, 3]
    assert steps["skills"].data["skills"]["active"] == [
        {"skill_id": "user:workspace/weather", "reason": "path_match"}]
    [contribution] = steps["memory"].data["contributions"]
    assert contribution["source"]["hook_id"] == "acme.memory"
    assert steps["memory"].data["failed_hooks"][0]["hook_id"] == "acme.index"
    first, second = steps["changes"].data["between"]
    assert (first["stable_changed"], first["dynamic_changed"]) == (False, True)
    assert first["changed"] == ["request_tools.hidden_domains"]
    assert (second["stable_changed"], second["dynamic_changed"]) == (False, False)
    # The stable text is below the 1,024-token minimum: the marks go on the end of the
    # history (the same place in every round) and on the last block.
    marks = [r["cache_breakpoints"] for r in steps["provider"].data["rounds"]]
    assert [m[0] for m in marks] == ["messages[3] (assistant)"] * 3


def test_json_lists_the_same_steps_in_order(workspace: Path, compiler: PromptCompiler) -> None:
    turn = _agent_turn(compiler, "openai-chat", MEMORY_ROUNDS[:1])
    code, out, _ = _explain("turn-5", "--db", str(turn.db), "--json")
    assert code == 0
    data = json.loads(out)
    assert out == render_json(explain_turn(turn.record))
    assert [step["step"] for step in data["steps"]] == STEPS
    provider = data["steps"][7]["rounds"]
    assert provider[0]["cache_breakpoints"] == []
    assert provider[0]["prompt_cache_key"].startswith("pioneer-")
    assert provider[0]["system"] == [
        {"kind": "stable", "chars": provider[0]["system"][0]["chars"]},
        {"kind": "dynamic", "chars": provider[0]["system"][1]["chars"]},
    ]


def test_a_chat_turn_has_no_tools_and_nothing_to_compare(workspace: Path,
                                                         compiler: PromptCompiler) -> None:
    with SqliteStore("chat.db") as store:
        store.ensure_thread("t")
        store.add_turn("t", turn_id="u1", user_text="Hi", assistant_text="Hello")
        payload = compiler.compile(PromptCompileInput(workspace_root=Path("home"),
                                                      profile="minimal"))
        request = ChatRequest(model="m", compiled_prompt=payload,
                              messages=[ChatMessage.user("Hi")])
        audit = TurnAudit("u1", "t", "chat")
        audit.add_round(payload.manifest, request, "gemini", build_request_body("gemini", request))
        TurnRecords(store).save(audit.record())
    code, out, _ = _explain("u1", "--db", "chat.db")
    assert code == 0
    blocks = out.split("\n\n")
    assert blocks[1] == "1. mode\n   chat: no tool calling"
    assert blocks[2] == "2. history\n   not recorded"
    assert "   round 1: 0 visible tools: none\n     hidden: none; Hidden Tool Domains " \
        "section not rendered" in out
    # Features nobody configured take one line each.
    assert "4. skills: none configured" in blocks
    assert blocks[7] == "7. permissions: none configured"
    assert blocks[-1] == "9. changes\n   one round: nothing to compare\n"


def test_a_turn_without_a_record_is_a_user_error(workspace: Path) -> None:
    with SqliteStore("empty.db") as store:
        store.ensure_thread("t")
    assert _explain("missing", "--db", "empty.db") == (
        1, "", "empty.db: turn 'missing' has no stored record (a turn is recorded when its "
        "agent loop saves a TurnRecord)\nerror: 1 problem\n")


def test_explain_never_creates_a_store(workspace: Path) -> None:
    code, _, err = _explain("t", "--db", "nowhere.db")
    assert (code, err) == (1, "nowhere.db: no conversation store at this path\n"
                              "error: 1 problem\n")
    assert not Path("nowhere.db").exists()


def test_docs_agent_loop_runs_prints_what_it_says_and_is_explained(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, expected = example("agent-loop", "explain.md")
    assert expected is not None, "the agent loop example says nothing about what it prints"
    exec(compile(code, "docs/explain.md", "exec"), {})
    assert capsys.readouterr().out == expected
    status, out, _ = _explain("turn-1", "--db", "home/pioneer.db")
    assert status == 0
    assert "   round 2: 2 visible tools: read_file, memory_search\n" in out
    assert "     call memory_search (c1): refused: " in out


def _one_round(compiler: PromptCompiler, compile_input: PromptCompileInput,
               permissions: PermissionProfile | None = None) -> TurnRecord:
    payload = compiler.compile(compile_input)
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    audit = TurnAudit("u1", "t", "chat", permissions=permissions)
    audit.add_round(payload.manifest, request, "gemini", build_request_body("gemini", request))
    return audit.record()


@pytest.mark.parametrize(
    ("profile", "permissions", "line"),
    [("none", PermissionProfile(mode="read_only"),
      "Current Permissions section: not rendered although the profile narrows access (the "
      "prompt profile has no place for it, or the caller gave its own text)"),
     ("none", PermissionProfile(),
      "Current Permissions section: not rendered (full access with nothing narrowed)")],
    ids=["narrowed-but-absent", "full-access"],
)
def test_permissions_step_says_why_the_section_is_absent(
    workspace: Path, compiler: PromptCompiler, profile: str, permissions: PermissionProfile,
    line: str,
) -> None:
    record = _one_round(compiler, PromptCompileInput(workspace_root=Path("home"),
                                                     profile=profile),
                        permissions=permissions)
    step = next(s for s in explain_turn(record).steps if s.name == "permissions")
    assert step.lines[-1] == line


def test_a_stable_change_between_rounds_is_called_out(workspace: Path,
                                                      compiler: PromptCompiler) -> None:
    first = _one_round(compiler, PromptCompileInput(workspace_root=Path("home")))
    Path("home", "USER.md").write_text("Prefers metric units.\n", encoding="utf-8")
    second = _one_round(compiler, PromptCompileInput(workspace_root=Path("home")))
    rounds = [first.rounds[0], second.rounds[0].model_copy(update={"round": 2})]
    record = first.model_copy(update={"rounds": rounds})
    step = next(s for s in explain_turn(record).steps if s.name == "changes")
    assert step.lines == (
        "round 1 -> 2: stable changed (the provider cache prefix breaks), dynamic unchanged",
        "  added: user_persona",
        "  diagnostics removed: bootstrap file `USER.md` is missing",
    )


def test_the_cache_plan_names_the_stable_section_that_broke_the_cache(
    workspace: Path, compiler: PromptCompiler
) -> None:
    """Two rounds in one turn, USER.md edited between them: the plan says where it broke."""
    audit = TurnAudit("u1", "t", "chat")
    messages = [ChatMessage.user("Hi")]
    for _ in range(2):
        payload = compiler.compile(PromptCompileInput(workspace_root=Path("home")))
        request = ChatRequest(model="m", compiled_prompt=payload, messages=messages)
        audit.add_round(payload.manifest, request, "openai-chat",
                        build_request_body("openai-chat", request))
        Path("home", "USER.md").write_text("Prefers metric units.\n", encoding="utf-8")
    second = audit.record().rounds[1].cache
    assert second is not None and second.first_difference is not None
    assert second.first_difference.model_dump() == {
        "index": 0, "label": "messages[0] (system)", "broken": True,
        "reason": "stable section user_persona changed",
    }
    step = next(s for s in explain_turn(audit.record()).steps if s.name == "provider")
    assert "    cache broken at block 0 messages[0] (system): stable section user_persona " \
        "changed" in step.lines


def test_json_carries_the_skill_outcomes_and_the_security_snapshot(
    workspace: Path, compiler: PromptCompiler
) -> None:
    turn = _agent_turn(compiler, "anthropic", MEMORY_ROUNDS[:1])
    code, out, _ = _explain("turn-5", "--db", str(turn.db), "--json")
    assert code == 0
    steps = {step["step"]: step for step in json.loads(out)["steps"]}
    assert steps["skills"]["skills"]["outcomes"] == [
        {"skill_id": "user:workspace/weather", "status": "resolved", "reason": "path_match"},
        {"skill_id": "user:workspace/deploy", "status": "disabled",
         "reason": "disable_model_invocation"},
        {"skill_id": "user:workspace/notes", "status": "non_implicit", "reason": "implicit_off"},
    ]
    security = steps["permissions"]["security"]
    assert {key: security[key] for key in ("source", "sandbox", "ask", "deny", "guidance")} == {
        "source": "workspace policy", "sandbox": "workspace container", "ask": ["network"],
        "deny": [], "guidance": True}
    assert security["profile"] == steps["permissions"]["profile"]
    assert security["profile"]["network"] == "ask"


def test_skills_step_says_why_each_skill_was_left_out(workspace: Path,
                                                      compiler: PromptCompiler) -> None:
    skills = [Skill("workspace/casual", "Casual", "Chat.", "skills/casual"),
              Skill("workspace/shy", "Shy", "Only on request.", "skills/shy",
                    user_invocable=False)]
    resolution = resolve_skill_outcomes(skills, allow_implicit=True)
    prompt = build_skills_prompt(resolution.active, compiler.templates.env, max_chars=60)
    record = _one_round(compiler, PromptCompileInput(workspace_root=Path("home"),
                                                     skills_prompt=prompt.text))
    record = record.model_copy(update={
        "skills": SkillsSnapshot.from_resolution(resolution, prompt)})
    step = next(s for s in explain_turn(record).steps if s.name == "skills")
    assert step.lines == (
        "1 skill resolved: user:workspace/casual (implicit)",
        "1 skill left out of the 2 skills considered:",
        "  non-implicit user:workspace/shy: not named and no touched path matched; not "
        "user-invocable, so never implicit",
        "left out of the full text: user:workspace/casual",
        "diagnostic: the [Skills] text was left out: its budget of 60 bytes cannot hold the "
        "[Skills] header and one skill entry (the smallest needs 125 bytes)",
        "Skills Runtime section: not rendered; the text was cut to its budget",
    )


def test_a_snapshot_of_an_active_list_says_what_was_not_recorded(
    workspace: Path, compiler: PromptCompiler
) -> None:
    record = _one_round(compiler, PromptCompileInput(workspace_root=Path("home")))
    active = resolve_skill_outcomes(
        [Skill("workspace/casual", "Casual", "Chat.", "skills/casual")],
        allow_implicit=True).active
    record = record.model_copy(update={"skills": SkillsSnapshot.from_resolution(active)})
    step = next(s for s in explain_turn(record).steps if s.name == "skills")
    assert step.lines[:2] == (
        "1 skill resolved: user:workspace/casual (implicit)",
        "skills left out: not recorded (the record keeps only the active skills)",
    )
    assert step.data["skills"]["outcomes"] is None


def test_a_security_snapshot_must_be_of_the_profile_given(workspace: Path) -> None:
    with pytest.raises(InputError) as caught:
        TurnAudit("u1", "t", "chat", permissions=PermissionProfile(mode="read_only"),
                  security=ExecutionSecurity.from_profile(PermissionProfile()))
    assert str(caught.value) == (
        "TurnAudit → security → profile: the execution security snapshot is of another "
        "permission profile than the one given")
    audit = TurnAudit("u1", "t", "chat", security=ExecutionSecurity.from_profile(
        PermissionProfile(mode="read_only", shell_command="deny"), source="admin"))
    assert audit.permissions == PermissionProfile(mode="read_only", shell_command="deny")
    assert audit.security.deny == ["shell_command"]
