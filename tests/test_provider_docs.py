"""docs/providers.md's examples run: the request, one doctest per provider, the CLI."""

from __future__ import annotations

import doctest
import io
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from doc_pages import example

from pioneer.cli import main

PAGE = "providers.md"
PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
ADAPTERS = ["to_anthropic", "to_openai_chat", "to_openai_responses", "to_gemini"]


def test_one_example_per_provider() -> None:
    for provider, adapter in zip(PROVIDERS, ADAPTERS, strict=True):
        body, _ = example(f"providers-{provider}", PAGE)
        assert adapter in body, provider


@pytest.fixture(scope="module")
def namespace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    setup, _ = example("providers-request", PAGE)
    names: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("providers"))
        exec(compile(setup, f"docs/{PAGE}", "exec"), names)
    return names


@pytest.mark.parametrize("provider", PROVIDERS)
def test_provider_example(provider: str, namespace: dict[str, Any]) -> None:
    body, _ = example(f"providers-{provider}", PAGE)
    test = doctest.DocTestParser().get_doctest(body, dict(namespace), provider, f"docs/{PAGE}", 0)
    report = io.StringIO()
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test, out=report.write)
    assert result.attempted > 0
    assert result.failed == 0, report.getvalue()


def test_command_line_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chat, _ = example("providers-chat-json", PAGE)
    command, _ = example("providers-cli", PAGE)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.json").write_text(chat, "utf-8")
    argv = shlex.split(command)
    assert argv[0] == "pioneer"
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv[1:], "--home", str(tmp_path / "home")], stdout=out, stderr=err)
    # a freshly seeded home has no USER.md, which is optional: nothing to warn about
    assert (code, err.getvalue()) == (0, "")
    body = json.loads(out.getvalue())
    assert body["model"] == "MODEL"
    # A freshly seeded home's stable text is far below the 1,024-token minimum an unknown
    # model gets, so the planner spends no mark on it.
    assert "cache_control" not in body["system"][0]
    assert body["tools"] == [{"name": "clock", "description": "The local time.",
                              "input_schema": {"properties": {}, "type": "object"}}]
