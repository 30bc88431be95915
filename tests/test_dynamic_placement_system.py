"""The ``system`` placement: the bodies of earlier versions, byte for byte.

The goldens in ``goldens/providers/system-*.json`` were written by the adapters as they
were before the cache-first layout (dynamic text in the system prompt, tools in the
caller's order, the stable block and the last message marked). A deployment that pins
``dynamic_placement = "system"`` keeps getting exactly those bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pioneer import PromptCompileInput, PromptCompiler, SamplingOptions, ToolSpec
from pioneer.providers import PROVIDERS, CacheOptions, ChatMessage, ChatRequest, ToolCall

GOLDENS = Path(__file__).parent / "goldens" / "providers"
WEATHER = ToolSpec(
    name="get_weather", description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]},
)
CLOCK = ToolSpec(name="clock", description="The local time.")


def _requests(folder: Path) -> dict[str, ChatRequest]:
    Path("home").mkdir()
    Path("home", "SOUL.md").write_text("Curious and calm.\n", encoding="utf-8")
    payload = PromptCompiler().compile(PromptCompileInput(
        workspace_root=Path("home"), profile="full", dynamic_context="The user is in Oslo.",
        retry_instruction="Check the tool's arguments before calling it again.",
    ))
    conversation = [
        ChatMessage.system("Summary of earlier conversation:\nThe user plans a trip."),
        ChatMessage.user("What is the weather in Oslo and Bergen?"),
        ChatMessage.assistant("Checking both.", tool_calls=[
            ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"}),
            ToolCall(id="call_2", name="get_weather", arguments={"city": "Bergen"}),
        ]),
        ChatMessage.tool("call_1", "Rain, 9 °C"),
        ChatMessage.tool("call_2", "service unavailable", is_error=True),
        ChatMessage.assistant("Oslo has rain; Bergen's weather service is down.",
                              cache_breakpoint=True),
        ChatMessage.user("And what time is it?"),
        ChatMessage.assistant("", tool_calls=[ToolCall(id="call_3", name="clock")]),
        ChatMessage.tool("call_3", "14:05"),
    ]
    return {
        "agent": ChatRequest(model="test-model", compiled_prompt=payload,
                             messages=conversation, tools=[WEATHER, CLOCK],
                             sampling=SamplingOptions(max_tokens=512, temperature=0.3)),
        "chat": ChatRequest(model="test-model", compiled_prompt=payload,
                            messages=[ChatMessage.user("Hello.")]),
        "no-prompt": ChatRequest(model="test-model", messages=conversation[1:],
                                 tools=[WEATHER, CLOCK]),
    }


def _system(request: ChatRequest) -> ChatRequest:
    return request.model_copy(update={"cache": CacheOptions(dynamic_placement="system")})


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_system_placement_keeps_the_earlier_bodies(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    golden: Callable[[Path, str], None],
) -> None:
    monkeypatch.chdir(tmp_path)
    adapter = PROVIDERS[provider]
    bodies: dict[str, Any] = {
        name: adapter(_system(request)) for name, request in _requests(tmp_path).items()
    }
    golden(GOLDENS / f"system-{provider}.json",
           json.dumps(bodies, indent=2, ensure_ascii=False) + "\n")
