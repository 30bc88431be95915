"""Cache marks over generated agent threads: Anthropic's marks, OpenAI GPT-5.6+ breakpoints.

For any thread (2 to 5 turns of 0 to 8 tool rounds, a summary or none, the history from
the store or with every tool round kept) and for each model:

* no request carries more than 4 marks (Anthropic) or 4 written breakpoints (OpenAI);
* no mark sits on a prefix shorter than the model's minimum;
* the first request of every turn after the first finds, at exactly the block where the
  longest prefix it shares with an earlier request ends, a mark an earlier request wrote
  (when that prefix reaches the minimum): the whole reusable prefix is read;
* Anthropic: every mark is within 20 blocks of an entry the thread already wrote or of
  an earlier mark of the same request, whenever there is one before it at all.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler, ToolSpec
from pioneer.audit import CacheBlock, request_blocks
from pioneer.providers import PROVIDERS, ChatMessage, ChatRequest, ToolCall, model_facts
from pioneer.tokens import default_counter

COMPILER = PromptCompiler(count_tokens=False)
PROPS = settings(max_examples=12, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TOOLS = [ToolSpec(name="read_file", description="Read a file."),
         ToolSpec(name="run_tests", description="Run the tests.")]
PERSONA = "Prefers short answers with the numbers first, and plans ahead. " * 90
TARGETS = [("anthropic", "claude-sonnet-4-6"), ("anthropic", "claude-opus-4-7"),
           ("openai-chat", "gpt-5.6"), ("openai-responses", "gpt-5.6-terra")]
LOOKBACK = 20


def _payloads(turns: int) -> list[CompiledPromptPayload]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "USER.md").write_text(PERSONA, encoding="utf-8")
        return [COMPILER.compile(PromptCompileInput(
            workspace_root=root, profile="full", dynamic_context=f"Turn {n} clock."))
            for n in range(turns)]


def _thread(rounds: list[int], kept: bool, summary: bool, size: int) -> list[list[ChatRequest]]:
    """Every request of every turn, in order: turns of tool rounds, then an answer."""
    payloads = _payloads(len(rounds))
    history = [ChatMessage.system("Summary of earlier conversation:\n" + "plans " * 60)] \
        if summary else []
    turns: list[list[ChatRequest]] = []
    for number, count in enumerate(rounds):
        question = f"Question {number}: " + "why " * (20 + number)
        messages = [*history, ChatMessage.user(question)]
        requests = []
        for step in range(count + 1):
            requests.append(ChatRequest(model="m", compiled_prompt=payloads[number],
                                        messages=messages, tools=TOOLS))
            if step == count:
                break
            call = ToolCall(id=f"c{number}-{step}", name="read_file", arguments={"n": step})
            messages = [*messages, ChatMessage.assistant("Reading.", tool_calls=[call]),
                        ChatMessage.tool(call.id, f"line {step} " * size)]
        answer = ChatMessage.assistant(f"Answer {number}: " + "because " * 40)
        history = [*messages, answer] if kept else [
            *history, ChatMessage.user(question), answer]
        turns.append(requests)
    return turns


def _prefix_tokens(provider: str, body: dict[str, Any]) -> list[int]:
    """Tokens through each block, in cache order, counted as the adapters count them."""
    count = default_counter().count

    def text(block: dict[str, Any]) -> str:
        if block.get("type") == "text" and provider == "anthropic":
            return str(block["text"])
        clean = {k: v for k, v in block.items() if k != "cache_control"}
        return json.dumps(_unmarked(clean), ensure_ascii=False)

    if provider == "anthropic":
        blocks = [*body.get("tools", []), *body.get("system", []),
                  *(b for turn in body["messages"] for b in turn["content"])]
    elif provider == "openai-chat":
        blocks = [*body.get("tools", []), *body["messages"]]
    else:
        blocks = [*body.get("tools", []), *body["input"]]
    totals, total = [], 0
    for block in blocks:
        total += count(text(block))
        totals.append(total)
    return totals


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "prompt_cache_breakpoint"}
    if isinstance(value, list):
        return [_unmarked(item) for item in value]
    return value


@PROPS
@given(rounds=st.lists(st.integers(0, 8), min_size=2, max_size=5), kept=st.booleans(),
       summary=st.booleans(), size=st.integers(5, 120))
def test_marks_read_the_whole_reusable_prefix(
    rounds: list[int], kept: bool, summary: bool, size: int,
) -> None:
    thread = _thread(rounds, kept, summary, size)
    for provider, model in TARGETS:
        minimum = model_facts(model, provider).min_cacheable_tokens
        written: set[str] = set()  # prefixes an earlier request wrote at a mark
        seen: set[str] = set()  # every prefix an earlier request sent
        for turn_number, requests in enumerate(thread):
            for round_number, generic in enumerate(requests):
                request = generic.model_copy(update={"model": model})
                body = PROVIDERS[provider](request)
                blocks = request_blocks(provider, request, body)
                prefix = _prefix_tokens(provider, body)
                assert len(prefix) == len(blocks)
                marks = [i for i, block in enumerate(blocks) if block.marked]
                assert len(marks) <= 4, (provider, marks)
                assert all(prefix[i] >= minimum for i in marks), (provider, marks)
                if round_number == 0 and turn_number > 0:
                    _reads_the_reusable_prefix(blocks, prefix, seen, written, minimum)
                if provider == "anthropic":
                    _within_the_lookback(blocks, marks, written)
                written.update(blocks[i].digest for i in marks)
                seen.update(block.digest for block in blocks)


def _reads_the_reusable_prefix(blocks: list[CacheBlock], prefix: list[int], seen: set[str],
                               written: set[str], minimum: int) -> None:
    shared = 0
    while shared < len(blocks) and blocks[shared].digest in seen:
        shared += 1
    assert shared > 0
    if prefix[shared - 1] >= minimum:
        assert blocks[shared - 1].digest in written, (
            f"no earlier mark at {blocks[shared - 1].label}, where the shared prefix ends")


def _within_the_lookback(blocks: list[CacheBlock], marks: list[int], written: set[str]) -> None:
    for number, mark in enumerate(marks):
        entries = [i for i in range(mark + 1) if blocks[i].digest in written]
        entries += marks[:number]
        if entries:
            assert mark - max(entries) <= LOOKBACK, (blocks[mark].label, mark, max(entries))
