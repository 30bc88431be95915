"""The README's Python API examples run: the turn runner stores its turn, and the compiler
compiles what it says; the exit codes it and docs/cli.md list are the command's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_pages import page

from pioneer.audit import TurnRecords
from pioneer.history import SqliteStore


def _examples() -> list[str]:
    section = page("README.md").split("<!-- api -->", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_runner_example_stores_its_turn(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(_examples()[0], "README.md", "exec"), namespace)
    finished = namespace["finished"]
    with SqliteStore("home/pioneer.db", create=False) as store:
        assert TurnRecords(store).get(finished.entry.turn_id) == finished.record  # type: ignore[attr-defined]
        [entry] = store.get_thread_conversation_history("thread-1")
    assert entry.assistant_text == "It says: buy milk."


def test_python_api_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(_examples()[1], "README.md", "exec"), namespace)
    payload = namespace["payload"]
    assert payload.dynamic_system_text == "## Extra System\nBe brief."  # type: ignore[attr-defined]
    assert (tmp_path / "home" / "SOUL.md").is_file()
    assert "## Extra System\nBe brief.\n" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["README.md", "cli.md"])
def test_the_exit_codes_listed_are_the_commands_own(name: str) -> None:
    from pioneer import cli

    said = re.search(r"^Exit codes: (.*?`130` interrupted)\.", page(name), flags=re.S | re.M)
    assert said is not None, name
    listed = [int(code) for code in re.findall(r"`(\d+)`\s[a-z]", said[1])]
    assert listed == [cli.EXIT_OK, cli.EXIT_USER, cli.EXIT_USAGE, cli.EXIT_INTERNAL,
                      cli.EXIT_INTERRUPTED] == [0, 1, 2, 3, 130]
    assert re.search(r"`2` bad usage \(an unknown command or option", said[1]), name
