"""The deployment's settings are the agent's: the summarizer from the summary settings (over
a real HTTP server on 127.0.0.1), the lock, the seeded home, the runtime facts, the
AGENTS.md hook."""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from support import run_cli
from test_history_summarizer import ChatServer

from pioneer import Agent, LockError, PioneerSettings, PromptCompiler
from pioneer.history import HistoryLimits, OpenAIChatSummarizer
from pioneer.history.summarizer import summarizer_from_settings
from pioneer.review.lock import verify_lock
from pioneer.tokens import counter_for, message_tokens

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

MODEL = agent_loop.MODELS["openai-chat"]


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("PIONEER_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("PIONEER_HOME", str(tmp_path / "home"))


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = ChatServer()
    yield chat
    chat.close()


def _turns(agent: Agent, count: int) -> list[dict[str, Any]]:
    bodies = []
    for n in range(count):
        turn = agent.turn("t", f"Question {n}: " + "words " * 30, turn_id=f"t{n}")
        bodies.append(turn.next_body())
        turn.receive(agent_loop.response("openai-chat", MODEL, f"Answer {n}: " + "more " * 30,
                                         [], agent_loop.usage("openai-chat",
                                                              turn.rounds[0].cache, 5)))
        turn.finish()
    return bodies


def _texts(value: Any) -> list[str]:
    """Every string of a request body, in order."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else []
    return [text for item in items for text in _texts(item)]


def test_the_summarizer_comes_from_the_summary_settings(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PIONEER_SUMMARY_BASE_URL", server.base_url)
    monkeypatch.setenv("PIONEER_SUMMARY_MODEL", "summary-model")
    settings = PioneerSettings.load(discover=False)
    built = summarizer_from_settings(settings)
    assert isinstance(built, OpenAIChatSummarizer)
    assert built.url == f"{server.base_url}/chat/completions"
    with Agent("p.db", provider="openai-chat", model=MODEL, recall=False,
               limits=HistoryLimits.from_tokens(200, 0)) as agent:
        assert isinstance(agent.summarizer, OpenAIChatSummarizer)
        bodies = _turns(agent, 4)
    [(path, _, request)] = server.requests
    assert path == "/v1/chat/completions" and request["model"] == "summary-model"
    assert "A short summary." in json.dumps(bodies[3])
    assert "Question 0" not in json.dumps(bodies[3])


def test_a_key_is_not_sent_over_plain_http_by_the_agent_either(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PIONEER_SUMMARY_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-wire")
    with Agent("p.db", provider="openai-chat", model=MODEL, recall=False,
               limits=HistoryLimits.from_tokens(200, 0)) as agent:
        _turns(agent, 4)
        record = agent.records.get("t3")
    assert server.requests == []  # neither the key nor the history went out
    assert record is not None and record.history is not None
    assert record.history.mode == "truncate"
    assert "the key in OPENAI_API_KEY is not sent over plain http" in record.history.reason


PROFILE = """name = "acme"
extends = "full"

[[sections]]
id = "acme_rules"
after = "identity_base"
title = "Rules"
stability = "stable"
template = "rules.md.j2"
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    for folder in ("p", "t"):
        (tmp_path / folder).mkdir()
    (tmp_path / "p" / "acme.toml").write_text(PROFILE)
    (tmp_path / "t" / "rules.md.j2").write_text("Be kind.\n")
    (tmp_path / "pioneer.toml").write_text('profile_path = ["p"]\ntemplate_path = ["t"]\n'
                                           'locked = true\n')
    code, _, err = run_cli("lock", "--profile", "acme", "--profile", "minimal",
                           "--config", "pioneer.toml")
    assert code == 0, err
    return tmp_path


def _locked_agent() -> Agent:
    return Agent(PioneerSettings.load("pioneer.toml"), provider="openai-chat", model=MODEL,
                 compile_input={"profile": "acme"}, recall=False)


def test_locked_refuses_an_edited_template_at_construction_and_on_reload(
    deployment: Path,
) -> None:
    agent = _locked_agent()
    (deployment / "t" / "rules.md.j2").write_text("Be rude.\n")
    with pytest.raises(LockError, match=r'profile "acme" does not match pioneer.lock; '
                       r"refusing to compile") as info:
        _locked_agent()
    assert "rules.md.j2" in str(info.value)
    before = agent.compiler
    with pytest.raises(LockError, match=r"rules\.md\.j2"):
        agent.reload()
    assert agent.compiler is before  # the agent keeps what it had
    turn = agent.turn("t", "Hello")
    assert "Be kind." in json.dumps(turn.next_body())
    with pytest.warns(ResourceWarning):
        turn.close()
    assert run_cli("lock", "--profile", "acme", "--config", "pioneer.toml")[0] == 0
    agent.reload()  # accepted once locked again
    turn = agent.turn("t", "Hello again")
    assert "Be rude." in json.dumps(turn.next_body())
    with pytest.warns(ResourceWarning):
        turn.close()
    agent.close()


def test_pioneer_locked_in_the_environment_and_verify_lock(
    deployment: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (deployment / "pioneer.toml").write_text('profile_path = ["p"]\ntemplate_path = ["t"]\n')
    (deployment / "t" / "rules.md.j2").write_text("Be rude.\n")
    Agent(PioneerSettings.load("pioneer.toml"), provider="openai-chat", model=MODEL,
          compile_input={"profile": "acme"}, recall=False).close()  # not locked: accepted
    monkeypatch.setenv("PIONEER_LOCKED", "true")
    with pytest.raises(LockError, match=r"rules\.md\.j2"):
        Agent(PioneerSettings.load("pioneer.toml"), provider="openai-chat", model=MODEL,
              compile_input={"profile": "acme"}, recall=False)
    compiler = PromptCompiler(PioneerSettings.load("pioneer.toml"))
    verify_lock(compiler, "minimal")
    with pytest.raises(LockError, match=r'profile "full" is not locked; run `pioneer lock'):
        verify_lock(compiler, ["minimal", "full"], deployment / "pioneer.lock")


def test_an_agent_seeds_its_home_and_tells_the_runtime_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PIONEER_CLOCK_GRANULARITY", "day")
    home = tmp_path / "home"
    assert not home.exists()
    with Agent("p.db", provider="anthropic", model="claude-sonnet-4-5", recall=False) as agent:
        assert sorted(p.name for p in home.iterdir()) == ["IDENTITY.md", "SOUL.md"]
        before = date.today()
        turn = agent.turn("t", "Hello", extra_system="Deployment: eu-west.")
        body = turn.next_body()
        after = date.today()
        with pytest.warns(ResourceWarning):
            turn.close()
    system = "\n".join(_texts(body))  # the runtime block is dynamic: after the history
    assert "## Soul Core" in system and "### SOUL.md" in system
    assert "### IDENTITY.md" in system
    assert any(f"- Date: {day:%A}, {day.isoformat()}\n" in system for day in (before, after))
    assert f"- Operating system: {platform.system()}" in system.replace("macOS", "Darwin")
    assert system.index("## Runtime") < system.index("Deployment: eu-west.")
    with Agent("p.db", provider="anthropic", model="claude-sonnet-4-5", recall=False,
               runtime_facts=False) as agent:
        turn = agent.turn("t", "Hello")
        quiet = json.dumps(turn.next_body())
        with pytest.warns(ResourceWarning):
            turn.close()
    assert "## Runtime" not in quiet


def test_a_thread_folder_runs_the_agents_md_hook(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    (home / "project" / "AGENTS.md").write_text("Run the tests with make check.\n")
    with Agent("p.db", provider="anthropic", model="claude-sonnet-4-5", recall=False,
               runtime_facts=False) as agent:
        bodies = []
        for folder in ("project", None):
            turn = agent.turn("t", "Hello", thread_folder=folder)
            bodies.append(json.dumps(turn.next_body()))
            with pytest.warns(ResourceWarning):
                turn.close()
    assert "Run the tests with make check." in bodies[0]
    assert "Run the tests with make check." not in bodies[1]


@pytest.mark.parametrize(("provider", "tokenizer"), [("openai-chat", "o200k"),
                                                     ("anthropic", "cl100k")])
def test_an_agents_store_counts_the_history_with_the_models_tokenizer(
    tmp_path: Path, provider: str, tokenizer: str,
) -> None:
    """The stored turns are counted as the window counts the rest of the request: in the
    tokenizer of the model's table row (Russian: o200k counts far fewer than cl100k)."""
    text = " ".join(["команда проверила план развёртывания и решила что миграция пройдёт"] * 5)
    with Agent(tmp_path / "a.db", provider=provider,  # type: ignore[arg-type]
               model=agent_loop.MODELS[provider]) as agent:
        agent.store.ensure_thread("t")
        agent.store.add_turn("t", user_text=text, assistant_text="ok", turn_id="t1",
                             user_item_id="u1", assistant_item_id="a1")
        [entry] = agent.store.get_thread_conversation_history("t")
    counts = {name: message_tokens(counter_for(name), entry.user_text)
              for name in ("o200k", "cl100k")}
    assert counts["o200k"] < counts["cl100k"]
    assert entry.user_tokens == counts[tokenizer]
