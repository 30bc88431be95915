"""Search paths: command line, then PIONEER_* environment, then pioneer.toml, then defaults."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from pioneer import InputError, PioneerSettings, PromptCompiler
from pioneer.cli import main


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("PIONEER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _profile(folder: Path, name: str, title: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\nextends = "none"\n[[sections]]\nid = "identity_base"\n'
        f'title = "{title}"\n'
    )


def _title(settings: PioneerSettings, name: str = "none") -> str:
    return PromptCompiler(settings).load_profile(name).spec.sections[0].title


def test_defaults_search_only_the_builtin_folders() -> None:
    settings = PioneerSettings()
    assert (settings.profile_path, settings.template_path) == ([], [])
    assert _title(settings) == "Identity"


def test_precedence_is_flag_then_environment_then_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for source in ("file", "env", "flag"):
        _profile(tmp_path / source, "none", f"From {source}")
    (tmp_path / "pioneer.toml").write_text('profile_path = ["file"]\n')
    assert _title(PioneerSettings.load()) == "From file"
    monkeypatch.setenv("PIONEER_PROFILE_PATH", "env")
    assert _title(PioneerSettings.load()) == "From env"
    assert _title(PioneerSettings.load(profile_path=[Path("flag")])) == "From flag"
    out = io.StringIO()
    assert main(["compile", "--profile", "none", "--home", "h", "--profile-path", "flag"],
                stdout=out) == 0
    assert out.getvalue().startswith("## From flag\n")


def test_environment_takes_pathsep_lists_and_earlier_folders_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _profile(tmp_path / "a", "none", "From a")
    _profile(tmp_path / "b", "none", "From b")
    _profile(tmp_path / "b", "only_b", "Only b")
    monkeypatch.setenv("PIONEER_PROFILE_PATH", os.pathsep.join(["a", "b"]))
    settings = PioneerSettings()
    assert settings.profile_path == [Path("a"), Path("b")]
    assert (_title(settings), _title(settings, "only_b")) == ("From a", "Only b")
    monkeypatch.setenv("PIONEER_PROFILE_PATH", '["b", "a"]')
    assert _title(PioneerSettings()) == "From b"


def test_deployment_file_paths_are_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy = tmp_path / "etc" / "acme"
    _profile(deploy / "profiles", "none", "Acme")
    (deploy / "templates").mkdir()
    (deploy / "templates" / "identity_base.md.j2").write_text("You are Acme's agent.\n")
    (deploy / "pioneer.toml").write_text(
        'profile_path = ["profiles"]\ntemplate_path = ["templates"]\nhome = "state"\n'
    )
    monkeypatch.setenv("PIONEER_CONFIG", str(deploy / "pioneer.toml"))
    settings = PioneerSettings()
    assert settings.profile_path == [deploy / "profiles"]
    assert settings.home == deploy / "state"
    out = io.StringIO()
    assert main(["compile", "--profile", "none"], stdout=out) == 0
    assert out.getvalue() == "## Acme\nYou are Acme's agent.\n"


def test_deployment_template_overrides_the_builtin_one(tmp_path: Path) -> None:
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "assistant_safety.md.j2").write_text("Deployment safety rules.\n")
    (tmp_path / "pioneer.toml").write_text('template_path = ["tpl"]\n')
    out = io.StringIO()
    assert main(["compile", "--profile", "minimal", "--home", "h"], stdout=out) == 0
    assert "## Safety\nDeployment safety rules.\n\n## Soul Core" in out.getvalue()


def test_a_missing_named_deployment_file_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_CONFIG", "nowhere.toml")
    with pytest.raises(InputError) as info:
        PioneerSettings()
    assert str(info.value) == "PIONEER_CONFIG names nowhere.toml, which is not a file"


def test_a_broken_deployment_file_is_a_located_user_error(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text('profile_path = ["a"\n')
    err = io.StringIO()
    assert main(["check"], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue() == (
        "pioneer.toml: unclosed array at end of document (TOML syntax)\nerror: 1 problem\n"
    )
    (tmp_path / "pioneer.toml").write_text('profile_path = "a" "b"\n')
    err = io.StringIO()
    assert main(["check"], stdout=io.StringIO(), stderr=err) == 1
    assert err.getvalue() == (
        "pioneer.toml:1:20: expected newline or end of document after a statement (TOML syntax)\n"
        "error: 1 problem\n"
    )
