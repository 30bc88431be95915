"""Where the artifact ref count comes from, and when the sections that read it render.

Each contribution or input section counts the ref lines it carries when it is rendered;
a section whose template or condition reads ``artifact_ref_count`` is rendered after the
other dynamic sections, with their total, and still takes its declared place, with its
omission in declared order. A stable section that reads the count gets the texts
searched first. A long-lived compiler gives what a fresh one gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import RuntimeSectionInput

REF = "- artifactId=a1 versionId=v1 name=\"q3.xlsx\" kind=spreadsheet."

PROFILE = """\
name = "refs"
description = "A section that prints the ref count, declared before what it counts."

[[contributions]]
id = "thread_context"
title = "Thread Context"

[[sections]]
id = "ref_total"
title = "Ref Total"
stability = "{stability}"
template = "ref_total.md.j2"
{when}
[[sections]]
id = "thread_context"
title = "Thread Context"
stability = "dynamic"
template = "content.md.j2"
source = "contribution"

[[sections]]
id = "dynamic_context"
title = "Dynamic Context"
stability = "dynamic"
template = "content.md.j2"
source = "input"
field = "dynamic_context"

[[sections]]
id = "tail"
title = "Tail"
stability = "dynamic"
template = "content.md.j2"
source = "input"
field = "extra_system"
"""


def _compiler(root: Path, *, stability: str = "dynamic", when: str = "") -> PromptCompiler:
    profiles, templates = root / "profiles", root / "templates"
    profiles.mkdir(exist_ok=True)
    templates.mkdir(exist_ok=True)
    (profiles / "refs.toml").write_text(PROFILE.format(stability=stability, when=when))
    (templates / "ref_total.md.j2").write_text("refs: {{ artifact_ref_count }}\n")
    return PromptCompiler(profile_path=[profiles], template_path=[templates])


def _input(root: Path, thread: str, context: str | None = None,
           extra: str | None = None) -> PromptCompileInput:
    return PromptCompileInput(
        workspace_root=root, profile="refs", dynamic_context=context, extra_system=extra,
        runtime_sections=[RuntimeSectionInput(id="thread_context", content=thread)])


def test_a_section_reading_the_count_sees_every_ref_and_keeps_its_place(
        tmp_path: Path) -> None:
    compiler = _compiler(tmp_path)
    payload = compiler.compile(_input(tmp_path, f"Earlier:\n{REF}\n  {REF}", REF, "no refs"))
    assert [s.id for s in payload.sections] == [
        "ref_total", "thread_context", "dynamic_context", "tail"]
    assert payload.sections[0].text == "## Ref Total\nrefs: 3"
    history = compiler.compile(_input(tmp_path, "none"), history=[REF, "plain", REF])
    assert history.sections[0].text == "## Ref Total\nrefs: 2"


def test_an_input_no_section_shows_carries_no_ref(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path)
    payload = compiler.compile(PromptCompileInput(
        workspace_root=tmp_path, profile="refs", retry_instruction=REF,
        runtime_sections=[RuntimeSectionInput(id="thread_context", content="plain")]))
    assert payload.sections[0].text == "## Ref Total\nrefs: 0"
    assert payload.manifest.ignored_inputs == ["retry_instruction"]


def test_a_left_out_reader_is_recorded_in_declared_order(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, when='when = "artifact_ref_count > 1"\n')
    payload = compiler.compile(_input(tmp_path, REF))
    assert [s.id for s in payload.sections] == ["thread_context"]
    assert [(o.id, o.reason) for o in payload.manifest.omitted] == [
        ("ref_total", "condition_false"), ("dynamic_context", "input_empty"),
        ("tail", "input_empty")]
    shown = compiler.compile(_input(tmp_path, REF, REF))
    assert [s.id for s in shown.sections] == ["ref_total", "thread_context", "dynamic_context"]
    assert shown.sections[0].text == "## Ref Total\nrefs: 2"


def test_a_stable_reader_gets_the_texts_searched_first(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, stability="stable")
    payload = compiler.compile(_input(tmp_path, f"{REF}\n{REF}", REF))
    assert payload.stable_system_text == "## Ref Total\nrefs: 3"


TEXT = st.sampled_from(["plain", REF, f"x\n{REF}", f"{REF}\n\n  {REF}", "- artifactId", ""])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT | st.none(), TEXT | st.none(), st.booleans()),
                min_size=1, max_size=6))
def test_a_long_lived_compiler_counts_as_a_fresh_one(tmp_path_factory: pytest.TempPathFactory,
                                                     turns: list[tuple[str, str | None,
                                                                       str | None, bool]]
                                                     ) -> None:
    root = tmp_path_factory.mktemp("refs")
    long_lived = _compiler(root)
    for thread, context, extra, with_history in turns:
        item = _input(root, thread or "none", context, extra)
        history = [REF] if with_history else None
        assert (long_lived.compile(item, history=history)
                == _compiler(root).compile(item, history=history))
