"""The providers' rules as the model table and the installed SDKs state them, on the wire.

Every body goes through its official SDK (the in-process transport of ``test_providers``)
and is checked against the SDK's own typed request parameters with unknown keys refused,
so a field the SDK does not define, or a value it does not allow, fails here. Covered:
OpenAI GPT-5.6+ breakpoints and ``prompt_cache_options`` (Chat Completions and
Responses), Anthropic's bridge mark within the 20-block lookback, the Claude 4.6+ prefill
refusal, Anthropic's whitespace stop sequences,
Gemini's stop limit and last turn, Responses call ids, and a system note between tool
rounds keeping its place on the next turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import ConfigDict, TypeAdapter, ValidationError
from support import run_cli
from test_providers import (
    PERSONA,
    SUMMARY,
    WEATHER,
    send_anthropic,
    send_gemini,
    send_openai_chat,
    send_openai_responses,
)

from pioneer import (
    CompiledPromptPayload,
    InputError,
    PromptCompileInput,
    PromptCompiler,
    SamplingOptions,
    ensure_runtime_home,
)
from pioneer.audit import plan_cache, request_blocks
from pioneer.providers import (
    CacheOptions,
    ChatMessage,
    ChatRequest,
    ToolCall,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)

BREAKPOINT = {"mode": "explicit"}
_STRICT = ConfigDict(extra="forbid")
_TYPED = {
    "anthropic": TypeAdapter(list[MessageCreateParamsNonStreaming], config=_STRICT),
    "openai-chat": TypeAdapter(list[CompletionCreateParamsNonStreaming], config=_STRICT),
    "openai-responses": TypeAdapter(list[ResponseCreateParamsNonStreaming], config=_STRICT),
}


def _drain(value: Any) -> Any:
    """Walk a validated value: the SDKs' ``Iterable`` fields validate as they are read."""
    if isinstance(value, dict):
        return {key: _drain(item) for key, item in value.items()}
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return value
    return [_drain(item) for item in value]


def typed(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body``, after the SDK's typed request parameters accepted it, unknown keys refused."""
    _drain(_TYPED[provider].validate_python([body]))
    return body


def refusal(call: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(InputError) as caught:
        call(*args)
    return str(caught.value)


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> CompiledPromptPayload:
    home = tmp_path_factory.mktemp("home")
    ensure_runtime_home(home)
    (home / "USER.md").write_text(PERSONA, encoding="utf-8")
    return PromptCompiler().compile(PromptCompileInput(
        workspace_root=home, profile="full", dynamic_context="The user is in Oslo."))


def turn(payload: CompiledPromptPayload, model: str, **cache: Any) -> ChatRequest:
    """A summary, one earlier exchange, this turn's question and one tool round."""
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    return ChatRequest(model=model, compiled_prompt=payload, tools=[WEATHER],
                       cache=CacheOptions(**cache), messages=[
        ChatMessage.system(SUMMARY),
        ChatMessage.user("Which cities are worth a visit?"),
        ChatMessage.assistant("Oslo and Bergen."),
        ChatMessage.user("What is the weather in Oslo?"),
        ChatMessage.assistant(tool_calls=[call]),
        ChatMessage.tool("call_1", "Rain, 9 °C"),
    ])


def _text(text: str, *, mark: dict[str, str] | None = None, kind: str = "text") -> list[Any]:
    part: dict[str, Any] = {"type": kind, "text": text}
    if mark is not None:
        part["prompt_cache_breakpoint"] = mark
    return [part]


# -- OpenAI GPT-5.6 and later: breakpoints -------------------------------------------------


def test_gpt_5_6_chat_marks_four_breakpoints(payload: CompiledPromptPayload) -> None:
    body = to_openai_chat(turn(payload, "gpt-5.6"))
    sent = send_openai_chat(typed("openai-chat", body)).body
    assert sent == body
    assert sent["messages"] == [
        # The stable text and the summary, each marked: what still reads after a new
        # summary or a cut.
        {"role": "system", "content": _text(payload.stable_system_text, mark=BREAKPOINT)},
        {"role": "system", "content": _text(SUMMARY, mark=BREAKPOINT)},
        {"role": "user", "content": _text("Which cities are worth a visit?")},
        # An assistant's output takes no breakpoint; it stays plain text.
        {"role": "assistant", "content": "Oslo and Bergen."},
        # This turn's user message ends what the next turn sends again: marked, and the
        # dynamic text follows it.
        {"role": "user", "content": _text("What is the weather in Oslo?", mark=BREAKPOINT)},
        {"role": "system", "content": _text(payload.dynamic_system_text)},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        # The last message: the next round reads this whole round.
        {"role": "tool", "tool_call_id": "call_1", "content": _text("Rain, 9 °C", mark=BREAKPOINT)},
    ]
    assert sent["prompt_cache_options"] == {"mode": "explicit"}
    assert "prompt_cache_retention" not in sent


def test_gpt_5_6_responses_marks_four_breakpoints(payload: CompiledPromptPayload) -> None:
    body = to_openai_responses(turn(payload, "gpt-5.6-sol"))
    sent = send_openai_responses(typed("openai-responses", body)).body
    assert sent == body
    # instructions take no breakpoint: the stable text is the first input message.
    assert "instructions" not in sent
    assert sent["input"] == [
        {"role": "system", "content": _text(payload.stable_system_text, mark=BREAKPOINT,
                                            kind="input_text")},
        {"role": "system", "content": _text(SUMMARY, mark=BREAKPOINT, kind="input_text")},
        {"role": "user", "content": _text("Which cities are worth a visit?", kind="input_text")},
        {"role": "assistant", "content": "Oslo and Bergen."},
        {"role": "user", "content": _text("What is the weather in Oslo?", mark=BREAKPOINT,
                                          kind="input_text")},
        {"role": "system", "content": _text(payload.dynamic_system_text, kind="input_text")},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1",
         "output": _text("Rain, 9 °C", mark=BREAKPOINT, kind="input_text")},
    ]
    assert sent["prompt_cache_options"] == {"mode": "explicit"}


@pytest.mark.parametrize("model", ["gpt-5.6-terra-pro", "gpt-5.7", "gpt-6.1-sol"])
def test_later_models_take_breakpoints_too(payload: CompiledPromptPayload, model: str) -> None:
    body = typed("openai-chat", to_openai_chat(turn(payload, model)))
    marked = [m for m in body["messages"] if isinstance(m["content"], list)
              and "prompt_cache_breakpoint" in m["content"][-1]]
    assert len(marked) == 4


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5.5", "gpt-4.1"])
def test_older_models_keep_the_bodies_they_had(payload: CompiledPromptPayload, model: str) -> None:
    body = typed("openai-chat", to_openai_chat(turn(payload, model,
                                                    prompt_cache_retention="24h")))
    assert all(isinstance(m["content"], str | None) for m in body["messages"])
    # The dynamic text before this turn's user message, as before.
    assert [m["role"] for m in body["messages"][4:6]] == ["system", "user"]
    assert body["prompt_cache_retention"] == "24h"
    assert "prompt_cache_options" not in body
    responses = typed("openai-responses", to_openai_responses(turn(payload, model)))
    assert responses["instructions"] == payload.stable_system_text


def test_a_long_ttl_keeps_the_stable_breakpoints_12_hours(payload: CompiledPromptPayload) -> None:
    for provider, adapter in (("openai-chat", to_openai_chat),
                              ("openai-responses", to_openai_responses)):
        body = typed(provider, adapter(turn(payload, "gpt-5.6", long_ttl=True)))
        items = body.get("messages") or body["input"]
        parts = [item.get("content") or item.get("output") for item in items]
        marks = [found[-1]["prompt_cache_breakpoint"] for found in parts
                 if isinstance(found, list) and "prompt_cache_breakpoint" in found[-1]]
        long = {"mode": "explicit", "ttl": "12h"}
        assert marks == [long, long, BREAKPOINT, BREAKPOINT], provider


def test_prompt_cache_ttl_is_sent_as_prompt_cache_options(payload: CompiledPromptPayload) -> None:
    chat = typed("openai-chat", to_openai_chat(turn(payload, "gpt-5.6", prompt_cache_ttl="30m")))
    assert send_openai_chat(chat).body["prompt_cache_options"] == {"mode": "explicit",
                                                                    "ttl": "30m"}
    responses = typed("openai-responses", to_openai_responses(
        turn(payload, "gpt-5.6", prompt_cache_ttl="12h")))
    assert send_openai_responses(responses).body["prompt_cache_options"] == {
        "mode": "explicit", "ttl": "12h"}


def test_the_cache_options_each_model_refuses(payload: CompiledPromptPayload) -> None:
    assert refusal(to_openai_chat, turn(payload, "gpt-5.6", prompt_cache_ttl="12h")) == (
        "cache → prompt_cache_ttl: openai-chat: Chat Completions takes "
        "prompt_cache_options.ttl 30m only, for 'gpt-5.6' too (got '12h'); the Responses "
        "API also takes 12h")
    assert refusal(to_openai_responses, turn(payload, "gpt-5.6", prompt_cache_retention="24h")) \
        == ("cache → prompt_cache_retention: openai-responses: prompt_cache_retention is "
            "deprecated for 'gpt-5.6' (GPT-5.6 and later); set cache.prompt_cache_ttl, sent "
            "as prompt_cache_options.ttl")
    assert refusal(to_openai_chat, turn(payload, "gpt-5", prompt_cache_ttl="30m")) == (
        "cache → prompt_cache_ttl: openai-chat: 'gpt-5' takes no prompt_cache_options "
        "(GPT-5.6 and later do); leave cache.prompt_cache_ttl unset or use "
        "cache.prompt_cache_retention")
    # From gpt-5.5 on the retention is 24h only (the SDK's own description of the field).
    assert refusal(to_openai_responses,
                   turn(payload, "gpt-5.5-pro", prompt_cache_retention="in_memory")) == (
        "cache → prompt_cache_retention: openai-responses: 'gpt-5.5-pro' takes "
        "prompt_cache_retention 24h only (got 'in_memory')")
    assert typed("openai-chat", to_openai_chat(turn(
        payload, "gpt-5.1", prompt_cache_retention="in_memory")))["prompt_cache_retention"] \
        == "in_memory"
    # The SDK's own types say the same: Chat Completions' ttl is 30m only.
    with pytest.raises(ValidationError):
        typed("openai-chat", {"model": "gpt-5.6", "messages": [],
                              "prompt_cache_options": {"ttl": "12h"}})


def test_an_assistant_output_takes_no_breakpoint_in_the_sdk_types() -> None:
    """Why assistant messages stay unmarked: the Responses types have no such field."""
    with pytest.raises(ValidationError):
        typed("openai-responses", {"model": "gpt-5.6", "input": [{
            "role": "assistant", "content": [
                {"type": "output_text", "text": "Oslo.", "annotations": [],
                 "prompt_cache_breakpoint": BREAKPOINT}]}]})


def test_no_breakpoint_below_the_minimum() -> None:
    short = ChatRequest(model="gpt-5.6", messages=[ChatMessage.user("hi")])
    body = typed("openai-chat", to_openai_chat(short))
    assert body["messages"] == [{"role": "user", "content": _text("hi")}]
    assert "prompt_cache_options" not in body  # no breakpoint: OpenAI's implicit one works


def test_the_minimum_is_counted_with_the_models_tokenizer() -> None:
    # About 780 tokens in o200k (the model's), 1,180 in cl100k: below the 1,024 minimum.
    text = "Погода в Осло сегодня дождливая, и ветер дует с моря. " * 40
    body = typed("openai-chat", to_openai_chat(
        ChatRequest(model="gpt-5.6", messages=[ChatMessage.user(text)])))
    assert body["messages"] == [{"role": "user", "content": _text(text)}]
    assert "prompt_cache_options" not in body


def test_the_next_turn_reads_through_this_turns_user_message(
    payload: CompiledPromptPayload,
) -> None:
    """The first request of a turn reads the entry the previous turn's breakpoint wrote at
    its user message: exactly the longest prefix the two share."""
    first = turn(payload, "gpt-5.6")
    nxt = first.model_copy(update={"messages": [
        *first.messages[:4], ChatMessage.assistant("Rain, 9 °C in Oslo."),
        ChatMessage.user("And tomorrow?")]})
    for provider, adapter in (("openai-chat", to_openai_chat),
                              ("openai-responses", to_openai_responses)):
        earlier = request_blocks(provider, first, adapter(first))
        blocks = request_blocks(provider, nxt, adapter(nxt))
        plan = plan_cache(provider, "gpt-5.6", blocks, [earlier])
        question = next(i for i, b in enumerate(earlier) if b.kind == "turn")
        assert earlier[question].marked
        assert plan.shared_blocks == question + 1
        assert plan.cached_tokens == sum(b.tokens for b in earlier[:question + 1])
        assert plan.written_tokens > 0


# -- Anthropic: every mark within 20 blocks of an entry ---------------------------------------


def test_a_bridge_mark_keeps_the_previous_turns_entry_within_the_lookback(
    payload: CompiledPromptPayload,
) -> None:
    """After a turn of 12 tool rounds kept in the history, this turn's history mark is 26
    blocks past the entry the previous turn wrote (the end of its history): a bridge mark
    20 blocks before it still reads that entry, so the whole shared prefix is read."""
    earlier = [ChatMessage.user("Which cities are worth a visit?"),
               ChatMessage.assistant("Oslo and Bergen."),
               ChatMessage.user("Plan the week in Oslo.")]
    rounds: list[ChatMessage] = []
    for n in range(12):
        call = ToolCall(id=f"call_{n}", name="get_weather", arguments={"day": n})
        rounds += [ChatMessage.assistant(tool_calls=[call]),
                   ChatMessage.tool(call.id, f"Day {n}: rain, 9 °C")]
    history = [*earlier, *rounds, ChatMessage.assistant("Pack a raincoat.")]

    def request(messages: list[ChatMessage]) -> ChatRequest:
        return ChatRequest(model="claude-sonnet-4-6", compiled_prompt=payload,
                           tools=[WEATHER], messages=messages)

    previous, current = request(earlier), request([*history, ChatMessage.user("And Bergen?")])
    body = to_anthropic(current)
    assert send_anthropic(typed("anthropic", body)).body == body
    blocks = [*body["tools"], *body["system"],
              *(block for turn in body["messages"] for block in turn["content"])]
    marks = [i for i, block in enumerate(blocks) if "cache_control" in block]
    # The stable text, the bridge, the end of the history, the last block: four marks.
    answer = next(i for i, block in enumerate(blocks) if block.get("text") == "Oslo and Bergen.")
    end = next(i for i, b in enumerate(blocks) if b.get("text") == "Pack a raincoat.")
    assert end - answer == 26
    assert marks == [len(body["tools"]), end - 20, end, len(blocks) - 1]
    # The previous turn's first request wrote its entry at the end of its history.
    before = request_blocks("anthropic", previous, to_anthropic(previous))
    assert before[answer].marked
    plan = plan_cache("anthropic", current.model,
                      request_blocks("anthropic", current, body), [before])
    assert plan.cached_tokens == sum(block.tokens for block in before[:answer + 1])
    # Without the bridge the history mark reaches back 20 blocks only, short of that entry:
    # the request would read the stable text alone.
    unbridged = json.loads(json.dumps(body))
    conversation = [b for turn in unbridged["messages"] for b in turn["content"]]
    del conversation[end - 20 - len(body["tools"]) - len(body["system"])]["cache_control"]
    alone = plan_cache("anthropic", current.model,
                       request_blocks("anthropic", current, unbridged), [before])
    assert alone.cached_tokens == sum(block.tokens for block in before[:marks[0] + 1])


# -- Claude 4.6 and later refuse an assistant prefill -------------------------------------------


def prefilled(model: str) -> ChatRequest:
    return ChatRequest(model=model, messages=[
        ChatMessage.user("What is the capital of Norway?"),
        ChatMessage.assistant("The capital of Norway is "),
    ])


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-opus-4-7", "claude-opus-5",
                                   "claude-mythos-preview", "claude-sonnet-4-6-20260301"])
def test_claude_4_6_and_later_refuse_a_prefill(model: str) -> None:
    assert refusal(to_anthropic, prefilled(model)) == (
        f"messages: anthropic: {model!r} does not support an assistant message prefill "
        "(Claude 4.6 and later refuse one); the conversation ends with an assistant "
        "message: end it with a user message or a tool result")


def test_a_model_the_table_only_guesses_says_so() -> None:
    assert refusal(to_anthropic, prefilled("claude-fable-5-2")) == (
        "messages: anthropic: 'claude-fable-5-2' (as the model table's claude-fable family) "
        "does not support an assistant message prefill (Claude 4.6 and later refuse one); "
        "the conversation ends with an assistant message: end it with a user message or a "
        "tool result")


@pytest.mark.parametrize("model", ["claude-opus-4-1", "claude-haiku-4-5", "claude-sonnet-4-5"])
def test_earlier_claude_models_take_a_prefill(model: str) -> None:
    sent = send_anthropic(typed("anthropic", to_anthropic(prefilled(model)))).body
    assert sent["messages"][-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "The capital of Norway is"}]}


def test_the_cli_refuses_a_prefill(tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "Hi"},
                                {"role": "assistant", "content": "Hello, "}]), "utf-8")
    code, out, err = run_cli("compile", "--home", str(tmp_path / "home"), "--profile", "none",
                             "--provider", "anthropic", "--model", "claude-opus-4-7",
                             "--messages", str(chat))
    assert (code, out) == (1, "")
    assert err.startswith("messages: anthropic: 'claude-opus-4-7' does not support an "
                          "assistant message prefill")


# -- stop sequences ----------------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["\n", " \t", "\r\n"])
def test_anthropic_refuses_a_whitespace_stop_sequence(stop: str) -> None:
    request = ChatRequest(model="claude-sonnet-4-6", messages=[ChatMessage.user("hi")],
                          sampling=SamplingOptions(stop=["END", stop]))
    assert refusal(to_anthropic, request) == (
        "sampling → stop[1]: anthropic: a stop sequence of whitespace only is refused for "
        f"'claude-sonnet-4-6', as for every model of the API (got {stop!r}); each must "
        "contain another character")
    # Other providers take it.
    assert to_openai_chat(request)["stop"] == ["END", stop]


def test_anthropic_takes_a_stop_sequence_with_whitespace_around_text() -> None:
    request = ChatRequest(model="claude-sonnet-4-6", messages=[ChatMessage.user("hi")],
                          sampling=SamplingOptions(stop=["\nEND\n"]))
    assert send_anthropic(typed("anthropic", to_anthropic(request))).body["stop_sequences"] == [
        "\nEND\n"]


def test_gemini_takes_at_most_five_stop_sequences() -> None:
    five = ChatRequest(model="gemini-2.5-flash", messages=[ChatMessage.user("hi")],
                       sampling=SamplingOptions(stop=list("abcde")))
    sent = send_gemini(five.model, to_gemini(five)).body
    assert sent["generationConfig"]["stopSequences"] == list("abcde")
    six = five.model_copy(update={"sampling": SamplingOptions(stop=list("abcdef"))})
    assert refusal(to_gemini, six) == (
        "sampling → stop: gemini: 'gemini-2.5-flash' takes at most 5 stop sequences; "
        "sampling.stop has 6")
    # A model the table knows by its family only: the refusal says whose rule it is.
    guessed = six.model_copy(update={"model": "gemini-3.9-flash"})
    assert refusal(to_gemini, guessed) == (
        "sampling → stop: gemini: 'gemini-3.9-flash' (as the model table's gemini-3+ "
        "family) takes at most 5 stop sequences; sampling.stop has 6")


# -- Gemini: the last turn is the user's ---------------------------------------------------------


def test_gemini_refuses_a_request_that_ends_with_a_model_turn() -> None:
    assert refusal(to_gemini, prefilled("gemini-2.5-pro")) == (
        "messages: gemini: a gemini request may not end with a model turn; "
        "'gemini-2.5-pro' answers only a user turn or function responses; the conversation "
        "ends with an assistant message: end it with a user message or a tool result")
    ends_with_results = ChatRequest(model="gemini-3.5-flash", messages=[
        ChatMessage.user("time?"),
        ChatMessage.assistant(tool_calls=[ToolCall(id="t", name="clock")]),
        ChatMessage.tool("t", "12:00"),
    ])
    sent = send_gemini(ends_with_results.model, to_gemini(ends_with_results)).body
    assert sent["contents"][-1]["role"] == "user"


# -- Responses: long call ids are mapped ---------------------------------------------------------


def test_responses_maps_call_ids_over_64_characters() -> None:
    long_id, short_id = "call_" + "x" * 60, "call_" + "y" * 59  # 65 and 64 characters
    request = ChatRequest(model="gpt-5", messages=[
        ChatMessage.user("two calls"),
        ChatMessage.assistant(tool_calls=[ToolCall(id=long_id, name="clock"),
                                          ToolCall(id=short_id, name="clock")]),
        ChatMessage.tool(long_id, "12:00"), ChatMessage.tool(short_id, "12:01"),
    ])
    sent = send_openai_responses(typed("openai-responses", to_openai_responses(request))).body
    calls = [item["call_id"] for item in sent["input"] if item.get("type") == "function_call"]
    outputs = [item["call_id"] for item in sent["input"]
               if item.get("type") == "function_call_output"]
    assert calls == outputs
    assert calls[1] == short_id
    assert len(calls[0]) <= 64 and calls[0] != long_id
    assert calls[0].startswith("call_xxxxxxxxxx_")


# -- a system note between tool rounds keeps its place on the next turn --------------------------


@pytest.mark.parametrize("provider, adapter", [("anthropic", to_anthropic),
                                               ("gemini", to_gemini)])
def test_a_system_note_keeps_its_place_on_the_next_turn(
    payload: CompiledPromptPayload, provider: str, adapter: Callable[[ChatRequest], Any],
) -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})
    this_turn = [
        ChatMessage.system(SUMMARY),
        ChatMessage.user("Which cities are worth a visit?"),
        ChatMessage.assistant("Oslo and Bergen."),
        ChatMessage.user("What is the weather in Oslo?"),
        ChatMessage.assistant(tool_calls=[call]),
        ChatMessage.tool("call_1", "service unavailable", is_error=True),
        ChatMessage.system("The last tool call failed; try once more."),
        ChatMessage.assistant("The weather service is down."),
    ]
    model = "claude-sonnet-4-6" if provider == "anthropic" else "gemini-2.5-flash"
    next_turn = ChatRequest(model=model, compiled_prompt=payload, tools=[WEATHER],
                            messages=[*this_turn, ChatMessage.user("Try Bergen then.")])
    body = adapter(next_turn)
    if provider == "anthropic":
        assert send_anthropic(typed("anthropic", body)).body == body
    else:
        send_gemini(model, body)
    if provider == "anthropic":
        system = [block["text"] for block in body["system"]]
        texts = [block.get("text") for t in body["messages"] for block in t["content"]]
    else:
        system = [part["text"] for part in body["systemInstruction"]["parts"]]
        texts = [part.get("text") for c in body["contents"] for part in c["parts"]]
    # Only the stable text and the summary open the system part; the note stays in place,
    # between the tool result and the answer, as it was on the turn it was made.
    assert system == [payload.stable_system_text, SUMMARY]
    assert texts.index("The last tool call failed; try once more.") \
        < texts.index("The weather service is down.")
    # So the next turn's history is the previous turn's body up to its own dynamic text.
    previous = ChatRequest(model=model, compiled_prompt=payload, tools=[WEATHER],
                           messages=this_turn[:4])
    blocks = request_blocks(provider, next_turn, body)
    earlier = request_blocks(provider, previous, adapter(previous))
    plan = plan_cache(provider, model, blocks, [earlier])
    assert plan.first_difference is not None and not plan.first_difference.broken
    assert [b.kind for b in blocks[:plan.shared_blocks]][-1] == "history"
