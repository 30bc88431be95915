"""One compile per round: the round's whole input in one call, the whole manifest out.

The runner calls ``PromptCompiler.compile`` exactly once per provider round (counted
through the public method of the compiler it was given); the compiler writes the
manifest's ``hook_sources`` and the hooks' diagnostics itself, from a
:class:`RoundInput` that no hook registry made; the deprecated spellings warn and give
the same payload.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jinja2
import pytest

from pioneer import (
    Agent,
    CompiledPromptPayload,
    HookRegistry,
    InputError,
    PromptCompileInput,
    PromptCompiler,
    ensure_runtime_home,
)
from pioneer.compile.manifest import Diagnostic, HookSourceEntry, HookSourceRef
from pioneer.compile.round import HookSection, RoundInput
from pioneer.hooks.models import PromptSectionContribution
from pioneer.sections import CurrentPermissions, HiddenToolDomains, PermissionProfile

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

REF = HookSourceRef(hook_id="acme.notes", subscription_id="acme.notes.turn.pre_prompt_compile",
                    phase="turn.pre_prompt_compile", contribution_id="acme.n1")


class CountingCompiler(PromptCompiler):
    """A compiler that counts the calls of its public ``compile``."""

    calls = 0

    def compile(self, round_input: Any, *, history: Iterable[str] | None = None
                ) -> CompiledPromptPayload:
        self.calls += 1
        return super().compile(round_input, history=history)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    folder = Path("home")
    ensure_runtime_home(folder)
    return folder


def test_a_round_calls_the_compiler_exactly_once(home: Path) -> None:
    compiler = CountingCompiler()
    rounds = 0
    with Agent("pioneer.db", provider="anthropic", model=agent_loop.MODELS["anthropic"],
               compiler=compiler, hooks=agent_loop.hooks(), tools=[agent_loop.READ_FILE],
               compile_input={"workspace_root": home}, runtime_facts=False) as agent:
        for number in range(3):
            turn = agent.turn("t1", f"Question {number}?", turn_id=f"turn-{number}")
            for calls in agent_loop.script(number):
                before = compiler.calls
                turn.next_body()
                rounds += 1
                assert compiler.calls == before + 1
                plan = turn.rounds[-1].cache
                step = turn.receive(agent_loop.response(
                    "anthropic", agent_loop.MODELS["anthropic"], "" if calls else "Done.",
                    calls, agent_loop.usage("anthropic", plan, 40)))
                for call in step.runnable:
                    turn.add_tool_result(call.id, agent_loop.run_tool(call))
                if step.done:
                    break
            finished = turn.finish()
            # The record's manifests are the compiler's own, hook sources included.
            assert all(r.manifest.hook_sources for r in finished.record.rounds)
    assert rounds > 3 and compiler.calls == rounds


def test_the_compiler_writes_hook_sources_and_hook_diagnostics(home: Path) -> None:
    compiler = PromptCompiler()
    given = PromptCompileInput(workspace_root=home, profile="full")
    failure = HookSourceEntry(source=REF.model_copy(update={"hook_id": "acme.broken"}),
                              contribution_kind="runtime_failure", truncation="unknown")
    note = Diagnostic(code="hook_diagnostic", message="acme.notes says hello")
    low = HookSection(section_id="hook.low", content="low " * 3000, priority=1, source=REF,
                      kind="prompt_section", title="Low")
    high = HookSection(section_id="hook.high", content="High note.", priority=9,
                       source=REF.model_copy(update={"contribution_id": "acme.n2"}),
                       kind="prompt_context", hook_truncated=True, source_count=2)
    payload = compiler.compile(RoundInput(given, hooks=(low, failure, high),
                                          hook_diagnostics=(note,)))
    sources = payload.manifest.hook_sources
    assert [(e.section_id, e.contribution_kind, e.priority, e.source_count, e.truncation)
            for e in sources] == [
        ("hook.low", "prompt_section", 1, 0, "prompt"),  # the hook pool cut it
        (None, "runtime_failure", None, None, "unknown"),
        ("hook.high", "prompt_context", 9, 2, "hook"),
    ]
    assert sources[2].source.contribution_id == "acme.n2"
    assert payload.manifest.diagnostics[-1] == note
    # Higher priority first: the high note gets pool room before the low one.
    text = payload.dynamic_system_text
    assert text.index("High note.") < text.index("low low")


def test_structured_sections_render_where_the_profile_places_them(home: Path) -> None:
    compiler = PromptCompiler()
    permissions = PermissionProfile(mode="read_only")
    hidden: Mapping[str, list[str]] = {"memory": ["memory_search"]}
    sections = (CurrentPermissions(permissions), HiddenToolDomains(hidden))
    full = compiler.compile(RoundInput(PromptCompileInput(workspace_root=home, profile="full"),
                                       sections=sections))
    assert {"current_permissions", "request_tools.hidden_domains"} <= set(
        full.manifest.section_ids)
    env: jinja2.Environment = compiler.templates.env
    assert sections[1].render(env) in full.dynamic_system_text
    # A profile that places neither gets neither, and no slot takes them.
    bare = compiler.compile(RoundInput(PromptCompileInput(workspace_root=home, profile="none"),
                                       sections=sections))
    assert not {"current_permissions", "request_tools.hidden_domains"} & set(
        bare.manifest.section_ids)
    assert "memory_search" not in bare.full_system_text


def test_a_round_input_carries_its_own_history(home: Path) -> None:
    compiler = PromptCompiler()
    given = PromptCompileInput(workspace_root=home)
    with pytest.raises(InputError, match="carries its own history"):
        compiler.compile(RoundInput(given), history=["text"])
    with pytest.raises(InputError, match="got one string"):
        compiler.compile(given, history="one string")


def test_the_deprecated_spellings_warn_and_give_the_same_payload(home: Path) -> None:
    from pioneer.turn.run import compile_turn, run_hooks

    hooks = HookRegistry()

    @hooks.hook("acme.notes", phase="turn.pre_prompt_compile")
    def notes(context: Any) -> PromptSectionContribution:
        return PromptSectionContribution(contribution_id="acme.n1", section_id="hook.notes",
                                         domain="acme", content="A note.")

    compiler = PromptCompiler()
    given = PromptCompileInput(workspace_root=home, profile="full")
    permissions = PermissionProfile(mode="read_only")
    expected = compiler.compile(hooks.run_hooks(compiler, given).round_input(
        given, sections=[CurrentPermissions(permissions)], history=["Earlier."]))
    with pytest.warns(DeprecationWarning, match="compile_turn is deprecated"):
        old = compile_turn(compiler, given, hooks, permissions=permissions,
                           history=["Earlier."])
    assert old.to_json() == expected.to_json()
    with pytest.warns(DeprecationWarning, match="run_hooks is deprecated"):
        run = run_hooks(compiler, given, hooks)
    assert compiler.compile(run.round_input(given, sections=[CurrentPermissions(
        permissions)], history=["Earlier."])).to_json() == expected.to_json()
    assert [e.section_id for e in expected.manifest.hook_sources] == ["hook.notes"]
