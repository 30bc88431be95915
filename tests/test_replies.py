"""Provider replies read back: ``read_response`` on each API's JSON and each official SDK's
response objects (parsed over an in-process transport), and the reply sent on again."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from test_providers import (
    Wire,
    send_anthropic,
    send_gemini,
    send_openai_chat,
    send_openai_responses,
)

from pioneer import ProviderError, ToolSpec
from pioneer.providers import (
    STOP_REASONS,
    ChatMessage,
    ChatRequest,
    ModelReply,
    ReportedUsage,
    build_request_body,
    read_response,
)
from pioneer.tools import ToolCatalog, TurnTools

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
SIGNATURE = "c2lnbmF0dXJlLTE="  # base64 of b"signature-1"
Call = tuple[str, str, Any]  # id, name, arguments (a dict, or the raw JSON text)


def reply(provider: str, *, text: str = "", calls: tuple[Call, ...] = (),
          stop: str | None = None, refusal: str | None = None) -> dict[str, Any]:
    """A response of ``provider`` as its API sends it (usage: 100 in, 60 cached, 7 out)."""
    if provider == "anthropic":
        content: list[dict[str, Any]] = [{"type": "thinking", "thinking": "hm",
                                          "signature": "x"}]
        content += [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                "content": content, "stop_reason": stop or ("tool_use" if calls else "end_turn"),
                "stop_sequence": None,
                "usage": {"input_tokens": 30, "cache_read_input_tokens": 60,
                          "cache_creation_input_tokens": 10, "output_tokens": 7}}
    if provider == "openai-chat":
        message: dict[str, Any] = {"role": "assistant", "content": text or None,
                                   "refusal": refusal}
        if calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {
                    "name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                for i, n, a in calls]
        return {"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-x",
                "choices": [{"index": 0, "message": message,
                             "finish_reason": stop or ("tool_calls" if calls else "stop")}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                          "prompt_tokens_details": {"cached_tokens": 60}}}
    if provider == "openai-responses":
        output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
        parts: list[dict[str, Any]] = [{"type": "output_text", "text": text, "annotations": []}] \
            if text else []
        parts += [{"type": "refusal", "refusal": refusal}] if refusal else []
        if parts:
            output.append({"type": "message", "id": "m1", "role": "assistant",
                           "status": "completed", "content": parts})
        output += [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": n,
                    "arguments": a if isinstance(a, str) else json.dumps(a),
                    "status": "completed"} for i, n, a in calls]
        data: dict[str, Any] = {
            "id": "r1", "object": "response", "created_at": 0, "model": "gpt-x",
            "status": "incomplete" if stop else "completed", "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60},
                      "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3},
                      "total_tokens": 107}}
        if stop:
            data["incomplete_details"] = {"reason": stop}
        return data
    gemini_parts: list[dict[str, Any]] = [{"text": "thinking...", "thought": True}]
    gemini_parts += [{"text": text}] if text else []
    gemini_parts += [{"functionCall": {"id": i, "name": n, "args": a},
                      **({"thoughtSignature": SIGNATURE} if k == 0 else {})}
                     for k, (i, n, a) in enumerate(calls)]
    return {"candidates": [{"content": {"role": "model", "parts": gemini_parts},
                            "finishReason": stop or "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 7,
                              "cachedContentTokenCount": 60, "totalTokenCount": 107}}


PARALLEL: tuple[Call, ...] = (("call_1", "get_weather", {"city": "Oslo"}),
                              ("call_2", "get_weather", {"city": "Bergen"}))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_text_only(provider: str) -> None:
    found = read_response(provider, reply(provider, text="It rains in Oslo."))
    assert found.message == ChatMessage.assistant("It rains in Oslo.")
    assert found.stop_reason == "end_turn" and found.tool_calls == ()
    # Chat Completions has no reasoning items; the others' are skipped and counted.
    assert found.reasoning_items == (0 if provider == "openai-chat" else 1)
    assert found.usage == ReportedUsage(input_tokens=100, output_tokens=7,
                                        cache_read_input_tokens=60,
                                        cache_creation_input_tokens=10
                                        if provider == "anthropic" else None)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_tool_calls_keep_their_ids_and_arguments(provider: str) -> None:
    found = read_response(provider, reply(provider, text="Checking both.", calls=PARALLEL))
    assert found.stop_reason == "tool_calls"
    assert found.text == "Checking both."
    assert [(c.id, c.name, c.arguments) for c in found.tool_calls] == [
        (i, n, a) for i, n, a in PARALLEL]
    signatures = [c.thought_signature for c in found.tool_calls]
    assert signatures == ([SIGNATURE, None] if provider == "gemini" else [None, None])
    assert found.argument_errors == {}


MAX_TOKENS = {"anthropic": "max_tokens", "openai-chat": "length",
              "openai-responses": "max_output_tokens", "gemini": "MAX_TOKENS"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_max_tokens(provider: str) -> None:
    found = read_response(provider, reply(provider, text="The forecast is",
                                          stop=MAX_TOKENS[provider]))
    assert (found.stop_reason, found.provider_stop_reason) == ("max_tokens", MAX_TOKENS[provider])
    assert found.text == "The forecast is"


def test_refusals() -> None:
    said = "I can't help with that."
    assert read_response("anthropic", reply("anthropic", stop="refusal")) == ModelReply(
        None, read_response("anthropic", reply("anthropic", stop="refusal")).usage, "refusal",
        "refusal", 1)
    chat = read_response("openai-chat", reply("openai-chat", refusal=said))
    assert (chat.stop_reason, chat.text) == ("refusal", said)
    responses = read_response("openai-responses", reply("openai-responses", refusal=said))
    assert (responses.stop_reason, responses.text) == ("refusal", said)
    gemini = read_response("gemini", reply("gemini", stop="SAFETY"))
    assert (gemini.stop_reason, gemini.message) == ("refusal", None)
    blocked = read_response("gemini", {"promptFeedback": {"blockReason": "SAFETY"}})
    assert (blocked.stop_reason, blocked.message, blocked.usage) == ("refusal", None, None)


BROKEN_ARGUMENTS = {
    "anthropic": ("oops", "the arguments are not a JSON object (got a string)"),
    "openai-chat": ('{"city": "Os', "the arguments are not valid JSON (Unterminated string "
                    "starting at character 9)"),
    "openai-responses": ("[1, 2]", "the arguments are not a JSON object (got a list)"),
    "gemini": ([1], "the arguments are not a JSON object (got a list)"),
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_arguments_are_kept_and_answered_with_an_error(provider: str) -> None:
    broken, why = BROKEN_ARGUMENTS[provider]
    calls = (("call_1", "get_weather", broken), PARALLEL[1])
    found = read_response(provider, reply(provider, calls=calls))
    first, second = found.tool_calls
    assert (first.id, first.arguments, second.arguments) == ("call_1", {}, {"city": "Bergen"})
    assert found.argument_errors["call_1"].startswith(why.split(" (")[0])
    assert found.argument_errors == {"call_1": why} or provider == "openai-chat"
    tools = TurnTools(ToolCatalog.build([ToolSpec(name="get_weather")]))
    tools.next_round()
    outcome = tools.decide(first, arguments_error=found.argument_errors["call_1"])
    assert outcome.verdict == "invalid" and outcome.result is not None
    assert outcome.result.is_error and "call get_weather again" in outcome.result.content
    assert tools.decide(second).verdict == "run"


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("openai-chat", lambda r: r["choices"][0]["message"]["tool_calls"][1]["function"].update(
        name=7),
     "choices[0].message.tool_calls[1].function.name: expected a string (got a number)"),
    ("openai-chat", lambda r: r.update(choices=[]), "choices: expected at least one choice "
     "(got a list)"),
    ("openai-chat", lambda r: r["choices"][0].update(message="hi"),
     "choices[0].message: expected an object (got a string)"),
    ("anthropic", lambda r: r.update(content={"type": "text"}),
     "content: expected a list (got an object)"),
    ("anthropic", lambda r: r["content"][2].pop("id"), "content[2].id: expected a string "
     "(got nothing)"),
    ("anthropic", lambda r: r["content"][2].update(name="no spaces allowed"),
     "content[2].name: expected a tool name matching ^[A-Za-z_][A-Za-z0-9_-]{0,63}$ "
     "(got 'no spaces allowed')"),
    ("openai-responses", lambda r: r["output"][2].update(call_id=""),
     "output[2].call_id: expected a non-empty string (got a string)"),
    ("openai-responses", lambda r: r.pop("output"), "output: expected a list (got nothing)"),
    ("gemini", lambda r: r["candidates"][0]["content"].update(parts=[{"text": 5}]),
     "candidates[0].content.parts[0].text: expected a string (got a number)"),
    ("gemini", lambda r: r.update(candidates="none"), "candidates: expected a list (got a string)"),
    ("openai-chat", lambda r: r.update(error={"message": "rate limited"}),
     "error: the response is an API error, not a reply: rate limited"),
]


@pytest.mark.parametrize(("provider", "damage", "message"), MALFORMED,
                         ids=[m[2].split(":")[0] + f"-{m[0]}" for m in MALFORMED])
def test_malformed_shapes_name_the_path(provider: str, damage: Callable[[dict[str, Any]], None],
                                        message: str) -> None:
    data = reply(provider, text="Checking.", calls=PARALLEL)
    damage(data)
    with pytest.raises(ProviderError) as info:
        read_response(provider, data)
    assert str(info.value) == message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_not_a_response_at_all(provider: str) -> None:
    with pytest.raises(ProviderError, match=r"^\(response\): expected the response JSON \(an "
                       r"object\) or an SDK response object \(got a list\)$"):
        read_response(provider, [])  # type: ignore[arg-type]


EMPTY = {"anthropic": "content", "openai-chat": "choices", "openai-responses": "output",
         "gemini": "candidates"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_object_is_not_a_reply(provider: str) -> None:
    with pytest.raises(ProviderError) as info:
        read_response(provider, {})
    assert str(info.value) == f"{EMPTY[provider]}: expected a list (got nothing)"


def test_every_stop_reason_is_one_of_six() -> None:
    seen = {read_response(p, reply(p, text="x", stop=s)).stop_reason for p, s in [
        ("anthropic", "pause_turn"), ("anthropic", "stop_sequence"), ("gemini", "OTHER"),
        ("openai-chat", "content_filter"), ("openai-responses", "content_filter")]}
    assert seen == {"other", "stop_sequence", "refusal"}
    assert set(STOP_REASONS) == {"end_turn", "tool_calls", "max_tokens", "stop_sequence",
                                 "refusal", "other"}


# -- the official SDKs' response objects -------------------------------------------------


def sdk_response(provider: str, data: dict[str, Any]) -> Any:
    """The SDK's own response object for ``data``, as it parses it off the wire."""
    wire = Wire(data)
    if provider == "anthropic":
        client = anthropic.Anthropic(api_key="test", http_client=wire.client(), max_retries=0)
        return client.messages.create(model="claude-x", max_tokens=10,
                                      messages=[{"role": "user", "content": "hi"}])
    if provider in ("openai-chat", "openai-responses"):
        oai = openai.OpenAI(api_key="test", http_client=wire.client(), max_retries=0)
        if provider == "openai-chat":
            return oai.chat.completions.create(model="gpt-x",
                                               messages=[{"role": "user", "content": "hi"}])
        return oai.responses.create(model="gpt-x", input="hi")
    google = genai.Client(api_key="test",
                          http_options=genai_types.HttpOptions(httpx_client=wire.client()))
    return google.models.generate_content(model="gemini-2.5-flash", contents="hi")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("case", ["text", "calls"])
def test_sdk_objects_read_as_their_json(provider: str, case: str) -> None:
    data = reply(provider, text="Checking both.", calls=PARALLEL if case == "calls" else ())
    expected = read_response(provider, data)
    obj = sdk_response(provider, data)
    assert read_response(provider, obj) == expected
    assert read_response(provider, obj.model_dump()) == expected


SENDERS: dict[str, Callable[[dict[str, Any]], Wire]] = {
    "anthropic": send_anthropic, "openai-chat": send_openai_chat,
    "openai-responses": send_openai_responses,
    "gemini": lambda body: send_gemini("gemini-3-pro-preview", body),
}
WEATHER = ToolSpec(name="get_weather", description="Weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}})


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_reply_goes_back_in_the_next_request(provider: str) -> None:
    obj = sdk_response(provider, reply(provider, text="Checking both.", calls=PARALLEL))
    found = read_response(provider, obj)
    assert found.message is not None
    request = ChatRequest(model="gemini-3-pro-preview" if provider == "gemini" else "m",
                          tools=[WEATHER], messages=[
        ChatMessage.user("Weather in Oslo and Bergen?"), found.message,
        *(ChatMessage.tool(call.id, "Rain") for call in found.tool_calls),
    ])
    sent = SENDERS[provider](build_request_body(provider, request)).body
    if provider == "anthropic":
        assert sent["messages"][1]["content"][1:] == [
            {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in PARALLEL]
    elif provider == "openai-chat":
        assert [c["id"] for c in sent["messages"][1]["tool_calls"]] == ["call_1", "call_2"]
        assert [m["tool_call_id"] for m in sent["messages"][2:]] == ["call_1", "call_2"]
    elif provider == "openai-responses":
        calls = [item for item in sent["input"] if item.get("type") == "function_call"]
        assert [(c["call_id"], json.loads(c["arguments"])) for c in calls] == [
            (i, a) for i, _, a in PARALLEL]
    else:
        parts = sent["contents"][1]["parts"]
        # The thought signature goes back with its call, byte for byte.
        assert parts[1] == {"functionCall": {"id": "call_1", "name": "get_weather",
                                             "args": {"city": "Oslo"}},
                            "thoughtSignature": SIGNATURE}
        assert "thoughtSignature" not in parts[2]
