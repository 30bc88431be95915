"""Skills: SKILL.md discovery, resolution, globs and the [Skills] builder's byte budget."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import within

from pioneer import PromptCompiler
from pioneer.sections._macros import call_macro
from pioneer.sections.skills import (
    MAX_NESTING,
    TEMPLATE,
    ActiveSkill,
    Skill,
    build_skills_prompt,
    discover_skills,
    match_path,
    resolve_skill_outcomes,
    resolve_skills,
)

GOLDENS = Path(__file__).parent / "goldens" / "skills"


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return PromptCompiler(count_tokens=False).templates.env


def _skill(name: str, **extra: object) -> Skill:
    fields: dict[str, object] = {
        "slug": f"workspace/{name}", "name": name.title(), "description": f"Use for {name}.",
        "directory": f"/skills/{name}", "body": f"Steps for {name}.", **extra,
    }
    return Skill(**fields)  # type: ignore[arg-type]


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


# -- builder -------------------------------------------------------------------------------


def test_builder_golden(env: jinja2.Environment, golden: Callable[[Path, str], None]) -> None:
    active = [
        ActiveSkill(_skill("release", source="system", description="Cutting a release."),
                    "explicit"),
        ActiveSkill(_skill("weather", description="Forecasts, in °C."), "path_match"),
        ActiveSkill(_skill("charts"), "path_match"),
    ]
    prompt = build_skills_prompt(active, env)
    golden(GOLDENS / "builder.txt", prompt.text)
    assert (prompt.truncated, prompt.omitted) == (False, ())
    assert prompt.text.index("[Skill Body: $user:workspace/charts]") < prompt.text.index(
        "[Skill Body: $user:workspace/weather]"
    )  # bodies sorted by slug
    assert "[Skill Body: $system:workspace/release]" not in prompt.text  # not path-matched


def test_no_active_skills_is_empty(env: jinja2.Environment) -> None:
    prompt = build_skills_prompt([], env)
    assert (prompt.text, prompt.truncated, prompt.omitted) == ("", False, ())


def test_block_budget_counts_utf8_bytes(env: jinja2.Environment) -> None:
    skill = _skill("météo", description="Prévisions à 7 jours.")
    active = [ActiveSkill(skill, "explicit")]
    full = build_skills_prompt(active, env, include_read_skill_hint=False).text
    last_line = "Use when: Prévisions à 7 jours.\n"
    block_end = full.index(last_line) + len(last_line)
    fits = build_skills_prompt(active, env, max_chars=_size(full[:block_end]),
                               include_read_skill_hint=False)
    assert fits.text == full[:block_end] and not fits.truncated
    over = build_skills_prompt(active, env, max_chars=_size(full[:block_end]) - 1,
                               include_read_skill_hint=False)
    # One byte short: the intro line gives way so the only skill keeps its entry.
    intro_end = full.index("- Météo\n")
    assert over.text == "[Skills]\n" + full[intro_end:block_end]
    assert (over.truncated, over.omitted, over.diagnostics) == (True, (), ())
    assert len(full[:block_end]) < _size(full[:block_end])  # the cap really is bytes


def test_body_that_does_not_fit_is_omitted(env: jinja2.Environment) -> None:
    active = [ActiveSkill(_skill("weather", body="x" * 500), "path_match")]
    full = build_skills_prompt(active, env, include_read_skill_hint=False).text
    body_start = full.index("\nSkill asset root for $")
    body_end = full.index("x" * 500) + 501
    at = build_skills_prompt(active, env, max_chars=body_end, include_read_skill_hint=False)
    assert at.text.endswith("x" * 500 + "\n") and not at.truncated
    under = build_skills_prompt(active, env, max_chars=body_end - 1,
                                include_read_skill_hint=False)
    assert under.text.startswith(full[:body_start]) and "[Skill Body:" not in under.text
    assert under.omitted == ("user:workspace/weather",)


@pytest.mark.parametrize(("count", "bodies"), [(6, 6), (7, 0)])
def test_bodies_only_when_few_skills_are_active(env: jinja2.Environment, count: int,
                                                bodies: int) -> None:
    active = [ActiveSkill(_skill(f"s{n}"), "path_match") for n in range(count)]
    prompt = build_skills_prompt(active, env)
    assert prompt.text.count("[Skill Body:") == bodies
    assert prompt.text.count("Skill slug for read_skill") == count  # blocks always stay
    if bodies:
        assert (prompt.truncated, prompt.omitted) == (False, ())
    else:
        assert prompt.truncated and len(prompt.omitted) == count
        assert "left out or shown without their body" in prompt.text


def test_hint_cuts_the_text_to_make_room(env: jinja2.Environment) -> None:
    active = [ActiveSkill(_skill(f"s{n}"), "explicit") for n in range(3)]
    hint = "Before following a skill, call read_skill with its exact slug.\n"
    prompt = build_skills_prompt(active, env, max_chars=300)
    assert prompt.text.endswith("\n" + hint) and _size(prompt.text) <= 300


def test_a_tight_budget_keeps_whole_lines_golden(env: jinja2.Environment,
                                                golden: Callable[[Path, str], None]) -> None:
    """At 400 bytes the second entry does not fit with the hint: it goes whole, where the
    text used to be cut inside it ("Use" and then the hint)."""
    active = [ActiveSkill(_skill("weather"), "path_match"),
              ActiveSkill(_skill("charts"), "explicit")]
    prompt = build_skills_prompt(active, env, max_chars=400)
    golden(GOLDENS / "tight-budget.txt", prompt.text)
    assert _size(prompt.text) <= 400
    assert prompt.omitted == ("user:workspace/weather", "user:workspace/charts")
    assert prompt.truncated and prompt.diagnostics == ()


def test_a_budget_too_small_for_any_entry_leaves_the_text_out(env: jinja2.Environment) -> None:
    active = [ActiveSkill(_skill("weather"), "path_match"),
              ActiveSkill(_skill("charts"), "explicit")]
    prompt = build_skills_prompt(active, env, max_chars=120)
    assert (prompt.text, prompt.truncated) == ("", True)
    assert prompt.omitted == ("user:workspace/weather", "user:workspace/charts")
    assert prompt.diagnostics == (
        "the [Skills] text was left out: its budget of 120 bytes cannot hold the [Skills] "
        "header and one skill entry (the smallest needs 136 bytes)",)
    # 136 bytes: the header and the charts entry, nothing else.
    smallest = build_skills_prompt(active, env, max_chars=136)
    assert smallest.text.startswith("[Skills]\n- Charts\n")
    assert _size(smallest.text) == 136 and smallest.diagnostics == ()


_names = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")), min_size=1,
                 max_size=12)
_prose = st.text(st.characters(blacklist_characters="`$\r", blacklist_categories=["Cs"]),
                 max_size=60)


def _lines(text: str) -> list[str]:
    return text.split("\n")[:-1] if text else []


def _is_subsequence(part: list[str], whole: list[str]) -> bool:
    remaining = iter(whole)
    return all(any(line == candidate for candidate in remaining) for line in part)


@settings(max_examples=150, deadline=None)
@given(budget=st.integers(0, 1500), hint=st.booleans(),
       skills=st.lists(st.tuples(_names, _prose, _prose, st.sampled_from(
           ["explicit", "path_match", "implicit"])), min_size=1, max_size=8,
                           unique_by=lambda t: t[0]))
def test_any_budget_keeps_whole_lines_and_whole_slugs(
    env: jinja2.Environment, budget: int, hint: bool,
    skills: list[tuple[str, str, str, str]],
) -> None:
    active = [ActiveSkill(_skill(name, description=description, body=body), reason)  # type: ignore[arg-type]
              for name, description, body, reason in skills]
    prompt = build_skills_prompt(active, env, max_chars=budget, include_read_skill_hint=hint)
    assert _size(prompt.text) <= max(1, budget)
    full = build_skills_prompt(active, env, max_chars=10**9, include_read_skill_hint=hint)
    # What the unbounded text holds, with the truncation note before the hint (or last).
    reference = _lines(full.text)
    note = call_macro(env, TEMPLATE, "truncation_note")
    if note not in reference:
        reference.insert(len(reference) - 1 if hint else len(reference), note)
    assert _is_subsequence(_lines(prompt.text), reference)
    assert prompt.text == "" or prompt.text.startswith("[Skills]\n")
    ids = {a.skill.skill_id for a in active}
    assert set(re.findall(r"`((?:system|user|registry):[^`]*)`", prompt.text)) <= ids
    assert set(re.findall(r"\$((?:system|user|registry):\S+?)(?=: |\])", prompt.text)) <= ids
    for item in active:
        skill = item.skill
        block = call_macro(env, TEMPLATE, "block", skill.name, skill.skill_id,
                           skill.directory, skill.description.strip()) + "\n"
        # An entry is whole or absent, and a skill not reported omitted is shown.
        assert (block in prompt.text) == (f"`{skill.skill_id}`\n  Skill asset" in prompt.text)
        if skill.skill_id not in prompt.omitted:
            assert block in prompt.text
        head = f"[Skill Body: ${skill.skill_id}]\n"
        if head in prompt.text and skill.body.strip():
            assert prompt.text.split(head, 1)[1].startswith(skill.body.strip() + "\n")
    if prompt.text == "":
        assert prompt.diagnostics and set(prompt.omitted) == ids
    else:
        assert any(f"`{i}`\n" in prompt.text for i in ids)  # at least one slug survives


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2000), st.booleans(), st.integers(0, 4), st.text(max_size=80))
def test_builder_never_exceeds_its_budget(env: jinja2.Environment, budget: int, hint: bool,
                                          count: int, description: str) -> None:
    active = [ActiveSkill(_skill(f"s{n}", description=description), "path_match")
              for n in range(count)]
    prompt = build_skills_prompt(active, env, max_chars=budget, include_read_skill_hint=hint)
    assert _size(prompt.text) <= max(1, budget)


# -- discovery -----------------------------------------------------------------------------


def _write(root: Path, folder: str, text: str) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / folder / "SKILL.md").write_text(text, encoding="utf-8")


def test_discovery_reads_front_matter_and_body(tmp_path: Path) -> None:
    _write(tmp_path, "weather", "---\nname: Weather\ndescription: Forecasts.\n"
           "paths: ['**/*.wx', 'data/*.csv']\nuser-invocable: false\n"
           "license: MIT\n---\n\nCall the forecast API.\r\n")
    _write(tmp_path, "deploy", "---\nname: Deploy\ndescription: Ship it.\npaths: ops/**\n"
           "disable_model_invocation: true\n---\nRun make deploy.\n")
    (tmp_path / "notes.txt").write_text("not a skill")
    (tmp_path / "empty-folder").mkdir()
    found = discover_skills(tmp_path, owner="acme")
    assert found.problems == ()
    assert found.skills == (
        Skill(slug="acme/deploy", name="Deploy", description="Ship it.",
              directory=str(tmp_path / "deploy"), body="Run make deploy.", paths=("ops/**",),
              disable_model_invocation=True),
        Skill(slug="acme/weather", name="Weather", description="Forecasts.",
              directory=str(tmp_path / "weather"), body="Call the forecast API.",
              paths=("**/*.wx", "data/*.csv"), user_invocable=False),
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no front matter\n", "{f}:1: missing front matter: the first line must be ---"),
        ("---\nname: X\n", "{f}:1: front matter is not closed by a --- line"),
        ("---\nname: X\ndescription: [a\n---\n",
         "{f}:3: expected ',' or ']', but got '<stream end>' (YAML front matter)"),
        ("---\n- a list\n---\n", "{f}:2: front matter must be a mapping of keys"),
        ("---\nname: X\n---\n",
         "{f}: front matter → description: expected a non-empty string (got nothing)"),
        ("---\nname: 3\ndescription: d\n---\n",
         "{f}: front matter → name: expected a non-empty string (got 3)"),
        ("---\nname: X\ndescription: d\npaths: {a: 1}\n---\n",
         "{f}: front matter → paths: expected a glob or a list of globs (got {{'a': 1}})"),
        ("---\nname: X\ndescription: d\nuser-invocable: sometimes\n---\n",
         "{f}: front matter → user-invocable: expected true or false (got 'sometimes')"),
    ],
)
def test_broken_skill_is_reported_and_skipped(tmp_path: Path, text: str, problem: str) -> None:
    _write(tmp_path, "broken", text)
    _write(tmp_path, "good", "---\nname: Good\ndescription: Fine.\n---\n")
    found = discover_skills(tmp_path)
    assert [s.slug for s in found.skills] == ["workspace/good"]
    assert [p.render() for p in found.problems] == [
        problem.format(f=tmp_path / "broken" / "SKILL.md")
    ]


def test_not_utf8_skill_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "SKILL.md").write_bytes(b"---\nname: caf\xe9\n---\n")
    (problem,) = discover_skills(tmp_path).problems
    assert problem.render().startswith(f"{tmp_path / 'bad' / 'SKILL.md'}: cannot read: ")


def test_skill_folder_escaping_the_root_is_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside, "spy", "---\nname: Spy\ndescription: d\n---\n")
    root = tmp_path / "skills"
    root.mkdir()
    (root / "spy").symlink_to(outside / "spy", target_is_directory=True)
    found = discover_skills(root)
    assert found.skills == ()
    assert [p.render() for p in found.problems] == [
        f"{root / 'spy' / 'SKILL.md'}: skipped: it resolves outside the skills folder"
    ]


def test_missing_root_has_no_skills(tmp_path: Path) -> None:
    assert discover_skills(tmp_path / "nope").skills == ()


# -- resolution and globs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        ("**/*.py", "src/app/main.py", True),
        ("**/*.py", "main.py", True),
        ("src/*.py", "src/app/main.py", False),
        ("src/*.py", "src/main.py", True),
        ("src/**", "src", True),
        ("src/**/test_*.py", "src\\a\\b\\test_x.py", True),
        ("./docs//*.md", "docs/./index.md", True),
        ("*.md", "README.txt", False),
        ("a*b*c", "axxbyyc", True),
        ("data/[x].csv", "data/[x].csv", True),  # no character classes: literal brackets
        ("data/[x].csv", "data/x.csv", False),
        ("*a*a*", "aa", True),
        ("a*ab", "aab", True),
        ("a*a", "a", False),
        ("**/**/*.py", "x.py", True),
    ],
)
def test_glob_matching(glob: str, path: str, matches: bool) -> None:
    assert match_path(glob, path) is matches


@given(glob=st.lists(st.sampled_from(["**", "*", "a", "a*", "*b", "a*b", "ab"]), max_size=6),
       path=st.lists(st.sampled_from(["a", "b", "ab", "ba", "aab", "x"]), max_size=6))
def test_glob_matching_agrees_with_a_regular_expression(glob: list[str],
                                                         path: list[str]) -> None:
    # The same language as a regex: ``**/`` is any number of whole segments, ``*`` any
    # characters within one segment.
    parts = [r"(?:[^/]*/)*" if piece == "**" else
             ".*".join(map(re.escape, piece.split("*"))).replace(".*", "[^/]*") + "/"
             for piece in glob]
    expected = re.fullmatch("".join(parts), "".join(f"{seg}/" for seg in path)) is not None
    assert match_path("/".join(glob), "/".join(path)) is expected


def test_repeated_double_stars_do_not_explode() -> None:
    glob = "/".join(["**", "a"] * 8 + ["nomatch"])
    path = "/".join(["a"] * 40)
    assert within(20.0, lambda: match_path(glob, path)) is False


def test_resolution_order_and_rules() -> None:
    skills = [
        _skill("zeta", paths=("**/*.py",)),
        _skill("alpha", paths=("**/*.py",)),
        _skill("hidden", paths=("**/*.py",), disable_model_invocation=True),
        _skill("chosen", disable_model_invocation=True),
        _skill("casual"),
        _skill("shy", user_invocable=False),
    ]
    active = resolve_skills(skills, explicit=["user:workspace/chosen"],
                            touched_paths=["src/a.py"], allow_implicit=True)
    assert [(a.skill.name, a.reason) for a in active] == [
        ("Chosen", "explicit"),
        ("Alpha", "path_match"),
        ("Zeta", "path_match"),
        ("Casual", "implicit"),
    ]
    by_slug = resolve_skills(skills, explicit=["workspace/hidden"])
    assert [(a.skill.name, a.reason) for a in by_slug] == [("Hidden", "explicit")]
    assert resolve_skills(skills) == []


def test_resolution_records_why_every_skill_is_in_or_out() -> None:
    skills = [
        _skill("zeta", paths=("**/*.py",)),
        _skill("hidden", paths=("**/*.py",), disable_model_invocation=True),
        _skill("chosen", disable_model_invocation=True),
        _skill("casual"),
        _skill("shy", user_invocable=False),
    ]
    resolution = resolve_skill_outcomes(skills, explicit=["workspace/chosen"],
                                        touched_paths=["src/a.py"], allow_implicit=True)
    assert [(o.skill.name, o.status, o.reason) for o in resolution.outcomes] == [
        ("Chosen", "resolved", "explicit"),
        ("Zeta", "resolved", "path_match"),
        ("Casual", "resolved", "implicit"),
        ("Hidden", "disabled", "disable_model_invocation"),
        ("Shy", "non_implicit", "not_user_invocable"),
    ]
    assert list(resolution.active) == resolve_skills(
        skills, explicit=["workspace/chosen"], touched_paths=["src/a.py"], allow_implicit=True)
    off = resolve_skill_outcomes(skills)
    assert [(o.skill.name, o.status, o.reason) for o in off.outcomes] == [
        ("Casual", "non_implicit", "implicit_off"),
        ("Chosen", "disabled", "disable_model_invocation"),
        ("Hidden", "disabled", "disable_model_invocation"),
        ("Shy", "non_implicit", "implicit_off"),
        ("Zeta", "non_implicit", "implicit_off"),
    ]
    assert off.active == ()


def _bomb() -> str:
    """347 bytes of YAML that name a list of 9**9 strings (nine levels of nine aliases)."""
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for level, name in enumerate("bcdefghi"):
        previous = "abcdefghi"[level]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join([*lines, "name: *i", "description: d"])


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        (_bomb(), "{f}:3: an alias (*a) is not allowed in front matter; write the value out "
                  "(YAML front matter)"),
        ("name: X\ndescription: d\npaths: " + "[" * 20_000 + "]" * 20_000,
         "{f}:2: front matter is 40030 characters long; at most 16384 are read"),
        ("name: X\ndescription: d\npaths: " + "[" * 8_000 + "]" * 8_000,
         "{f}:4: front matter nests deeper than 16 lists or mappings (YAML front matter)"),
        ("name: X\ndescription: d\nx:\n" + "".join(" " * n + "- \n" for n in range(40)),
         "{f}:20: front matter nests deeper than 16 lists or mappings (YAML front matter)"),
    ],
    ids=["alias-bomb", "too-long", "nested-flow", "nested-block"],
)
def test_front_matter_that_would_build_too_much_is_refused(tmp_path: Path, front: str,
                                                           problem: str) -> None:
    """Refused from the event stream, before PyYAML builds a value (the bomb would build
    387 million strings; the nesting would recurse past Python's limit)."""
    _write(tmp_path, "bomb", f"---\n{front}\n---\nBody.\n")
    _write(tmp_path, "good", "---\nname: Good\ndescription: Fine.\n---\n")
    found = within(20.0, lambda: discover_skills(tmp_path))
    assert [s.slug for s in found.skills] == ["workspace/good"]
    assert [p.render() for p in found.problems] == [
        problem.format(f=tmp_path / "bomb" / "SKILL.md")]


def test_front_matter_at_the_nesting_limit_still_parses(tmp_path: Path) -> None:
    nested = "[" * (MAX_NESTING - 1) + "'g'" + "]" * (MAX_NESTING - 1)
    _write(tmp_path, "deep", f"---\nname: Deep\ndescription: d\nx: {nested}\n---\n")
    found = discover_skills(tmp_path)
    assert found.problems == () and [s.name for s in found.skills] == ["Deep"]


def test_task_orchestration_names_skills_as_read_skill_takes_them(home: Path) -> None:
    payload = PromptCompiler().compile({"workspace_root": home, "profile": "full",
                                        "include_task_orchestration_policy": True})
    (text,) = [s.text for s in payload.sections if s.id == "task_orchestration_policy"]
    named = re.findall(r"`([^`]+/[^`]+)`", text)
    expected = [Skill(slug, "", "", "", source="system").skill_id
                for slug in ("pioneer/subagents", "pioneer/tasks")]
    assert named == expected  # {source}:{slug}, the form the Skills section asks for
