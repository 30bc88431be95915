"""ChatRequest validation: conversations no provider accepts are refused, with exact errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pioneer import InputError, ToolSpec
from pioneer.compile.boundary import BOUNDARY_MARKER
from pioneer.providers import (
    ChatMessage,
    ChatRequest,
    ToolCall,
    load_chat_request,
    parse_chat_request,
)

#: The tool name rule as every refusal shows it.
NAME_RULE = ("must match ^[A-Za-z_][A-Za-z0-9_-]{0,63}$: a letter or _ first, then letters, "
             "digits, _ or -, at most 64 characters in all")
CALL = {"role": "assistant", "tool_calls": [{"id": "a", "name": "clock"}]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_result": {"call_id": call_id, "content": "12:00"}}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            {"messages": [CALL, {"role": "user", "content": "well?"}]},
            "messages[0]: call 'a' has no tool result before messages[1]",
            id="call-not-answered-before-the-next-message",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "hi"}, CALL]},
            "messages[1]: call 'a' has no tool result at the end of the conversation",
            id="call-not-answered-at-the-end",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "hi"}, result("zz")]},
            "messages[1]: tool result for call 'zz', but the assistant message before it "
            "made no such call",
            id="result-without-a-call",
        ),
        pytest.param(
            {"messages": [CALL, result("a"), result("a")]},
            "messages[2]: call 'a' is already answered",
            id="answered-twice",
        ),
        pytest.param(
            {"messages": [CALL, result("a"), {"role": "user", "content": "again"}, CALL,
                          result("a")]},
            "messages[3]: call id 'a' is used twice",
            id="call-id-reused",
        ),
        pytest.param(
            {"messages": [{"role": "tool", "content": "12:00"}]},
            "messages[0]: tool_result: a tool message needs a tool_result",
            id="tool-message-without-result",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "x",
                           "tool_calls": [{"id": "a", "name": "clock"}]}]},
            "messages[0]: tool_calls: only assistant messages make tool calls, not user",
            id="user-with-tool-calls",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "  \n"}]},
            "messages[0]: content: a user message needs text",
            id="blank-user-message",
        ),
        pytest.param(
            {"messages": [{"role": "assistant"}]},
            "messages[0]: content: an assistant message needs text or tool calls",
            id="empty-assistant-message",
        ),
        pytest.param(
            {"messages": [{"role": "system", "content": BOUNDARY_MARKER}]},
            "messages[0]: content: a system message needs text",
            id="marker-is-not-text",
        ),
        pytest.param(
            {"messages": [{"role": "robot", "content": "x"}]},
            "messages[0] → role: Input should be 'system', 'user', 'assistant' or 'tool'",
            id="unknown-role",
        ),
        pytest.param(
            {"tools": [{"name": "t", "descripton": "x"}]},
            'tools[0] → descripton: unknown field (did you mean "description"?)',
            id="misspelt-field",
        ),
        pytest.param(
            {"mesages": []},
            'mesages: unknown field (did you mean "messages"?)',
            id="misspelt-top-field",
        ),
        pytest.param(
            {"messages": [{"role": "user", "content": "x", "name": "bob"}]},
            "messages[0] → name: unknown field (known: role, content, tool_calls, "
            "tool_result, cache_breakpoint)",
            id="unknown-field",
        ),
        pytest.param(
            {"tools": [{"name": "get weather"}]},
            f"tools[0] → name: {NAME_RULE} (got 'get weather')",
            id="bad-tool-name",
        ),
        pytest.param(
            {"tools": [{"name": "2fa_check"}]},
            f"tools[0] → name: {NAME_RULE} (got '2fa_check')",
            id="tool-name-starts-with-a-digit",
        ),
        pytest.param(
            {"tools": [{"name": "-dash"}]},
            f"tools[0] → name: {NAME_RULE} (got '-dash')",
            id="tool-name-starts-with-a-dash",
        ),
        pytest.param(
            {"tools": [{"name": "t" * 65}]},
            f"tools[0] → name: {NAME_RULE} (got '{'t' * 65}')",
            id="tool-name-too-long",
        ),
        pytest.param(
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "a", "name": "9lives"}]},
                          result("a")]},
            f"messages[0] → tool_calls[0] → name: {NAME_RULE} (got '9lives')",
            id="called-tool-name-starts-with-a-digit",
        ),
        pytest.param(
            {"tools": [{"name": "t", "parameters": {"type": "string"}}]},
            'tools[0] → parameters: must describe an object ("type": "object"), '
            "got type 'string'",
            id="parameters-not-an-object",
        ),
        pytest.param(
            {"tools": [{"name": "t", "parameters": {"type": "object",
                                                     "properties": {"a": {"type": "nope"}}}}]},
            "tools[0] → parameters: not a valid JSON Schema at properties → a → type: "
            "'nope' is not valid under any of the given schemas",
            id="parameters-not-a-schema",
        ),
        pytest.param(
            {"tools": [{"name": "t"}, {"name": "t"}]},
            "tools[1]: tool name 't' is used twice",
            id="duplicate-tool-names",
        ),
        pytest.param(
            {"sampling": {"temperature": 3}},
            "sampling → temperature: Input should be less than or equal to 2",
            id="temperature-out-of-range",
        ),
    ],
)
def test_invalid_request_errors(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_chat_request({"model": "m", **data}, file="chat.json")
    assert caught.value.render() == f"chat.json: {expected}\nerror: 1 problem in chat.json"


def test_every_conversation_problem_is_listed() -> None:
    data = {"model": "m", "messages": [CALL, result("b"), {"role": "user", "content": "x"}]}
    with pytest.raises(InputError) as caught:
        parse_chat_request(data)
    assert caught.value.render() == (
        "messages[1]: tool result for call 'b', but the assistant message before it made "
        "no such call\n"
        "messages[0]: call 'a' has no tool result before messages[2]\n"
        "error: 2 problems"
    )


def test_direct_construction_raises_an_input_error() -> None:
    with pytest.raises(InputError,
                       match=r"ChatRequest: messages\[0\]: call 'a' has no tool result"):
        ChatRequest(model="m", messages=[ChatMessage.assistant(
            tool_calls=[ToolCall(id="a", name="clock")])])


def test_parallel_calls_may_be_answered_in_any_order() -> None:
    request = ChatRequest(model="m", messages=[
        ChatMessage.assistant(tool_calls=[ToolCall(id="a", name="clock"),
                                          ToolCall(id="b", name="clock")]),
        ChatMessage.tool("b", "2"),
        ChatMessage.tool("a", "1"),
    ])
    assert request.tool_call_names() == {"a": "clock", "b": "clock"}


def test_tool_defaults_to_an_empty_arguments_object() -> None:
    assert ToolSpec(name="clock").parameters == {"type": "object", "properties": {}}


def test_load_a_list_of_messages(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]), "utf-8")
    request = load_chat_request(path, model="m")
    assert request.model == "m"
    assert request.messages == [ChatMessage.user("hi")]


def test_load_request_fields_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({
        "model": "from-file", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "clock"}], "sampling": {"max_tokens": 10},
    }), "utf-8")
    request = load_chat_request(path, model="from-option")
    assert request.model == "from-option"
    assert [tool.name for tool in request.tools] == ["clock"]
    assert request.sampling.max_tokens == 10


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"model": ', "1:11: Expecting value (JSON syntax)"),
        ('"just a string"', " expected a JSON object or a list of messages"),
    ],
)
def test_load_bad_files(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "chat.json"
    path.write_text(text, "utf-8")
    with pytest.raises(InputError) as caught:
        load_chat_request(path)
    assert caught.value.render() == f"{path}:{expected}"


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read messages"):
        load_chat_request(tmp_path / "absent.json")


def _compiled(home: Path) -> dict[str, Any]:
    from pioneer import PromptCompileInput, PromptCompiler

    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home,
                                                          extra_system="Be brief."))
    return json.loads(payload.to_json())


def test_a_written_payload_reads_back_with_or_without_its_full_text(home: Path) -> None:
    data = _compiled(home)
    full = data["full_system_text"]  # written out, though joined only when read
    assert full == data["stable_system_text"] + BOUNDARY_MARKER + data["dynamic_system_text"]
    with_full = parse_chat_request({"model": "m", "compiled_prompt": data})
    without = parse_chat_request({"model": "m", "compiled_prompt": {
        key: value for key, value in data.items() if key != "full_system_text"}})
    assert with_full == without
    assert with_full.compiled_prompt is not None
    assert with_full.compiled_prompt.full_system_text == full
    assert json.loads(with_full.compiled_prompt.to_json()) == data


def test_a_payload_whose_full_text_is_not_the_join_is_refused(home: Path) -> None:
    data = _compiled(home)
    data["full_system_text"] = data["full_system_text"].replace("Be brief.", "Be long.")
    with pytest.raises(InputError) as caught:
        parse_chat_request({"model": "m", "compiled_prompt": data}, file="chat.json")
    assert caught.value.render() == (
        "chat.json: compiled_prompt: full_system_text is not the stable text, the boundary "
        "marker and the dynamic text joined\nerror: 1 problem in chat.json"
    )


@pytest.mark.parametrize("value", [None, 5, ["text"]])
def test_a_full_text_that_is_not_a_string_is_refused(home: Path, value: Any) -> None:
    data = {**_compiled(home), "full_system_text": value}
    with pytest.raises(InputError, match="full_system_text is not the stable text"):
        parse_chat_request({"model": "m", "compiled_prompt": data})


def test_a_payload_may_come_as_any_mapping(home: Path) -> None:
    from types import MappingProxyType

    data = _compiled(home)
    request = parse_chat_request({"model": "m", "compiled_prompt": MappingProxyType(data)})
    assert request.compiled_prompt is not None
    assert request.compiled_prompt.full_system_text == data["full_system_text"]


def test_a_written_request_validates_against_the_committed_schema(home: Path) -> None:
    import jsonschema

    from pioneer.files import load_schema

    request = parse_chat_request({"model": "m", "compiled_prompt": _compiled(home)})
    jsonschema.Draft202012Validator(load_schema("chat_request.schema.json")).validate(
        request.model_dump(mode="json"))
