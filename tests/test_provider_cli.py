"""``pioneer compile --provider``: the compiled prompt as a provider request body."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli as run

from pioneer import PromptCompileInput, PromptCompiler, ensure_runtime_home

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


@pytest.fixture
def turn(tmp_path: Path) -> Path:
    spec = tmp_path / "turn.toml"
    spec.write_text('profile = "minimal"\ndynamic_context = "The user is in Oslo."\n')
    return spec


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({
        "model": "file-model",
        "messages": [
            {"role": "system", "content": "Summary of earlier conversation:\nTrip planning."},
            {"role": "user", "content": "What time is it?"},
            {"role": "assistant", "tool_calls": [{"id": "t1", "name": "clock"}]},
            {"role": "tool", "tool_result": {"call_id": "t1", "content": "12:00"}},
        ],
        "tools": [{"name": "clock", "description": "The local time."}],
    }), "utf-8")
    return path


def test_anthropic_body(tmp_path: Path, turn: Path, chat: Path) -> None:
    home = tmp_path / "home"
    code, out, err = run("compile", "-q", "--home", str(home), "--input", str(turn),
                         "--provider", "anthropic", "--messages", str(chat))
    assert (code, err) == (0, "")
    body = json.loads(out)
    ensure_runtime_home(home)
    payload = PromptCompiler().compile(PromptCompileInput(
        workspace_root=home, profile="minimal", dynamic_context="The user is in Oslo."))
    assert body["model"] == "file-model"
    assert [block["text"] for block in body["system"]] == [
        payload.stable_system_text, "Summary of earlier conversation:\nTrip planning.",
    ]
    assert body["tools"][0]["name"] == "clock"
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"][0] == {
        "type": "text", "text": payload.dynamic_system_text}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_provider_prints_json_without_marker(
    provider: str, tmp_path: Path, turn: Path, chat: Path
) -> None:
    code, out, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--input", str(turn),
                         "--provider", provider, "--messages", str(chat), "--model", "cli-model")
    assert (code, err) == (0, "")
    assert "PIONEER_PROMT_CACHE_BOUNDARY" not in out
    assert "Summary of earlier conversation:\\nTrip planning." in out
    body = json.loads(out)
    # the model names the endpoint for Gemini, so it is not in the body
    assert body.get("model", "cli-model") == "cli-model"


def test_model_without_messages(tmp_path: Path) -> None:
    code, out, _ = run("compile", "-q", "--home", str(tmp_path / "home"), "--profile", "none",
                       "--provider", "openai-chat", "--model", "m")
    assert code == 0
    assert json.loads(out)["messages"] == [{"role": "system", "content": (
        "## Identity\nYou are Pioneer, a personal assistant agent that helps one person get "
        "real work done."
    )}]


def test_provider_needs_a_model(tmp_path: Path) -> None:
    code, out, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--provider", "gemini")
    assert (code, out) == (2, "")
    assert err == ('--provider needs --model (or a --messages file that sets "model")\n'
                   "error: 1 problem\n(run `pioneer compile --help` for usage)\n")


def test_model_needs_a_provider(tmp_path: Path) -> None:
    code, _, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--model", "m")
    assert (code, err) == (2, "--model and --messages need --provider\nerror: 1 problem\n"
                              "(run `pioneer compile --help` for usage)\n")


def test_provider_excludes_other_outputs(tmp_path: Path) -> None:
    code, _, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--json",
                       "--provider", "gemini", "--model", "m")
    assert code == 2
    assert "not allowed with argument --json" in err


def test_unknown_provider(tmp_path: Path) -> None:
    code, _, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--provider", "bedrock")
    assert code == 2
    assert "invalid choice: 'bedrock'" in err


def test_bad_messages_file_is_a_user_error(tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "assistant", "tool_calls": [{"id": "a", "name": "x"}]}]))
    code, out, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--provider",
                         "anthropic", "--model", "m", "--messages", str(chat))
    assert (code, out) == (1, "")
    assert err == (
        f"{chat}: messages[0]: call 'a' has no tool result at the end of the conversation\n"
        f"error: 1 problem in {chat}\n"
    )


def test_provider_rule_refusal_is_a_user_error(tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}],
                                "sampling": {"stop": ["END"]}}))
    code, _, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--provider",
                       "openai-responses", "--model", "m", "--messages", str(chat))
    assert (code, err) == (1, "sampling → stop: openai-responses has no stop sequences; "
                              "leave sampling.stop empty\nerror: 1 problem\n")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lone_surrogate_in_the_messages_file_becomes_a_replacement_character(
    provider: str, tmp_path: Path, turn: Path
) -> None:
    # json.loads turns the escape into a lone surrogate, which UTF-8 cannot encode.
    chat = tmp_path / "chat.json"
    chat.write_text('{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}],'
                    ' "tools": [{"name": "t", "description": "x\\udfffy"}]}', "utf-8")
    code, out, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--input", str(turn),
                         "--provider", provider, "--messages", str(chat))
    assert (code, err) == (0, "")
    assert "a\ufffdb" in json.dumps(json.loads(out), ensure_ascii=False)
    assert "\ud800" not in out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_dynamic_placement_flag_and_setting(
    provider: str, tmp_path: Path, turn: Path, chat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--dynamic-placement system gives the earlier bodies; the setting is the default."""
    base = ("compile", "-q", "--home", str(tmp_path / "home"), "--input", str(turn),
            "--provider", provider, "--messages", str(chat))
    _, cache_first, _ = run(*base)
    code, system, err = run(*base, "--dynamic-placement", "system")
    assert (code, err) == (0, "")
    assert system != cache_first
    assert json.loads(run(*base, "--dynamic-placement", "cache-first")[1]) == json.loads(
        cache_first)
    monkeypatch.setenv("PIONEER_DYNAMIC_PLACEMENT", "system")
    assert run(*base)[1] == system
    assert run(*base, "--dynamic-placement", "cache-first")[1] == cache_first


def test_dynamic_placement_needs_a_provider(tmp_path: Path) -> None:
    code, _, err = run("compile", "-q", "--home", str(tmp_path / "home"),
                       "--dynamic-placement", "system")
    assert (code, err) == (2, "--dynamic-placement needs --provider\nerror: 1 problem\n"
                              "(run `pioneer compile --help` for usage)\n")


_NOT_JSON = ("is not a JSON number; a request body cannot carry NaN or an infinity (in a "
             "tool call's arguments or a tool's schema, write a number, a string or null)")


@pytest.mark.parametrize(
    ("provider", "where", "problem"),
    [
        ("anthropic", "arguments", "request body → messages[1] → content[0] → input → x: nan"),
        ("openai-chat", "arguments", 'tool call "c1" → arguments → x: nan'),
        ("openai-responses", "arguments", 'tool call "c1" → arguments → x: nan'),
        ("gemini", "arguments",
         "request body → contents[1] → parts[0] → functionCall → args → x: nan"),
        ("anthropic", "schema",
         "request body → tools[0] → input_schema → properties → x → maximum: inf"),
        ("openai-chat", "schema",
         "request body → tools[0] → function → parameters → properties → x → maximum: inf"),
        ("openai-responses", "schema",
         "request body → tools[0] → parameters → properties → x → maximum: inf"),
        ("gemini", "schema", "request body → tools[0] → functionDeclarations[0] → "
                             "parametersJsonSchema → properties → x → maximum: -inf"),
    ],
)
def test_nan_and_infinity_never_reach_a_body(tmp_path: Path, turn: Path, provider: str,
                                             where: str, problem: str) -> None:
    """Python's JSON would write them as NaN and Infinity, which no provider parses."""
    bound = "-Infinity" if provider == "gemini" else "Infinity"
    maximum = bound if where == "schema" else "9"
    schema = ('{"type": "object", "properties": {"x": {"type": "number", "maximum": '
              + maximum + "}}}")
    arguments = '{"x": NaN}' if where == "arguments" else '{"x": 1}'
    chat = tmp_path / "chat.json"
    chat.write_text(
        '{"model": "m", "tools": [{"name": "calc", "parameters": ' + schema + '}], '
        '"messages": [{"role": "user", "content": "add"}, {"role": "assistant", '
        '"tool_calls": [{"id": "c1", "name": "calc", "arguments": ' + arguments + '}]}, '
        '{"role": "tool", "tool_result": {"call_id": "c1", "content": "2"}}]}')
    code, out, err = run("compile", "-q", "--home", str(tmp_path / "home"), "--input",
                         str(turn), "--provider", provider, "--messages", str(chat))
    assert (code, out) == (1, "")
    assert err == f"{problem} {_NOT_JSON}\nerror: 1 problem\n"
