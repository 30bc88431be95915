"""Error paths: exact, located messages for profiles, templates and inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import CONDITION, INPUT_SECTION

from pioneer import (
    InputError,
    PioneerError,
    ProfileError,
    PromptCompileInput,
    PromptCompiler,
    TemplateError,
)
from pioneer.compile.inputs import load_compile_input
from pioneer.errors import ProfileSyntaxError

BASE = """name = "acme"

[[sections]]
id = "identity_base"
title = "Identity"
stability = "stable"
template = "identity_base.md.j2"
"""


def _load(tmp_path: Path, text: str, templates: dict[str, str] | None = None) -> PioneerError:
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "profiles" / "acme.toml").write_text(text)
    (tmp_path / "templates").mkdir(exist_ok=True)
    for name, source in (templates or {}).items():
        (tmp_path / "templates" / name).write_text(source)
    compiler = PromptCompiler(
        profile_path=[tmp_path / "profiles"], template_path=[tmp_path / "templates"]
    )
    with pytest.raises(PioneerError) as info:
        compiler.load_profile("acme")
    return info.value


def _text(error: PioneerError, tmp_path: Path) -> str:
    return error.render().replace(str(tmp_path) + "/", "")


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    error = _load(tmp_path, 'name = "acme"\n[[sections]\n')
    assert isinstance(error, ProfileSyntaxError)
    assert _text(error, tmp_path) == (
        "profiles/acme.toml:2:11: expected ']]' at the end of an array declaration (TOML syntax)"
    )


def test_schema_problems_are_all_reported_with_lines(tmp_path: Path) -> None:
    text = (
        BASE.replace('name = "acme"', 'name = "acme"\n\n[budgets]\nmax_chars_total = -3')
        + """
[[sections]]
id = "soul_core"
title = "Soul"
stability = "sometimes"
template = "identity_base.md.j2"
max_chars = -5
colour = "red"
"""
    )
    error = _load(tmp_path, text)
    assert isinstance(error, ProfileError)
    assert _text(error, tmp_path) == "\n".join(
        [
            "profiles/acme.toml:4: budgets → max_chars_total: must be ≥ 0 (got -3)",
            'profiles/acme.toml:15: sections[1] (id "soul_core") → stability: '
            'expected one of "stable", "dynamic" (got \'sometimes\')',
            'profiles/acme.toml:17: sections[1] (id "soul_core") → max_chars: must be ≥ 0 (got -5)',
            'profiles/acme.toml:18: sections[1] (id "soul_core") → colour: unknown key (known: '
            "field, file, id, keep_empty, max_chars, max_tokens, refuse, reminder, source, "
            "stability, template, title, when)",
            "error: 4 problems in profiles/acme.toml",
        ]
    )


def test_missing_required_key(tmp_path: Path) -> None:
    error = _load(tmp_path, BASE.replace('title = "Identity"\n', ""))
    assert _text(error, tmp_path) == "\n".join(
        [
            'profiles/acme.toml:3: sections[0] (id "identity_base"): missing key "title"',
            "error: 1 problem in profiles/acme.toml",
        ]
    )


def test_structural_and_template_problems_are_reported_together(tmp_path: Path) -> None:
    text = (
        BASE.replace('stability = "stable"', 'stability = "dynamic"')
        + """
[[sections]]
id = "identity_base"
title = "Again"
stability = "stable"
template = "missing.md.j2"
when = "not_a_field or include_tool_recovery_policy"

[[sections]]
id = "extra"
title = "Extra"
stability = "dynamic"
template = "uses_unknown.md.j2"
source = "input"

[[sections]]
id = "broken"
title = "Broken"
stability = "dynamic"
template = "broken.md.j2"
"""
    )
    error = _load(
        tmp_path,
        text,
        {
            "uses_unknown.md.j2": "{{ content }}\nfor {{ user_name }}\n",
            "broken.md.j2": "ok\n{% if x %}\n",
        },
    )
    assert _text(error, tmp_path) == "\n".join(
        [
            'profiles/acme.toml:10: sections[1] (id "identity_base") → id: '
            "duplicate section id (first used at sections[0])",
            'profiles/acme.toml:12: sections[1] (id "identity_base") → stability: '
            'stable section after dynamic section "identity_base"; '
            "every stable section must come first",
            'profiles/acme.toml:21: sections[2] (id "extra") → source: '
            'source "input" needs key "field"',
            'profiles/acme.toml:13: sections[1] (id "identity_base") → template: '
            'template "missing.md.j2" not found on the template search path; searched '
            "templates/, the built-in templates",
            'profiles/acme.toml:14: sections[1] (id "identity_base") → when: '
            f'"not_a_field" is undefined (not in the compile context, which holds {CONDITION})',
            'templates/uses_unknown.md.j2:2: "user_name" is undefined (not in the compile '
            f"context, which holds {INPUT_SECTION})",
            '  while checking section "extra" of profiles/acme.toml',
            "templates/broken.md.j2:2: Unexpected end of template. Jinja was looking for the "
            "following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be "
            "closed is 'if'.",
            '  while checking section "broken" of profiles/acme.toml',
            "error: 7 problems in profiles/acme.toml",
        ]
    )


def test_unknown_profile_lists_known_ones() -> None:
    with pytest.raises(ProfileError) as info:
        PromptCompiler().load_profile("nope")
    assert str(info.value) == (
        'unknown profile "nope" (did you mean "none"?) (known: full, minimal, none)'
    )


def test_sandbox_refuses_internals_with_template_and_line(tmp_path: Path, home: Path) -> None:
    text = BASE.replace("identity_base.md.j2", "evil.md.j2")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "acme.toml").write_text(text)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "evil.md.j2").write_text("fine\n{{ profile.__class__.__mro__ }}\n")
    compiler = PromptCompiler(
        profile_path=[tmp_path / "profiles"], template_path=[tmp_path / "templates"]
    )
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(workspace_root=home, profile="acme"))
    assert str(info.value) == (
        f"{tmp_path}/templates/evil.md.j2:2: access to attribute '__class__' of 'str' object "
        'is unsafe.\n  while rendering section "identity_base"'
    )


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.json", '{"profile": "full",\n "x": }', "bad.json:2:7: Expecting value (JSON syntax)"),
        ("bad.toml", "profile = \n", "bad.toml:1:11: invalid value (TOML syntax)"),
        ("list.json", "[1, 2]", "list.json: expected a JSON object at the top level"),
        (
            "fields.json",
            '{"limits": {"max_chars_total": -1},\n "artifact_ref_count": "many"}',
            "fields.json:1: limits → max_chars_total: Input should be greater than or equal to "
            "0\nfields.json:2: artifact_ref_count: Input should be a valid integer\n"
            "error: 2 problems in fields.json",
        ),
    ],
)
def test_input_file_errors(tmp_path: Path, name: str, content: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputError) as info:
        load_compile_input(path)
    assert str(info.value).replace(str(tmp_path) + "/", "") == expected
