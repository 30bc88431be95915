"""The command line, called in-process through ``main(argv, stdout=, stderr=)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli as run
from support import run_script

from pioneer.compile.boundary import BOUNDARY_MARKER


def test_compile_seeds_the_home_and_prints_the_prompt(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    code, out, err = run("compile", "--home", str(home))
    assert (code, err) == (0, "")  # USER.md is optional: its absence is info, not a warning
    assert run("compile", "--home", str(home), "-v")[2] == (
        "info: bootstrap file `USER.md` is missing [missing_file]\n")
    assert (home / "SOUL.md").is_file() and (home / "IDENTITY.md").is_file()
    assert out.startswith("## Identity\nYou are Pioneer, a personal assistant agent")
    assert f"### SOUL.md ({home / 'SOUL.md'})" in out
    assert BOUNDARY_MARKER not in out  # no dynamic input: stable text only


def test_compile_uses_pioneer_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_HOME", str(tmp_path / "env-home"))
    code, out, _ = run("compile", "--profile", "none")
    assert code == 0 and out == (
        "## Identity\nYou are Pioneer, a personal assistant agent that helps one person get "
        "real work done.\n"
    )
    assert (tmp_path / "env-home" / "SOUL.md").is_file()


def test_compile_input_file_and_json_outputs(tmp_path: Path) -> None:
    spec = tmp_path / "turn.toml"
    spec.write_text('profile = "minimal"\nextra_system = "Be brief."\n')
    code, out, _ = run("compile", "--home", str(tmp_path / "h"), "--input", str(spec), "--json")
    payload = json.loads(out)
    assert code == 0
    assert payload["manifest"]["profile"] == "minimal"
    assert payload["dynamic_system_text"] == "## Extra System\nBe brief."
    assert all(isinstance(s["tokens"], int) for s in payload["manifest"]["sections"])
    code, out, _ = run(
        "compile",
        "--home",
        str(tmp_path / "h"),
        "--input",
        str(spec),
        "--profile",
        "none",
        "--manifest",
    )
    assert json.loads(out)["section_ids"] == ["identity_base"]


def test_compile_bad_input_is_exit_1_without_traceback(tmp_path: Path) -> None:
    spec = tmp_path / "turn.json"
    spec.write_text('{"runtime_sections": [{"id": "a b", "content": "x"}]}')
    code, out, err = run("compile", "--home", str(tmp_path), "--input", str(spec))
    assert (code, out) == (1, "")
    assert err == (
        f"{spec}:1: runtime_sections[0] → id: must not contain whitespace (got 'a b')\n"
        f"error: 1 problem in {spec}\n"
    )
    assert "Traceback" not in err


def test_check_passes_on_builtin_profiles() -> None:
    assert run("check") == (0, "ok: 3 profiles (full, minimal, none)\n", "")


def test_check_fails_and_lists_problems(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "bad"\nsections = 3\n')
    code, out, err = run("check", "--profile-path", str(tmp_path), "bad")
    assert (code, out) == (1, "")
    assert err == (
        f"{tmp_path / 'bad.toml'}:2: sections: expected array (got 3)\n"
        "error: 1 problem in 1 profile\n"
    )


def test_init_reports_created_then_kept(tmp_path: Path) -> None:
    code, out, _ = run("init", "--home", str(tmp_path))
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [
        "runtime", "created", "created", "optional"]
    code, out, _ = run("init", "--home", str(tmp_path))
    assert code == 0
    assert out.splitlines()[1:3] == [
        f"kept     {tmp_path / name} (already exists)" for name in ("SOUL.md", "IDENTITY.md")
    ]


def test_usage_error_is_exit_2() -> None:
    code, _, err = run("frobnicate")
    assert code == 2 and "invalid choice: 'frobnicate'" in err


def test_internal_error_is_exit_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def explode(*_: object, **__: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("pioneer.compile.compiler.PromptCompiler.compile", explode)
    code, _, err = run("compile", "--home", str(tmp_path))
    assert code == 3
    assert err == "internal error: RuntimeError: boom\n(run with --debug for the traceback)\n"
    code, _, err = run("--debug", "compile", "--home", str(tmp_path))
    assert code == 3 and "Traceback" in err


def test_interrupt_is_exit_130(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def interrupt(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("pioneer.compile.compiler.PromptCompiler.compile", interrupt)
    assert run("compile", "--home", str(tmp_path))[0] == 130


def test_help_is_exit_0() -> None:
    code, out, _ = run("--help")
    assert code == 0 and "compile" in out


def test_init_says_what_it_seeded_and_where_user_md_goes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out, err = run_script("init", "--home", str(home))
    assert (code, err) == (0, "")
    assert out == (
        f"runtime home {home}\n"
        f"created  {home / 'SOUL.md'}\n"
        f"created  {home / 'IDENTITY.md'}\n"
        f"optional {home / 'USER.md'} (not created: write about the user there, for the User "
        "Persona section; compiles work without it)\n"
    )
    (home / "USER.md").write_text("Ada.\n")
    assert run_script("init", "--home", str(home))[1].splitlines()[1:] == [
        f"kept     {home / 'SOUL.md'} (already exists)",
        f"kept     {home / 'IDENTITY.md'} (already exists)",
        f"kept     {home / 'USER.md'} (optional, already exists)",
    ]


def test_a_missing_user_md_is_info_kept_in_the_manifest(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    code, _, err = run_script("compile", "--home", home)
    assert (code, err) == (0, "")  # the README's first command: nothing to warn about
    code, _, err = run_script("compile", "--home", home, "--verbose")
    assert (code, err) == (0, "info: bootstrap file `USER.md` is missing [missing_file]\n")
    code, out, _ = run_script("compile", "--home", home, "--manifest")
    (diagnostic,) = json.loads(out)["diagnostics"]
    assert (diagnostic["code"], diagnostic["level"]) == ("missing_file", "info")
    assert run("compile", "--home", home, "-v")[2] == err


def test_warnings_are_still_printed(tmp_path: Path) -> None:
    (tmp_path / "input.json").write_text('{"limits": {"max_chars_total": 999999}}')
    argv = ["compile", "--home", str(tmp_path / "home"), "--input", str(tmp_path / "input.json")]
    code, _, err = run_script(*argv)
    assert (code, err) == (0, (
        "warning: limits.max_chars_total = 999999 is above the 150000 of profile `full`, so it "
        "is clamped to 150000 (a limit can only lower a budget) [limit_clamped]\n"))
    assert run_script(*argv, "-q")[2] == ""
