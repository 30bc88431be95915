"""What a prompt author meets: ``check`` finds what ``compile`` would, nothing changes the
prompt silently, and every problem is shown at once, each at its own line (exact text and
exit code through ``main``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TEXT_SECTION
from support import run_cli as run

SECTION = 'name = "{name}"\n[[sections]]\nid = "a"\ntitle = "A"\nstability = "stable"\n' \
    'template = "{template}"\n'


def _deployment(tmp_path: Path, templates: dict[str, str], profiles: dict[str, str]) -> list[str]:
    for folder, files in (("t", templates), ("p", profiles)):
        (tmp_path / folder).mkdir(exist_ok=True)
        for name, text in files.items():
            (tmp_path / folder / name).write_text(text)
    return ["--profile-path", str(tmp_path / "p"), "--template-path", str(tmp_path / "t")]


def test_check_finds_an_attribute_that_does_not_exist(tmp_path: Path) -> None:
    paths = _deployment(tmp_path, {"lim.md.j2": "Up to {{ limits.max_chars }}.\n"}, {
        "lim.toml": SECTION.format(name="lim", template="lim.md.j2")
        + '\n[[sections]]\nid = "b"\ntitle = "B"\nstability = "stable"\n'
        'template = "assistant_safety.md.j2"\nwhen = "limits.max_chars > 3"\n',
    })
    hint = ("`limits` has no attribute `max_chars` (did you mean \"max_chars_total\"?); "
            "`limits` has `max_chars_per_file`, `max_chars_total`")
    assert run("check", "lim", *paths) == (1, "", (
        f"{tmp_path / 't' / 'lim.md.j2'}:1: {hint}\n"
        '  while rendering section "a"\n'
        f'{tmp_path / "p" / "lim.toml"}:13: sections[1] (id "b") → when: condition failed: '
        f"{hint}\n"
        "error: 2 problems in 1 profile\n"
    ))
    code, _, err = run("compile", "--profile", "lim", "--home", str(tmp_path / "h"), *paths)
    assert (code, err.splitlines()[0]) == (1, f"{tmp_path / 't' / 'lim.md.j2'}:1: {hint}")


def test_check_lists_every_problem_of_every_profile(tmp_path: Path) -> None:
    paths = _deployment(tmp_path, {}, {
        "one.toml": 'name = "one"\nnope = 1\n[[sections]]\nid = "a"\ntitle = "x"\n'
                    'stability = "stable"\ntemplate = "missing.md.j2"\n',
        "two.toml": SECTION.format(name="two", template="assistant_safety.md.j2").replace(
            'title = "A"', "title = 3"),
        "three.toml": 'name = "three"\n[[sections\n',
    })
    assert run("check", *paths) == (1, "", (
        f"{tmp_path / 'p' / 'one.toml'}:2: nope: unknown key (known: budgets, contributions, "
        "description, inputs, name, sections)\n"
        f'{tmp_path / "p" / "one.toml"}:7: sections[0] (id "a") → template: template '
        f'"missing.md.j2" not found on the template search path; searched {tmp_path / "t"}/, '
        "the built-in templates\n"
        f"{tmp_path / 'p' / 'three.toml'}:2:11: expected ']]' at the end of an array "
        "declaration (TOML syntax)\n"
        f'{tmp_path / "p" / "two.toml"}:4: sections[0] (id "a") → title: expected string '
        "(got 3)\n"
        "error: 4 problems in 3 profiles\n"
    ))


#: A prompt author's three mistakes: a misspelt key, an unclosed {% for %} and an unknown
#: name, and a condition reading an attribute that does not exist (found by rendering).
MISTAKES = """
[[sections]]
id = "house_style"
{anchor}title = "House Style"
stabilty = "stable"
template = "house_style.md.j2"

[[sections]]
id = "greeting"
{anchor}title = "Greeting"
stability = "stable"
template = "greeting.md.j2"
when = "limits.max_chars > 3"
"""


@pytest.mark.parametrize("derived", [True, False], ids=["extends", "standalone"])
def test_check_reports_every_problem_of_a_profile_at_once(tmp_path: Path, derived: bool) -> None:
    head = 'name = "mybot"\nextends = "full"\n' if derived else 'name = "mybot"\n'
    body = MISTAKES.format(anchor='after = "assistant_safety"\n' if derived else "")
    paths = _deployment(tmp_path, {"house_style.md.j2": "{% for rule in rules %}\n- {{ rule }}\n",
                                   "greeting.md.j2": "Hello {{ user_name }}.\n"},
                        {"mybot.toml": head + body})
    profile, templates = tmp_path / "p" / "mybot.toml", tmp_path / "t"
    line = 3 + derived  # of the first section's id
    missing = [] if derived else [  # (a derived entry is checked whole once its key is fixed)
        f'{profile}:{line}: sections[0] (id "house_style"): missing key "stability"\n']
    assert run("check", "mybot", *paths) == (1, "", "".join([
        *missing,
        f'{profile}:{line + 3 + derived}: sections[0] (id "house_style") → stabilty: unknown '
        'key (did you mean "stability"?)\n',
        # the templates of the well-formed sections, then of those whose keys are wrong
        f'{templates / "greeting.md.j2"}:1: "user_name" is undefined (not in the compile '
        f"context, which holds {TEXT_SECTION})\n",
        f'  while checking section "greeting" of {profile}\n',
        f'{templates / "house_style.md.j2"}:2: Unexpected end of template. Jinja was looking '
        "for the following tags: 'endfor' or 'else'. The innermost block that needs to be "
        "closed is 'for'.\n",
        f'  while checking section "house_style" of {profile}\n',
        f"error: {4 - derived} problems in 1 profile\n",
    ]))
    # with the template fixed, the section is rendered (and its condition evaluated)
    # although the key is still wrong
    (templates / "greeting.md.j2").write_text("Hello.\n")
    code, _, err = run("check", "mybot", *paths)
    assert (code, err.splitlines()[-2:]) == (1, [
        f'{profile}:{line + 11 + 2 * derived}: sections[1] (id "greeting") → when: condition '
        "failed: `limits` has no attribute `max_chars` (did you mean \"max_chars_total\"?); "
        "`limits` has `max_chars_per_file`, `max_chars_total`",
        f"error: {4 - derived} problems in 1 profile"])


def test_a_derived_entry_written_like_a_new_section_on_a_base_id_warns(tmp_path: Path) -> None:
    paths = _deployment(tmp_path, {}, {
        "der.toml": 'name = "der"\nextends = "full"\n\n[[sections]]\nid = "soul_core"\n'
                    'title = "My Tone"\nstability = "stable"\ntemplate = "assistant_safety.md.j2"\n'
                    'after = "assistant_safety"\n',
        "patch.toml": 'name = "patch"\nextends = "full"\n\n[[sections]]\n'
                      'id = "assistant_safety"\ntitle = "Ground Rules"\n',
    })
    assert run("check", "der", "patch", *paths) == (0, "ok: 2 profiles (der, patch)\n", (
        f'warning: {tmp_path / "p" / "der.toml"}:6: sections[0] (id "soul_core") → title: '
        'section "soul_core" of base profile "full" exists: this entry patches and moves it '
        'and changes its title from "Soul Core" to "My Tone" (add replace = true if that is '
        "meant, or give a new section its own id)\n"
    ))


def test_a_misspelt_contribution_id_is_a_warning_with_a_suggestion(tmp_path: Path) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps({
        "profile": "full",
        "runtime_sections": [{"id": "memory_recal", "content": "Likes tea."}],
        "dynamic_sections": [{"id": "my_own_hook", "content": "Fine."}],
    }))
    code, out, err = run("compile", "--home", str(tmp_path / "home"), "--input", str(turn))
    assert code == 0 and "## Dynamic: memory_recal\nLikes tea." in out
    assert err.splitlines()[-1] == (
        "warning: contribution `memory_recal` matches no section or declared contribution and "
        'was placed by the slot (did you mean "memory_recall"?) [unknown_contribution]'
    )
    assert "my_own_hook" not in err  # an id that resembles nothing known is a free choice
    assert run("compile", "-q", "--home", str(tmp_path / "home"), "--input", str(turn))[2] == ""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("turn.toml", 'profile = "minimal"\nartifact_ref_count = "2"\n',
         "turn.toml:2: artifact_ref_count: Input should be a valid integer"),
        ("turn.json", '{\n  "profile": "minimal",\n  "dynamic_contxt": "x"\n}\n',
         'turn.json:3: dynamic_contxt: unknown field (did you mean "dynamic_context"?)'),
        ("turn.json", '{"limits": {\n  "max_chars": 3}}',
         'turn.json:2: limits → max_chars: unknown field (did you mean "max_chars_total"?)'),
    ],
    ids=["strict-type", "unknown-field", "nested-unknown-field"],
)
def test_input_errors_name_the_line(tmp_path: Path, name: str, text: str,
                                    expected: str) -> None:
    (tmp_path / name).write_text(text)
    assert run("compile", "--home", str(tmp_path), "--input", str(tmp_path / name)) == (
        1, "", f"{tmp_path}/{expected}\nerror: 1 problem in {tmp_path / name}\n"
    )


def test_a_missing_template_names_the_closest_ones_and_the_folders_searched(
    tmp_path: Path,
) -> None:
    paths = _deployment(tmp_path, {"house_style.md.j2": "Brief.\n", "house_rules.md.j2": "x\n"},
                        {"h.toml": SECTION.format(name="h", template="house_styl.md.j2")})
    paths += ["--template-path", str(tmp_path / "more")]
    (tmp_path / "more").mkdir()
    assert run("check", "h", *paths) == (1, "", (
        f'{tmp_path / "p" / "h.toml"}:6: sections[0] (id "a") → template: template '
        '"house_styl.md.j2" not found on the template search path (did you mean '
        '"house_style.md.j2" or "house_rules.md.j2"?); searched '
        f'{tmp_path / "t"}/, {tmp_path / "more"}/, the built-in templates\n'
        "error: 1 problem in 1 profile\n"))


def test_an_undefined_name_lists_the_names_there_are_when_none_is_close(tmp_path: Path) -> None:
    paths = _deployment(tmp_path, {"a.md.j2": "{{ user_nmae }} {{ contnt }}\n"}, {
        "u.toml": SECTION.format(name="u", template="a.md.j2").replace(
            'template = "a.md.j2"\n', 'template = "a.md.j2"\nsource = "input"\n'
            'field = "extra_system"\nwhen = "sandbox"\n')})
    template, profile = tmp_path / "t" / "a.md.j2", tmp_path / "p" / "u.toml"
    assert run("check", "u", *paths) == (1, "", (
        f'{template}:1: "contnt" is undefined (did you mean "content"?) (not in the compile '
        "context)\n"
        f'  while checking section "a" of {profile}\n'
        f'{template}:1: "user_nmae" is undefined (not in the compile context, which holds '
        "artifact_ref_count, artifact_refs, content, continue_generation_hint, "
        "dynamic_context, dynamic_sections, extra_system, include_task_orchestration_policy, "
        "include_tool_recovery_policy, inputs, limits, profile, retry_instruction, "
        "runtime_sections, section, skills_prompt, workspace_root)\n"
        f'  while checking section "a" of {profile}\n'
        f'{profile}:9: sections[0] (id "a") → when: "sandbox" is undefined (not in the compile '
        "context, which holds artifact_ref_count, artifact_refs, continue_generation_hint, "
        "dynamic_context, dynamic_sections, extra_system, include_task_orchestration_policy, "
        "include_tool_recovery_policy, inputs, limits, profile, retry_instruction, "
        "runtime_sections, skills_prompt, workspace_root)\n"
        "error: 3 problems in 1 profile\n"))
