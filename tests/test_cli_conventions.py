"""Command-line conventions: --version, ``-`` for standard input, exit 2 for usage errors,
one footer for every failure, did-you-mean, and output that never crashes on a stream
that cannot take it (an ASCII terminal, a closed or full stdout, a closed stderr)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli as run
from support import run_script

from pioneer import __version__


def _environment(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if not name.upper().startswith("PIONEER_")}
    return {**env, **extra}


def _pioneer(*argv: str, cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pioneer", *argv], cwd=cwd, text=True,
                          env=kwargs.pop("env", _environment()), check=False,  # type: ignore[arg-type]
                          **kwargs)  # type: ignore[call-overload]


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str) -> None:
    assert run(flag) == (0, f"pioneer {__version__}\n", "")
    assert run_script(flag) == (0, f"pioneer {__version__}\n", "")


def test_bare_pioneer_prints_the_help_and_exits_2() -> None:
    code, out, err = run_script()
    assert (code, out) == (2, "")
    assert err.startswith("usage: pioneer [-h] [-V] [--debug] [--color WHEN] COMMAND ...\n")
    for command in ("check", "compile", "diff", "init", "recall", "schema"):
        assert re.search(rf"^    {command} ", err, flags=re.M), command
    assert run() == (2, "", err)


@pytest.mark.parametrize(("argv", "usage"), [
    (["recall", "demo"], "pioneer recall --help"),
    (["compile", "--json", "--manifest"], "pioneer compile --help"),
    (["schema", "profil"], "pioneer schema --help"),
    (["--color", "always", "diff", "a.json"], "pioneer diff --help"),
    (["nope"], "pioneer --help"),
])
def test_the_console_script_points_at_the_commands_help(argv: list[str], usage: str) -> None:
    code, out, err = run_script(*argv)
    assert (code, out) == (2, "")
    assert err.endswith(f"error: 1 problem\n(run `{usage}` for usage)\n")
    assert run(*argv) == (code, out, err)


@pytest.mark.parametrize(
    ("argv", "message", "usage"),
    [
        (["compil"], "pioneer: argument COMMAND: invalid choice: 'compil' (choose from 'check', "
         "'compile', 'diff', 'explain', 'history', 'init', 'inspect', 'lock', 'recall', "
         '\'schema\') (did you mean "compile"?)', "pioneer --help"),
        (["compile", "--jsn"], 'pioneer: unrecognized arguments: --jsn (did you mean "--json"?)',
         "pioneer compile --help"),
        (["diff", "a.json"], "pioneer diff: the following arguments are required: B.json",
         "pioneer diff --help"),
        (["diff", "-", "-"], "only one of A.json and B.json can be - (standard input)",
         "pioneer diff --help"),
    ],
    ids=["command", "option", "missing-argument", "two-stdins"],
)
def test_usage_errors_exit_2_with_the_footer(argv: list[str], message: str, usage: str) -> None:
    assert run(*argv) == (
        2, "", f"{message}\nerror: 1 problem\n(run `{usage}` for usage)\n"
    )


def test_a_misspelt_profile_is_suggested(tmp_path: Path) -> None:
    assert run("compile", "--home", str(tmp_path), "--profile", "minimall") == (
        1, "", 'unknown profile "minimall" (did you mean "minimal"?) (known: full, minimal, '
        "none)\nerror: 1 problem\n"
    )


def test_a_misspelt_template_variable_is_suggested(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.md.j2").write_text("{{ dynamic_contxt }}\n")
    (tmp_path / "p" / "x.toml").write_text(
        'name = "x"\n[[sections]]\nid = "a"\ntitle = "A"\nstability = "stable"\n'
        'template = "x.md.j2"\n'
    )
    code, _, err = run("check", "x", "--profile-path", str(tmp_path / "p"), "--template-path",
                       str(tmp_path / "t"))
    assert (code, err) == (1, (
        f'{tmp_path / "t" / "x.md.j2"}:1: "dynamic_contxt" is undefined (did you mean '
        '"dynamic_context"?) (not in the compile context)\n'
        f'  while checking section "a" of {tmp_path / "p" / "x.toml"}\n'
        "error: 1 problem in 1 profile\n"
    ))


def test_input_from_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"dynamic_context": "x"}'))
    code, out, _ = run("compile", "--home", str(tmp_path), "--input", "-")
    assert code == 0 and "\n## Dynamic Context\nx\n" in out
    monkeypatch.setattr("sys.stdin", io.StringIO('extra_system = "y"\n'))
    code, out, _ = run("compile", "--home", str(tmp_path), "--input", "-")
    assert code == 0 and "\n## Extra System\ny\n" in out
    monkeypatch.setattr("sys.stdin", io.StringIO('{"profile": "none", "bogus": 1}'))
    assert run("compile", "--home", str(tmp_path), "--input", "-") == (1, "", (
        "<stdin>:1: bogus: unknown field (known: workspace_root, profile, skills_prompt, "
        "retry_instruction, include_tool_recovery_policy, include_task_orchestration_policy, "
        "continue_generation_hint, runtime_sections, dynamic_sections, artifact_ref_count, "
        "dynamic_context, extra_system, limits, inputs)\nerror: 1 problem in <stdin>\n"
    ))


def test_messages_from_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(
        [{"role": "user", "content": "hi"}])))
    code, out, _ = run("compile", "-q", "--home", str(tmp_path), "--provider", "anthropic",
                       "--model", "m", "--messages", "-")
    assert code == 0 and json.loads(out)["messages"][-1]["content"][-1]["text"] == "hi"


def test_diff_reads_one_side_from_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, manifest, _ = run("compile", "--home", str(tmp_path), "--manifest")
    (tmp_path / "a.json").write_text(manifest)
    monkeypatch.setattr("sys.stdin", io.StringIO(manifest))
    code, out, _ = run("diff", str(tmp_path / "a.json"), "-")
    assert code == 0
    assert out.splitlines()[1].startswith("b: <stdin>  profile full")
    assert "  no section changes" in out.splitlines()


def test_check_json(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "bad"\nsections = 3\n')
    code, out, err = run("check", "--format", "json", "--profile-path", str(tmp_path), "bad",
                         "none")
    assert (code, err) == (1, "")
    assert json.loads(out) == {
        "ok": False, "profiles": ["bad", "none"], "warnings": [], "tokens": [],
        "problems": [{"profile": "bad", "file": str(tmp_path / "bad.toml"), "line": 2,
                      "column": None, "path": "sections", "context": None,
                      "message": "expected array (got 3)"}],
    }
    code, out, _ = run("check", "--format", "json", "none")
    assert (code, json.loads(out)["ok"]) == (0, True)


def test_check_json_is_a_deprecated_spelling_of_format_json() -> None:
    code, out, err = run("check", "--json", "none")
    assert (code, out) == run("check", "--format", "json", "none")[:2]
    assert err == ("warning: check --json is deprecated and goes in the next release; "
                   "use --format json\n")


def test_the_deployment_file_is_found_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text('home = "h"\n')
    (tmp_path / "deep" / "er").mkdir(parents=True)
    result = _pioneer("compile", "-q", cwd=tmp_path / "deep" / "er", capture_output=True)
    assert (result.returncode, result.stderr) == (0, "")
    assert f"### SOUL.md ({os.path.join('..', '..', 'h', 'SOUL.md')})" in result.stdout
    result = _pioneer("compile", "-q", "--config", str(tmp_path / "missing.toml"),
                      cwd=tmp_path, capture_output=True)
    assert (result.returncode, result.stderr) == (
        1, f"{tmp_path / 'missing.toml'}: config file not found\nerror: 1 problem\n"
    )


def _non_ascii_workspace(tmp_path: Path) -> dict[str, list[str]]:
    """A command line per command, each printing something outside ASCII."""
    home = tmp_path / "hôme"
    run("init", "--home", str(home))
    (home / "SOUL.md").write_text("Café → ok\n")
    _, manifest_a, _ = run("compile", "--home", str(home), "--manifest")
    (home / "SOUL.md").write_text("Café → changed\n")
    _, manifest_b, _ = run("compile", "--home", str(home), "--manifest")
    (tmp_path / "a.json").write_text(manifest_a)
    (tmp_path / "b.json").write_text(manifest_b)
    (tmp_path / "bäd").mkdir()
    (tmp_path / "bäd" / "bad.toml").write_text('name = "bad"\nsections = "é"\n')
    store = str(tmp_path / "störe.db")
    (tmp_path / "tëmplates").mkdir()
    (tmp_path / "tëmplates" / "assistant_safety.md.j2").write_text("Be kind.\n")
    return {
        "init": ["init", "--home", str(home)],
        "compile": ["compile", "--home", str(home)],
        "check": ["check", "--profile-path", str(tmp_path / "bäd")],
        "inspect": ["inspect", "--home", str(home), "--template-path",
                    str(tmp_path / "tëmplates")],
        "diff": ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
        "lock": ["lock", "--profile", "none", "--lock", str(tmp_path / "löck.toml")],
        "history": ["history", "t", "--db", store],
        "recall": ["recall", "t", "café", "--db", store],
        "explain": ["explain", "t", "--db", store],
        "schema": ["schema", "deployment"],  # its descriptions hold an ellipsis
    }


def test_every_command_survives_an_ascii_terminal(tmp_path: Path) -> None:
    from pioneer import commands

    commands_found = sorted(
        name for name in os.listdir(Path(commands.__file__).parent)
        if name.endswith(".py") and not name.startswith("_")
    )
    lines = _non_ascii_workspace(tmp_path)
    assert sorted(f"{name}.py" for name in lines) == commands_found
    running = {  # one process per command, side by side
        name: subprocess.Popen([sys.executable, "-m", "pioneer", *argv], cwd=tmp_path,
                               text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=_environment(PYTHONIOENCODING="ascii"))
        for name, argv in lines.items()
    }
    for name, process in running.items():
        out, err = process.communicate(timeout=120)
        assert process.returncode in (0, 1), (name, err)
        assert "internal error" not in err, name
        # what ASCII cannot hold is written as a backslash escape
        assert re.search(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4})", out + err), (name, out + err)


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``line`` run by sh, with ``pioneer`` meaning this interpreter's ``-m pioneer``."""
    command = line.replace("pioneer", f"{sys.executable} -m pioneer", 1)
    return subprocess.run(["sh", "-c", command], cwd=cwd, text=True, capture_output=True,
                          env=_environment(), check=False)


def test_a_closed_stdout_is_an_error_message(tmp_path: Path) -> None:
    result = _shell(f"pioneer compile -q --home {tmp_path} >&-", tmp_path)
    assert (result.returncode, result.stderr) == (
        1, "cannot write to standard output: it is closed\nerror: 1 problem\n"
    )


def test_a_full_stdout_is_an_error_message(tmp_path: Path) -> None:
    result = _shell(f"pioneer compile -q --home {tmp_path} >/dev/full", tmp_path)
    assert (result.returncode, result.stderr) == (
        1, "cannot write to standard output: No space left on device\nerror: 1 problem\n"
    )


def test_with_stderr_closed_errors_never_reach_stdout(tmp_path: Path) -> None:
    result = _shell(f"pioneer compile --profile nope --home {tmp_path} 2>&-", tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
