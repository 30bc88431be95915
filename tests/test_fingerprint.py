"""The profile fingerprint covers the resolved profile and every template it uses."""

from __future__ import annotations

from pathlib import Path

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.fingerprint import ABSENT, canonical_profile

PROFILE = """name = "acme"

[[sections]]
id = "rules"
title = "Rules"
stability = "stable"
template = "rules.md.j2"
"""


def _fingerprint(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    compiler = PromptCompiler(
        profile_path=[tmp_path / "profiles"], template_path=[tmp_path / "templates"]
    )
    return compiler.load_profile("acme").fingerprint


def test_it_is_what_the_manifest_records(tmp_path: Path) -> None:
    compiler = PromptCompiler()
    payload = compiler.compile(PromptCompileInput(profile="none", workspace_root=tmp_path))
    assert payload.manifest.profile_fingerprint == compiler.load_profile("none").fingerprint


def test_a_template_change_moves_it(tmp_path: Path) -> None:
    files = {"profiles/acme.toml": PROFILE, "templates/rules.md.j2": "Be kind.\n"}
    before = _fingerprint(tmp_path, files)
    assert _fingerprint(tmp_path, files) == before
    assert _fingerprint(tmp_path, {"templates/rules.md.j2": "Be kinder.\n"}) != before


def test_a_deployment_template_override_moves_it(tmp_path: Path) -> None:
    before = PromptCompiler().load_profile("none").fingerprint
    (tmp_path / "identity_base.md.j2").write_text("You are someone else.\n")
    after = PromptCompiler(template_path=[tmp_path]).load_profile("none").fingerprint
    assert after != before


def test_imported_and_included_templates_are_covered(tmp_path: Path) -> None:
    files = {
        "profiles/acme.toml": PROFILE,
        "templates/rules.md.j2": '{% import "macros.j2" as m %}{{ m.rule("x") }}\n'
        '{% include "footer.j2" %}\n',
        "templates/macros.j2": "{% macro rule(t) %}- {{ t }}{% endmacro %}",
        "templates/footer.j2": '{% include "signature.j2" %}',
        "templates/signature.j2": "-- acme",
    }
    before = _fingerprint(tmp_path, files)
    compiler = PromptCompiler(
        profile_path=[tmp_path / "profiles"], template_path=[tmp_path / "templates"]
    )
    assert list(compiler.load_profile("acme").templates) == [
        "footer.j2", "macros.j2", "rules.md.j2", "signature.j2",
    ]
    after_macro = _fingerprint(tmp_path, {"templates/macros.j2": "{% macro rule(t) %}* {{ t }}"
                                          "{% endmacro %}"})
    after_nested = _fingerprint(tmp_path, {"templates/signature.j2": "-- acme inc"})
    assert len({before, after_macro, after_nested}) == 3


def test_a_missing_optional_include_is_pinned_as_absent(tmp_path: Path) -> None:
    files = {
        "profiles/acme.toml": PROFILE,
        "templates/rules.md.j2": 'Rules.\n{% include "local.j2" ignore missing %}\n',
    }
    before = _fingerprint(tmp_path, files)
    compiler = PromptCompiler(
        profile_path=[tmp_path / "profiles"], template_path=[tmp_path / "templates"]
    )
    assert compiler.load_profile("acme").templates["local.j2"] == ABSENT
    assert _fingerprint(tmp_path, {"templates/local.j2": "local rule"}) != before


def test_a_derived_override_moves_it_and_a_comment_does_not(tmp_path: Path) -> None:
    derived = 'name = "acme"\nextends = "none"\n[budgets]\nmax_chars_total = 5\n'
    before = _fingerprint(tmp_path, {"profiles/acme.toml": derived})
    assert _fingerprint(tmp_path, {"profiles/acme.toml": "# pinned\n" + derived}) == before
    changed = derived.replace("= 5", "= 6")
    assert _fingerprint(tmp_path, {"profiles/acme.toml": changed}) != before


def test_unset_later_keys_stay_out_of_the_canonical_form(tmp_path: Path) -> None:
    spec = PromptCompiler().load_profile("full").spec
    assert '"max_tokens"' not in canonical_profile(spec)
    limited = spec.model_copy(update={"sections": [
        spec.sections[0].model_copy(update={"max_tokens": 50}), *spec.sections[1:]
    ]})
    assert '"max_tokens": 50' in canonical_profile(limited)
