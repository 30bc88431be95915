"""Rules the APIs enforce and their SDKs do not: each refused with its exact message, or mapped.

Every rule is shown twice: the official SDK (on the in-process transport of
``test_providers``) sends the body it applies to, so nothing but the adapter stands
between a caller and the API's refusal; and the adapter's body or error is asserted
exactly. They are listed in docs/providers.md, "What each provider refuses and what is mapped".
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import run_cli as run
from test_providers import (
    SUMMARY,
    send_anthropic,
    send_gemini,
    send_openai_chat,
    send_openai_responses,
)

from pioneer import InputError, SamplingOptions, ToolSpec
from pioneer.providers import (
    CacheOptions,
    ChatMessage,
    ChatRequest,
    ToolCall,
    build_request_body,
    parse_chat_request,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from pioneer.providers.gemini import LEAD_TEXT, PLACEHOLDER_SIGNATURE
from pioneer.providers.request import TOOL_NAME_PATTERN
from pioneer.providers.rules import (
    ANTHROPIC_CALL_IDS,
    OPENAI_CHAT_CALL_IDS,
    CallIdRule,
    map_call_ids,
    safe_call_id,
)

CLOCK = ToolSpec(name="clock", description="The local time.")


def refusal(call: Any, *args: Any) -> str:
    with pytest.raises(InputError) as caught:
        call(*args)
    return str(caught.value)


# -- 1. an empty conversation -------------------------------------------------

EMPTY = ("needs at least one user or assistant message; this request has none (system "
         "messages and the history summary go to the system prompt, which is not enough on "
         "its own)")


@pytest.mark.parametrize("messages", [[], [ChatMessage.system(SUMMARY)]], ids=["none", "summary"])
def test_anthropic_and_gemini_refuse_an_empty_conversation(messages: list[ChatMessage]) -> None:
    request = ChatRequest(model="m", messages=messages)
    assert refusal(to_anthropic, request) == f"messages: anthropic {EMPTY}"
    assert refusal(to_gemini, request) == f"messages: gemini {EMPTY}"
    # The Anthropic SDK sends the empty list on; only the API would refuse it.
    assert send_anthropic({"model": "m", "max_tokens": 1, "messages": []}).body["messages"] == []
    # The OpenAI APIs take a conversation of system text only.
    assert to_openai_chat(request)["messages"] == [
        {"role": "system", "content": SUMMARY} for _ in messages
    ]


def test_the_cli_refuses_an_empty_anthropic_conversation(tmp_path: Path) -> None:
    code, out, err = run("compile", "--home", str(tmp_path / "home"), "--profile", "none",
                         "--provider", "anthropic", "--model", "m")
    assert (code, out, err) == (1, "", f"messages: anthropic {EMPTY}\nerror: 1 problem\n")


# -- 2. a prefill ending in whitespace ----------------------------------------


@pytest.mark.parametrize("placement", ["cache-first", "system"])
def test_anthropic_strips_the_prefill_of_trailing_whitespace(placement: Any) -> None:
    request = ChatRequest(model="m", cache=CacheOptions(dynamic_placement=placement), messages=[
        ChatMessage.user("What is the capital of Norway? "),
        ChatMessage.assistant("I will answer briefly. "),
        ChatMessage.user("Go on. "),
        ChatMessage.assistant("The capital of Norway is \n"),
    ])
    sent = send_anthropic(to_anthropic(request)).body
    texts = [block["text"] for turn in sent["messages"] for block in turn["content"]]
    # Only the final assistant text (the prefill) loses its trailing whitespace.
    assert texts == ["What is the capital of Norway? ", "I will answer briefly. ", "Go on. ",
                     "The capital of Norway is"]
    # The other providers send it as given.
    assert to_openai_chat(request)["messages"][-1]["content"] == "The capital of Norway is \n"


# -- 3. tool names -------------------------------------------------------------

#: Each provider's own documented rule for a tool (function) name.
OWN_NAME_RULES = {
    "anthropic": r"[a-zA-Z0-9_-]{1,64}",
    "openai": r"[a-zA-Z0-9_-]{1,64}",
    "gemini": r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}",
}


@settings(max_examples=60, deadline=None)
@given(st.from_regex(TOOL_NAME_PATTERN))
def test_a_tool_name_the_rule_accepts_every_provider_accepts(name: str) -> None:
    name = name.removesuffix("\n")  # a regex's $ also matches before a final newline
    for pattern in OWN_NAME_RULES.values():
        assert re.fullmatch(pattern, name)


@pytest.mark.parametrize("name", ["2fa_check", "-dash", "a" * 65, "a.b"])
def test_a_name_one_provider_refuses_is_refused(name: str) -> None:
    refused_by = [provider for provider, pattern in OWN_NAME_RULES.items()
                  if not re.fullmatch(pattern, name)]
    assert refused_by  # the rule refuses only what some provider refuses
    with pytest.raises(InputError) as caught:
        parse_chat_request({"model": "m", "tools": [{"name": name}]})
    assert str(caught.value) == (
        f"tools[0] → name: must match {TOOL_NAME_PATTERN}: a letter or _ first, then letters, "
        f"digits, _ or -, at most 64 characters in all (got {name!r})\nerror: 1 problem"
    )


def test_names_at_the_edges_of_the_rule_go_through_every_sdk() -> None:
    tools = [ToolSpec(name="_private-tool"), ToolSpec(name="t" * 64)]
    request = ChatRequest(model="m", messages=[ChatMessage.user("hi")], tools=tools)
    assert [t["name"] for t in send_anthropic(to_anthropic(request)).body["tools"]] == [
        "_private-tool", "t" * 64]
    assert [t["function"]["name"] for t in send_openai_chat(
        to_openai_chat(request)).body["tools"]] == ["_private-tool", "t" * 64]
    assert [t["name"] for t in send_openai_responses(
        to_openai_responses(request)).body["tools"]] == ["_private-tool", "t" * 64]
    assert [t["name"] for t in send_gemini("m", to_gemini(request)).body["tools"][0][
        "functionDeclarations"]] == ["_private-tool", "t" * 64]


# -- 4. tool call ids across providers ----------------------------------------


def calls(*ids: str) -> list[ChatMessage]:
    return [
        ChatMessage.user("What time is it?"),
        ChatMessage.assistant(tool_calls=[ToolCall(id=i, name="clock") for i in ids]),
        *(ChatMessage.tool(i, f"12:0{n}") for n, i in enumerate(ids)),
    ]


def test_anthropic_maps_an_id_outside_its_characters() -> None:
    request = ChatRequest(model="m", messages=calls("functions.clock:0", "toolu_01"),
                          tools=[CLOCK])
    sent = send_anthropic(to_anthropic(request)).body
    uses = [block["id"] for block in sent["messages"][1]["content"]]
    results = [block["tool_use_id"] for block in sent["messages"][2]["content"]]
    assert uses == results == ["functions_clock_f23015bee0dad586cdfc3d16", "toolu_01"]
    # The other providers take the id as it is.
    assert to_openai_chat(request)["messages"][1]["tool_calls"][0]["id"] == "functions.clock:0"
    assert to_gemini(request)["contents"][1]["parts"][0]["functionCall"]["id"] == (
        "functions.clock:0")


def test_openai_chat_maps_an_id_over_40_characters() -> None:
    long_id = "call_" + "x" * 60
    request = ChatRequest(model="m", messages=calls(long_id, "call_2"), tools=[CLOCK])
    sent = send_openai_chat(to_openai_chat(request)).body
    assert [c["id"] for c in sent["messages"][1]["tool_calls"]] == [
        "call_xxxxxxxxxx_b8823c91081544cac30c56e1", "call_2"]
    assert [m["tool_call_id"] for m in sent["messages"][2:]] == [
        "call_xxxxxxxxxx_b8823c91081544cac30c56e1", "call_2"]
    # Anthropic takes it as it is (its characters are all allowed).
    assert to_anthropic(request)["messages"][1]["content"][0]["id"] == long_id


ID = st.text(min_size=1, max_size=80)


@settings(max_examples=60, deadline=None)
@given(st.lists(ID, min_size=1, max_size=6, unique=True),
       st.sampled_from([ANTHROPIC_CALL_IDS, OPENAI_CHAT_CALL_IDS]))
def test_call_id_mapping_is_deterministic_injective_and_keeps_the_pairs(
    ids: list[str], rule: CallIdRule
) -> None:
    request = ChatRequest(model="m", messages=calls(*ids))
    mapped = map_call_ids(request, rule)
    sent = [call.id for call in mapped.messages[1].tool_calls]
    answered = [m.tool_result.call_id for m in mapped.messages[2:] if m.tool_result]
    assert answered == sent  # each result still answers its own call
    assert len(set(sent)) == len(ids)  # no two calls share an id
    assert all(rule.accepts(call_id) for call_id in sent)
    for original, call_id in zip(ids, sent, strict=True):
        # The same id maps the same way whatever request it is in; an accepted id is kept.
        assert call_id == safe_call_id(original, rule)
        assert call_id == map_call_ids(
            ChatRequest(model="m", messages=calls(original)), rule
        ).messages[1].tool_calls[0].id
        assert (call_id == original) == rule.accepts(original)


def test_a_mapped_id_that_meets_another_id_is_refused() -> None:
    taken = safe_call_id("functions.clock:0", ANTHROPIC_CALL_IDS)
    request = ChatRequest(model="m", messages=calls("functions.clock:0", taken))
    assert refusal(to_anthropic, request) == (
        f"messages: anthropic: call ids 'functions.clock:0' and {taken!r} would both be sent "
        f"as {taken!r}; rename one of them"
    )


# -- 5. stop sequences ---------------------------------------------------------


def test_openai_chat_takes_at_most_four_stop_sequences() -> None:
    five = ChatRequest(model="m", messages=[ChatMessage.user("hi")],
                       sampling=SamplingOptions(stop=["a", "b", "c", "d", "e"]))
    assert refusal(to_openai_chat, five) == (
        "sampling → stop: openai-chat: 'm' (as the model table's openai family) takes at "
        "most 4 stop sequences; sampling.stop has 5"
    )
    # The SDK sends five on; only the API would refuse them.
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "stop": ["a", "b", "c", "d", "e"]}
    assert send_openai_chat(body).body["stop"] == ["a", "b", "c", "d", "e"]
    four = five.model_copy(update={"sampling": SamplingOptions(stop=["a", "b", "c", "d"])})
    assert send_openai_chat(to_openai_chat(four)).body["stop"] == ["a", "b", "c", "d"]
    # Anthropic and Gemini send all five.
    assert to_anthropic(five)["stop_sequences"] == ["a", "b", "c", "d", "e"]
    assert to_gemini(five)["generationConfig"]["stopSequences"] == ["a", "b", "c", "d", "e"]


def test_an_empty_stop_sequence_is_refused_for_every_provider() -> None:
    with pytest.raises(InputError) as caught:
        parse_chat_request({"model": "m", "sampling": {"stop": ["END", ""]}}, file="chat.json")
    assert caught.value.render() == (
        "chat.json: sampling → stop: item 1 is empty; every provider refuses an empty stop "
        "sequence\nerror: 1 problem in chat.json"
    )
    # The SDKs would send it.
    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
            "stop_sequences": [""]}
    assert send_anthropic(body).body["stop_sequences"] == [""]


# -- 6. Gemini turn order ------------------------------------------------------


def test_gemini_puts_a_user_turn_before_an_opening_function_call() -> None:
    request = ChatRequest(model="gemini-2.5-flash", tools=[CLOCK], messages=[
        ChatMessage.system(SUMMARY),
        ChatMessage.assistant(tool_calls=[ToolCall(id="t1", name="clock")]),
        ChatMessage.tool("t1", "12:00"),
        ChatMessage.user("And the date?"),
    ])
    sent = send_gemini(request.model, to_gemini(request)).body
    assert sent["systemInstruction"] == {"parts": [{"text": SUMMARY}]}
    assert sent["contents"] == [
        {"role": "user", "parts": [{"text": LEAD_TEXT}]},
        {"role": "model", "parts": [{"functionCall": {"id": "t1", "name": "clock", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {
            "id": "t1", "name": "clock", "response": {"output": "12:00"}}}]},
        {"role": "user", "parts": [{"text": "And the date?"}]},
    ]


def test_gemini_sends_a_conversation_opening_with_model_text_as_it_is() -> None:
    request = ChatRequest(model="gemini-2.5-flash", messages=[
        ChatMessage.assistant("Hello! How can I help?"), ChatMessage.user("hi"),
    ])
    assert [c["role"] for c in to_gemini(request)["contents"]] == ["model", "user"]


# -- 7. Gemini 3 thought signatures --------------------------------------------


def signed_calls(model: str, signature: str | None) -> ChatRequest:
    return ChatRequest(model=model, tools=[CLOCK], messages=[
        ChatMessage.user("Time in Oslo and Tokyo?"),
        ChatMessage.assistant(tool_calls=[
            ToolCall(id="t1", name="clock", thought_signature=signature),
            ToolCall(id="t2", name="clock"),
        ]),
        ChatMessage.tool("t1", "12:00"),
        ChatMessage.tool("t2", "20:00"),
    ])


def call_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["contents"][1]["parts"]


def test_a_thought_signature_round_trips_into_the_gemini_body() -> None:
    request = signed_calls("gemini-3-pro-preview", "Q2lnbmF0dXJlIGJ5dGVz")
    sent = send_gemini(request.model, to_gemini(request)).body
    assert call_parts(sent) == [
        {"functionCall": {"id": "t1", "name": "clock", "args": {}},
         "thoughtSignature": "Q2lnbmF0dXJlIGJ5dGVz"},
        {"functionCall": {"id": "t2", "name": "clock", "args": {}}},
    ]
    # It reads back from a messages file, and the other providers leave it out.
    again = parse_chat_request(json.loads(request.model_dump_json()))
    assert again == request
    assert "Q2lnbmF0" not in json.dumps(to_anthropic(request))


def test_a_gemini_3_call_without_a_signature_gets_the_placeholder() -> None:
    request = signed_calls("gemini-3-flash-preview", None)
    sent = send_gemini(request.model, to_gemini(request)).body
    # The first call of the turn carries it, as a parallel turn's signature would.
    assert call_parts(sent) == [
        {"functionCall": {"id": "t1", "name": "clock", "args": {}},
         "thoughtSignature": "skip_thought_signature_validator"},
        {"functionCall": {"id": "t2", "name": "clock", "args": {}}},
    ]
    assert PLACEHOLDER_SIGNATURE == "skip_thought_signature_validator"


@pytest.mark.parametrize("model", ["gemini-2.5-pro", "claude-sonnet-4-6"])
def test_earlier_models_get_no_placeholder(model: str) -> None:
    assert all("thoughtSignature" not in part
               for part in call_parts(to_gemini(signed_calls(model, None))))


# -- 8. a conversation that opens with an assistant message -------------------


def test_anthropic_sends_a_conversation_opening_with_the_assistant() -> None:
    request = ChatRequest(model="m", messages=[
        ChatMessage.system(SUMMARY),
        ChatMessage.assistant("Hello! How can I help?"),
        ChatMessage.user("What time is it?"),
    ])
    sent = send_anthropic(to_anthropic(request)).body
    assert [(turn["role"], turn["content"][0]["text"]) for turn in sent["messages"]] == [
        ("assistant", "Hello! How can I help?"), ("user", "What time is it?"),
    ]


# -- 9. the system role and store ----------------------------------------------


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([
        {"role": "system", "content": "Summary of earlier conversation:\nTrip planning."},
        {"role": "user", "content": "What time is it?"},
    ]), "utf-8")
    return path


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_the_cli_takes_the_developer_role(provider: str, tmp_path: Path, chat: Path) -> None:
    code, out, err = run("compile", "--home", str(tmp_path / "home"), "--profile", "none",
                         "--provider", provider, "--model", "m", "--messages", str(chat),
                         "--system-role", "developer")
    assert (code, err) == (0, "")
    body = json.loads(out)
    items = body["messages"] if provider == "openai-chat" else body["input"]
    assert [item["role"] for item in items] == ["developer", "developer", "user"][-len(items):]
    sent = (send_openai_chat(body) if provider == "openai-chat" else send_openai_responses(body))
    assert sent.body == body


def test_the_cli_refuses_a_system_role_elsewhere(tmp_path: Path, chat: Path) -> None:
    code, out, err = run("compile", "--home", str(tmp_path / "home"), "--provider", "anthropic",
                         "--model", "m", "--messages", str(chat), "--system-role", "developer")
    assert (code, out, err) == (
        2, "", "--system-role applies to openai-chat and openai-responses, not anthropic"
        "\nerror: 1 problem\n(run `pioneer compile --help` for usage)\n")
    code, _, err = run("compile", "--home", str(tmp_path / "home"), "--system-role", "system")
    assert (code, err) == (
        2, "--system-role needs --provider\nerror: 1 problem\n"
        "(run `pioneer compile --help` for usage)\n")
    request = ChatRequest(model="m", messages=[ChatMessage.user("hi")])
    assert refusal(lambda: build_request_body("gemini", request, system_role="developer")) == (
        "gemini has no system role option; leave system_role unset")


def test_responses_bodies_do_not_ask_to_store(tmp_path: Path, chat: Path) -> None:
    code, out, _ = run("compile", "--home", str(tmp_path / "home"), "--provider",
                       "openai-responses", "--model", "m", "--messages", str(chat))
    assert code == 0
    assert send_openai_responses(json.loads(out)).body["store"] is False
