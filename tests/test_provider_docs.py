"""The README's provider examples run: the setup block, one doctest per provider, the CLI."""

from __future__ import annotations

import doctest
import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from pioneer.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")
SECTION = README.split("<!-- providers -->", 1)[1].split("\n## ")[0]
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", SECTION, flags=re.S)
PYCON = [body for kind, body in BLOCKS if kind == "pycon"]


def test_one_example_per_provider() -> None:
    assert len(PYCON) == 4
    for adapter in ("to_anthropic", "to_openai_chat", "to_openai_responses", "to_gemini"):
        assert sum(adapter in body for body in PYCON) == 1, adapter


@pytest.fixture(scope="module")
def namespace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    setup = [body for kind, body in BLOCKS if kind == "python"]
    assert len(setup) == 1
    names: dict[str, Any] = {"home": tmp_path_factory.mktemp("home")}
    exec(compile(setup[0], "README.md", "exec"), names)
    return names


@pytest.mark.parametrize("example", PYCON, ids=["anthropic", "openai-chat", "openai-responses",
                                                "gemini"])
def test_provider_example(example: str, namespace: dict[str, Any]) -> None:
    test = doctest.DocTestParser().get_doctest(example, dict(namespace), "README", "README.md", 0)
    report = io.StringIO()
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test, out=report.write)
    assert result.attempted > 0
    assert result.failed == 0, report.getvalue()


def test_command_line_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = [body for kind, body in BLOCKS if kind == "json"]
    commands = [body for kind, body in BLOCKS if kind == "sh"]
    assert len(files) == 1 and len(commands) == 1
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.json").write_text(files[0], "utf-8")
    argv = shlex.split(commands[0])
    assert argv[0] == "pioneer"
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv[1:], "--home", str(tmp_path / "home")], stdout=out, stderr=err)
    assert (code, err.getvalue()) == (0, "")
    body = json.loads(out.getvalue())
    assert body["model"] == "MODEL"
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"] == [{"name": "clock", "description": "The local time.",
                              "input_schema": {"type": "object", "properties": {}}}]
