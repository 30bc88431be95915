"""Prompt-cache use of long threads, per scenario and provider, against the ideal.

    python benchmarks/cache_bench.py [--scenario NAME] [--seed N] [--max-context N]
                                     [--reserve N]

Each scenario generates a thread and drives it through the real pieces: a SQLite store,
the history budgeter, the prompt compiler with a seeded runtime home, and the provider
adapters. Every body is replayed through a model of its provider's prompt cache, with
the rules and prices of the model's row in the model table (docs/cache-benchmark.md):

* ``cache_control`` (Anthropic): an entry is written at each mark whose prefix is at
  least the model's minimum; a mark reads the longest entry written at it or up to 20
  blocks before it; the tokens from the read prefix to the last mark are written.
* ``prompt_cache_breakpoint`` (OpenAI GPT-5.6 and later): an entry is written at each
  breakpoint (at most 4 a request; with none, at the request's end, where OpenAI puts its
  implicit breakpoint); a request reads the longest entry that is a prefix of it, however
  far back (no lookback limit); the tokens from there to its last breakpoint are written.
* ``implicit`` (OpenAI before GPT-5.6, Gemini): the longest prefix shared with any
  earlier request is read when it reaches the minimum, in steps of the model's
  ``cache_step_tokens`` (OpenAI: 128); nothing is billed for writing.

The ideal is every token already sent in the thread (as a prefix) read from cache, as
far as the provider caches it at all (a prefix of at least the model's minimum, in its
steps), and every other token at the price of making it cacheable (a write where writes
cost, plain input elsewhere); the ``sent before`` column is that share without the
provider's minimum and steps, and ``vs sent before`` the cost against it. Targets, per
scenario and provider (the cache-first layout): cached share within 1 point of the
ideal's, input cost at most 1.02x the ideal's. Not a test; run it on demand. The
scenarios:

* ``agent``: 160 turns of two tool rounds and an answer, the history budgeted from the
  store; run with a summarizer stub and with truncation (no summarizer), and in the
  ``system`` placement of earlier versions beside the cache-first layout.
* ``rounds-3`` and ``rounds-8``: 30 turns of 0 to 3 (0 to 8) tool rounds.
* ``rounds-8-kept``: the same turns, but the history keeps every tool round (the thread's
  own transcript), not only the user text and final answers the store holds.
* ``chat-400``: 400 small turns of a chat (``minimal`` profile, no tools): the history
  stays under the summarising threshold and passes the 200-turn window.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pioneer import PromptCompileInput, PromptCompiler, ToolSpec, ensure_runtime_home
from pioneer.audit import CacheBlock, request_blocks
from pioneer.history import HistoryBudgeter, HistoryLimits, SqliteStore, SummaryRequest
from pioneer.providers import (
    PROVIDERS,
    CacheOptions,
    ChatMessage,
    ChatRequest,
    DynamicPlacement,
    ModelFacts,
    ToolCall,
    model_facts,
)
from pioneer.tokens import TiktokenCounter

#: What is measured: a label, the adapter, the model (its row of the model table).
TARGETS: tuple[tuple[str, str, str], ...] = (
    ("anthropic", "anthropic", "claude-sonnet-4-6"),
    ("openai-chat gpt-5", "openai-chat", "gpt-5"),
    ("openai-chat gpt-5.6", "openai-chat", "gpt-5.6"),
    ("openai-responses gpt-5.6", "openai-responses", "gpt-5.6"),
    ("gemini", "gemini", "gemini-2.5-flash"),
)
#: Anthropic: how many blocks before a mark it looks for an entry.
LOOKBACK = 20
#: Most breakpoints one GPT-5.6 request writes.
WRITTEN_BREAKPOINTS = 4
#: History limits: a 72,000-token window with 8,000 kept for the reply, so the agent
#: thread's history reaches the 80% threshold around turn 110 of 160.
MAX_CONTEXT, RESERVE = 72_000, 8_000
#: The targets: cached share within this many points of the ideal's, and cost at most
#: this many times the ideal's.
SHARE_POINTS, COST_LIMIT = 1.0, 1.02

_WORDS = """the build failed because the cache key changed when the tool list was
reordered so the agent read the log again and compared the two requests block by block
until it found the section that moved and then it wrote a short note for the user about
what to change in the deployment file and which test proves it""".split()

TOOLS = [
    ToolSpec(name="run_tests", description="Run the test suite and return its output.",
             parameters={"type": "object", "properties": {
                 "path": {"type": "string", "description": "Test file or folder."},
                 "keyword": {"type": "string", "description": "Only tests matching this."}},
                 "required": ["path"]}),
    ToolSpec(name="read_file", description="Read a file of the workspace.",
             parameters={"type": "object", "properties": {
                 "path": {"type": "string"}, "start": {"type": "integer"},
                 "end": {"type": "integer"}}, "required": ["path"]}),
    ToolSpec(name="search", description="Search the workspace for a regular expression.",
             parameters={"type": "object", "properties": {
                 "pattern": {"type": "string"}, "glob": {"type": "string"}},
                 "required": ["pattern"]}),
    ToolSpec(name="apply_patch", description="Apply a unified diff to the workspace.",
             parameters={"type": "object", "properties": {"diff": {"type": "string"}},
                         "required": ["diff"]}),
    ToolSpec(name="memory_search", description="Search remembered facts about the user.",
             parameters={"type": "object", "properties": {"query": {"type": "string"}},
                         "required": ["query"]}),
]


@dataclass(frozen=True)
class Scenario:
    """One generated thread and what is measured on it."""

    name: str
    turns: int
    #: Tool rounds per turn, drawn uniformly from this range (inclusive).
    rounds: tuple[int, int]
    #: store: the history is what the budgeter builds from the store; kept: the
    #: thread's whole transcript, tool rounds included.
    history: Literal["store", "kept"] = "store"
    summarize: bool = False
    #: Small turns, the minimal profile and no tools.
    chat: bool = False
    layouts: tuple[DynamicPlacement, ...] = ("cache-first",)


SCENARIOS = (
    Scenario("agent, summarizer", 160, (2, 2), summarize=True, layouts=("cache-first", "system")),
    Scenario("agent, truncation", 160, (2, 2), layouts=("cache-first", "system")),
    Scenario("rounds-3", 30, (0, 3)),
    Scenario("rounds-8", 30, (0, 8)),
    Scenario("rounds-8-kept", 30, (0, 8), history="kept"),
    Scenario("chat-400", 400, (0, 0), chat=True),
)


def _text(rng: random.Random, tokens: int) -> str:
    """Prose of about ``tokens`` cl100k tokens (one word is about one token)."""
    return " ".join(rng.choice(_WORDS) for _ in range(tokens))


class TargetSummarizer:
    """A summarizer stub: replies with a summary of exactly its target size (near enough)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        return f"Summary {self.calls}: " + _text(self.rng, max(1, request.target_tokens - 20))


@dataclass
class Thread:
    """The generated thread: every request of every round, per layout, in order."""

    requests: list[dict[str, ChatRequest]] = field(default_factory=list)
    summaries: int = 0
    cuts: int = 0
    truncated_turns: int = 0
    first_rounds: list[int] = field(default_factory=list)


def generate(scenario: Scenario, seed: int, home: Path, db: Path,
             limits: HistoryLimits) -> Thread:
    """Drive the thread through the store, budgeter and compiler; keep every request."""
    rng = random.Random(seed)
    compiler = PromptCompiler(count_tokens=False)
    thread = Thread()
    summarizer = TargetSummarizer(random.Random(seed + 1)) if scenario.summarize else None
    tools = [] if scenario.chat else TOOLS
    kept: list[ChatMessage] = []
    with SqliteStore(db) as store:
        store.ensure_thread("bench", model="m")
        budgeter = HistoryBudgeter(store, limits, summarizer=summarizer)
        for turn in range(scenario.turns):
            decision = budgeter.build("bench")
            if decision.mode == "truncate":
                thread.truncated_turns += 1
            thread.cuts += decision.cut_stored
            thread.summaries += decision.summary_stored
            history = kept if scenario.history == "kept" else [
                ChatMessage(role=m.role, content=m.content) for m in decision.messages]
            size = (10, 40) if scenario.chat else (30, 120)
            question = f"Turn {turn}: " + _text(rng, rng.randint(*size))
            messages = [*history, ChatMessage.user(question)]
            memory = f"The user prefers {rng.choice(_WORDS)} {rng.choice(_WORDS)} answers."
            rounds = rng.randint(*scenario.rounds)
            thread.first_rounds.append(len(thread.requests))
            for number in range(rounds + 1):
                retry = ("The last tool call failed; check its arguments before calling it "
                         "again." if number == rounds and turn % 10 == 9 and rounds else "")
                payload = compiler.compile(PromptCompileInput(
                    workspace_root=home, profile="minimal" if scenario.chat else "full",
                    dynamic_context=f"Current time: 2026-12-01 {8 + turn // 60:02d}:"
                                    f"{turn % 60:02d} UTC. Working folder: ~/project.",
                    dynamic_sections=[] if scenario.chat else [
                        {"id": "plugin.memory", "content": memory}],
                    retry_instruction=retry,
                ))
                thread.requests.append({
                    layout: ChatRequest(model="m", compiled_prompt=payload, messages=messages,
                                        tools=tools,
                                        cache=CacheOptions(dynamic_placement=layout))
                    for layout in scenario.layouts
                })
                if number == rounds:
                    break
                call = ToolCall(id=f"call-{turn}-{number}", name=rng.choice(TOOLS).name,
                                arguments={"path": f"src/module_{rng.randint(1, 40)}.py"})
                messages = [*messages,
                            ChatMessage.assistant(_text(rng, 20), tool_calls=[call]),
                            ChatMessage.tool(call.id, _text(rng, rng.randint(300, 1500)))]
            answer = _text(rng, rng.randint(*((20, 80) if scenario.chat else (150, 600))))
            kept = [*messages, ChatMessage.assistant(answer)]
            store.add_turn("bench", user_text=question, assistant_text=answer)
    return thread


@dataclass
class Tally:
    """What one provider and layout paid over the thread."""

    facts: ModelFacts
    tokens: int = 0
    cached: int = 0
    written: int = 0
    #: Tokens sent before in the thread, as a prefix: all of it, and what the provider
    #: can cache of it (a prefix of at least its minimum, in its steps): the ideal.
    sent_before: int = 0
    ideal_read: int = 0
    #: Turns whose first request read nothing, and turns in all.
    cold_turns: int = 0
    turns: int = 0

    def cost(self) -> float:
        rest = self.tokens - self.cached - self.written
        return (self.cached * self.facts.cache_read_price
                + self.written * self.facts.cache_write_price + rest)

    def ideal(self, read: int | None = None) -> float:
        """The ideal cost; ``read``: another count of the tokens read (default the ideal's)."""
        read = self.ideal_read if read is None else read
        return (read * self.facts.cache_read_price
                + (self.tokens - read) * self.facts.cache_write_price)


class CacheModel:
    """One model's prefix cache over one thread (nothing expires: turns are minutes apart)."""

    def __init__(self, facts: ModelFacts) -> None:
        self.facts = facts
        self.seen: set[str] = set()  # every prefix sent (for implicit caches and the ideal)
        self.entries: set[str] = set()  # prefixes written at a mark or breakpoint

    def replay(self, blocks: Sequence[CacheBlock], tally: Tally, *, first: bool) -> None:
        ends: list[int] = []
        total = 0
        for block in blocks:
            total += block.tokens
            ends.append(total)
        shared = 0
        for index, block in enumerate(blocks):
            if block.digest not in self.seen:
                break
            shared = ends[index]
        minimum = self.facts.min_cacheable_tokens
        step = self.facts.cache_step_tokens
        style = self.facts.breakpoint_style
        if style == "cache_control":
            marks = [i for i, b in enumerate(blocks) if b.marked and ends[i] >= minimum]
            cached = 0
            for mark in marks:
                for index in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                    if blocks[index].digest in self.entries:
                        cached = max(cached, ends[index])
                        break
            written = max(0, max((ends[m] for m in marks), default=0) - cached)
            self.entries.update(blocks[m].digest for m in marks)
        elif style == "prompt_cache_breakpoint":
            marks = [i for i, b in enumerate(blocks) if b.marked][-WRITTEN_BREAKPOINTS:]
            marks = marks or [len(blocks) - 1]  # the implicit breakpoint at the end
            last = marks[-1]
            cached = max((ends[i] for i in range(last + 1)
                          if blocks[i].digest in self.entries), default=0)
            marks = [m for m in marks if ends[m] >= minimum]
            written = max(0, max((ends[m] for m in marks), default=0) - cached)
            self.entries.update(blocks[m].digest for m in marks)
        else:
            cached = shared // step * step if shared >= minimum else 0
            written = 0
        tally.tokens += total
        tally.sent_before += shared
        tally.ideal_read += shared // step * step if shared >= minimum else 0
        tally.cached += cached
        tally.written += written
        if first:
            tally.turns += 1
            tally.cold_turns += cached == 0 and shared > 0
        self.seen.update(block.digest for block in blocks)


def measure(thread: Thread, layouts: Sequence[DynamicPlacement],
            counter: TiktokenCounter) -> dict[tuple[str, str], Tally]:
    results: dict[tuple[str, str], Tally] = {}
    firsts = set(thread.first_rounds)
    for label, provider, model in TARGETS:
        facts = model_facts(model, provider)
        for layout in layouts:
            cache, tally = CacheModel(facts), Tally(facts)
            for number, requests in enumerate(thread.requests):
                request = requests[layout].model_copy(update={"model": model})
                body = PROVIDERS[provider](request)
                cache.replay(request_blocks(provider, request, body, counter=counter), tally,
                             first=number in firsts)
            results[(label, layout)] = tally
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS],
                        help="run only this scenario (repeatable; default: all)")
    parser.add_argument("--seed", type=int, default=16, help="random seed")
    parser.add_argument("--max-context", type=int, default=MAX_CONTEXT,
                        help=f"model context window (default {MAX_CONTEXT})")
    parser.add_argument("--reserve", type=int, default=RESERVE,
                        help=f"tokens kept for the reply (default {RESERVE})")
    args = parser.parse_args(argv)
    limits = HistoryLimits.from_tokens(args.max_context, args.reserve)
    counter = TiktokenCounter(cache_bytes=1 << 28)
    rows = []
    failed = False
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder) / "home"
        ensure_runtime_home(home)
        for number, scenario in enumerate(SCENARIOS):
            if args.scenario and scenario.name not in args.scenario:
                continue
            thread = generate(scenario, args.seed, home, Path(folder) / f"{number}.db", limits)
            print(f"{scenario.name}: history budget {limits.budget:,} tokens; "
                  f"{scenario.turns} turns, {len(thread.requests)} provider rounds, "
                  f"{thread.summaries} summaries stored, {thread.truncated_turns} turns "
                  f"truncated, {thread.cuts} cuts stored", file=sys.stderr)
            for (label, layout), tally in measure(thread, scenario.layouts, counter).items():
                share = tally.cached / tally.tokens
                ideal_share = tally.ideal_read / tally.tokens
                against = tally.cost() / tally.ideal()
                verdict = ""
                if layout == "cache-first":
                    ok = share >= ideal_share - SHARE_POINTS / 100 and against <= COST_LIMIT
                    failed |= not ok
                    verdict = "met" if ok else "MISSED"
                rows.append((scenario.name, label, layout, f"{tally.tokens:,}", f"{share:.1%}",
                             f"{ideal_share:.1%}", f"{tally.sent_before / tally.tokens:.1%}",
                             f"{tally.cold_turns}/{tally.turns}",
                             f"{tally.written:,}", f"{tally.cost() / tally.tokens:.3f}x",
                             f"{against:.3f}x",
                             f"{tally.cost() / tally.ideal(tally.sent_before):.3f}x", verdict))
    header = ("scenario", "provider", "layout", "input tokens", "cached share", "ideal share",
              "sent before", "cold first rounds", "cache writes", "cost vs uncached",
              "cost vs ideal", "vs sent before", "targets")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
              + " |")
    print(f"\ntargets (cache-first): cached share within {SHARE_POINTS:g} point of the ideal's, "
          f"cost <= {COST_LIMIT:.2f}x the ideal's")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
