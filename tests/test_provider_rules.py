"""Rules the APIs enforce and their SDKs do not: each refused with its exact message, or mapped.

Every rule is shown twice: the official SDK (on the in-process transport of
``test_providers``) sends the body it applies to, so nothing but the adapter stands
between a caller and the API's refusal; and the adapter's body or error is asserted
exactly. They are listed in docs/providers.md, "What each provider refuses and what is mapped".
"""

from __future__ import annotations

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

from pioneer import (
    ChatMessage,
    ChatRequest,
    InputError,
    SamplingOptions,
    ToolSpec,
)
from pioneer.providers import (
    CacheOptions,
    parse_chat_request,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from pioneer.providers.request import TOOL_NAME_PATTERN

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
    assert (code, out, err) == (1, "", f"messages: anthropic {EMPTY}\n")


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


# -- 5. stop sequences ---------------------------------------------------------


def test_openai_chat_takes_at_most_four_stop_sequences() -> None:
    five = ChatRequest(model="m", messages=[ChatMessage.user("hi")],
                       sampling=SamplingOptions(stop=["a", "b", "c", "d", "e"]))
    assert refusal(to_openai_chat, five) == (
        "sampling → stop: openai-chat takes at most 4 stop sequences; sampling.stop has 5"
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
