"""The hook runtime: registration, phases, await and failure policies, manifest records."""

from __future__ import annotations

import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from support import compile_round

from pioneer import HookError, HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.hooks.models import (
    HookDiagnostic,
    PromptContextContribution,
    PromptSectionContribution,
    SourceRef,
)
from pioneer.hooks.registry import PHASES, HookContext, Subscription, TurnContext, canonical_phase

PRE_CONTEXT = "turn.pre_prompt_context"
PRE_COMPILE = "turn.pre_prompt_compile"



@pytest.fixture
def base(home: Path) -> PromptCompileInput:
    return PromptCompileInput(workspace_root=home)


def section(
    content: str, section_id: str = "acme.notes", **extra: Any
) -> PromptSectionContribution:
    return PromptSectionContribution(
        contribution_id=f"{section_id}.c", section_id=section_id, domain="acme", content=content,
        **extra,
    )


def returning(*outputs: Any) -> Any:
    def hook(context: HookContext) -> Any:
        return list(outputs)

    return hook


def test_phases_accept_the_reference_spelling() -> None:
    assert canonical_phase("turn_pre_prompt_compile") == PRE_COMPILE
    assert canonical_phase("runtime_turn_pre_context") == "runtime.turn_pre_context"


def test_unknown_phase_is_a_clear_error() -> None:
    with pytest.raises(HookError) as error:
        HookRegistry().hook("acme", phase="turn.nope")
    assert str(error.value) == f'unknown hook phase "turn.nope" (known: {", ".join(PHASES)})'


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hook_id": " "}, "hook id must not be blank"),
        ({"deadline_ms": 0}, 'hook "acme": deadline_ms must be > 0 (got 0)'),
        ({"failure": "sometimes"},
         "hook \"acme\": failure must be \"fail_closed\" or \"best_effort\" (got 'sometimes')"),
    ],
)
def test_bad_subscription_is_refused(kwargs: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"hook_id": "acme", "phase": PRE_CONTEXT, "function": returning()}
    with pytest.raises(HookError) as error:
        Subscription(**{**fields, **kwargs})
    assert str(error.value) == message


def test_duplicate_subscription_id_is_refused() -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(returning())
    with pytest.raises(HookError) as error:
        registry.hook("acme", phase=PRE_CONTEXT)(returning())
    assert str(error.value) == (
        'subscription id "acme.turn.pre_prompt_context" is already registered'
    )


def test_higher_priority_runs_first_ties_keep_registration_order() -> None:
    registry = HookRegistry()
    for name, priority in [("low", -10), ("first", 5), ("second", 5), ("top", 100)]:
        registry.hook(name, phase=PRE_CONTEXT, priority=priority)(returning())
    registry.hook("elsewhere", phase=PRE_COMPILE, priority=1000)(returning())
    order = [s.hook_id for s in registry.subscriptions(PRE_CONTEXT)]
    assert order == ["top", "first", "second", "low"]


def test_section_contribution_reaches_its_section(compiler: PromptCompiler,
                                                  base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(returning(section("Remember the milk.",
                                                               "memory_recall")))
    payload = compile_round(compiler, base, registry)
    assert "## Memory Recall\nRemember the milk." in payload.dynamic_system_text
    (entry,) = payload.manifest.hook_sources
    assert (entry.section_id, entry.contribution_kind, entry.truncation) == (
        "memory_recall", "prompt_section", "none"
    )


def test_context_contribution_goes_to_its_domain(compiler: PromptCompiler,
                                                 base: PromptCompileInput) -> None:
    registry = HookRegistry()
    recall = PromptContextContribution(
        contribution_id="recall", domain="thread_context", content="- earlier: hello",
        source_refs=[SourceRef(kind="thread_episodic", id="thread:t/i/c")],
    )
    registry.hook("acme", phase=PRE_CONTEXT)(returning(recall))
    payload = compile_round(compiler, base, registry)
    assert "## Thread Context\n- earlier: hello" in payload.dynamic_system_text
    (entry,) = payload.manifest.hook_sources
    assert (entry.contribution_kind, entry.source_count) == ("thread_context", 1)


def test_higher_priority_contribution_gets_pool_room_first(compiler: PromptCompiler,
                                                           base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(returning(
        section("low", "acme.low", priority=1), section("high", "acme.high", priority=9),
    ))
    payload = compile_round(compiler, base, registry)
    assert payload.manifest.section_ids[-2:] == ["acme.high", "acme.low"]


def test_later_phases_see_earlier_contributions(compiler: PromptCompiler,
                                                base: PromptCompileInput) -> None:
    registry = HookRegistry()
    seen: list[str] = []
    registry.hook("first", phase=PRE_CONTEXT)(returning(section("one", "acme.one")))

    @registry.hook("second", phase=PRE_COMPILE)
    def second(context: HookContext) -> None:
        seen.extend(c.output.contribution_id for c in context.earlier)

    compile_round(compiler, base, registry)
    assert seen == ["acme.one.c"]


def test_hook_diagnostics_follow_the_compiler_diagnostics(compiler: PromptCompiler,
                                                          base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(returning(
        HookDiagnostic(message="index is stale"),
        section("x", "acme.notes", diagnostics=["3 notes skipped"]),
    ))
    payload = compile_round(compiler, base, registry)
    tail = [(d.code, d.message, d.section_id, d.hook_source)
            for d in payload.manifest.diagnostics[-2:]]
    assert tail == [
        ("hook_diagnostic", "hook `acme`: index is stale", None, "acme"),
        ("hook_diagnostic", "hook `acme`: 3 notes skipped", "acme.notes", "acme"),
    ]
    assert payload.manifest.diagnostics[0].code == "missing_file"
    kinds = [e.contribution_kind for e in payload.manifest.hook_sources]
    assert kinds == ["prompt_manifest_diagnostic", "prompt_section"]


@pytest.mark.parametrize(
    ("contribution", "profile", "truncation"),
    [
        (section("a" * 20, max_chars=10), "full", "hook"),
        (section("a" * 20, truncated=True), "full", "hook"),
        (section("a" * 9000), "full", "prompt"),
        (section("a" * 9000, truncated=True), "full", "hook_and_prompt"),
        (section("kept nowhere"), "none", "prompt"),
        (section("   "), "full", "none"),
    ],
    ids=["hook-max-chars", "hook-flag", "pool-cap", "both", "section-missing", "blank"],
)
def test_truncation_state(compiler: PromptCompiler, home: Path,
                          contribution: PromptSectionContribution, profile: str,
                          truncation: str) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(returning(contribution))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home, profile=profile),
                           registry)
    (entry,) = payload.manifest.hook_sources
    assert entry.truncation == truncation


def test_hook_side_cut_is_applied_before_the_compiler(compiler: PromptCompiler,
                                                      base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(returning(section("0123456789abc", max_chars=10)))
    payload = compile_round(compiler, base, registry)
    assert payload.dynamic_system_text.endswith("## Dynamic: acme.notes\n0123456789")


def test_best_effort_hook_that_raises_lets_the_turn_go_on(compiler: PromptCompiler,
                                                          base: PromptCompileInput) -> None:
    registry = HookRegistry()

    @registry.hook("acme.db", phase=PRE_CONTEXT, failure="best_effort")
    def broken(context: HookContext) -> None:
        raise RuntimeError("database is down")

    registry.hook("acme.ok", phase=PRE_CONTEXT, priority=-1)(returning(section("fine")))
    payload = compile_round(compiler, base, registry)
    assert "## Dynamic: acme.notes\nfine" in payload.dynamic_system_text
    failure = payload.manifest.diagnostics[-1]
    assert (failure.code, failure.message, failure.hook_source) == (
        "hook_best_effort_failed",
        "hook `acme.db` at turn.pre_prompt_context failed: RuntimeError: database is down; "
        "the turn went on without it",
        "acme.db",
    )
    first = payload.manifest.hook_sources[0]
    assert (first.source.hook_id, first.contribution_kind) == ("acme.db", "runtime_failure")


def test_best_effort_hook_that_overruns_is_abandoned(compiler: PromptCompiler,
                                                     base: PromptCompileInput) -> None:
    release = threading.Event()
    registry = HookRegistry()

    @registry.hook("acme.slow", phase=PRE_CONTEXT, deadline_ms=50, failure="best_effort")
    def stuck(context: HookContext) -> PromptSectionContribution:
        release.wait(timeout=60)  # without an enforced deadline the turn would wait here
        return section("too late")

    registry.hook("acme.ok", phase=PRE_COMPILE)(returning(section("on time", "acme.ok")))
    try:
        payload = compile_round(compiler, base, registry)
        assert not release.is_set()  # the turn finished while the hook was still stuck
    finally:
        release.set()
    assert "too late" not in payload.full_system_text
    assert "## Dynamic: acme.ok\non time" in payload.dynamic_system_text
    assert payload.manifest.diagnostics[-1].message == (
        "hook `acme.slow` at turn.pre_prompt_context missed its 50 ms deadline; "
        "the turn went on without it"
    )


def test_deadline_hooks_of_a_phase_run_side_by_side(compiler: PromptCompiler,
                                                    base: PromptCompileInput) -> None:
    # Each hook waits for the other to start: run one after the other, both would miss.
    started = [threading.Event(), threading.Event()]
    registry = HookRegistry()
    for index in (0, 1):
        def hook(context: HookContext, index: int = index) -> PromptSectionContribution:
            started[index].set()
            assert started[1 - index].wait(timeout=30)
            return section(f"hook {index}", f"acme.h{index}")

        registry.hook(f"acme.h{index}", phase=PRE_CONTEXT, deadline_ms=30_000,
                      failure="best_effort")(hook)
    payload = compile_round(compiler, base, registry)
    assert payload.manifest.section_ids[-2:] == ["acme.h0", "acme.h1"]


def test_deadline_hook_that_finishes_in_time_contributes(compiler: PromptCompiler,
                                                         base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT, deadline_ms=30_000)(returning(section("quick")))
    payload = compile_round(compiler, base, registry)
    assert "## Dynamic: acme.notes\nquick" in payload.dynamic_system_text


def test_fail_closed_hook_that_raises_stops_the_turn(compiler: PromptCompiler,
                                                     base: PromptCompileInput) -> None:
    registry = HookRegistry()

    @registry.hook("acme.db", phase=PRE_CONTEXT)
    def broken(context: HookContext) -> None:
        raise RuntimeError("database is down")

    with pytest.raises(HookError) as error:
        compile_round(compiler, base, registry)
    assert str(error.value) == (
        "turn.pre_prompt_context → acme.db.turn.pre_prompt_context: hook \"acme.db\" failed: "
        "RuntimeError: database is down (fail-closed, the turn stops)"
    )


def test_fail_closed_hook_that_overruns_stops_the_turn(compiler: PromptCompiler,
                                                       base: PromptCompileInput) -> None:
    release = threading.Event()
    registry = HookRegistry()
    registry.hook("acme.slow", phase=PRE_COMPILE, deadline_ms=20)(lambda c: release.wait(60))
    try:
        with pytest.raises(HookError) as error:
            compile_round(compiler, base, registry)
    finally:
        release.set()
    assert str(error.value) == (
        "turn.pre_prompt_compile → acme.slow.turn.pre_prompt_compile: hook \"acme.slow\" "
        "missed its 20 ms deadline (fail-closed, the turn stops)"
    )


@pytest.mark.parametrize(
    ("result", "detail"),
    [
        ("plain text", "TypeError: hook returned str; expected PromptSectionContribution, "
                       "PromptContextContribution or HookDiagnostic"),
        ([{"content": "x"}], "TypeError: hook returned dict; expected "
                             "PromptSectionContribution, PromptContextContribution or "
                             "HookDiagnostic"),
    ],
)
def test_wrong_return_type_is_a_hook_failure(compiler: PromptCompiler, base: PromptCompileInput,
                                             result: Any, detail: str) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT, failure="best_effort")(lambda c: result)
    payload = compile_round(compiler, base, registry)
    assert payload.manifest.diagnostics[-1].message == (
        f"hook `acme` at turn.pre_prompt_context failed: {detail}; the turn went on without it"
    )


def test_invalid_section_id_is_a_hook_failure(compiler: PromptCompiler,
                                              base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase=PRE_CONTEXT)(lambda c: section("x", "identity_base"))
    with pytest.raises(HookError) as error:
        compile_round(compiler, base, registry)
    assert "'identity_base' is a built-in section id and cannot be used as a dynamic id" in str(
        error.value
    )


def test_contributions_outside_prompt_phases_are_ignored(compiler: PromptCompiler,
                                                         base: PromptCompileInput) -> None:
    registry = HookRegistry()
    registry.hook("acme", phase="turn.pre_compaction")(returning(section("ignored")))
    outcome = registry.run_phase("turn.pre_compaction", turn=TurnContext(), compile_input=base,
                                 env=compiler.templates.env)
    assert outcome.contributions == ()
    assert [d.message for d in outcome.diagnostics] == [
        "hook `acme`: contribution `acme.notes.c` ignored: turn.pre_compaction does not feed "
        "the prompt"
    ]


def _install_distribution(root: Path, module: str, entry_points: str, source: str) -> None:
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[pioneer.hooks]\n{entry_points}\n")


def test_entry_points_register_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     compiler: PromptCompiler, base: PromptCompileInput) -> None:
    _install_distribution(tmp_path, "acme_hooks_ok", "acme = acme_hooks_ok:register", """
        from pioneer.hooks.models import PromptSectionContribution

        def register(registry):
            @registry.hook("acme.plugin", phase="turn.pre_prompt_context")
            def plugin(context):
                return PromptSectionContribution(
                    contribution_id="p", section_id="acme.plugin", domain="acme",
                    content="from a plugin",
                )
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = HookRegistry()
    assert registry.load_entry_points() == ["acme"]
    payload = compile_round(compiler, base, registry)
    assert "## Dynamic: acme.plugin\nfrom a plugin" in payload.dynamic_system_text
    monkeypatch.delitem(sys.modules, "acme_hooks_ok")


def test_broken_entry_point_is_a_clear_error(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _install_distribution(tmp_path, "acme_hooks_bad", "bad = acme_hooks_bad:missing", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HookError) as error:
        HookRegistry().load_entry_points()
    assert str(error.value) == (
        "pioneer.hooks → entry point bad = acme_hooks_bad:missing: cannot register hooks: "
        "AttributeError: module 'acme_hooks_bad' has no attribute 'missing'"
    )
    monkeypatch.delitem(sys.modules, "acme_hooks_bad")
