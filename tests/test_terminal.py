"""The terminal: coloured tables and a progress bar on a pseudo-terminal, plain text when
piped or with NO_COLOR, and nothing drawn (or imported) off a terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, run_script

from pioneer.episodic import EpisodicIndex
from pioneer.history import SqliteStore
from pioneer.review.terminal import colour_enabled, painter, plain, progress

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIONEER_") and k not in ("NO_COLOR", "TERM")}
    return {**env, "TERM": "xterm-256color", **extra}


def _on_pty(argv: list[str], *, stream: str = "stdout", **env: str) -> tuple[str, str]:
    """Run ``python -m pioneer ARGV`` with ``stream`` on a pseudo-terminal: (pty, other)."""
    controller, terminal = pty.openpty()
    other = subprocess.PIPE
    process = subprocess.Popen(
        [sys.executable, "-m", "pioneer", *argv],
        stdout=terminal if stream == "stdout" else other,
        stderr=terminal if stream == "stderr" else other,
        env=_environment(**env),
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal side closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    out, err = process.communicate(timeout=60)
    rest = (err if stream == "stdout" else out).decode()
    assert process.returncode == 0, rest
    return b"".join(chunks).decode().replace("\r\n", "\n"), rest


def _piped(argv: list[str], **env: str) -> str:
    result = subprocess.run([sys.executable, "-m", "pioneer", *argv], capture_output=True,
                            text=True, env=_environment(**env), check=True)
    return result.stdout


@pytest.fixture
def inspect_args(tmp_path: Path) -> list[str]:
    (tmp_path / "input.json").write_text(
        '{"profile": "full", "dynamic_context": "Monday.", "runtime_sections": '
        '[{"id": "big", "content": "' + "x" * 9000 + '"}]}')
    return ["inspect", "--home", str(tmp_path / "home"), "--input", str(tmp_path / "input.json")]


def test_inspect_on_a_terminal_paints_stability_and_status(inspect_args: list[str]) -> None:
    coloured, _ = _on_pty(inspect_args)
    plain_text = _piped(inspect_args)
    assert "\x1b[38;5;33mstable\x1b[0m" in coloured  # blue
    assert "\x1b[38;5;208mdynamic\x1b[0m" in coloured  # orange
    assert "\x1b[1;38;5;208mtruncated\x1b[0m: dynamic prompt section `big`" in coloured
    assert "\x1b[2momitted\x1b[0m: condition" in coloured  # dim
    assert "\x1b[1mSECTION" in coloured
    # The colour is all there is to it: without the escapes, the text is the piped one.
    assert ESCAPE.sub("", coloured) == plain_text


def test_inspect_is_plain_when_piped_or_with_no_color(inspect_args: list[str]) -> None:
    piped = _piped(inspect_args)
    assert "\x1b" not in piped and "truncated: dynamic prompt section `big`" in piped
    no_colour, _ = _on_pty(inspect_args, NO_COLOR="1")
    assert no_colour == piped
    dumb, _ = _on_pty(inspect_args, TERM="dumb")
    assert dumb == piped


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "pioneer.db"
    with SqliteStore(path) as opened:
        opened.ensure_thread("demo")
        for n in range(30):
            opened.add_turn("demo", user_text=f"question {n} about the gateway",
                            assistant_text=f"answer {n}", turn_id=f"t{n}")
    return path


def test_recall_reindex_draws_a_progress_bar_on_a_terminal(store: Path) -> None:
    argv = ["recall", "demo", "gateway", "--db", str(store), "--reindex"]
    drawn, out = _on_pty(argv, stream="stderr")
    assert "reindexing thread demo" in drawn
    assert "30/30" in drawn  # the bar's count of turns
    assert drawn.rstrip().endswith("reindexed thread demo: 60 snippets")
    assert out == _piped(argv)


def test_recall_reindex_piped_prints_only_its_summary_line(store: Path) -> None:
    code, _, err = run_cli("recall", "demo", "gateway", "--db", str(store), "--reindex")
    assert (code, err) == (0, "reindexed thread demo: 60 snippets\n")


def test_reindex_reports_each_turn(store: Path) -> None:
    seen: list[tuple[int, int]] = []
    with EpisodicIndex(store, create=False) as index:
        assert index.reindex_thread("demo", lambda done, total: seen.append((done, total))) == 60
    assert seen == [(n, 30) for n in range(1, 31)]


def test_off_a_terminal_progress_draws_nothing_and_imports_nothing() -> None:
    code = ("import io, sys\nfrom pioneer.review.terminal import progress\n"
            "with progress(io.StringIO(), 'work', 3) as update:\n    update(1, 3)\n"
            "assert not [m for m in sys.modules if m.startswith('rich')]")
    subprocess.run([sys.executable, "-c", code], check=True, env=_environment())
    stream = io.StringIO()
    with progress(stream, "work", 2) as update:
        update(2, 2)
    assert stream.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "expected"), [
    ({}, True), ({"NO_COLOR": "1"}, False), ({"NO_COLOR": ""}, True), ({"TERM": "dumb"}, False),
])
def test_colour_follows_no_color_and_term(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: bool,
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert colour_enabled(_Terminal()) is expected
    assert colour_enabled(io.StringIO()) is False
    assert (painter(_Terminal()) is plain) is not expected


class _Choosing(io.StringIO):
    def __init__(self, colour: str):
        super().__init__()
        self.colour = colour


@pytest.mark.parametrize(("env", "choice", "expected"), [
    ({"FORCE_COLOR": "1"}, "auto", True),  # even piped
    ({"FORCE_COLOR": "1", "TERM": "dumb"}, "auto", True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, "auto", False),  # NO_COLOR first, as CPython
    ({"FORCE_COLOR": ""}, "auto", False),
    ({"NO_COLOR": "1"}, "always", True),  # --color wins over the environment
    ({"FORCE_COLOR": "1"}, "never", False),
], ids=["force", "force-dumb", "no-color-first", "empty", "always", "never"])
def test_colour_choice_then_force_color(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], choice: str, expected: bool,
) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert colour_enabled(_Choosing(choice)) is expected


@pytest.mark.parametrize(("options", "env", "coloured"), [
    ([], {}, False),  # piped
    (["--color", "always"], {}, True),
    (["--color=always"], {"NO_COLOR": "1"}, True),  # the command line wins
    ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": "1", "TERM": "dumb"}, True),
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # as CPython decides
    ([], {"FORCE_COLOR": ""}, False),
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    (["--color", "auto"], {"FORCE_COLOR": "1"}, True),
], ids=["piped", "always", "always-over-no-color", "force-color", "force-color-dumb",
        "no-color-wins", "empty-force-color", "never", "auto"])
def test_the_console_script_follows_color_and_the_variables(
    inspect_args: list[str], options: list[str], env: dict[str, str], coloured: bool,
) -> None:
    code, out, err = run_script(*options, *inspect_args, **env)
    assert (code, err) == (0, "")
    assert bool(ESCAPE.search(out)) is coloured
    assert ESCAPE.sub("", out) == run_script(*inspect_args)[1]  # colour is all that differs


def test_color_after_the_command_and_a_bad_value(inspect_args: list[str]) -> None:
    assert ESCAPE.search(run_script(*inspect_args, "--color", "always")[1])
    code, _, err = run_script(*inspect_args, "--color", "sometimes")
    assert code == 2
    assert "argument --color: invalid choice: 'sometimes'" in err
