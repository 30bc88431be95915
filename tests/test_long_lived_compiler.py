"""A long-lived compiler: each turn's output is byte-identical to a fresh compiler's, edits
to the identity files between turns are seen, and only files inside the root are read."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler
from pioneer.compile.bootstrap import load_bootstrap

PAST_NS = 1_600_000_000 * 10**9


def _input(root: Path, **fields: Any) -> PromptCompileInput:
    return PromptCompileInput.model_validate({"workspace_root": root, **fields})


def _cold(compile_input: PromptCompileInput, **options: Any) -> str:
    return PromptCompiler(**options).compile(compile_input).to_json()


def _write(path: Path, text: str, stamp_ns: int) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stamp_ns, stamp_ns))


@pytest.fixture
def full_home(home: Path) -> Path:
    _write(home / "SOUL.md", "Calm and direct.", PAST_NS)
    _write(home / "IDENTITY.md", "- Name: Pioneer", PAST_NS)
    _write(home / "USER.md", "Ada, a backend engineer.", PAST_NS)
    return home


TURNS: list[dict[str, Any]] = [
    {"dynamic_context": "turn one"},
    {"dynamic_context": "turn two"},
    {"dynamic_context": "turn two", "include_tool_recovery_policy": True},
    {"dynamic_context": "turn three", "include_tool_recovery_policy": True,
     "runtime_sections": [{"id": "memory_recall", "content": "- prefers tea"}]},
    {"profile": "minimal", "dynamic_context": "turn four"},
    {"dynamic_context": "turn five", "limits": {"max_chars_per_file": 5}},
    {"dynamic_context": "turn five", "limits": {"max_chars_total": 20}},
    {"profile": "none", "extra_system": "be brief"},
    {"dynamic_context": "turn one"},
]


def test_every_turn_matches_a_fresh_compiler(full_home: Path) -> None:
    warm = PromptCompiler()
    for fields in TURNS:
        compile_input = _input(full_home, **fields)
        payload = warm.compile(compile_input)
        assert payload.to_json() == _cold(compile_input), fields
        # Reused records and sections still make a payload that validates as itself.
        assert CompiledPromptPayload.model_validate(payload.model_dump()) == payload


@pytest.mark.parametrize("same_size", [True, False], ids=["same-size", "new-size"])
def test_bootstrap_file_edited_between_turns(
    full_home: Path, same_size: bool
) -> None:
    compiler = PromptCompiler()
    before = compiler.compile(_input(full_home, dynamic_context="one"))
    edit = "Bob, a frontend develop." if same_size else "Bob."
    assert (len(edit) == len("Ada, a backend engineer.")) is same_size
    _write(full_home / "USER.md", edit, PAST_NS + 10**9)
    after = compiler.compile(_input(full_home, dynamic_context="one"))
    assert "Bob" in after.stable_system_text and "Ada" not in after.stable_system_text
    assert after.manifest.fingerprint_stable != before.manifest.fingerprint_stable
    assert after.to_json() == _cold(_input(full_home, dynamic_context="one"))


def test_a_file_appearing_and_disappearing(full_home: Path) -> None:
    compiler = PromptCompiler()
    (full_home / "USER.md").unlink()
    without = compiler.compile(_input(full_home))
    assert "user_persona" not in without.manifest.section_ids
    _write(full_home / "USER.md", "Ada again.", PAST_NS)
    again = compiler.compile(_input(full_home))
    assert "user_persona" in again.manifest.section_ids
    assert again.to_json() == _cold(_input(full_home))


def test_eager_token_counts_match_a_fresh_compiler_and_counting_on_demand(
    full_home: Path,
) -> None:
    eager, lazy = PromptCompiler(count_tokens=True), PromptCompiler()
    for fields in TURNS:
        compile_input = _input(full_home, **fields)
        payload = eager.compile(compile_input)
        assert all(record.tokens is not None for record in payload.manifest.sections)
        assert payload.to_json() == _cold(compile_input, count_tokens=True)
        assert lazy.compile(compile_input).with_token_counts().to_json() == payload.to_json()


@pytest.fixture
def partial_templates(tmp_path: Path) -> Iterator[Path]:
    """A deployment override whose stable section reads a dynamic field through an include."""
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "identity_base.md.j2").write_text(
        "You are Pioneer.\n{% include 'partial.md.j2' %}\n", encoding="utf-8"
    )
    (folder / "partial.md.j2").write_text("Mode: {{ extra_system }}\n", encoding="utf-8")
    yield folder


def test_names_read_through_an_include_reach_the_template(
    full_home: Path, partial_templates: Path
) -> None:
    compiler = PromptCompiler(template_path=[partial_templates])
    assert compiler.templates.names_read("partial.md.j2") == frozenset({"extra_system"})
    for extra in ("alpha", "beta", "alpha"):
        compile_input = _input(full_home, extra_system=extra)
        payload = compiler.compile(compile_input)
        assert f"Mode: {extra}" in payload.stable_system_text
        assert payload.to_json() == _cold(compile_input, template_path=[partial_templates])


def test_a_symlink_repointed_outside_the_root_is_seen(
    full_home: Path, tmp_path: Path
) -> None:
    # The outside name is a hard link to the inside file: following the symlink finds
    # the very same file (same inode, times and size) both times.
    inside, outside = full_home / "user-v1.md", tmp_path / "outside.md"
    _write(inside, "Ada inside.", PAST_NS)
    os.link(inside, outside)
    (full_home / "USER.md").unlink()
    (full_home / "USER.md").symlink_to(inside)
    compiler = PromptCompiler()
    assert "Ada inside." in compiler.compile(_input(full_home)).stable_system_text
    (full_home / "USER.md").unlink()
    (full_home / "USER.md").symlink_to(outside)
    payload = compiler.compile(_input(full_home))
    assert "Ada inside." not in payload.stable_system_text
    assert [d.code for d in payload.manifest.diagnostics] == ["file_read_error"]
    assert payload.to_json() == _cold(_input(full_home))


def test_the_render_limit_counts_the_same_input_text(
    full_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pioneer.compile import render as render_module
    from pioneer.compile.sandbox import render_parts, text_size

    seen: list[int] = []

    def checked(
        template: jinja2.Template, context: dict[str, Any], *, given: Callable[[], int]
    ) -> list[str]:
        # The compiler measures lazily (only a render past MAX_OUTPUT needs it), but what it
        # would measure must equal the size of the whole context.
        assert given() == text_size(context.values())
        seen.append(given())
        return render_parts(template, context, given=given)

    # Filters take these templates past what is filled in without the engine.
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "content.md.j2").write_text("{{ content | string }}\n", encoding="utf-8")
    (folder / "bootstrap_file.md.j2").write_text(
        "### {{ file.name }}\n{{ file.content | string }}\n", encoding="utf-8")
    monkeypatch.setattr(render_module, "render_parts", checked)
    PromptCompiler(template_path=[folder]).compile(_input(
        full_home, **TURNS[3], extra_system="x", skills_prompt="y", continue_generation_hint=True,
        dynamic_sections=[{"id": "hook.a", "content": "from a hook"}],
    ))
    assert len(seen) >= 6  # three identity files and at least three inputs


@pytest.mark.parametrize(
    ("name", "target", "readable"),
    [
        ("SOUL.md", "outside", False),  # a symlink out of the root
        ("SOUL.md", "inside", True),  # a symlink within the root
        ("../outside.md", None, False),  # a name that climbs out
        ("SOUL.md", None, True),  # a plain file, no resolving needed
    ],
)
def test_only_files_inside_the_root_are_read(
    tmp_path: Path, name: str, target: str | None, readable: bool
) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    home = tmp_path / "home"
    home.symlink_to(real, target_is_directory=True)  # the root itself may be a link
    (tmp_path / "outside.md").write_text("secret", encoding="utf-8")
    (real / "inside.md").write_text("fine", encoding="utf-8")
    if target == "outside":
        (real / name).symlink_to(tmp_path / "outside.md")
    elif target == "inside":
        (real / name).symlink_to(real / "inside.md")
    elif "/" not in name:
        (real / name).write_text("plain", encoding="utf-8")
    result = load_bootstrap(home, [(name, True)], max_chars_per_file=100,
                            max_chars_total=100)
    assert (name in result.files) is readable
    if not readable:
        assert [d.code for d in result.diagnostics] == ["file_read_error"]


def test_the_render_context_holds_exactly_the_input_fields(full_home: Path) -> None:
    # The renderer copies the input's ``__dict__`` as the base context; pydantic must keep
    # every field there and nothing else, or a template would see a different context.
    compile_input = _input(full_home, dynamic_context="x")
    assert set(vars(compile_input)) == set(PromptCompileInput.model_fields)
