"""Provider adapters, checked on the wire: each body goes through the official SDK.

Every SDK gets an in-process transport (``httpx2.MockTransport``, the HTTP client the
SDKs are built on) that records the request and answers with a minimal valid reply, so
the assertions are on the JSON the SDK would really send. Nothing touches the network.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from pioneer import (
    CompiledPromptPayload,
    InputError,
    PromptCompileInput,
    PromptCompiler,
    SamplingOptions,
    ToolSpec,
    ensure_runtime_home,
)
from pioneer.compile.boundary import BOUNDARY_MARKER
from pioneer.providers import (
    MAX_CACHE_BREAKPOINTS,
    CacheOptions,
    ChatMessage,
    ChatRequest,
    ToolCall,
    build_request_body,
    count_breakpoints,
    minimum_cacheable_tokens,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from pioneer.providers.gemini import endpoint

SUMMARY = "Summary of earlier conversation:\nThe user is planning a trip to Norway."
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
CLOCK = ToolSpec(name="clock", description="The local time.")


class Wire:
    """An in-process HTTP transport that records requests and returns a canned reply."""

    def __init__(self, reply: dict[str, Any]):
        self.reply = reply
        self.requests: list[httpx2.Request] = []

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(200, json=self.reply)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self._handle))

    @property
    def body(self) -> dict[str, Any]:
        assert len(self.requests) == 1, "expected exactly one request on the wire"
        data: dict[str, Any] = json.loads(self.requests[0].content)
        return data

    @property
    def url(self) -> str:
        return str(self.requests[0].url)


def send_anthropic(body: dict[str, Any]) -> Wire:
    wire = Wire({
        "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    })
    client = anthropic.Anthropic(api_key="test", http_client=wire.client(), max_retries=0)
    reply = client.messages.create(**body)
    assert reply.content[0].type == "text"
    return wire


def send_openai_chat(body: dict[str, Any]) -> Wire:
    wire = Wire({
        "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "ok"}}],
    })
    client = openai.OpenAI(api_key="test", http_client=wire.client(), max_retries=0)
    reply = client.chat.completions.create(**body)
    assert reply.choices[0].message.content == "ok"
    return wire


def send_openai_responses(body: dict[str, Any]) -> Wire:
    wire = Wire({
        "id": "r1", "object": "response", "created_at": 0, "model": body["model"],
        "status": "completed", "output": [], "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [],
    })
    client = openai.OpenAI(api_key="test", http_client=wire.client(), max_retries=0)
    reply = client.responses.create(**body)
    assert reply.status == "completed"
    return wire


def send_gemini(model: str, body: dict[str, Any]) -> Wire:
    """The SDK takes contents and a flat config; it puts them back into the REST shape."""
    wire = Wire({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                 "finishReason": "STOP"}]})
    client = genai.Client(
        api_key="test", http_options=genai_types.HttpOptions(httpx_client=wire.client())
    )
    config = {key: body[key] for key in ("systemInstruction", "tools") if key in body}
    config.update(body.get("generationConfig", {}))
    reply = client.models.generate_content(model=model, contents=body["contents"], config=config)
    assert reply.text == "ok"
    return wire


#: A persona long enough that the stable text passes a 1,024-token cache minimum.
PERSONA = "Prefers metric units and short answers, and plans trips a month ahead. " * 120
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> CompiledPromptPayload:
    home = tmp_path_factory.mktemp("home")
    ensure_runtime_home(home)
    (home / "USER.md").write_text(PERSONA, encoding="utf-8")
    return PromptCompiler().compile(PromptCompileInput(
        workspace_root=home, profile="full", dynamic_context="The user is in Oslo.",
    ))


def conversation() -> list[ChatMessage]:
    """A summary, a question, two parallel tool calls and their results, a follow-up."""
    return [
        ChatMessage.system(SUMMARY),
        ChatMessage.user("What is the weather in Oslo and Bergen?"),
        ChatMessage.assistant("Checking both.", tool_calls=[
            ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"}),
            ToolCall(id="call_2", name="get_weather", arguments={"city": "Bergen"}),
        ]),
        ChatMessage.tool("call_1", "Rain, 9 °C"),
        ChatMessage.tool("call_2", "service unavailable", is_error=True),
        ChatMessage.assistant("Oslo has rain; Bergen's weather service is down."),
        ChatMessage.user("And what time is it?"),
    ]


@pytest.fixture
def request_(payload: CompiledPromptPayload) -> ChatRequest:
    return ChatRequest(
        model="claude-sonnet-4-6", compiled_prompt=payload, messages=conversation(),
        tools=[WEATHER, CLOCK], sampling=SamplingOptions(max_tokens=512, temperature=0.3),
    )


def assert_no_marker(body: dict[str, Any]) -> None:
    text = json.dumps(body, ensure_ascii=False)
    assert "PIONEER_PROMT_CACHE_BOUNDARY" not in text


def assert_no_tool_prose(texts: list[str]) -> None:
    """Tool definitions travel in ``tools`` only, never as system prose."""
    for text in texts:
        assert WEATHER.description not in text
        assert '"city"' not in text


# -- Anthropic Messages --------------------------------------------------------


def test_anthropic_on_the_wire(request_: ChatRequest, payload: CompiledPromptPayload) -> None:
    body = to_anthropic(request_)
    wire = send_anthropic(body)
    sent = wire.body
    assert wire.url == "https://api.anthropic.com/v1/messages"
    assert sent == body
    # Stable text, then the summary; the dynamic text is not in the system part.
    assert sent["system"] == [
        {"type": "text", "text": payload.stable_system_text, "cache_control": EPHEMERAL},
        {"type": "text", "text": SUMMARY, "cache_control": EPHEMERAL},
    ]
    assert [turn["role"] for turn in sent["messages"]] == [
        "user", "assistant", "user", "assistant", "user"
    ]
    question, calls, results, answer, follow_up = sent["messages"]
    assert question["content"] == [
        {"type": "text", "text": "What is the weather in Oslo and Bergen?"}
    ]
    assert calls["content"] == [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Bergen"}},
    ]
    # Parallel results travel together in the one user turn right after the calls.
    assert results["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "Rain, 9 °C"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "service unavailable",
         "is_error": True},
    ]
    # The end of the history is marked, so the next turn reads all of it.
    assert answer["content"] == [
        {"type": "text", "text": "Oslo has rain; Bergen's weather service is down.",
         "cache_control": EPHEMERAL}
    ]
    # This turn: the dynamic text next to the user's text, then the last block's mark.
    assert follow_up["content"] == [
        {"type": "text", "text": payload.dynamic_system_text},
        {"type": "text", "text": "And what time is it?", "cache_control": EPHEMERAL},
    ]
    # Tools by name, whatever order the caller gave.
    assert sent["tools"] == [
        {"name": "clock", "description": CLOCK.description,
         "input_schema": {"properties": {}, "type": "object"}},
        {"name": "get_weather", "description": WEATHER.description,
         "input_schema": {"properties": {"city": {"type": "string"}}, "required": ["city"],
                          "type": "object"}},
    ]
    assert json.dumps(sent["tools"][1]["input_schema"]) == (
        '{"properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"}'
    )
    # The Messages API version the SDK speaks refuses sampling knobs; they stay out.
    assert sent["max_tokens"] == 512 and "temperature" not in sent
    assert count_breakpoints(sent) == 4
    assert_no_marker(sent)
    assert_no_tool_prose([block["text"] for block in sent["system"]])


def test_anthropic_user_text_after_tool_results_joins_their_turn(
    payload: CompiledPromptPayload,
) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.user("time?"),
        ChatMessage.assistant(tool_calls=[ToolCall(id="t", name="clock")]),
        ChatMessage.tool("t", ""),
        ChatMessage.user("that was empty, try again"),
    ], tools=[CLOCK])
    sent = send_anthropic(to_anthropic(request)).body
    assert [turn["role"] for turn in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t", "name": "clock", "input": {}}
    ]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t", "cache_control": EPHEMERAL},
        {"type": "text", "text": payload.dynamic_system_text},
        {"type": "text", "text": "that was empty, try again", "cache_control": EPHEMERAL},
    ]


def test_anthropic_tool_rounds_follow_the_dynamic_text(payload: CompiledPromptPayload) -> None:
    """Within a turn the dynamic text stays before the rounds; the last block is marked."""
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.user("time?"),
        ChatMessage.assistant(tool_calls=[ToolCall(id="t", name="clock")]),
        ChatMessage.tool("t", "12:00"),
    ], tools=[CLOCK])
    sent = send_anthropic(to_anthropic(request)).body
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": payload.dynamic_system_text},
                                     {"type": "text", "text": "time?"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "clock", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "12:00",
             "cache_control": EPHEMERAL}]},
    ]


def test_anthropic_without_conversation_caching(request_: ChatRequest) -> None:
    body = to_anthropic(request_, cache_conversation=False)
    assert count_breakpoints(body) == 3
    assert "cache_control" not in body["messages"][-1]["content"][-1]


def test_anthropic_never_more_than_four_breakpoints(payload: CompiledPromptPayload) -> None:
    messages = []
    for turn in range(6):
        messages += [ChatMessage.user(f"question {turn}", cache_breakpoint=True),
                     ChatMessage.assistant(f"answer {turn}", cache_breakpoint=True)]
    messages.append(ChatMessage.user("last question"))
    request = ChatRequest(model="m", compiled_prompt=payload, messages=messages, tools=[WEATHER])
    sent = send_anthropic(to_anthropic(request)).body
    assert count_breakpoints(sent) == MAX_CACHE_BREAKPOINTS == 4
    marked = [block["text"] for turn in sent["messages"] for block in turn["content"]
              if "cache_control" in block]
    # The caller's marks come first, newest first, and fill every slot.
    assert marked == ["question 4", "answer 4", "question 5", "answer 5"]
    assert all("cache_control" not in block for block in sent["system"])


def test_anthropic_marks_last_tool_when_there_is_no_stable_text() -> None:
    big = ToolSpec(name="search", description="Search the notes. " * 400)
    request = ChatRequest(model="m", messages=[ChatMessage.user("hi")],
                          tools=[WEATHER, big, CLOCK])
    sent = send_anthropic(to_anthropic(request)).body
    assert "system" not in sent
    assert [tool["name"] for tool in sent["tools"]] == ["clock", "get_weather", "search"]
    assert sent["tools"][-1]["cache_control"] == EPHEMERAL
    assert [("cache_control" in tool) for tool in sent["tools"]] == [False, False, True]
    assert count_breakpoints(sent) == 2


def test_anthropic_no_mark_below_the_model_minimum(payload: CompiledPromptPayload) -> None:
    """A prefix shorter than the model caches takes no slot; the minimum is per model."""
    messages = [ChatMessage.user("hi"), ChatMessage.assistant("hello"), ChatMessage.user("go")]
    small = ChatRequest(model="claude-sonnet-4-6", messages=messages, tools=[CLOCK])
    assert count_breakpoints(to_anthropic(small)) == 0
    # The same stable text passes Sonnet 4.6's 1,024 tokens but not Opus 4.6's 4,096.
    sonnet = ChatRequest(model="claude-sonnet-4-6", compiled_prompt=payload, messages=messages)
    opus = sonnet.model_copy(update={"model": "claude-opus-4-6"})
    assert count_breakpoints(to_anthropic(sonnet)) == 3
    assert count_breakpoints(to_anthropic(opus)) == 0
    assert minimum_cacheable_tokens("claude-opus-4-5-20251101") == 4096
    assert minimum_cacheable_tokens("claude-3-5-haiku-latest") == 2048
    assert minimum_cacheable_tokens("claude-sonnet-4-20250514") == 1024
    assert minimum_cacheable_tokens("someone-elses-model") == 1024


def test_anthropic_long_ttl_on_the_stable_part_only(request_: ChatRequest) -> None:
    request = request_.model_copy(update={"cache": CacheOptions(long_ttl=True)})
    sent = send_anthropic(to_anthropic(request)).body
    hour = {"type": "ephemeral", "ttl": "1h"}
    assert [block["cache_control"] for block in sent["system"]] == [hour, hour]
    marks = [block["cache_control"] for turn in sent["messages"] for block in turn["content"]
             if "cache_control" in block]
    assert marks == [EPHEMERAL, EPHEMERAL]


def test_anthropic_caller_mark_on_the_summary(payload: CompiledPromptPayload) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.system(SUMMARY, cache_breakpoint=True), ChatMessage.user("hi"),
    ])
    system = to_anthropic(request)["system"]
    assert [("cache_control" in block) for block in system] == [True, True]


def test_anthropic_default_max_tokens_and_stop(payload: CompiledPromptPayload) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("hi")],
                          sampling=SamplingOptions(stop=["END"], top_p=0.9))
    sent = send_anthropic(to_anthropic(request)).body
    assert sent["max_tokens"] == 4096
    assert sent["stop_sequences"] == ["END"] and "top_p" not in sent


# -- OpenAI Chat Completions ---------------------------------------------------


def test_openai_chat_on_the_wire(request_: ChatRequest, payload: CompiledPromptPayload) -> None:
    body = to_openai_chat(request_)
    wire = send_openai_chat(body)
    sent = wire.body
    assert wire.url == "https://api.openai.com/v1/chat/completions"
    assert sent == body
    # Stable text, the summary right after it; the dynamic text just before this turn.
    assert sent["messages"][:2] == [
        {"role": "system", "content": payload.stable_system_text},
        {"role": "system", "content": SUMMARY},
    ]
    assert [m["role"] for m in sent["messages"][2:]] == [
        "user", "assistant", "tool", "tool", "assistant", "system", "user"
    ]
    assert sent["messages"][-2:] == [
        {"role": "system", "content": payload.dynamic_system_text},
        {"role": "user", "content": "And what time is it?"},
    ]
    calls = sent["messages"][3]
    assert calls["content"] == "Checking both."
    assert [(c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in calls["tool_calls"]] == [
        ("call_1", "function", "get_weather", {"city": "Oslo"}),
        ("call_2", "function", "get_weather", {"city": "Bergen"}),
    ]
    assert sent["messages"][4] == {"role": "tool", "tool_call_id": "call_1",
                                   "content": "Rain, 9 °C"}
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["clock", "get_weather"]
    assert sent["tools"][1] == {"type": "function", "function": {
        "name": "get_weather", "description": WEATHER.description,
        "parameters": WEATHER.parameters,
    }}
    assert list(sent["tools"][1]["function"]["parameters"]) == ["properties", "required", "type"]
    assert "prompt_cache_retention" not in sent
    assert sent["prompt_cache_key"] == f"pioneer-{payload.manifest.fingerprint_stable[:48]}"
    assert len(sent["prompt_cache_key"]) <= 64
    assert sent["max_completion_tokens"] == 512 and sent["temperature"] == 0.3
    assert_no_marker(sent)
    assert_no_tool_prose([sent["messages"][0]["content"]])


def test_openai_chat_developer_role(request_: ChatRequest) -> None:
    sent = send_openai_chat(to_openai_chat(request_, system_role="developer")).body
    assert [m["role"] for m in sent["messages"][:2]] == ["developer", "developer"]
    assert sent["messages"][-2]["role"] == "developer"
    assert "system" not in [m["role"] for m in sent["messages"]]


@pytest.mark.parametrize("send, adapter", [(send_openai_chat, to_openai_chat),
                                           (send_openai_responses, to_openai_responses)])
def test_openai_prompt_cache_retention(
    request_: ChatRequest, send: Callable[[dict[str, Any]], Wire],
    adapter: Callable[[ChatRequest], dict[str, Any]],
) -> None:
    request = request_.model_copy(
        update={"cache": CacheOptions(prompt_cache_retention="24h")}
    )
    sent = send(adapter(request)).body
    assert sent["prompt_cache_retention"] == "24h"


def test_openai_chat_tool_calls_without_text(payload: CompiledPromptPayload) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.user("time?"),
        ChatMessage.assistant(tool_calls=[ToolCall(id="t", name="clock")]),
        ChatMessage.tool("t", "12:00"),
    ])
    sent = send_openai_chat(to_openai_chat(request)).body
    assert sent["messages"][3] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
    ]}


# -- OpenAI Responses ----------------------------------------------------------


def test_openai_responses_on_the_wire(
    request_: ChatRequest, payload: CompiledPromptPayload
) -> None:
    body = to_openai_responses(request_)
    wire = send_openai_responses(body)
    sent = wire.body
    assert wire.url == "https://api.openai.com/v1/responses"
    assert sent == body
    assert sent["instructions"] == payload.stable_system_text
    assert sent["store"] is False
    assert sent["input"] == [
        {"role": "system", "content": SUMMARY},
        {"role": "user", "content": "What is the weather in Oslo and Bergen?"},
        {"role": "assistant", "content": "Checking both."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": "call_2", "name": "get_weather",
         "arguments": '{"city": "Bergen"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Rain, 9 °C"},
        {"type": "function_call_output", "call_id": "call_2", "output": "service unavailable"},
        {"role": "assistant", "content": "Oslo has rain; Bergen's weather service is down."},
        {"role": "system", "content": payload.dynamic_system_text},
        {"role": "user", "content": "And what time is it?"},
    ]
    assert sent["tools"][1] == {
        "type": "function", "name": "get_weather", "description": WEATHER.description,
        "parameters": WEATHER.parameters, "strict": False,
    }
    assert sent["prompt_cache_key"] == f"pioneer-{payload.manifest.fingerprint_stable[:48]}"
    assert sent["max_output_tokens"] == 512
    assert_no_marker(sent)
    assert_no_tool_prose([sent["instructions"]])


def test_openai_responses_developer_role(request_: ChatRequest) -> None:
    sent = send_openai_responses(to_openai_responses(request_, system_role="developer")).body
    assert sent["input"][0] == {"role": "developer", "content": SUMMARY}
    assert sent["input"][-2]["role"] == "developer"


def test_openai_responses_stores_only_when_asked(request_: ChatRequest) -> None:
    asked = request_.model_copy(update={"cache": CacheOptions(store=True)})
    assert send_openai_responses(to_openai_responses(asked)).body["store"] is True
    legacy = request_.model_copy(update={"cache": CacheOptions(dynamic_placement="system")})
    assert "store" not in to_openai_responses(legacy)


def test_openai_responses_refuses_stop_sequences() -> None:
    request = ChatRequest(model="m", messages=[ChatMessage.user("hi")],
                          sampling=SamplingOptions(stop=["END"]))
    with pytest.raises(InputError) as caught:
        to_openai_responses(request)
    assert str(caught.value) == (
        "sampling → stop: openai-responses has no stop sequences; leave sampling.stop empty"
    )


# -- Gemini generateContent ----------------------------------------------------


def test_gemini_on_the_wire(request_: ChatRequest, payload: CompiledPromptPayload) -> None:
    body = to_gemini(request_)
    wire = send_gemini(request_.model, body)
    sent = wire.body
    assert wire.url.endswith("/" + endpoint(request_))
    # The SDK spells this one field in snake case; the REST API accepts both spellings.
    for declaration in sent["tools"][0]["functionDeclarations"]:
        declaration["parametersJsonSchema"] = declaration.pop("parameters_json_schema")
    assert sent == body
    assert sent["systemInstruction"]["parts"] == [
        {"text": payload.stable_system_text},
        {"text": SUMMARY},
    ]
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user", "model", "user"]
    assert sent["contents"][-1]["parts"] == [
        {"text": payload.dynamic_system_text}, {"text": "And what time is it?"},
    ]
    assert sent["contents"][1]["parts"] == [
        {"text": "Checking both."},
        {"functionCall": {"id": "call_1", "name": "get_weather", "args": {"city": "Oslo"}}},
        {"functionCall": {"id": "call_2", "name": "get_weather", "args": {"city": "Bergen"}}},
    ]
    assert sent["contents"][2]["parts"] == [
        {"functionResponse": {"id": "call_1", "name": "get_weather",
                              "response": {"output": "Rain, 9 °C"}}},
        {"functionResponse": {"id": "call_2", "name": "get_weather",
                              "response": {"error": "service unavailable"}}},
    ]
    assert sent["tools"] == [{"functionDeclarations": [
        {"name": "clock", "description": CLOCK.description,
         "parametersJsonSchema": {"type": "object", "properties": {}}},
        {"name": "get_weather", "description": WEATHER.description,
         "parametersJsonSchema": WEATHER.parameters},
    ]}]
    assert sent["generationConfig"] == {"maxOutputTokens": 512, "temperature": 0.3}
    assert_no_marker(sent)
    assert_no_tool_prose([part["text"] for part in sent["systemInstruction"]["parts"]])


def test_gemini_keeps_tool_results_apart_from_the_next_user_text(
    payload: CompiledPromptPayload,
) -> None:
    request = ChatRequest(model="g", compiled_prompt=payload, messages=[
        ChatMessage.user("time?"),
        ChatMessage.assistant(tool_calls=[ToolCall(id="t", name="clock")]),
        ChatMessage.tool("t", "12:00"),
        ChatMessage.user("thanks, and the date?"),
    ])
    sent = send_gemini("g", to_gemini(request)).body
    assert [c["role"] for c in sent["contents"]] == ["user", "model", "user", "user"]
    # The function response has a content of its own; the next user text starts another.
    assert sent["contents"][2]["parts"] == [
        {"functionResponse": {"id": "t", "name": "clock", "response": {"output": "12:00"}}},
    ]
    assert sent["contents"][3]["parts"] == [
        {"text": payload.dynamic_system_text},
        {"text": "thanks, and the date?"},
    ]


# -- across providers ----------------------------------------------------------

ADAPTERS: dict[str, Callable[[ChatRequest], dict[str, Any]]] = {
    "anthropic": to_anthropic,
    "openai-chat": to_openai_chat,
    "openai-responses": to_openai_responses,
    "gemini": to_gemini,
}


@pytest.mark.parametrize("name", ADAPTERS)
def test_marker_in_any_text_never_reaches_the_model(
    name: str, payload: CompiledPromptPayload
) -> None:
    leaked = f"before{BOUNDARY_MARKER}after"
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.system(payload.full_system_text),
        ChatMessage.user(leaked),
        ChatMessage.assistant(leaked, tool_calls=[ToolCall(id="t", name="clock")]),
        ChatMessage.tool("t", leaked),
    ], tools=[CLOCK])
    body = ADAPTERS[name](request)
    assert_no_marker(body)
    assert "before\\nafter" in json.dumps(body, ensure_ascii=False)


SENDERS: dict[str, Callable[[dict[str, Any]], Wire]] = {
    "anthropic": send_anthropic,
    "openai-chat": send_openai_chat,
    "openai-responses": send_openai_responses,
    "gemini": lambda body: send_gemini("m", body),
}


@pytest.mark.parametrize("name", ADAPTERS)
def test_marker_in_tool_arguments_and_descriptions_never_reaches_the_model(
    name: str, payload: CompiledPromptPayload
) -> None:
    comment = BOUNDARY_MARKER.strip()
    leaked = f"lead-in{BOUNDARY_MARKER}follow-up"
    tool = ToolSpec(
        name="search", description=f"Search.{BOUNDARY_MARKER}Use it often.",
        parameters={"type": "object", "properties": {
            "query": {"type": "string", "description": f"what to find {comment}"},
            f"tag{comment}": {"type": "string"},
        }},
    )
    arguments = {"query": leaked, "nested": {"list": [leaked, 1, {"deep": comment}]},
                 f"key{comment}": "value"}
    request = ChatRequest(
        model="m", compiled_prompt=payload, tools=[tool],
        messages=[
            ChatMessage.user("find it"),
            ChatMessage.assistant("", tool_calls=[ToolCall(id="t", name="search",
                                                           arguments=arguments)]),
            ChatMessage.tool("t", "found"),
            ChatMessage.user("thanks"),
        ],
        # The Responses API has no stop sequences.
        sampling=SamplingOptions(stop=[] if name == "openai-responses" else [f"END{comment}"]),
    )
    body = ADAPTERS[name](request)
    sent = SENDERS[name](body).body  # what the official SDK puts on the wire
    for shown in (body, sent):
        assert_no_marker(shown)
        text = json.dumps(shown, ensure_ascii=False)
        # The text around each marker stays (arguments may travel as JSON text).
        assert text.count("lead-in") == text.count("follow-up") == 2
        assert "Search.\\nUse it often." in text and "what to find " in text


@pytest.mark.parametrize("name", ADAPTERS)
def test_summary_survives_every_adapter(name: str, payload: CompiledPromptPayload) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload,
                          messages=[ChatMessage.system(SUMMARY), ChatMessage.user("go on")])
    assert json.dumps(ADAPTERS[name](request), ensure_ascii=False).count(
        json.dumps(SUMMARY, ensure_ascii=False)) == 1


@pytest.mark.parametrize("name", ADAPTERS)
def test_without_a_compiled_prompt(name: str) -> None:
    request = ChatRequest(model="m", messages=[ChatMessage.user("hi")])
    body = ADAPTERS[name](request)
    assert "prompt_cache_key" not in body
    assert not {"system", "instructions", "systemInstruction"} & set(body)
    assert "hi" in json.dumps(body)


def test_history_messages_fit_a_chat_request(tmp_path: Path) -> None:
    """The history budgeter's hand-off shape (role + content) validates as messages."""
    history = [
        {"role": "system", "content": SUMMARY},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
    ]
    request = ChatRequest.model_validate({"model": "m", "messages": history})
    assert [m.role for m in request.messages] == ["system", "user", "assistant"]


def test_build_request_body_by_name(request_: ChatRequest) -> None:
    assert build_request_body("gemini", request_) == to_gemini(request_)
    with pytest.raises(InputError) as caught:
        build_request_body("bedrock", request_)
    assert str(caught.value) == (
        "unknown provider 'bedrock'; expected one of anthropic, openai-chat, "
        "openai-responses, gemini"
    )
