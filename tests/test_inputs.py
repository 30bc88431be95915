"""Declared inputs: a profile's own typed variables, from declaration to manifest.

Each declared type, enum, default and example; every error (wrong type, undeclared with
a suggestion, missing); inheritance through ``extends``; ``--var`` on compile, inspect
and check; conditions and templates reading ``inputs``; the fingerprint and the lock
moving with a declaration; hashes (never values) in the manifest; the cache warning for
a stable section reading a per-turn input; ``check`` rendering each enum value; the
compile input's schema for one profile; and the support bot of
``tests/cases/support-bot/`` end to end, through the console script and the runner.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import run_cli, run_script

from pioneer import Agent, InputError, PromptCompileInput, PromptCompiler
from pioneer.compile.declared import InputSpec, input_schema, parse_var, value_problem
from pioneer.compile.templates import TemplateSet, build_environment
from pioneer.errors import ProfileError
from pioneer.review import names

CASE = Path(__file__).parent / "cases" / "support-bot"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "templates.md"

PROFILE = """name = "bot"
extends = "none"

[inputs.tier]
type = "string"
enum = ["gold", "standard"]
default = "standard"
changes = "thread"

[inputs.seats]
type = "integer"
minimum = 1
maximum = 500
examples = [1, 40]

[inputs.ratio]
type = "number"
default = 0.5

[inputs.beta]
type = "boolean"
default = false
changes = "deployment"

[inputs.code]
type = ["string", "integer"]
pattern = "^[A-Z0-9]+$"
maxLength = 8
default = "AB1"

[[sections]]
id = "facts"
after = "identity_base"
title = "Facts"
stability = "dynamic"
template = "facts.md.j2"
when = "inputs.seats > 0"
"""
FACTS = ("tier {{ inputs.tier }}; seats {{ inputs.seats }}; ratio {{ inputs.ratio }}; "
         "beta {{ inputs.beta }}; code {{ inputs['code'] }}\n")


def _deployment(root: Path, profile: str = PROFILE, **templates: str) -> PromptCompiler:
    (root / "p").mkdir(exist_ok=True)
    (root / "t").mkdir(exist_ok=True)
    (root / "p" / "bot.toml").write_text(profile, encoding="utf-8")
    for name, text in {"facts.md.j2": FACTS, **templates}.items():
        (root / "t" / name).write_text(text, encoding="utf-8")
    return PromptCompiler(profile_path=[root / "p"], template_path=[root / "t"])


def _compile(compiler: PromptCompiler, **inputs: Any) -> str:
    payload = compiler.compile({"profile": "bot", "workspace_root": "nowhere",
                                "inputs": inputs})
    return payload.dynamic_system_text


def _problems(error: pytest.ExceptionInfo[Exception]) -> list[str]:
    return [problem.render() for problem in error.value.problems]  # type: ignore[attr-defined]


# -- types, enum, default, examples ----------------------------------------------------


def test_each_declared_type_reaches_the_template_as_its_value(tmp_path: Path) -> None:
    compiler = _deployment(tmp_path)
    assert _compile(compiler, seats=40) == (
        "## Facts\ntier standard; seats 40; ratio 0.5; beta False; code AB1")
    assert _compile(compiler, tier="gold", seats=2, ratio=3, beta=True, code=42) == (
        "## Facts\ntier gold; seats 2; ratio 3; beta True; code 42")


def test_a_condition_reads_an_input(tmp_path: Path) -> None:
    compiler = _deployment(tmp_path, PROFILE.replace("minimum = 1", "minimum = 0"))
    assert _compile(compiler, seats=0) == ""
    payload = compiler.compile({"profile": "bot", "workspace_root": "x",
                                "inputs": {"seats": 0}})
    assert [(o.id, o.detail) for o in payload.manifest.omitted] == [
        ("facts", 'condition "inputs.seats > 0" is false')]


@pytest.mark.parametrize(("given", "message"), [
    ({"seats": "40"}, 'inputs → seats: input "seats" of profile "bot": expected integer, '
                      'got string "40"'),
    ({"seats": True}, 'inputs → seats: input "seats" of profile "bot": expected integer, '
                      "got boolean true"),
    ({"seats": 2.5}, 'inputs → seats: input "seats" of profile "bot": expected integer, '
                     "got number 2.5"),
    ({"seats": 0}, 'inputs → seats: input "seats" of profile "bot": expected at least 1, got 0'),
    ({"seats": 501}, 'inputs → seats: input "seats" of profile "bot": expected at most 500, '
                     "got 501"),
    ({"seats": 1, "tier": "silver"}, 'inputs → tier: input "tier" of profile "bot": expected '
                                     'one of "gold", "standard", got "silver"'),
    ({"seats": 1, "ratio": "half"}, 'inputs → ratio: input "ratio" of profile "bot": expected '
                                    'number, got string "half"'),
    ({"seats": 1, "beta": "yes"}, 'inputs → beta: input "beta" of profile "bot": expected '
                                  'boolean, got string "yes"'),
    ({"seats": 1, "code": "ab"}, 'inputs → code: input "code" of profile "bot": expected text '
                                 'matching the pattern "^[A-Z0-9]+$", got "ab"'),
    ({"seats": 1, "code": "ABCDEFGHIJ"}, 'inputs → code: input "code" of profile "bot": '
                                         "expected at most 8 characters, got 10"),
    ({"seats": 1, "code": [1]}, 'inputs → code: input "code" of profile "bot": expected '
                                "string or integer, got array [1]"),
    ({"seats": 1, "teir": "gold"}, 'inputs → teir: input "teir" is not declared by profile '
                                   '"bot" (did you mean "tier"?)'),
    ({}, 'inputs → seats: input "seats" of profile "bot" is missing: expected integer, got '
         "nothing (it has no default)"),
])
def test_a_value_the_declaration_refuses_is_an_error_naming_it(
        tmp_path: Path, given: dict[str, Any], message: str) -> None:
    compiler = _deployment(tmp_path)
    with pytest.raises(InputError) as error:
        _compile(compiler, **given)
    assert _problems(error) == [message]
    assert error.value.summary == 'error: 1 problem in the inputs of profile "bot"'


def test_every_problem_of_the_inputs_is_reported_at_once(tmp_path: Path) -> None:
    compiler = _deployment(tmp_path)
    with pytest.raises(InputError) as error:
        _compile(compiler, nope=1, tier=3)
    assert _problems(error) == [
        'inputs → nope: input "nope" is not declared by profile "bot" (it declares tier, '
        "seats, ratio, beta, code)",
        'inputs → tier: input "tier" of profile "bot": expected string, got integer 3',
        'inputs → seats: input "seats" of profile "bot" is missing: expected integer, got '
        "nothing (it has no default)",
    ]


def test_a_profile_without_inputs_refuses_any(tmp_path: Path) -> None:
    with pytest.raises(InputError, match='input "tier" is not declared by profile "none" '
                       r"\(it declares none\)"):
        PromptCompiler().compile({"profile": "none", "inputs": {"tier": "gold"}})


@pytest.mark.parametrize(("key", "value", "message"), [
    ("default", '"platinum"', 'inputs → tier → default: the default does not fit the '
     'declaration: expected one of "gold", "standard", got "platinum"'),
    ("examples", '["gold", 7]', 'inputs → tier → examples[1]: the example does not fit the '
     'declaration: expected string, got integer 7'),
    ("maximum", "3", "inputs → tier → maximum: maximum applies only to type integer or "
     "number (type is string)"),
    ("pattern", '"("', "inputs → tier → pattern: not a regular expression: missing ), "
     "unterminated subpattern at position 0"),
])
def test_a_declaration_is_checked_at_its_line(tmp_path: Path, key: str, value: str,
                                              message: str) -> None:
    text = PROFILE.replace('changes = "thread"', f'changes = "thread"\n{key} = {value}', 1)
    if key == "default":
        text = text.replace('default = "standard"\n', "", 1)
    _deployment(tmp_path, text)
    code, out, err = run_cli("check", "bot", "--profile-path", str(tmp_path / "p"),
                             "--template-path", str(tmp_path / "t"))
    assert (code, out) == (1, "")
    line = text.splitlines().index(f"{key} = {value}") + 1
    assert err.splitlines()[0] == f"{tmp_path / 'p' / 'bot.toml'}:{line}: {message}"


def test_an_input_name_must_be_an_identifier(tmp_path: Path) -> None:
    _deployment(tmp_path, PROFILE + '\n[inputs."two words"]\ntype = "string"\n')
    with pytest.raises(ProfileError, match="two words"):
        PromptCompiler(profile_path=[tmp_path / "p"], template_path=[tmp_path / "t"]
                       ).load_profile("bot")


def test_var_text_is_read_by_the_declared_type() -> None:
    spec = InputSpec.model_validate
    assert parse_var(spec({"type": "integer"}), "n", "-3") == -3
    assert parse_var(spec({"type": "number"}), "n", "2.5") == 2.5
    assert parse_var(spec({"type": "boolean"}), "n", "true") is True
    assert parse_var(spec({"type": ["string", "integer"]}), "n", "5") == 5
    assert parse_var(spec({"type": ["string", "integer"]}), "n", "five") == "five"
    with pytest.raises(ValueError, match='input "n": expected number, got "nan"'):
        parse_var(spec({"type": "number"}), "n", "nan")
    assert value_problem(spec({"type": "number"}), 3) is None  # an integer is a number


# -- templates, check and the cache ---------------------------------------------------


def test_a_template_reading_an_undeclared_input_fails_check_at_its_line(tmp_path: Path) -> None:
    _deployment(tmp_path, **{"facts.md.j2": "x\n{{ inputs.teir }}\n"})
    code, _, err = run_cli("check", "bot", "--profile-path", str(tmp_path / "p"),
                           "--template-path", str(tmp_path / "t"))
    assert code == 1
    assert err.splitlines()[:2] == [
        f'{tmp_path / "t" / "facts.md.j2"}:2: "inputs.teir" is not a declared input (did you '
        'mean "tier"?); profile "bot" declares tier, seats, ratio, beta, code (add '
        "[inputs.teir] to declare it)",
        f'  while checking section "facts" of {tmp_path / "p" / "bot.toml"}',
    ]


def test_check_renders_each_enum_value_and_example(tmp_path: Path) -> None:
    # Breaks for "standard" only (the default, not the first example's value), and for
    # the second example of seats only.
    broken = ('{% if inputs.tier == "standard" %}{{ 1 // 0 }}{% endif %}'
              '{% if inputs.seats == 40 %}{{ inputs.seats.nope }}{% endif %}\n')
    _deployment(tmp_path, PROFILE.replace('default = "standard"', 'default = "standard"\n'
                                          'examples = ["gold"]'), **{"facts.md.j2": broken})
    code, _, err = run_cli("check", "bot", "--profile-path", str(tmp_path / "p"),
                           "--template-path", str(tmp_path / "t"))
    assert code == 1
    lines = err.splitlines()
    assert lines[0].endswith("facts.md.j2:1: ZeroDivisionError: integer division or modulo "
                             "by zero")
    assert lines[1] == ('  while rendering section "facts" with inputs.tier = "standard"')
    assert lines[2].endswith("facts.md.j2:1: 'int object' has no attribute 'nope'")
    assert lines[3] == '  while rendering section "facts" with inputs.seats = 40'
    assert lines[-1] == "error: 2 problems in 1 profile"


def test_a_stable_section_reading_a_per_turn_input_is_a_warning(tmp_path: Path) -> None:
    text = PROFILE.replace('stability = "dynamic"', 'stability = "stable"')
    _deployment(tmp_path, text)
    code, out, err = run_cli("check", "bot", "--profile-path", str(tmp_path / "p"),
                             "--template-path", str(tmp_path / "t"))
    assert code == 0 and out == "ok: 1 profile (bot)\n"
    file = tmp_path / "p" / "bot.toml"
    when = text.splitlines().index('when = "inputs.seats > 0"') + 1
    template = text.splitlines().index('template = "facts.md.j2"') + 1
    fix = ('a new value on each turn would change the cached prefix every turn; declare how '
           'often it really changes (changes = "thread" or "deployment") or make the section '
           "dynamic")
    # tier (thread) and beta (deployment) are fine; ratio, code and seats change per turn
    assert err.splitlines() == [
        f'warning: {file}:{template}: sections[0] (id "facts") → template: stable section '
        f'"facts" reads input "code", declared changes = "turn": {fix}',
        f'warning: {file}:{template}: sections[0] (id "facts") → template: stable section '
        f'"facts" reads input "ratio", declared changes = "turn": {fix}',
        f'warning: {file}:{when}: sections[0] (id "facts") → when: stable section "facts" '
        f'reads input "seats", declared changes = "turn": {fix}',
    ]


def test_reads_and_input_uses_follow_includes_imports_and_extends(tmp_path: Path) -> None:
    """What a template reads, and where it reads ``inputs``, through every template it
    includes, imports or extends, each once (a cycle ends), whether or not it was checked
    first; a missing template reads nothing, while one that cannot be parsed or is named at
    render time makes the names read unknown (``None``) and adds no input reads."""
    templates = {
        "main.md.j2": "{{ inputs.a }}\n{% include 'part.md.j2' %}\n"
                      "{% from 'macros.md.j2' import m %}\n"
                      "{% include 'gone.md.j2' ignore missing %}\n",
        "part.md.j2": "{{ x }}\n{{ inputs.b }}\n{% include 'main.md.j2' %}\n",
        "macros.md.j2": "{% macro m() %}{{ inputs['c'] }}{{ y }}{% endmacro %}\n",
        "child.md.j2": "{% extends 'main.md.j2' %}\n",
        "broken.md.j2": "{{ inputs.d }}\n{% include 'bad.md.j2' %}\n",
        "bad.md.j2": "{% if %}\n",
        "computed.md.j2": "{{ inputs.e }}\n{% include which %}\n",
    }
    for name, text in templates.items():
        (tmp_path / name).write_text(text, encoding="utf-8")

    def file(name: str) -> str:
        return str(tmp_path / name)

    uses = (("a", file("main.md.j2"), 1), ("c", file("macros.md.j2"), 1),
            ("b", file("part.md.j2"), 2))
    for checked in (False, True):
        templates_set = TemplateSet(build_environment([tmp_path]))
        if checked:
            assert list(templates_set.check_template(
                "main.md.j2", frozenset({"inputs", "x", "y", "which"}), context="")) == []
        assert templates_set.input_uses("main.md.j2") == uses
        assert templates_set.names_read("main.md.j2") == frozenset({"inputs", "x", "y"})
        assert templates_set.input_uses("child.md.j2") == uses
        assert templates_set.names_read("child.md.j2") == frozenset({"inputs", "x", "y"})
        assert templates_set.names_read("part.md.j2") == frozenset({"inputs", "x", "y"})
        assert templates_set.input_uses("broken.md.j2") == (("d", file("broken.md.j2"), 1),)
        assert templates_set.names_read("broken.md.j2") is None
        assert templates_set.input_uses("computed.md.j2") == (
            ("e", file("computed.md.j2"), 1),)
        assert templates_set.names_read("computed.md.j2") is None
        assert templates_set.input_uses("gone.md.j2") == ()
        assert templates_set.names_read("gone.md.j2") == frozenset()


def test_inspect_shows_the_inputs_each_section_reads(tmp_path: Path) -> None:
    _deployment(tmp_path)
    code, out, err = run_cli("inspect", "--profile", "bot", "--home", str(tmp_path),
                             "--profile-path", str(tmp_path / "p"), "--template-path",
                             str(tmp_path / "t"), "--var", "seats=3", "--json")
    assert code == 0, err
    rows = {row["id"]: row for row in json.loads(out)["sections"]}
    assert rows["facts"]["inputs"] == ["beta", "code", "ratio", "seats", "tier"]
    assert rows["identity_base"]["inputs"] == []
    # The built-in text is builtin; the deployment's own template is "text".
    assert (rows["identity_base"]["source"], rows["facts"]["source"]) == ("builtin", "text")


# -- --var on each command ----------------------------------------------------------------


def test_var_on_compile_inspect_and_check(tmp_path: Path) -> None:
    _deployment(tmp_path, PROFILE.replace("[[sections]]", "[budgets]\nmax_tokens = 900\n\n"
                                          "[[sections]]", 1))
    where = ["--home", str(tmp_path), "--profile-path", str(tmp_path / "p"),
             "--template-path", str(tmp_path / "t")]
    code, out, err = run_cli("compile", "--profile", "bot", *where, "--var", "seats=12",
                             "--var", "beta=true", "--var", "code=9")
    assert code == 0, err
    assert "tier standard; seats 12; ratio 0.5; beta True; code 9" in out
    code, out, err = run_cli("inspect", "--profile", "bot", *where, "--var", "seats=12")
    assert code == 0, err
    assert "text  " in out and "beta, code, ratio, seats, tier  kept" in out
    code, out, err = run_cli("check", "bot", *where, "--var", "seats=12")
    assert (code, err) == (0, ""), err
    assert out.startswith("tokens: bot ")  # the budget gate compiled with the value
    for command in (["compile", "--profile", "bot"], ["inspect", "--profile", "bot"],
                    ["check", "bot"]):
        code, out, err = run_cli(*command, *where, "--var", "seats=many", "--var", "tire=gold")
        assert (code, out) == (1, ""), command
        assert err == (
            '--var seats: input "seats": expected integer, got "many"\n'
            '--var tire: input "tire" is not declared by profile "bot" (did you mean "tier"?)\n'
            'error: 2 problems in the inputs of profile "bot"\n'), command


def test_a_value_in_an_input_file_is_located_at_its_line(tmp_path: Path) -> None:
    _deployment(tmp_path)
    (tmp_path / "in.toml").write_text('profile = "bot"\n\n[inputs]\nseats = 2\ntier = "x"\n')
    code, _, err = run_script("compile", "--input", str(tmp_path / "in.toml"), "--home",
                              str(tmp_path), "--profile-path", str(tmp_path / "p"),
                              "--template-path", str(tmp_path / "t"))
    assert (code, err) == (1, (
        f'{tmp_path / "in.toml"}:5: inputs → tier: input "tier" of profile "bot": expected '
        'one of "gold", "standard", got "x"\n'
        'error: 1 problem in the inputs of profile "bot"\n'))


# -- extends, fingerprint, lock, manifest -----------------------------------------------


DERIVED = """name = "team"
extends = "bot.toml"

[inputs.region]
type = "string"
default = "eu"
changes = "deployment"

[[sections]]
id = "region"
before = "facts"
title = "Region"
stability = "stable"
template = "region.md.j2"
"""


def test_inputs_are_inherited_and_added_through_extends(tmp_path: Path) -> None:
    compiler = _deployment(tmp_path, **{"region.md.j2": "{{ inputs.region }}/{{ inputs.tier }}\n"})
    (tmp_path / "p" / "team.toml").write_text(DERIVED)
    profile = compiler.load_profile("team")
    assert list(profile.spec.inputs) == ["tier", "seats", "ratio", "beta", "code", "region"]
    payload = compiler.compile({"profile": "team", "workspace_root": "x",
                                "inputs": {"seats": 1, "tier": "gold"}})
    assert "## Region\neu/gold" in payload.stable_system_text
    assert "seats 1" in payload.dynamic_system_text


def test_a_derived_profile_cannot_declare_a_base_input_again(tmp_path: Path) -> None:
    _deployment(tmp_path)
    (tmp_path / "p" / "team.toml").write_text(
        'name = "team"\nextends = "bot.toml"\n\n[inputs.tier]\ntype = "string"\n')
    code, _, err = run_cli("check", "team", "--profile-path", str(tmp_path / "p"),
                           "--template-path", str(tmp_path / "t"))
    assert code == 1
    assert err.splitlines()[0] == (
        f'{tmp_path / "p" / "team.toml"}:4: inputs → tier: input "tier" is already declared '
        f'by base profile "bot" ({tmp_path / "p" / "bot.toml"}:4); a derived profile may add '
        "inputs, not declare one of its base again")


def test_the_fingerprint_and_the_lock_move_with_a_declaration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    compiler = _deployment(tmp_path)
    before = compiler.load_profile("bot").fingerprint
    where = ["--profile-path", "p", "--template-path", "t"]
    assert run_cli("lock", "--profile", "bot", *where)[0] == 0
    assert run_cli("compile", "--profile", "bot", "--locked", "--home", ".", *where,
                   "--var", "seats=1")[0] == 0
    (tmp_path / "p" / "bot.toml").write_text(PROFILE.replace("maximum = 500", "maximum = 400"))
    after = _deployment(tmp_path, PROFILE.replace("maximum = 500", "maximum = 400")
                        ).load_profile("bot").fingerprint
    assert after != before
    code, out, err = run_cli("compile", "--profile", "bot", "--locked", "--home", ".", *where,
                             "--var", "seats=1")
    assert (code, out) == (1, "")
    assert "pioneer.lock: profiles → bot: profile file p/bot.toml changed" in err


def test_the_manifest_keeps_hashes_of_the_given_inputs_never_the_values(tmp_path: Path) -> None:
    compiler = _deployment(tmp_path)
    secret = "ZQ7SECR"
    payload = compiler.compile({"profile": "bot", "workspace_root": "x",
                                "inputs": {"seats": 3, "code": secret}})
    manifest = payload.manifest
    assert manifest.inputs is not None
    assert [(i.name, i.sha256) for i in manifest.inputs] == [
        ("code", hashlib.sha256(b'"ZQ7SECR"').hexdigest()),
        ("seats", hashlib.sha256(b"3").hexdigest()),
    ]
    assert secret not in manifest.to_json()
    assert secret in payload.dynamic_system_text  # the prompt has it; the record does not
    plain = compiler.compile({"profile": "bot", "workspace_root": "x", "inputs": {"seats": 3}})
    assert plain.manifest.fingerprint_full != manifest.fingerprint_full
    none = PromptCompiler().compile({"profile": "none", "workspace_root": "x"})
    assert "inputs" not in json.loads(none.manifest.to_json())


def test_an_old_lock_naming_a_built_in_file_without_its_prefix_still_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _deployment(tmp_path)
    where = ["--profile-path", "p", "--template-path", "t"]
    assert run_cli("lock", "--profile", "bot", *where)[0] == 0
    lock = Path("pioneer.lock").read_text()
    assert '"<built-in>/profiles/none.toml"' in lock
    Path("pioneer.lock").write_text(lock.replace('"<built-in>/profiles/none.toml"',
                                                 '"profiles/none.toml"'))
    assert run_cli("compile", "--profile", "bot", "--locked", "--home", ".", *where,
                   "--var", "seats=1")[0] == 0
    # When the fingerprint differs, the built-in file is compared under its new name.
    Path("p/bot.toml").write_text(PROFILE.replace("maximum = 500", "maximum = 499"))
    code, _, err = run_cli("compile", "--profile", "bot", "--locked", "--home", ".", *where,
                           "--var", "seats=1")
    assert code == 1
    assert "none.toml" not in err and "profile file p/bot.toml changed" in err


# -- the derived profile's own line, labels -------------------------------------------------


def test_a_derived_ordering_mistake_is_reported_at_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "support.toml").write_text(
        'name = "support"\nextends = "full"\n\n[[sections]]\nid = "escalation"\n'
        'after = "assistant_safety"\ntitle = "Escalation"\nstability = "dynamic"\n'
        'template = "content.md.j2"\nsource = "input"\nfield = "extra_system"\n')
    code, _, err = run_script("check", "support", "--profile-path", str(tmp_path / "p"))
    assert (code, err) == (1, (
        f'{tmp_path / "p" / "support.toml"}:6: sections[0] (id "escalation") → after: '
        'dynamic section "escalation" is placed after assistant_safety, which is stable; a '
        "dynamic section must come after every stable one: put it after "
        "tool_recovery_policy or later\n"
        "error: 1 problem in 1 profile\n"))


def test_a_base_problem_names_the_built_in_file(tmp_path: Path) -> None:
    compiler = PromptCompiler()
    assert compiler.load_profile("full").file == "<built-in>/profiles/full.toml"


# -- the schema for one profile ---------------------------------------------------------------


def test_schema_compile_input_for_a_profile_describes_its_inputs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CASE)
    code, out, err = run_script("schema", "compile-input", "--profile", "support")
    assert code == 0, err
    schema = json.loads(out)
    assert schema["properties"]["inputs"]["properties"]["customer_tier"] == {
        "type": "string", "description": "The customer's support tier.",
        "enum": ["gold", "standard"], "default": "standard"}
    validator = jsonschema.Draft202012Validator(schema)
    good = json.loads((CASE / "input.json").read_text())
    assert list(validator.iter_errors(good)) == []
    bad = {**good, "inputs": {"customer_tier": "silver", "open_tickets": -1, "tier": 1}}
    found = sorted(error.message for error in validator.iter_errors(bad))
    assert found == sorted(["-1 is less than the minimum of 0",
                            "'silver' is not one of ['gold', 'standard']",
                            "Additional properties are not allowed ('tier' was unexpected)"])
    assert run_cli("schema", "profile", "--profile", "support")[0] == 2


def test_the_docs_list_the_support_bot_inputs() -> None:
    text = PAGE.read_text("utf-8")
    assert names._inputs_blocks(text, PAGE.parent.parent) == text, (
        "docs/templates.md differs from the code: run python -m pioneer.review.names")


# -- the support bot, end to end ---------------------------------------------------------------


@pytest.fixture
def bot(tmp_path: Path) -> Path:
    """A copy of the support-bot case, as a deployment folder (its pioneer.toml)."""
    folder = tmp_path / "support-bot"
    shutil.copytree(CASE, folder, ignore=shutil.ignore_patterns("expected"))
    return folder


def test_the_support_bot_works_through_the_console_script(bot: Path) -> None:
    assert run_script("check", "support", cwd=bot) == (0, "ok: 1 profile (support)\n", "")
    code, out, err = run_script("compile", "--input", "input.json", cwd=bot)
    assert (code, err) == (0, "")
    assert out == (CASE / "expected" / "full.txt").read_text() + "\n"
    code, out, _ = run_script("compile", "--input", "input.json", "--var",
                              "customer_tier=standard", "--var", "open_tickets=0", cwd=bot)
    assert code == 0 and "Customer Tier" not in out and "Open Tickets" not in out
    code, out, err = run_script("inspect", "--input", "input.json", cwd=bot)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("tier_rules "))
    assert row.split()[4:7] == ["text", "templates/tier_rules.md.j2", "(deployment)"]
    assert row.split()[7:] == ["customer_tier", "kept"]
    code, out, err = run_script("inspect", "--input", "input.json", "--html", "map.html",
                                "--json", cwd=bot)
    assert code == 0, err
    data = json.loads(out)
    blocks = {block["id"]: block for block in data["blocks"]}
    assert blocks["tier_rules"]["source"]["from"] == "deployment text"
    assert blocks["identity_base"]["source"]["from"] == "built-in text"
    assert all(block["chars"] is not None for block in data["blocks"])
    assert data["budget"]["window_from"].startswith(
        "no model given: window and minimum of the default model (")
    page = (bot / "map.html").read_text()
    assert "Customer Tier" in page and "no model given" in page


def test_the_support_bot_through_the_runner(bot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(bot)
    compiler = PromptCompiler(profile_path=["profiles"], template_path=["templates"])
    base = PromptCompileInput(workspace_root=Path("home"), profile="support",
                              inputs={"customer_tier": "gold"})
    with Agent("turns.db", provider="anthropic", model="claude-sonnet-4-5", compiler=compiler,
               compile_input=base, recall=False) as agent:
        body = json.dumps(agent.turn("t1", "Where is my order?",
                                     inputs={"open_tickets": 2}).next_body())
        assert "on the gold tier" in body and "2 open tickets" in body
        body = json.dumps(agent.turn("t2", "Hi", inputs={"customer_tier": "standard"})
                          .next_body())
        assert "gold tier" not in body and "open tickets" not in body
        with pytest.raises(InputError, match='input "customer_tier" of profile "support": '
                           'expected one of "gold", "standard", got "silver"'):
            agent.turn("t3", "Hi", inputs={"customer_tier": "silver"}).next_body()


# -- the checker agrees with JSON Schema --------------------------------------------------------

_SCALARS = st.one_of(
    st.text(max_size=6), st.booleans(), st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False).filter(lambda x: not x.is_integer()))
_TYPES = st.sampled_from(["string", "integer", "number", "boolean"])


@st.composite
def _specs(draw: st.DrawFn) -> InputSpec:
    kinds = draw(st.lists(_TYPES, min_size=1, max_size=3, unique=True))
    keys: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
    if draw(st.booleans()):
        keys["enum"] = draw(st.lists(_SCALARS, min_size=1, max_size=3))
    if {"integer", "number"} & set(kinds):
        for bound in ("minimum", "maximum"):
            if draw(st.booleans()):
                keys[bound] = draw(st.integers(-3, 3))
    if "string" in kinds and draw(st.booleans()):
        keys["maxLength"] = draw(st.integers(0, 4))
    if "string" in kinds and draw(st.booleans()):
        keys["pattern"] = draw(st.sampled_from(["^a", "b$", "[0-9]", "^$"]))
    return InputSpec.model_validate(keys)


@settings(max_examples=300, deadline=None)
@given(spec=_specs(), value=_SCALARS)
def test_a_value_is_refused_exactly_when_its_json_schema_refuses_it(
        spec: InputSpec, value: Any) -> None:
    """The compile's check and the schema an editor gets (``schema compile-input
    --profile``) accept the same values (integers written without a fraction)."""
    schema = input_schema({"x": spec}, "p")["properties"]["x"]
    refused = not jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (value_problem(spec, value) is not None) == refused, (schema, value)


# -- diff and the budget gate ----------------------------------------------------------


def test_diff_shows_the_inputs_given_differently(tmp_path: Path) -> None:
    _deployment(tmp_path)
    where = ["--home", str(tmp_path), "--profile-path", str(tmp_path / "p"),
             "--template-path", str(tmp_path / "t"), "--json"]

    def compiled(name: str, *pairs: str) -> str:
        code, out, err = run_cli("compile", "--profile", "bot", *where,
                                 *[arg for pair in pairs for arg in ("--var", pair)])
        assert code == 0, err
        (tmp_path / name).write_text(out)
        return str(tmp_path / name)

    def sha(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()

    a = compiled("a.json", "seats=3", "tier=gold")
    b = compiled("b.json", "seats=4", "beta=true")
    same = compiled("same.json", "seats=3", "tier=gold")
    code, out, err = run_cli("diff", a, b)
    assert (code, err) == (0, "")
    assert out.split("inputs given:\n", 1)[1].split("stable prefix:")[0] == (
        f"  + beta   now given (sha256 {sha('true')[:12]})\n"
        f"  ~ seats  value changed (sha256 {sha('3')[:12]} → {sha('4')[:12]})\n"
        f'  - tier   no longer given (was sha256 {sha(chr(34) + "gold" + chr(34))[:12]})\n')
    code, out, _ = run_cli("diff", a, b, "--json")
    assert json.loads(out)["inputs"] == [
        {"kind": "added", "name": "beta", "before": None, "after": sha("true")},
        {"kind": "changed", "name": "seats", "before": sha("3"), "after": sha("4")},
        {"kind": "removed", "name": "tier", "before": sha('"gold"'), "after": None},
    ]
    code, out, _ = run_cli("diff", a, same)
    assert code == 0 and "inputs given" not in out
    assert json.loads(run_cli("diff", a, same, "--json")[1])["inputs"] == []


def test_the_budget_gate_measures_a_missing_input_with_its_example(tmp_path: Path) -> None:
    # seats has no default: the gate uses its first example (1) and says so, as check does.
    _deployment(tmp_path, **{"facts.md.j2": "{{ 'seat ' * inputs.seats }}\n"})
    where = ["--profile-path", str(tmp_path / "p"), "--template-path", str(tmp_path / "t")]
    code, out, err = run_cli("check", "bot", *where, "--max-tokens", "5000")
    assert (code, err) == (0, "")
    assert out.splitlines()[0].endswith(
        ", limit 5000; inputs not given, measured with inputs.seats = 1 "
        "(--var NAME=VALUE chooses)")
    code, out, err = run_cli("check", "bot", *where, "--max-tokens", "5000", "--json")
    assert json.loads(out)["tokens"][0]["assumed_inputs"] == {"seats": 1}
    code, out, err = run_cli("check", "bot", *where, "--max-tokens", "100", "--var",
                             "seats=400")
    assert code == 1
    assert out.startswith("tokens: bot ") and "measured with" not in out
    assert "over --max-tokens 100" in err
    turn = tmp_path / "turn.json"
    turn.write_text('{"inputs": {"tier": "gold"}}')
    code, out, err = run_cli("check", "bot", *where, "--max-tokens", "5000", "--input",
                             str(turn))
    assert (code, err) == (0, "")
    assert "measured with inputs.seats = 1 " in out
