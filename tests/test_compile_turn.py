"""compile_turn: hooks, built-in sections and the compiler together, as a library user sees it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from doc_pages import example
from support import compile_round

from pioneer import HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.history.artifacts import ArtifactRef, render_message
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext, TurnContext
from pioneer.sections import (
    DEFAULT_TOOL_DOMAINS,
    MemoryItem,
    MemoryRecall,
    PermissionProfile,
    ThreadSnippet,
    render_memory_recall,
    thread_context_contribution,
)
from pioneer.sections.agents_md import agents_md_subscription

GOLDENS = Path(__file__).parent / "goldens" / "turn"
REPORT = ArtifactRef("art-1", "report.pdf", "document", version_id="v1", size_bytes=2_500_000)



@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A relative workspace (paths in goldens stay portable) with a root AGENTS.md."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "SOUL.md").write_text("Curious and calm.\n", encoding="utf-8")
    root = Path("workspace")
    (root / "app").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Prefer small commits.\n", encoding="utf-8")
    return root


def _registry(root: Path, *, refs: bool = True) -> HookRegistry:
    registry = HookRegistry()
    registry.add(agents_md_subscription(root))

    @registry.hook("acme.memory", phase="turn.pre_prompt_context", deadline_ms=30_000,
                   failure="best_effort")
    def memory(context: HookContext) -> PromptSectionContribution | None:
        text = render_memory_recall(MemoryRecall(
            policy="read_only", tools=["memory_search"],
            recalled=[MemoryItem("user:7", "preference", "Likes tables.")],
        ), context.env)
        return text and PromptSectionContribution(
            contribution_id="acme.memory.recall", section_id="memory_recall",
            domain="memory", priority=500, content=text,
            source_refs=[{"kind": "memory", "id": "m-1"}],  # type: ignore[list-item]
        )

    @registry.hook("acme.thread", phase="turn.pre_prompt_context", priority=-10,
                   deadline_ms=30_000, failure="best_effort")
    def thread(context: HookContext) -> object:
        snippet = ThreadSnippet("turn-2", "item-1", "0", "user", "user_visible_thread_item",
                                0.72, "Please use the attached report.",
                                [REPORT] if refs else [], thread_id="t1")
        return thread_context_contribution([snippet], context.env)

    @registry.hook("acme.flaky", phase="turn.post_preflight_prompt_context",
                   failure="best_effort")
    def flaky(context: HookContext) -> None:
        raise ConnectionError("index unavailable")

    return registry


def test_full_turn_golden(workspace: Path, compiler: PromptCompiler,
                          golden: Callable[[Path, str], None]) -> None:
    payload = compile_round(
        compiler, PromptCompileInput(workspace_root=Path("home"), extra_system="Be brief."),
        _registry(workspace), turn=TurnContext(thread_folder="app"),
        permissions=PermissionProfile(mode="workspace_write", network="ask"),
        hidden_tool_domains=DEFAULT_TOOL_DOMAINS,
    )
    golden(GOLDENS / "full-dynamic.txt", payload.dynamic_system_text + "\n")
    manifest = payload.manifest.to_dict()
    record = {key: manifest[key] for key in ("section_ids", "hook_sources", "diagnostics")}
    golden(GOLDENS / "full-record.json", json.dumps(record, indent=2, sort_keys=True) + "\n")
    assert payload.manifest.section_ids[-7:] == [
        "current_permissions", "memory_recall", "thread_context", "artifact_references",
        "request_tools.hidden_domains", "agents_md", "extra_system",
    ]


def test_turn_is_deterministic(workspace: Path, compiler: PromptCompiler) -> None:
    def run() -> str:
        return compile_round(compiler, PromptCompileInput(workspace_root=Path("home")),
                            _registry(workspace), turn=TurnContext(thread_folder="app")).to_json()

    assert run() == run()


@pytest.mark.parametrize(
    ("refs", "history_refs", "shown"),
    [(True, 0, True), (False, 0, False), (False, 2, True)],
    ids=["refs-in-thread-context", "no-refs", "refs-in-history"],
)
def test_artifact_policy_only_when_refs_are_present(workspace: Path, compiler: PromptCompiler,
                                                    refs: bool, history_refs: int,
                                                    shown: bool) -> None:
    history = [render_message("See these.", [ArtifactRef(f"h-{n}", "a.md", "document")], "user")
               or "" for n in range(history_refs)]
    payload = compile_round(compiler, PromptCompileInput(workspace_root=Path("home")),
                           _registry(workspace, refs=refs), history=history)
    assert ("artifact_references" in payload.manifest.section_ids) is shown
    assert ("- artifactId=art-1" in payload.dynamic_system_text) is refs


def test_caller_sections_win_over_built_ins(workspace: Path, compiler: PromptCompiler) -> None:
    given = [RuntimeSectionInput(id="current_permissions", content="Ask before anything."),
             RuntimeSectionInput(id="request_tools.hidden_domains", content="None today.")]
    payload = compile_round(
        compiler, PromptCompileInput(workspace_root=Path("home"), runtime_sections=given),
        permissions=PermissionProfile(mode="read_only"), hidden_tool_domains={"task": ["t"]},
    )
    texts = {s.id: s.text for s in payload.sections}
    assert texts["current_permissions"] == "## Current Permissions\nAsk before anything."
    assert texts["request_tools.hidden_domains"] == "## Hidden Tool Domains\nNone today."


def test_built_in_sections_only_where_the_profile_places_them(workspace: Path,
                                                              compiler: PromptCompiler) -> None:
    payload = compile_round(
        compiler, PromptCompileInput(workspace_root=Path("home"), profile="minimal"),
        permissions=PermissionProfile(mode="read_only"), hidden_tool_domains=DEFAULT_TOOL_DOMAINS,
    )
    # minimal (tool-less chat) places neither, so neither falls into its slot either.
    assert "current_permissions" not in payload.manifest.section_ids
    assert "Hidden Tool Domains" not in payload.full_system_text
    assert "Current Permissions" not in payload.full_system_text
    full = compile_round(
        compiler, PromptCompileInput(workspace_root=Path("home")),
        permissions=PermissionProfile(mode="read_only"), hidden_tool_domains=DEFAULT_TOOL_DOMAINS,
    )
    assert {"current_permissions", "request_tools.hidden_domains"} <= set(
        full.manifest.section_ids)


def test_plain_full_access_adds_no_permissions_section(workspace: Path,
                                                       compiler: PromptCompiler) -> None:
    payload = compile_round(compiler, PromptCompileInput(workspace_root=Path("home")),
                           permissions=PermissionProfile())
    assert "current_permissions" not in payload.manifest.section_ids
    assert payload.manifest.hook_sources == []


def test_without_hooks_it_is_a_plain_compile(workspace: Path, compiler: PromptCompiler) -> None:
    compile_input = PromptCompileInput(workspace_root=Path("home"), dynamic_context="Now.")
    assert compile_round(compiler, compile_input) == compiler.compile(compile_input)


def test_docs_hooks_example_runs_and_prints_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, expected = example("hooks", "hooks-and-sections.md")
    assert expected is not None, "the hooks example says nothing about what it prints"
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/hooks-and-sections.md", "exec"), {})
    assert capsys.readouterr().out == expected
