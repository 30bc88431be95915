"""What the interpreter records: why each section was left out, where each contribution
went, which inputs the profile ignores, and when the Artifact References policy appears."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support import compile_round

from pioneer import HookRegistry, InputError, PromptCompileInput, PromptCompiler
from pioneer.cli import main
from pioneer.compile.compiler import compile_prompt
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.history.artifacts import ArtifactRef, ref_line, render_message
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext
from pioneer.review.inspect import inspect_prompt, render_table

REF = ArtifactRef("art-9", "plan.md", "document", version_id="v2", size_bytes=2048)


def _omitted(compiler: PromptCompiler, **fields: object) -> dict[str, tuple[str, str]]:
    payload = compiler.compile(PromptCompileInput.model_validate(fields))
    return {o.id: (o.reason, o.detail) for o in payload.manifest.omitted}


def test_each_declared_section_left_out_says_why(tmp_path: Path, compiler: PromptCompiler) -> None:
    (tmp_path / "SOUL.md").write_text("Calm.\n", encoding="utf-8")
    (tmp_path / "USER.md").write_text("  \n", encoding="utf-8")
    omitted = _omitted(compiler, workspace_root=tmp_path)
    assert omitted["identity_core"] == ("file_missing", "IDENTITY.md is missing")
    assert omitted["user_persona"] == ("file_empty", "USER.md is empty")
    assert omitted["tool_recovery_policy"] == (
        "condition_false", 'condition "include_tool_recovery_policy" is false')
    assert omitted["memory_recall"] == ("no_contribution", "no contribution with this id")
    assert omitted["contributions"] == ("no_contribution", "no other contributions")
    assert omitted["retry_runtime_instruction"] == (
        "input_empty", "input retry_instruction is empty")
    assert "soul_core" not in omitted and "identity_base" not in omitted


def test_budget_omissions_name_the_pool_and_the_input_position(
    tmp_path: Path, compiler: PromptCompiler
) -> None:
    payload = compiler.compile(PromptCompileInput(
        workspace_root=tmp_path, limits={"max_chars_total": 0},  # type: ignore[arg-type]
        runtime_sections=[RuntimeSectionInput(id=f"r{n}", content="x" * 8000) for n in range(4)],
    ))
    records = {(o.id, o.pool, o.index): (o.reason, o.detail) for o in payload.manifest.omitted}
    assert records[("r3", "runtime", 3)] == ("budget", "dynamic section budget was exhausted")
    placements = [(p.id, p.section, p.chars, p.cut) for p in payload.manifest.placements]
    assert placements == [("r0", "contributions", 8000, False),
                          ("r1", "contributions", 8000, False),
                          ("r2", "contributions", 8000, False),
                          ("r3", None, 0, True)]


def test_minimal_refuses_tool_and_skills_contributions(tmp_path: Path,
                                                       compiler: PromptCompiler) -> None:
    payload = compiler.compile(PromptCompileInput(
        workspace_root=tmp_path, profile="minimal",
        runtime_sections=[
            RuntimeSectionInput(id="request_tools.hidden_domains", content="- task: task_list."),
            RuntimeSectionInput(id="selected_skills", content="- weather"),
            RuntimeSectionInput(id="acme.note", content="Kept."),
        ],
    ))
    assert payload.manifest.section_ids[-1] == "acme.note"
    assert "task_list" not in payload.dynamic_system_text
    assert "weather" not in payload.dynamic_system_text
    messages = [d.message for d in payload.manifest.diagnostics
                if d.code == "dynamic_section_omitted"]
    assert messages == [
        "dynamic prompt section `selected_skills` omitted: refused by section `contributions` "
        "of profile `minimal`",
        "dynamic prompt section `request_tools.hidden_domains` omitted: refused by section "
        "`contributions` of profile `minimal`",
    ]
    refused = {o.id: o.reason for o in payload.manifest.omitted if o.pool}
    assert refused == {"selected_skills": "refused", "request_tools.hidden_domains": "refused"}


def test_minimal_reports_the_inputs_it_ignores(tmp_path: Path, compiler: PromptCompiler) -> None:
    given = PromptCompileInput(
        workspace_root=tmp_path, profile="minimal", skills_prompt="[Skills]", artifact_ref_count=2,
        retry_instruction="Try again.", include_tool_recovery_policy=True,
        dynamic_context="Kept: minimal reads it.", extra_system="  ",
    )
    payload = compiler.compile(given)
    assert payload.manifest.ignored_inputs == [
        "artifact_ref_count", "include_tool_recovery_policy", "retry_instruction", "skills_prompt",
    ]
    assert [d.message for d in payload.manifest.diagnostics if d.code == "input_ignored"] == [
        "input `artifact_ref_count` is ignored: the Artifact References policy follows the "
        "refs the prompt carries; pass the history messages sent with it as history=",
        "input `include_tool_recovery_policy` is ignored: no section of profile `minimal` reads it",
        "input `retry_instruction` is ignored: no section of profile `minimal` reads it",
        "input `skills_prompt` is ignored: no section of profile `minimal` reads it",
    ]
    table = render_table(inspect_prompt(compiler, given))
    assert table.splitlines()[-4:] == [
        "ignored  input artifact_ref_count: the Artifact References policy follows the refs "
        "the prompt carries; pass the history messages sent with it as history=",
        *(f"ignored  input {name}: no section of profile minimal reads it"
          for name in ("include_tool_recovery_policy", "retry_instruction", "skills_prompt")),
    ]
    assert compiler.compile(PromptCompileInput(
        workspace_root=tmp_path, skills_prompt="[Skills]")).manifest.ignored_inputs == []


def test_inspect_json_lists_ignored_inputs(tmp_path: Path) -> None:
    source = tmp_path / "input.json"
    source.write_text(json.dumps({"workspace_root": str(tmp_path), "profile": "minimal",
                                  "skills_prompt": "[Skills]"}), encoding="utf-8")
    out = io.StringIO()
    assert main(["inspect", "--input", str(source), "--json"], stdout=out) == 0
    assert json.loads(out.getvalue())["ignored_inputs"] == ["skills_prompt"]


def test_a_profile_without_a_slot_reports_what_it_cannot_place(
    tmp_path: Path, compiler: PromptCompiler
) -> None:
    payload = compiler.compile(PromptCompileInput(
        workspace_root=tmp_path, profile="none",
        runtime_sections=[RuntimeSectionInput(id="acme.note", content="Nowhere to go.")],
    ))
    assert [(o.id, o.reason, o.detail) for o in payload.manifest.omitted] == [
        ("acme.note", "unplaced", "no section of profile `none` places this id")]
    assert payload.manifest.diagnostics[-1].message == (
        "dynamic prompt section `acme.note` omitted: no section of profile `none` places this id")


def test_refuse_only_applies_to_a_slot(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "odd.toml").write_text(
        'name = "odd"\n[[sections]]\nid = "identity_base"\ntitle = "Identity"\n'
        'stability = "stable"\ntemplate = "identity_base.md.j2"\nrefuse = ["x"]\n',
        encoding="utf-8",
    )
    errors = PromptCompiler(profile_path=[profiles]).check(["odd"])
    assert [str(error) for error in errors] == [
        f'{profiles / "odd.toml"}:7: sections[0] (id "identity_base") → refuse: key "refuse" only '
        f'applies to source "slot"\nerror: 1 problem in {profiles / "odd.toml"}'
    ]


# -- where a hook contribution went, read from the manifest ------------------------------


def _hooks(*contents: str) -> HookRegistry:
    registry = HookRegistry()
    for number, content in enumerate(contents):
        @registry.hook(f"acme.h{number}", phase="turn.pre_prompt_compile")
        def contribute(context: HookContext, content: str = content,
                       number: int = number) -> PromptSectionContribution:
            return PromptSectionContribution(
                contribution_id=f"c{number}", section_id="acme.shared", domain="acme",
                priority=number, content=content)
    return registry


def test_truncation_comes_from_the_placement_not_the_text(tmp_path: Path,
                                                          compiler: PromptCompiler) -> None:
    # Two hook contributions to one id; the higher priority one fills the runtime pool,
    # so the other is left out. Its whole text is inside the kept one's section, so a
    # search of the output text would call it complete.
    fillers = [RuntimeSectionInput(id=f"acme.filler{n}", content="f" * size)
               for n, size in enumerate((8000, 8000, 6000))]
    payload = compile_round(
        compiler, PromptCompileInput(workspace_root=tmp_path, runtime_sections=fillers),
        _hooks("a" * 1000, "a" * 1000 + "b" * 1000),
    )
    by_id = {entry.source.contribution_id: entry.truncation
             for entry in payload.manifest.hook_sources}
    assert by_id == {"c0": "prompt", "c1": "none"}
    assert [(p.id, p.index, p.section, p.chars, p.cut)
            for p in payload.manifest.placements][3:] == [
        ("acme.shared", 3, "contributions", 2000, False),
        ("acme.shared", 4, None, 0, True),
    ]


def test_a_placed_contribution_is_not_cut(tmp_path: Path, compiler: PromptCompiler) -> None:
    payload = compile_round(compiler, PromptCompileInput(workspace_root=tmp_path),
                           _hooks("Short.\r\nTwo lines."))
    assert [e.truncation for e in payload.manifest.hook_sources] == ["none"]


# -- the Artifact References policy follows the refs the request carries ----------------


def test_policy_appears_for_refs_in_a_runtime_contribution(tmp_path: Path,
                                                           compiler: PromptCompiler) -> None:
    thread = RuntimeSectionInput(id="thread_context", content="Earlier:\n" + ref_line(REF))
    payload = compiler.compile(PromptCompileInput(workspace_root=tmp_path,
                                                  runtime_sections=[thread]))
    assert "artifact_references" in payload.manifest.section_ids


@pytest.mark.parametrize(("history", "shown"), [
    (["Plain question.", "Plain answer."], False),
    ([render_message("See the plan.", [REF], "user") or ""], True),
], ids=["stale-count-no-refs", "one-ref-in-history"])
def test_policy_follows_the_history_sent(tmp_path: Path, compiler: PromptCompiler,
                                         history: list[str], shown: bool) -> None:
    # A stale caller count does not decide it once the history is given.
    payload = compile_round(compiler, PromptCompileInput(workspace_root=tmp_path,
                                                        artifact_ref_count=3), history=history)
    assert ("artifact_references" in payload.manifest.section_ids) is shown


#: The two inputs of the compiler: a bare compile input, and a round's whole input
#: (hooks, then the compile).
PATHS = {
    "compile": lambda compiler, given, history: compiler.compile(given, history=history),
    "round": lambda compiler, given, history: compile_round(compiler, given,
                                                           history=history),
}
#: A history message the budgeter sends: the user's text and its artifact ref block.
WITH_REF = render_message("See the plan.", [REF], "user") or ""


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize(
    ("fields", "history", "shown"),
    [
        ({"runtime_sections": [RuntimeSectionInput(
            id="thread_context", content="Earlier:\n" + ref_line(REF))]}, None, True),
        ({"artifact_ref_count": 3}, None, False),
        ({"artifact_ref_count": 3}, ["Plain question.", "Plain answer."], False),
        ({}, [WITH_REF], True),
        ({"dynamic_context": "Attached:\n" + ref_line(REF)}, [], True),
        ({}, None, False),
    ],
    ids=["refs-in-thread-context-no-count", "count-without-refs", "count-and-a-plain-history",
         "one-ref-in-history-no-count", "refs-in-an-input-text", "nothing"],
)
def test_the_policy_follows_what_the_request_carries(
    tmp_path: Path, compiler: PromptCompiler, path: str, fields: dict[str, object],
    history: list[str] | None, shown: bool,
) -> None:
    given = PromptCompileInput(workspace_root=tmp_path, **fields)  # type: ignore[arg-type]
    payload = PATHS[path](compiler, given, history)
    assert ("artifact_references" in payload.manifest.section_ids) is shown
    counted = "artifact_ref_count" in fields
    assert ("artifact_ref_count" in payload.manifest.ignored_inputs) is counted
    assert any(d.code == "input_ignored" and "`artifact_ref_count`" in d.message
               for d in payload.manifest.diagnostics) is counted


def test_compile_prompt_takes_the_history_too(tmp_path: Path, compiler: PromptCompiler) -> None:
    given = PromptCompileInput(workspace_root=tmp_path)
    with pytest.warns(DeprecationWarning, match="compile_prompt is deprecated"):
        assert "artifact_references" in compile_prompt(
            given, compiler=compiler, history=[WITH_REF]).manifest.section_ids
    with pytest.warns(DeprecationWarning, match="compile_prompt is deprecated"):
        assert "artifact_references" not in compile_prompt(
            given, compiler=compiler, history=["No refs here."]).manifest.section_ids


def test_a_hook_contribution_with_refs_brings_the_policy(tmp_path: Path,
                                                        compiler: PromptCompiler) -> None:
    registry = HookRegistry()

    @registry.hook("acme.recall", phase="turn.pre_prompt_compile")
    def recall(context: HookContext) -> PromptSectionContribution:
        return PromptSectionContribution(
            contribution_id="r", section_id="thread_context", domain="acme",
            content="Earlier:\n" + ref_line(REF))

    payload = compile_round(compiler, PromptCompileInput(workspace_root=tmp_path), registry)
    assert "artifact_references" in payload.manifest.section_ids


@pytest.mark.parametrize(("text", "shown"), [(WITH_REF, True), ("Plain question.", False)],
                         ids=["ref-in-a-message", "no-ref"])
def test_compile_provider_counts_the_refs_of_the_messages_it_sends(
    tmp_path: Path, text: str, shown: bool
) -> None:
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps([{"role": "user", "content": text}]), encoding="utf-8")
    out = io.StringIO()
    assert main(["compile", "--home", str(tmp_path / "home"), "--provider", "anthropic",
                 "--model", "m", "--messages", str(messages), "-q"], stdout=out) == 0
    assert ("## Artifact References" in out.getvalue()) is shown
    page = tmp_path / "map.html"
    assert main(["inspect", "--home", str(tmp_path / "home"), "--html", str(page),
                 "--messages", str(messages), "--model", "m", "--json"], stdout=out,
                stderr=io.StringIO()) == 0
    assert ("Artifact References" in page.read_text("utf-8")) is shown


@pytest.mark.parametrize(("history", "message"), [
    ("See the plan.", "history: expected the texts of the messages sent (a list of strings), "
                      "got one string: wrap it in a list"),
    (["ok", 3], "history[1]: expected a message text, got int (pass its content)"),
], ids=["one-string", "not-a-text"])
def test_a_history_that_is_not_texts_is_refused(tmp_path: Path, compiler: PromptCompiler,
                                                history: object, message: str) -> None:
    with pytest.raises(InputError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path),
                         history=history)  # type: ignore[arg-type]
    assert [p.render() for p in info.value.problems] == [message]
