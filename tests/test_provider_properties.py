"""Provider properties: the stable text is the cacheable prefix on every provider.

For any home files and profile (the stable inputs) and any two sets of dynamic inputs,
every adapter's system content starts with the same stable text, byte for byte, and no
body ever carries the boundary marker, wherever a caller's text put it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler, ToolSpec
from pioneer.compile.boundary import BOUNDARY_MARKER
from pioneer.providers import (
    ChatMessage,
    ChatRequest,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from pioneer.providers.request import clean

COMPILER = PromptCompiler(count_tokens=False)
PROPS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(codec="utf-8"), max_size=200)
visible = st.text(st.characters(codec="utf-8"), min_size=1, max_size=80).filter(
    lambda s: s.replace(BOUNDARY_MARKER, "").strip()
)
# Caller text that may carry the marker, as when a full text is pasted into a message.
leaky = st.one_of(visible, st.builds(lambda a, b: a + BOUNDARY_MARKER + b, visible, visible))
dynamic_fields = st.fixed_dictionaries(
    {},
    optional={
        "dynamic_context": text,
        "extra_system": text,
        "retry_instruction": text,
        "skills_prompt": text,
        "continue_generation_hint": st.booleans(),
        "include_task_orchestration_policy": st.booleans(),
        "dynamic_sections": st.lists(
            st.fixed_dictionaries({"id": st.sampled_from(["plugin.notes", "plugin.todo"]),
                                   "content": text}),
            max_size=2, unique_by=lambda section: section["id"],
        ),
    },
)
stable_inputs = st.fixed_dictionaries({
    "profile": st.sampled_from(["full", "minimal", "none"]),
    "include_tool_recovery_policy": st.booleans(),
    "files": st.fixed_dictionaries({}, optional={"SOUL.md": text, "USER.md": text}),
})

Adapter = Callable[[ChatRequest], dict[str, Any]]


def _anthropic(body: dict[str, Any]) -> str:
    return "\n\n".join(block["text"] for block in body.get("system", []))


def _chat(body: dict[str, Any]) -> str:
    first = body["messages"][0] if body["messages"] else {}
    return str(first.get("content", "")) if first.get("role") == "system" else ""


def _responses(body: dict[str, Any]) -> str:
    return str(body.get("instructions", ""))


def _gemini(body: dict[str, Any]) -> str:
    return "\n\n".join(part["text"] for part in body.get("systemInstruction", {}).get("parts", []))


#: Each adapter with a reader for what it sends as system content.
ADAPTERS: dict[str, tuple[Adapter, Callable[[dict[str, Any]], str]]] = {
    "anthropic": (to_anthropic, _anthropic),
    "openai-chat": (to_openai_chat, _chat),
    "openai-responses": (to_openai_responses, _responses),
    "gemini": (to_gemini, _gemini),
}


def _compile(root: Path, stable: dict[str, Any], dynamic: dict[str, Any]) -> CompiledPromptPayload:
    data = {"workspace_root": root, "profile": stable["profile"],
            "include_tool_recovery_policy": stable["include_tool_recovery_policy"], **dynamic}
    return COMPILER.compile(PromptCompileInput.model_validate(data))


@PROPS
@given(stable=stable_inputs, first=dynamic_fields, second=dynamic_fields,
       summary=st.none() | leaky, question=leaky)
def test_stable_text_is_the_prefix_of_every_system_content(
    stable: dict[str, Any], first: dict[str, Any], second: dict[str, Any],
    summary: str | None, question: str,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, content in stable["files"].items():
            (root / name).write_bytes(content.encode("utf-8"))
        payloads = [_compile(root, stable, first), _compile(root, stable, second)]
    stable_text = payloads[0].stable_system_text
    assert payloads[1].stable_system_text == stable_text
    messages = [ChatMessage.user(question)]
    if summary is not None:
        messages.insert(0, ChatMessage.system("Summary of earlier conversation:\n" + summary))
    tools = [ToolSpec(name="clock", description="The local time.")]
    for adapter, system_content in ADAPTERS.values():
        for payload in payloads:
            request = ChatRequest(model="m", compiled_prompt=payload, messages=messages,
                                  tools=tools)
            body = adapter(request)
            sent = system_content(body)
            assert sent.startswith(stable_text)
            assert BOUNDARY_MARKER.strip() not in json.dumps(body, ensure_ascii=False)
            if summary is not None:
                assert "Summary of earlier conversation:" in json.dumps(body, ensure_ascii=False)
            if stable_text and adapter is to_anthropic:
                assert body["system"][0]["text"] == stable_text


COMMENT = BOUNDARY_MARKER.strip()
marker_pieces = st.sampled_from(
    [BOUNDARY_MARKER, COMMENT, COMMENT[:12], COMMENT[12:], "\n", "x", " "]
)


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(marker_pieces, min_size=1, max_size=12))
@example(pieces=[COMMENT[:12], COMMENT, COMMENT[12:]])
@example(pieces=["x", BOUNDARY_MARKER.rstrip("\n"), BOUNDARY_MARKER.lstrip("\n"), "x"])
def test_no_marker_survives_cleaning_however_the_pieces_are_arranged(pieces: list[str]) -> None:
    """Removing one marker can join the halves of another; cleaning removes that too."""
    content = "".join(pieces)
    assert COMMENT not in clean(content)
    if clean(content).strip():
        for adapter, _ in ADAPTERS.values():
            request = ChatRequest(model="m", messages=[ChatMessage.user(content)])
            assert COMMENT not in json.dumps(adapter(request), ensure_ascii=False)
