"""Cache-first layout properties, for every adapter, over generated threads.

For any stable inputs (profile, home files, tools in any order), any history (with or
without a summary) and any dynamic text per turn:

* the next turn's body starts with this turn's tools, stable text, summary and history,
  byte for byte (each block as sent, its cache mark left out);
* within a turn, round k+1's body starts with round k's body;
* the dynamic text appears exactly once, after the last history block;
* tools go out sorted by name;
* Anthropic: never more than 4 marks, and none on a prefix shorter than the model's
  minimum cacheable length.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler, ToolSpec
from pioneer.providers import (
    PROVIDERS,
    ChatMessage,
    ChatRequest,
    ToolCall,
    count_breakpoints,
    minimum_cacheable_tokens,
)
from pioneer.providers.rules import previewing
from pioneer.tokens import default_counter

COMPILER = PromptCompiler(count_tokens=False)
PROPS = settings(max_examples=25, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                max_size=60).filter(str.strip)
prose = st.lists(st.sampled_from(["cache", "prefix", "turn", "tool", "Köln", "東京", "🚀"]),
                 min_size=1, max_size=400).map(" ".join)
tool_names = st.lists(st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True), min_size=0,
                      max_size=5, unique=True)
history = st.lists(st.tuples(words, prose), max_size=4)
MODELS = ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5", "some-model"]


def _blocks(provider: str, body: dict[str, Any]) -> list[str]:
    """Every block of a body in the order the provider caches it, as sent, mark left out."""
    def text(value: Any) -> str:
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "cache_control"}
        return json.dumps(value, ensure_ascii=False)

    if provider == "anthropic":
        system = body.get("system", [])
        return [*(text(t) for t in body.get("tools", [])), *(text(b) for b in system),
                *(turn["role"] + ":" + text(b) for turn in body["messages"]
                  for b in turn["content"])]
    if provider == "openai-chat":
        return [*(text(t) for t in body.get("tools", [])), *(text(m) for m in body["messages"])]
    if provider == "openai-responses":
        head = [text(body["instructions"])] if "instructions" in body else []
        return [*(text(t) for t in body.get("tools", [])), *head,
                *(text(i) for i in body["input"])]
    declarations = [d for t in body.get("tools", []) for d in t["functionDeclarations"]]
    parts = body.get("systemInstruction", {}).get("parts", [])
    return [*(text(d) for d in declarations), *(text(p) for p in parts),
            *(c["role"] + ":" + text(p) for c in body["contents"] for p in c["parts"])]


def _payload(root: Path, profile: str, clock: str) -> CompiledPromptPayload:
    return COMPILER.compile(PromptCompileInput(
        workspace_root=root, profile=profile, dynamic_context=f"Clock zq{clock}qz"))


@PROPS
@given(profile=st.sampled_from(["full", "minimal", "none"]), persona=st.none() | prose,
       names=tool_names, turns=history, summary=st.none() | prose,
       questions=st.tuples(words, words), result=prose, model=st.sampled_from(MODELS))
def test_every_request_starts_with_the_one_before(
    profile: str, persona: str | None, names: list[str], turns: list[tuple[str, str]],
    summary: str | None, questions: tuple[str, str], result: str, model: str,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        if persona is not None:
            (root / "USER.md").write_text(persona, encoding="utf-8")
        first, second = _payload(root, profile, "1"), _payload(root, profile, "2")
    assert first.stable_system_text == second.stable_system_text
    tools = [ToolSpec(name=name, description=f"The {name} tool.") for name in names]
    past = [ChatMessage.system("Summary of earlier conversation:\n" + summary)] if summary else []
    for user, reply in turns:
        past += [ChatMessage.user(user), ChatMessage.assistant(reply)]
    call = ToolCall(id="call-1", name=names[0] if names else "x", arguments={"b": 1, "a": 2})
    one = [*past, ChatMessage.user(questions[0])]
    one_round_two = [*one, ChatMessage.assistant(tool_calls=[call]),
                     ChatMessage.tool(call.id, result)]
    two = [*past, ChatMessage.user(questions[0]), ChatMessage.assistant("Done."),
           ChatMessage.user(questions[1])]
    if not names:
        one_round_two = one  # no tool to call: a one-round turn

    def body(provider: str, payload: CompiledPromptPayload,
             messages: list[ChatMessage]) -> dict[str, Any]:
        return PROVIDERS[provider](ChatRequest(model=model, compiled_prompt=payload,
                                               messages=messages, tools=list(reversed(tools))))

    for provider in PROVIDERS:
        turn_one = body(provider, first, one)
        round_two = body(provider, first, one_round_two)
        turn_two = body(provider, second, two)
        # The prefix alone is only looked at, never sent: with no history turn yet it has
        # no conversation, which the adapters refuse for a body that is sent.
        with previewing():
            history_only = _blocks(provider, PROVIDERS[provider](ChatRequest(
                model=model, compiled_prompt=first.model_copy(update={"dynamic_system_text": ""}),
                messages=past, tools=tools)))
        blocks_one, blocks_two = _blocks(provider, turn_one), _blocks(provider, turn_two)
        reused = len(history_only)
        # Tools, stable text, summary and history of this turn open the next turn's body.
        assert blocks_one[:reused] == history_only
        assert blocks_two[:reused] == history_only
        # A round only appends to the round before it.
        blocks_round_two = _blocks(provider, round_two)
        assert blocks_round_two[:len(blocks_one)] == blocks_one
        # The dynamic text: once, after the history.
        for blocks, clock in ((blocks_one, "1"), (blocks_round_two, "1"), (blocks_two, "2")):
            if profile == "none":
                assert not any(f"zq{c}qz" in b for b in blocks for c in "12")
                continue
            where = [i for i, b in enumerate(blocks) if f"zq{clock}qz" in b]
            assert len(where) == 1 and where[0] >= reused
            assert json.dumps(blocks).count(f"zq{clock}qz") == 1
        assert _tool_names(provider, turn_two) == sorted(names)
        if provider == "anthropic":
            _check_marks(turn_one, model)
            _check_marks(round_two, model)
            _check_marks(turn_two, model)


def _tool_names(provider: str, body: dict[str, Any]) -> list[str]:
    tools = body.get("tools", [])
    if provider == "openai-chat":
        return [t["function"]["name"] for t in tools]
    if provider == "gemini":
        return [d["name"] for t in tools for d in t["functionDeclarations"]]
    return [t["name"] for t in tools]


def _check_marks(body: dict[str, Any], model: str) -> None:
    assert count_breakpoints(body) <= 4
    counter = default_counter()
    total = 0
    minimum = minimum_cacheable_tokens(model)
    blocks = [*body.get("tools", []), *body.get("system", []),
              *(b for turn in body["messages"] for b in turn["content"])]
    for block in blocks:
        text = block["text"] if block.get("type") == "text" else json.dumps(
            {k: v for k, v in block.items() if k != "cache_control"}, ensure_ascii=False)
        total += counter.count(text)
        if "cache_control" in block:
            assert total >= minimum, (total, minimum)
