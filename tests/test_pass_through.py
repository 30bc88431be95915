"""Templates that only print one name (``{{ content }}``) are not run: their output is
the value between their fixed text. These tests hold that output to what jinja2 renders
for the same template, and check which templates qualify."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.sandbox import render_parts
from pioneer.compile.templates import build_environment, pass_through

#: The same output as the built-in ``content.md.j2`` from a template that is run: the
#: block tag makes it more than a print (trim_blocks drops the newline after it).
RUN_FOLDER = tempfile.TemporaryDirectory(prefix="pioneer-run-")
(Path(RUN_FOLDER.name) / "content.md.j2").write_text(
    "{% if true %}{{ content }}{% endif %}\n", encoding="utf-8")
PASSED = PromptCompiler()
RUN = PromptCompiler(template_path=[Path(RUN_FOLDER.name)])

text = st.text(st.characters(codec="utf-8"), max_size=200)


def contribution(ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"id": st.sampled_from(ids), "content": text},
                                 optional={"title": text})


fields = st.fixed_dictionaries(
    {},
    optional={
        "dynamic_context": text,
        "retry_instruction": text,
        "extra_system": text,
        "skills_prompt": text,
        "runtime_sections": st.lists(
            contribution(["thread_context", "memory_recall", "custom.y"]), max_size=4),
        "dynamic_sections": st.lists(contribution(["hook.x", "hook.z"]), max_size=3),
    },
)


def _texts(compiler: PromptCompiler, root: Path, values: dict[str, Any]) -> list[tuple[str, str]]:
    payload = compiler.compile(PromptCompileInput.model_validate(
        {"workspace_root": root, "profile": "full", **values}))
    return [(section.id, section.text) for section in payload.sections]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=fields)
def test_a_passed_through_section_is_the_text_jinja2_renders(values: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as root:
        assert _texts(PASSED, Path(root), values) == _texts(RUN, Path(root), values)
    # Both sides did what their names say: one passed the template through, one ran it.
    assert "content.md.j2" in PASSED.templates.pass_through
    assert "content.md.j2" not in RUN.templates.pass_through


@pytest.mark.parametrize(("source", "pieces"), [
    ("{{ content }}", ("", "content", "")),
    ("{{ content }}\n", ("", "content", "\n")),
    ("Note: {{ body }} (end)\n", ("Note: ", "body", " (end)\n")),
    ("{# a comment #}{{ content }}", ("", "content", "")),
])
def test_a_template_that_prints_one_name_passes_it_through(
    source: str, pieces: tuple[str, str, str]
) -> None:
    env = build_environment([])
    assert pass_through(env.parse(source)) == pieces
    # What jinja2 renders for it is those pieces around the value.
    value = " a value\r\n with {{ braces }} and \u00e9 "
    rendered = render_parts(env.from_string(source), {pieces[1]: value})
    assert "".join(rendered) == pieces[0] + value + pieces[2]


@pytest.mark.parametrize("source", [
    "{{ content|upper }}",
    "{{ content.strip() }}",
    "{{ content ~ '!' }}",
    "{{ content }}{{ content }}",
    "{{ self }}",
    "{{ 'text' }}",
    "{% if content %}{{ content }}{% endif %}",
    "{% set content = 'x' %}{{ content }}",
    "{% include 'other.md.j2' %}",
    "plain text",
    "",
])
def test_anything_more_than_one_printed_name_is_run(source: str) -> None:
    env = build_environment([])
    assert pass_through(env.parse(source)) is None


def test_a_value_that_is_not_a_string_is_rendered_by_jinja2(tmp_path: Path) -> None:
    """A section whose input is a flag goes through the template, which prints it."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "flag.toml").write_text(
        'name = "flag"\n\n[[sections]]\nid = "hint"\ntitle = "Hint"\n'
        'stability = "dynamic"\ntemplate = "content.md.j2"\nsource = "input"\n'
        'field = "continue_generation_hint"\n', encoding="utf-8")
    compiler = PromptCompiler(profile_path=[profiles])
    payload = compiler.compile(PromptCompileInput.model_validate(
        {"workspace_root": tmp_path, "profile": "flag", "continue_generation_hint": True}))
    assert payload.dynamic_system_text == "## Hint\nTrue"
    assert "content.md.j2" in compiler.templates.pass_through
