"""A reply from the wrong API is named as such, for every pair of the four APIs (the
official SDKs' own reply objects, their dumps and the wire JSON); a chat turn answered
with a tool call ends with the text and a diagnostic."""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import pytest
from test_replies import PARALLEL, reply, sdk_response

from pioneer import Agent, InputError, ProviderError, ensure_runtime_home
from pioneer.providers import read_response
from pioneer.providers.api import API_NAMES

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

PROVIDERS = ["anthropic", "openai-chat", "openai-responses", "gemini"]
PAIRS = [pair for pair in itertools.permutations(PROVIDERS, 2)]


@pytest.mark.parametrize(("sent_by", "built_for"), PAIRS)
def test_a_reply_of_another_api_is_named(sent_by: str, built_for: str) -> None:
    data = reply(sent_by, text="Checking both.", calls=PARALLEL)
    obj = sdk_response(sent_by, data)
    message = (f"(response): the response looks like a reply of {API_NAMES[sent_by]} "
               f"({sent_by}), but the turn was built for {API_NAMES[built_for]} "
               f"({built_for}): send the body to the API it was built for, or build it for "
               f"{sent_by}")
    for response in (obj, obj.model_dump(), data):
        with pytest.raises(ProviderError) as info:
            read_response(built_for, response)
        assert str(info.value) == message, type(response)
    assert read_response(sent_by, obj).text == "Checking both."


def test_the_names_are_the_apis_as_docs_spell_them() -> None:
    assert API_NAMES == {"anthropic": "Anthropic Messages",
                         "openai-chat": "OpenAI Chat Completions",
                         "openai-responses": "OpenAI Responses",
                         "gemini": "Gemini generateContent"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_chat_turn_answered_with_a_tool_call_ends_with_its_text(
    provider: str, tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    ensure_runtime_home(home)
    model = agent_loop.MODELS[provider]
    with Agent(tmp_path / "p.db", provider=provider, model=model,  # type: ignore[arg-type]
               compile_input={"workspace_root": home}, recall=False,
               runtime_facts=False) as agent:
        turn = agent.turn("t", "Hello", mode="chat", turn_id="chat-1")
        body = turn.next_body()
        assert "tools" not in body
        step = turn.receive(sdk_response(provider, reply(provider, text="Let me look.",
                                                         calls=PARALLEL)))
        assert step.done and step.calls == () and step.runnable == ()
        assert step.text == "Let me look."
        [diagnostic] = step.diagnostics
        assert diagnostic.code == "input_ignored"
        assert re.fullmatch(r"a chat turn offers no tools, but the reply asked for 2 tool "
                            r"call\(s\) \(get_weather, get_weather\): they were dropped, and "
                            r"the turn ends with the reply's text", diagnostic.message)
        with pytest.raises(InputError, match="answered without a tool call; finish"):
            turn.next_body()
        finished = turn.finish()
        assert finished.entry.assistant_text == "Let me look."
        assert finished.diagnostics == (diagnostic,)
        assert finished.record.rounds[0].reply is not None
        assert finished.record.rounds[0].reply.tool_calls == 2  # what the provider said
        after = agent.turn("t", "And now?", mode="chat")
        following = json.dumps(after.next_body())
        with pytest.warns(ResourceWarning):
            after.close()
    # The next body carries the answer as text, and no tool round a provider would refuse.
    assert "Let me look." in following
    for word in ("tool_use", "tool_result", "tool_call", "function_call", "functionCall",
                 "functionResponse", "get_weather"):
        assert word not in following, word
