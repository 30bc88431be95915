"""The cache plan: blocks of every adapter's body, expected cache use, what broke it.

Bodies come from the real compiler and adapters; the plans follow the providers' rules
as docs/providers.md states them (Anthropic: entries written at marks, read within 20
blocks; OpenAI: 1,024 tokens, 128-token steps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import (
    CompiledPromptPayload,
    PromptCompileInput,
    PromptCompiler,
    ToolSpec,
    ensure_runtime_home,
)
from pioneer.audit import CacheBlock, plan_cache, plan_request, request_blocks
from pioneer.audit.cache_report import _block_texts, _strip_marks
from pioneer.providers import (
    PROVIDERS,
    CacheOptions,
    ChatMessage,
    ChatRequest,
    DynamicPlacement,
    ToolCall,
)

#: Long enough that the stable text passes every minimum below (Gemini 2.5: 2,048 tokens).
PERSONA = "Prefers metric units and short answers, and plans trips a month ahead. " * 160
#: A model of each provider, so the plan follows that model's row of the model table.
MODELS = {"anthropic": "claude-sonnet-4-6", "openai-chat": "gpt-5",
          "openai-responses": "gpt-5", "gemini": "gemini-2.5-flash"}
SUMMARY = "Summary of earlier conversation:\nPlanning a trip to Norway."
TOOLS = [ToolSpec(name="clock", description="The local time."),
         ToolSpec(name="get_weather", description="Weather for a city.")]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("home")
    ensure_runtime_home(folder)
    (folder / "USER.md").write_text(PERSONA, encoding="utf-8")
    return folder


def _payload(home: Path, clock: str) -> CompiledPromptPayload:
    return PromptCompiler(count_tokens=False).compile(
        PromptCompileInput(workspace_root=home, dynamic_context=f"It is {clock}."))


def _thread(home: Path, provider: str, placement: DynamicPlacement = "cache-first",
            turns: int = 3) -> list[list[CacheBlock]]:
    """Blocks of every round of a thread: two rounds per turn, a clock that moves."""
    history = [ChatMessage.system(SUMMARY)]
    requests: list[list[CacheBlock]] = []
    for turn in range(turns):
        messages = [*history, ChatMessage.user(f"Question {turn}: " + "why? " * 40)]
        for round_ in range(2):
            request = ChatRequest(model=MODELS[provider],
                                  compiled_prompt=_payload(home, f"10:{turn}0"),
                                  messages=messages, tools=TOOLS,
                                  cache=CacheOptions(dynamic_placement=placement))
            body = PROVIDERS[provider](request)
            requests.append(request_blocks(provider, request, body))
            call = ToolCall(id=f"c{turn}{round_}", name="clock")
            messages = [*messages, ChatMessage.assistant(tool_calls=[call]),
                        ChatMessage.tool(call.id, "12:00 " * 80)]
        history = [*history, ChatMessage.user(f"Question {turn}: " + "why? " * 40),
                   ChatMessage.assistant(f"Answer {turn}: " + "because. " * 60)]
    return requests


@pytest.mark.parametrize("placement", ["cache-first", "system"])
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_request_is_planned_as_its_blocks_are(home: Path, provider: str,
                                                placement: DynamicPlacement) -> None:
    """``plan_request`` (each block made once, with its status) gives the plan that
    ``plan_cache`` gives of the request's blocks, round after round."""
    earlier: list[list[CacheBlock]] = []
    messages = [ChatMessage.system(SUMMARY), ChatMessage.user("Question: " + "why? " * 40)]
    for round_ in range(3):
        request = ChatRequest(model=MODELS[provider], compiled_prompt=_payload(home, "10:00"),
                              messages=messages, tools=TOOLS,
                              cache=CacheOptions(dynamic_placement=placement))
        body = PROVIDERS[provider](request)
        planned = plan_request(provider, request, body, earlier)
        assert planned == plan_cache(provider, MODELS[provider],
                                     request_blocks(provider, request, body), earlier)
        assert planned.cached_tokens > 0 or round_ == 0
        earlier.append(list(planned.blocks))
        call = ToolCall(id=f"c{round_}", name="clock")
        messages = [*messages, ChatMessage.assistant(tool_calls=[call]),
                    ChatMessage.tool(call.id, "12:00 " * 80)]


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_blocks_are_labelled_in_cache_order(home: Path, provider: str) -> None:
    kinds = [block.kind for block in _thread(home, provider)[2]]
    # Turn 2, round 1: tools, stable, summary, the first turn as history, then this turn.
    assert kinds[:4] == ["tools", "tools", "stable", "summary"]
    assert kinds[4:6] == ["history", "history"]
    assert kinds[6:] == ["dynamic", "turn"]


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_new_turn_reads_the_history_and_breaks_nothing(home: Path, provider: str) -> None:
    requests = _thread(home, provider)
    plan = plan_cache(provider, MODELS[provider], requests[2], requests[:2])
    assert plan.first_difference is not None
    assert (plan.first_difference.broken, plan.first_difference.reason) == (False, "a new turn")
    # Everything the previous turn sent before its own turn began is read (OpenAI: in
    # 128-token steps): tools, stable text, summary and the history before it.
    previous = requests[1]
    shared = sum(b.tokens for b in previous if b.kind not in ("dynamic", "turn"))
    assert shared - 127 <= plan.cached_tokens <= shared
    assert all(b.status == "cached" for b in plan.blocks[:2])
    assert plan.cached_tokens + plan.written_tokens + plan.uncached_tokens == plan.total_tokens


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_second_round_reads_the_whole_first_round(home: Path, provider: str) -> None:
    requests = _thread(home, provider)
    plan = plan_cache(provider, MODELS[provider], requests[1], requests[:1])
    assert plan.first_difference is None  # the round only appended
    first_round = sum(b.tokens for b in requests[0])
    assert first_round - 127 <= plan.cached_tokens <= first_round
    if provider == "anthropic":
        assert plan.written_tokens == plan.total_tokens - plan.cached_tokens


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_the_system_placement_breaks_at_the_dynamic_text(home: Path, provider: str) -> None:
    requests = _thread(home, provider, placement="system")
    plan = plan_cache(provider, MODELS[provider], requests[2], requests[:2])
    assert plan.first_difference is not None
    assert plan.first_difference.broken
    assert plan.first_difference.reason == "dynamic text before the history"
    assert all(b.status != "cached" for b in plan.blocks if b.kind == "history")


def test_tools_in_another_order_break_the_cache(home: Path) -> None:
    payload = _payload(home, "10:00")
    first, second = (
        ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")],
                    tools=tools, cache=CacheOptions(tool_order="as_given"))
        for tools in (TOOLS, TOOLS[::-1])
    )
    blocks = [request_blocks("openai-chat", r, PROVIDERS["openai-chat"](r))
              for r in (first, second)]
    plan = plan_cache("openai-chat", "m", blocks[1], blocks[:1])
    assert plan.first_difference is not None
    assert plan.first_difference.model_dump() == {
        "index": 0, "label": "tool get_weather", "broken": True, "reason": "tools changed order"}
    assert plan.cached_tokens == 0
    # Sorted by name (the default), the same two tools give the same prefix.
    by_name = [r.model_copy(update={"cache": CacheOptions()}) for r in (first, second)]
    blocks = [request_blocks("openai-chat", r, PROVIDERS["openai-chat"](r)) for r in by_name]
    assert plan_cache("openai-chat", "m", blocks[1], blocks[:1]).first_difference is None


def test_openai_caches_nothing_below_1024_tokens_and_counts_in_128s(home: Path) -> None:
    def block(index: int, tokens: int, digest: str) -> CacheBlock:
        return CacheBlock(index=index, kind="history", label=f"b{index}", tokens=tokens,
                          digest=digest)

    earlier = [[block(0, 1000, "a"), block(1, 300, "b")]]
    plan = plan_cache("openai-chat", "m", [block(0, 1000, "a"), block(1, 300, "b"),
                                           block(2, 50, "c")], earlier)
    assert (plan.cached_tokens, plan.uncached_tokens) == (1280, 70)
    plan = plan_cache("openai-chat", "m", [block(0, 1000, "a"), block(1, 300, "x")], earlier)
    assert plan.cached_tokens == 0  # 1,000 shared tokens are below the minimum


def test_anthropic_reads_only_what_an_earlier_mark_wrote_within_20_blocks() -> None:
    def blocks(count: int, marked: set[int]) -> list[CacheBlock]:
        return [CacheBlock(index=i, kind="history", label=f"b{i}", tokens=100,
                           digest=f"d{i}", marked=i in marked) for i in range(count)]

    earlier = [blocks(12, {11})]  # an entry at block 11 (1,200 tokens)
    near = plan_cache("anthropic", "claude-sonnet-4-6", blocks(30, {29}), earlier)
    assert (near.cached_tokens, near.written_tokens) == (1200, 1800)
    far = plan_cache("anthropic", "claude-sonnet-4-6", blocks(40, {39}), earlier)
    assert far.cached_tokens == 0  # block 11 is more than 20 blocks before the mark
    unmarked = plan_cache("anthropic", "claude-sonnet-4-6", blocks(30, {29}), [blocks(12, set())])
    assert unmarked.cached_tokens == 0


# -- a block's texts ---------------------------------------------------------------------

_KEYS = st.sampled_from(["cache_control", "prompt_cache_breakpoint", "text", "type", "id",
                         '"cache_control"', "x"])
_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.lists(
    st.sampled_from(['"', "\\", "a", " ", ",", ":", "é", "cache_control"])).map("".join)
_BLOCKS = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    _KEYS, inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(content=_BLOCKS)
def test_a_block_is_counted_and_digested_with_its_marks_left_out(content: Any) -> None:
    # The JSON of a block without marks is used as it is; with a mark at any depth (or a
    # text that looks like one), the marks are left out first: the texts are those of the
    # content with every mark removed, whichever way is taken.
    stripped = _strip_marks(content)
    text, canonical = _block_texts(content)
    assert canonical == json.dumps(stripped, ensure_ascii=False, sort_keys=True,
                                   separators=(",", ":"))
    if isinstance(stripped, dict) and set(stripped) <= {"type", "text"} \
            and isinstance(stripped.get("text"), str):
        assert text == stripped["text"]
    elif not isinstance(stripped, str):
        assert text == json.dumps(stripped, ensure_ascii=False, sort_keys=True)
