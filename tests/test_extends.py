"""Derived profiles: every edit kind, chains, search-path lookups and exact error text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import PioneerError, PromptCompileInput, PromptCompiler
from pioneer.compile.compiler import LoadedProfile


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


#: Where a test's templates are looked for, as a template-not-found message says it.
SEARCHED = "; searched templates/, the built-in templates"


def _compiler(tmp_path: Path) -> PromptCompiler:
    return PromptCompiler(
        profile_path=[tmp_path / "profiles"], template_path=[tmp_path / "templates"]
    )


def _load(tmp_path: Path, files: dict[str, str], name: str = "acme") -> LoadedProfile:
    _tree(tmp_path, files)
    return _compiler(tmp_path).load_profile(name)


def _error(tmp_path: Path, files: dict[str, str], name: str = "acme") -> str:
    _tree(tmp_path, files)
    with pytest.raises(PioneerError) as info:
        _compiler(tmp_path).load_profile(name)
    return info.value.render().replace(f"{tmp_path}/", "")


def _ids(profile: LoadedProfile) -> list[str]:
    return [section.id for section in profile.spec.sections]


FULL_IDS = _ids(PromptCompiler().load_profile("full"))
HEAD = 'name = "acme"\nextends = "full"\n'


def test_patch_changes_only_the_keys_given(tmp_path: Path) -> None:
    profile = _load(tmp_path, {"profiles/acme.toml": HEAD + """
[[sections]]
id = "soul_core"
title = "Who You Are"
template = "soul.md.j2"
""", "templates/soul.md.j2": "{{ file.content }}\n"})
    base = PromptCompiler().load_profile("full").spec.sections[2]
    soul = profile.spec.sections[2]
    assert _ids(profile) == FULL_IDS
    assert (soul.title, soul.template) == ("Who You Are", "soul.md.j2")
    assert soul.model_dump(exclude={"title", "template"}) == base.model_dump(
        exclude={"title", "template"}
    )


def test_remove_replace_insert_and_move(tmp_path: Path) -> None:
    profile = _load(tmp_path, {"profiles/acme.toml": HEAD + """
[[sections]]
id = "task_orchestration_policy"
remove = true

[[sections]]
id = "tool_recovery_policy"
replace = true
title = "Failures"
stability = "stable"
template = "content.md.j2"
source = "input"
field = "retry_instruction"

[[sections]]
id = "first"
before = "identity_base"
title = "First"
stability = "stable"
template = "identity_base.md.j2"

[[sections]]
id = "after_first"
after = "first"
title = "After First"
stability = "stable"
template = "identity_base.md.j2"

[[sections]]
id = "dynamic_context"
after = "extra_system"
"""})
    expected = ["first", "after_first", *FULL_IDS]
    expected.remove("task_orchestration_policy")
    expected.remove("dynamic_context")
    assert _ids(profile) == [*expected, "dynamic_context"]
    replaced = profile.spec.sections[expected.index("tool_recovery_policy")]
    assert replaced.when is None and replaced.field == "retry_instruction"


def test_budgets_merge_key_by_key_over_defaults(tmp_path: Path) -> None:
    profile = _load(tmp_path, {"profiles/acme.toml": """name = "acme"
extends = "none"

[budgets]
max_chars_total = 10
hook_pool = { max_sections = 2 }
"""})
    budgets = profile.spec.budgets
    assert (budgets.max_chars_total, budgets.max_chars_per_file) == (10, 20_000)
    assert (budgets.hook_pool.max_chars, budgets.hook_pool.max_sections) == (16_000, 2)
    assert profile.spec.description == "The identity line alone: no files, no dynamic sections."


def test_contributions_patch_add_and_remove(tmp_path: Path) -> None:
    profile = _load(tmp_path, {"profiles/acme.toml": HEAD + """
[[contributions]]
id = "agents_md"
max_chars = 100

[[contributions]]
id = "acme.crm"
title = "CRM"

[[contributions]]
id = "memory_recall"
remove = true
"""})
    specs = profile.spec.contribution_specs()
    assert (specs["agents_md"].max_chars, specs["agents_md"].title) == (100, "AGENTS.md")
    assert (specs["acme.crm"].title, specs["acme.crm"].sort_key) == ("CRM", 9)
    assert "memory_recall" not in specs
    assert list(specs)[-1] == "acme.crm"


def test_chain_of_three_with_a_relative_path(tmp_path: Path) -> None:
    profile = _load(tmp_path, {
        "profiles/acme.toml": 'name = "acme"\nextends = "../shared/team.toml"\n'
        '[[sections]]\nid = "identity_base"\ntitle = "Acme"\n',
        "shared/team.toml": 'name = "team"\nextends = "minimal"\ndescription = "Team."\n'
        '[[sections]]\nid = "identity_base"\ntitle = "Team"\n'
        '[[sections]]\nid = "assistant_safety"\ntitle = "Team Safety"\n',
    })
    assert profile.spec.description == "Team."
    assert [s.title for s in profile.spec.sections[:2]] == ["Acme", "Team Safety"]
    assert [f.file for f in profile.source.files] == [
        str(tmp_path / "profiles/acme.toml"), str(tmp_path / "shared/team.toml"),
        "<built-in>/profiles/minimal.toml",
    ]


def test_extending_its_own_name_takes_the_next_one_down(tmp_path: Path) -> None:
    profile = _load(tmp_path, {"profiles/full.toml": 'name = "full"\nextends = "full"\n'
                               '[[sections]]\nid = "identity_base"\ntitle = "Deployed"\n'},
                    name="full")
    assert profile.spec.sections[0].title == "Deployed"
    assert _ids(profile) == FULL_IDS


def test_an_empty_derivation_has_the_base_fingerprint(tmp_path: Path) -> None:
    """The fingerprint covers the resolved profile, not the files it was written in."""
    profile = _load(tmp_path, {"profiles/full.toml": '# same as the base\nname = "full"\n'
                               'extends = "full"\n'}, name="full")
    assert profile.fingerprint == PromptCompiler().load_profile("full").fingerprint


def test_derived_profile_compiles(tmp_path: Path, home: Path) -> None:
    _tree(tmp_path, {"profiles/acme.toml": 'name = "acme"\nextends = "none"\n'
                     '[[sections]]\nid = "extra"\nafter = "identity_base"\ntitle = "Extra"\n'
                     'stability = "dynamic"\ntemplate = "content.md.j2"\nsource = "input"\n'
                     'field = "extra_system"\n'})
    payload = _compiler(tmp_path).compile(
        PromptCompileInput(profile="acme", workspace_root=home, extra_system="hello")
    )
    assert payload.dynamic_system_text == "## Extra\nhello"
    assert payload.manifest.profile == "acme"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"profiles/acme.toml": 'name = "acme"\nextends = "fulll"\n'},
            'profiles/acme.toml:2: extends: unknown profile "fulll" (did you mean "full"?) '
            "(known: acme, full, minimal, none)",
            id="unknown-base",
        ),
        pytest.param(
            {"profiles/acme.toml": 'name = "acme"\nextends = "base/x.toml"\n'},
            'profiles/acme.toml:2: extends: profile file "base/x.toml" not found '
            "(looked for profiles/base/x.toml)",
            id="missing-path",
        ),
        pytest.param(
            {"profiles/acme.toml": 'name = "acme"\nextends = "acme"\n'},
            'profiles/acme.toml:2: extends: profile "acme" extends itself and no other '
            '"acme" is further down the search path',
            id="own-name",
        ),
        pytest.param(
            {"profiles/acme.toml": 'name = "acme"\nextends = "./acme.toml"\n'},
            'profiles/acme.toml:2: extends: "./acme.toml" closes a cycle: '
            "profiles/acme.toml → profiles/acme.toml",
            id="self-cycle",
        ),
        pytest.param(
            {"profiles/acme.toml": 'name = "acme"\nextends = "b"\n',
             "profiles/b.toml": 'name = "b"\n\nextends = "acme"\n'},
            'profiles/b.toml:3: extends: "acme" closes a cycle: '
            "profiles/acme.toml → profiles/b.toml → profiles/acme.toml",
            id="two-file-cycle",
        ),
    ],
)
def test_extends_errors(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    assert _error(tmp_path, files) == expected


def test_edit_errors_are_all_reported(tmp_path: Path) -> None:
    text = HEAD + """
[[sections]]
id = "soul_core"
before = "identity_base"
after = "user_persona"

[[sections]]
id = "identity_core"
after = "identity_core"

[[sections]]
id = "soul_core"
title = "Again"

[[sections]]
id = "nothing_like_this"
replace = true

[[contributions]]
id = "no_such_contribution"
remove = true
"""
    assert _error(tmp_path, {"profiles/acme.toml": text}) == "\n".join([
        'profiles/acme.toml:7: sections[0] (id "soul_core") → after: '
        'give "before" or "after", not both',
        'profiles/acme.toml:11: sections[1] (id "identity_core") → after: '
        'cannot place section "identity_core" after itself',
        'profiles/acme.toml:14: sections[2] (id "soul_core") → id: '
        'section "soul_core" is already edited at sections[0]',
        'profiles/acme.toml:18: sections[3] (id "nothing_like_this") → id: '
        'unknown section id "nothing_like_this" in base profile "full"',
        'profiles/acme.toml:22: contributions[0] (id "no_such_contribution") → id: '
        'unknown contribution id "no_such_contribution" in base profile "full"',
        "error: 5 problems in profiles/acme.toml",
    ])


def test_derived_file_is_schema_checked_against_the_derived_shape(tmp_path: Path) -> None:
    text = HEAD + '\n[budgets]\nhook_pool = { max_chars = -1 }\n\n[[sections]]\nid = "x"\n' \
        'remove = "yes"\ncolour = "red"\n'
    assert _error(tmp_path, {"profiles/acme.toml": text}) == "\n".join([
        "profiles/acme.toml:5: budgets → hook_pool → max_chars: must be ≥ 0 (got -1)",
        "profiles/acme.toml:9: sections[0] (id \"x\") → remove: expected boolean (got 'yes')",
        'profiles/acme.toml:10: sections[0] (id "x") → colour: unknown key (known: after, '
        "before, field, file, id, keep_empty, max_chars, max_tokens, refuse, reminder, remove, "
        "replace, source, stability, template, title, when)",
        "error: 3 problems in profiles/acme.toml",
    ])


def test_resolved_problems_point_at_the_derived_lines(tmp_path: Path) -> None:
    text = HEAD + """
[[sections]]
id = "early_dynamic"
before = "tool_recovery_policy"
title = "Early"
stability = "dynamic"
template = "content.md.j2"
source = "input"
field = "extra_system"

[[sections]]
id = "no_template"
before = "early_dynamic"
title = "No Template"
stability = "stable"

[[sections]]
id = "soul_core"
template = "nowhere.md.j2"
"""
    # every problem at once: the entry the whole profile's schema refuses is left out
    # and the rest is still checked, structure and templates
    # The dynamic section placed among the base's stable ones is said once, at the
    # derived file's before = ..., naming the base sections in words (not at each stable
    # section of the built-in file after it).
    order = ('profiles/acme.toml:6: sections[0] (id "early_dynamic") → before: dynamic '
             'section "early_dynamic" is placed before tool_recovery_policy, which is stable; '
             "a dynamic section must come after every stable one: put it after "
             "tool_recovery_policy or later")
    assert _error(tmp_path, {"profiles/acme.toml": text}) == "\n".join([
        order,
        'profiles/acme.toml:13: sections[1] (id "no_template"): missing key "template"',
        'profiles/acme.toml:21: sections[2] (id "soul_core") → template: template '
        f'"nowhere.md.j2" not found on the template search path{SEARCHED}',
        "error: 3 problems in profiles/acme.toml",
    ])
    fixed = text.replace('stability = "stable"\n', 'stability = "stable"\ntemplate = "a.md.j2"\n')
    assert _error(tmp_path, {"profiles/acme.toml": fixed}) == "\n".join([
        order,
        'profiles/acme.toml:22: sections[2] (id "soul_core") → template: template '
        f'"nowhere.md.j2" not found on the template search path{SEARCHED}',
        'profiles/acme.toml:18: sections[1] (id "no_template") → template: template '
        f'"a.md.j2" not found on the template search path{SEARCHED}',
        "error: 3 problems in profiles/acme.toml",
    ])


def test_a_broken_base_is_reported_in_the_base(tmp_path: Path) -> None:
    files = {
        "profiles/acme.toml": 'name = "acme"\nextends = "base"\n',
        "profiles/base.toml": 'name = "base"\nsections = 3\n',
    }
    assert _error(tmp_path, files) == "\n".join([
        "profiles/base.toml:2: sections: expected array (got 3)",
        "error: 1 problem in profiles/acme.toml",
    ])


_IDS = [*FULL_IDS[:6], "new_a", "new_b"]
_ANCHOR = st.sampled_from(["before", "after"])
_FULL = {"title": st.just("T"), "stability": st.just("stable"),
         "template": st.just("identity_base.md.j2")}
_EDIT = st.one_of(
    st.fixed_dictionaries({"id": st.sampled_from(_IDS), "title": st.just("Patched")}),
    st.fixed_dictionaries({"id": st.sampled_from(_IDS), "remove": st.just(True)}),
    st.fixed_dictionaries({"id": st.sampled_from(_IDS), "replace": st.just(True), **_FULL}),
    st.builds(lambda edit, key, anchor: {**edit, key: anchor},
              st.fixed_dictionaries({"id": st.sampled_from(_IDS), **_FULL}), _ANCHOR,
              st.sampled_from(_IDS)),
    st.fixed_dictionaries(  # anything at all, mostly wrong
        {"id": st.sampled_from([*_IDS, "has space"])},
        optional={"remove": st.booleans(), "before": st.sampled_from(_IDS),
                  "after": st.sampled_from(_IDS), "stability": st.sampled_from(["x", "dynamic"]),
                  "template": st.just("missing.md.j2")},
    ),
)


def _expected_ids(edits: list[dict[str, object]]) -> list[str]:
    """What the edits do to the base's ids, when they resolve at all."""
    ids = list(FULL_IDS)
    for edit in edits:
        item = str(edit["id"])
        if edit.get("remove"):
            ids.remove(item)
            continue
        for key in ("before", "after"):
            if key in edit:
                if item in ids:
                    ids.remove(item)
                ids.insert(ids.index(str(edit[key])) + (key == "after"), item)
    return ids


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(_EDIT, max_size=5, unique_by=lambda edit: str(edit["id"])))
def test_any_edit_list_resolves_as_specified_or_fails_cleanly(
    tmp_path: Path, edits: list[dict[str, object]]
) -> None:
    text = HEAD + "".join(
        "\n[[sections]]\n" + "".join(f"{key} = {json.dumps(val)}\n" for key, val in edit.items())
        for edit in edits
    )
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "profiles" / "acme.toml").write_text(text)
    try:
        profile = _compiler(tmp_path).load_profile("acme")
    except PioneerError as error:
        assert all(problem.file for problem in error.problems)
        return
    assert _ids(profile) == _expected_ids(edits)
    titles = {section.id: section.title for section in profile.spec.sections}
    assert all(titles[str(e["id"])] == "Patched" for e in edits if e.get("title") == "Patched")
