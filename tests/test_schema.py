"""Schemas: committed files match the models, and validate what they claim to."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest
from doc_pages import example
from support import run_cli, run_script

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.files import builtin_dir, load_schema
from pioneer.review.schemas import SCHEMA_MODELS, render

SCHEMAS = builtin_dir("schemas")
PROFILES = sorted(builtin_dir("profiles").glob("*.toml"))


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_committed_schema_matches_models(name: str) -> None:
    committed = (SCHEMAS / name).read_text("utf-8")
    stale = f"schemas/{name} is stale: run python -m pioneer.review.schemas"
    assert committed == render(name), stale


def test_builtin_profiles_are_found() -> None:
    assert [p.stem for p in PROFILES] == ["full", "minimal", "none"]


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_shipped_profiles_validate(path: Path) -> None:
    data = tomllib.loads(path.read_text("utf-8"))
    jsonschema.Draft202012Validator(load_schema("profile.schema.json")).validate(data)


@pytest.mark.parametrize(
    "mutation",
    [
        {"sections": []},
        {"name": "has space"},
        {"budgets": {"max_chars_total": -1}},
        {"unknown": 1},
        {"sections": [{"id": "x", "title": "X", "stability": "stable"}]},
        {"sections": [{"id": "x", "title": "X", "stability": "both", "template": "t"}]},
        {"sections": [{"id": "x", "title": "", "stability": "stable", "template": "t"}]},
        {
            "sections": [
                {"id": "x", "title": "X", "stability": "stable", "template": "t", "source": "web"}
            ]
        },
    ],
)
def test_schema_rejects_broken_profiles(mutation: dict[str, object]) -> None:
    data = tomllib.loads(PROFILES[0].read_text("utf-8")) | mutation
    validator = jsonschema.Draft202012Validator(load_schema("profile.schema.json"))
    assert list(validator.iter_errors(data))


def test_manifest_json_validates_against_its_schema(home: Path) -> None:
    (home / "USER.md").write_text("user")
    payload = PromptCompiler().compile(
        PromptCompileInput(
            workspace_root=home,
            extra_system="x",
            dynamic_sections=[{"id": "a.b", "content": "c" * 9000}],
        )
    )
    data = json.loads(payload.manifest.to_json())
    jsonschema.Draft202012Validator(load_schema("manifest.schema.json")).validate(data)
    assert {d["code"] for d in data["diagnostics"]} == {"missing_file", "dynamic_section_truncated"}


def test_builtin_profile_tables_match_the_design() -> None:
    compiler = PromptCompiler()
    rows = {
        name: [(s.id, s.title, s.stability) for s in compiler.load_profile(name).spec.sections]
        for name in ("full", "minimal", "none")
    }
    assert rows["none"] == [("identity_base", "Identity", "stable")]
    assert [r[0] for r in rows["full"]] == [
        "identity_base",
        "assistant_safety",
        "soul_core",
        "identity_core",
        "user_persona",
        "tool_recovery_policy",
        "current_permissions",
        "task_orchestration_policy",
        "memory_recall",
        "thread_context",
        "artifact_references",
        "request_tools.hidden_domains",
        "agents_md",
        "contributions",
        "recovery_continuation",
        "skills_runtime_prompt",
        "retry_runtime_instruction",
        "dynamic_context",
        "extra_system",
    ]
    # minimal is for tool-less chat turns: no tool guidance, so no Current Permissions.
    dropped = {
        "current_permissions",
        "tool_recovery_policy",
        "task_orchestration_policy",
        "artifact_references",
        "request_tools.hidden_domains",
        "skills_runtime_prompt",
        "retry_runtime_instruction",
    }
    assert rows["minimal"] == [r for r in rows["full"] if r[0] not in dropped]


# -- pioneer schema NAME ---------------------------------------------------------------------

SCHEMA_FILES = {"profile": "profile.schema.json", "compile-input": "compile_input.schema.json",
                "manifest": "manifest.schema.json", "deployment": "deployment.schema.json"}


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_pioneer_schema_prints_the_shipped_file(name: str) -> None:
    code, out, err = run_script("schema", name)
    assert (code, err) == (0, "")
    assert out == (SCHEMAS / SCHEMA_FILES[name]).read_text("utf-8")
    jsonschema.Draft202012Validator.check_schema(json.loads(out))
    assert run_cli("schema", name) == (code, out, err)


def test_every_shipped_schema_has_a_name() -> None:
    code, out, _ = run_cli("schema", "--help")
    assert code == 0
    for path in SCHEMAS.glob("*.schema.json"):
        assert path.name.removesuffix(".schema.json").replace("_", "-") in out


def test_a_misspelt_schema_name_is_suggested() -> None:
    code, out, err = run_script("schema", "profil")
    assert (code, out) == (2, "")
    assert err.startswith("pioneer schema: argument NAME: invalid choice: 'profil'")
    assert '(did you mean "profile"?)' in err


def _validator(name: str) -> jsonschema.Draft202012Validator:
    code, out, _ = run_cli("schema", name)
    assert code == 0
    return jsonschema.Draft202012Validator(json.loads(out))


def test_the_printed_schemas_accept_what_pioneer_accepts(tmp_path: Path) -> None:
    for path in PROFILES:
        _validator("profile").validate(tomllib.loads(path.read_text("utf-8")))
    _validator("deployment").validate(
        {"home": "home", "profile_path": ["profiles"], "clock_granularity": "day"})
    assert list(_validator("deployment").iter_errors({"profile_paths": ["profiles"]}))
    case = Path(__file__).parent / "cases" / "full-everything" / "input.json"
    _validator("compile-input").validate(json.loads(case.read_text("utf-8")))
    code, manifest, _ = run_cli("compile", "--home", str(tmp_path / "h"), "--manifest")
    assert code == 0
    _validator("manifest").validate(json.loads(manifest))


@pytest.mark.parametrize("section_id", ["\u0455oul", "zero\u200bwidth", "two words"])
def test_the_printed_schemas_refuse_the_ids_pioneer_refuses(section_id: str) -> None:
    """docs/profiles.md, "Ids": a compile input's and a hook's section ids follow the
    profile's id rule, and the published schemas say so, not only the compiler."""
    given = {"runtime_sections": [{"id": section_id, "content": "x"}]}
    with pytest.raises(ValueError, match=r"not allowed|must not contain"):
        PromptCompileInput.model_validate(given)
    assert list(_validator("compile-input").iter_errors(given))
    assert list(_validator("compile-input").iter_errors(
        {"dynamic_sections": [{"id": section_id, "content": "x"}]}))
    hooks = jsonschema.Draft202012Validator(load_schema("hook_contribution.schema.json"))
    hook = {"contribution_id": "c1", "domain": "docs", "content": "x", "section_id": "docs.faq"}
    assert not list(hooks.iter_errors(hook))
    assert list(hooks.iter_errors({**hook, "section_id": section_id}))
    assert not list(_validator("compile-input").iter_errors(
        {"runtime_sections": [{"id": "request_tools.hidden_domains", "content": "x"}]}))


def test_a_profile_with_the_schema_directive_of_the_docs(tmp_path: Path) -> None:
    """docs/profiles.md, "Editor support": the schema written as shown, and a profile that
    starts with the #:schema line, which pioneer loads and the schema validates."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "profiles").mkdir()
    code, out, _ = run_script("schema", "profile")
    assert code == 0
    (tmp_path / "schemas" / "profile.schema.json").write_text(out, encoding="utf-8")
    body, _ = example("schema-directive", "profiles.md")
    profile = tmp_path / "profiles" / "mybot.toml"
    profile.write_text(body, encoding="utf-8")
    directive = body.splitlines()[0]
    assert directive.startswith("#:schema ")
    schema_file = (profile.parent / directive.removeprefix("#:schema ")).resolve()
    assert schema_file == tmp_path / "schemas" / "profile.schema.json"
    jsonschema.Draft202012Validator(json.loads(schema_file.read_text("utf-8"))).validate(
        tomllib.loads(body))
    code, out, err = run_script("check", "mybot", "--profile-path", str(tmp_path / "profiles"),
                                cwd=tmp_path)
    assert (code, err) == (0, "")
    assert out.endswith("ok: 1 profile (mybot)\n")
