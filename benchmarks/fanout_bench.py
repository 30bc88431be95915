"""Parallel tool calls: what one reply with thousands of calls costs the runner.

    python benchmarks/fanout_bench.py [--calls 1000,2000,5000,10000]
                                      [--providers anthropic,openai-chat,...] [--repeats 3]

For each provider API and each number of calls, a new thread's turn sends its first
body, then gets one reply (the provider's JSON, as ``examples/agent_loop.py`` writes it)
asking for that many ``read_file`` calls at once, each with its own id and path. Three
steps are timed in CPU seconds of the process (``time.process_time``), each the median
of ``--repeats`` runs with ids no earlier run used (so no token count is cached):

* ``receive``: the reply read, every call judged (visible, arguments valid);
* ``results``: ``add_tool_result`` once per call, every other one an error;
* ``next body``: the next round's request, with the calls and their results: the window
  fit, the provider body and the round's record with its cache plan (the tokens, digest
  and expected cache status of each of the body's blocks).

Beside them, the floor: what any runner that sends the calls back and counts what it
sends must do at least, timed the same way: parse the reply's JSON text, count once
with the model's tokenizer the text of each block that is new in the next body (two
per call on Anthropic, Responses and Gemini: the call and its result; on Chat
Completions the assistant message with every call, and a message per result), and
write the next body as JSON once.

The interpreter's collector is frozen over the objects made before each run
(``gc.freeze``), as in ``tests/test_reply_bounds.py``: a collector pass over what a
process already holds costs what it holds, not what the calls do. The target is
10,000 calls under a second, and each row's cost per call at most 1.5 times the first
row's (linear). Not a test: about a minute on a 2-core machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import agent_loop

from pioneer import Agent, PioneerSettings, ProviderName, ensure_runtime_home
from pioneer.audit.cache_report import block_texts
from pioneer.providers import ToolCall, model_facts
from pioneer.tokens import TiktokenCounter

PROVIDERS: tuple[ProviderName, ...] = ("anthropic", "openai-chat", "openai-responses", "gemini")
TARGET_SECONDS = 1.0
TARGET_CALLS = 10_000
#: The most a row's cost per call may be over the first row's.
LINEAR = 1.5
REPORTED = {"anthropic": {"input_tokens": 100, "output_tokens": 7},
            "openai-chat": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
            "openai-responses": {"input_tokens": 100, "output_tokens": 7, "total_tokens": 107},
            "gemini": {"promptTokenCount": 100, "candidatesTokenCount": 7,
                       "totalTokenCount": 107}}


def one_run(agent: Agent, provider: ProviderName, calls: int, tag: str, *,
            floor: bool = True) -> dict[str, float]:
    """CPU seconds of each step for one reply with ``calls`` calls (ids and paths made
    with ``tag``, which no other run should use), and the floor (``floor``)."""
    turn = agent.turn(f"fan-{tag}", "Read every file")
    first = turn.next_body()
    made = [ToolCall(id=f"call_{tag}_{n}", name="read_file", arguments={"path": f"f{tag}_{n}.md"})
            for n in range(calls)]
    text = json.dumps(agent_loop.response(provider, agent.model, "", made, REPORTED[provider]))
    data = json.loads(text)
    gc.collect()
    gc.freeze()
    try:
        started = time.process_time()
        step = turn.receive(data)
        received = time.process_time()
        for number, call in enumerate(step.runnable):
            turn.add_tool_result(call.id, "text", is_error=bool(number % 2))
        added = time.process_time()
        body = turn.next_body()
        built = time.process_time()
    finally:
        gc.unfreeze()
    turn.finish(assistant_text="Read them all.")  # untimed: the turn and its record stored
    assert len(step.runnable) == calls
    assert json.dumps(body).count(f'"call_{tag}_{calls - 1}"') >= 2  # the last call, result
    return {"receive": received - started, "results": added - received,
            "next body": built - added, "total": built - started,
            "floor": _floor(provider, agent.model, text, first, body) if floor else 0.0}


def _floor(provider: ProviderName, model: str, text: str, first: dict[str, Any],
           body: dict[str, Any]) -> float:
    before = set(block_texts(provider, first))
    new = [block for block in block_texts(provider, body) if block not in before]
    counter = TiktokenCounter(0, tokenizer=model_facts(model, provider).tokenizer)
    gc.collect()
    gc.freeze()
    try:
        started = time.process_time()
        json.loads(text)
        for block in new:
            counter.count(block)
        json.dumps(body)
        return time.process_time() - started
    finally:
        gc.unfreeze()


def measure(provider: ProviderName, counts: Sequence[int], repeats: int,
            where: Path) -> list[tuple[int, dict[str, float]]]:
    home = where / "home"
    ensure_runtime_home(home)
    agent = Agent(where / f"{provider}.db", provider=provider,
                  model=agent_loop.MODELS[provider], tools=[agent_loop.READ_FILE],
                  compile_input={"workspace_root": home},
                  # room for every call and result in one request
                  settings=PioneerSettings(max_context_tokens=8_000_000))
    rows = []
    try:
        one_run(agent, provider, 100, "warm")  # imports, the tokenizer's tables
        for calls in counts:
            runs = [one_run(agent, provider, calls, f"{calls}x{repeat}")
                    for repeat in range(repeats)]
            rows.append((calls, {key: statistics.median(run[key] for run in runs)
                                 for key in runs[0]}))
    finally:
        agent.close()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default="1000,2000,5000,10000")
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.calls.split(",")]
    providers = [name for name in args.providers.split(",") if name]
    print("CPU seconds (median of", args.repeats, "runs); floor: parse the reply, count each "
          "new block once, write the body once")
    print(f"{'provider':<17} {'calls':>6} {'receive':>8} {'results':>8} {'next body':>9} "
          f"{'total':>7} {'floor':>7} {'x floor':>7} {'us/call':>8} {'linear':>7}  target")
    met = True
    for provider in providers:
        with tempfile.TemporaryDirectory() as where:
            rows = measure(provider, counts, args.repeats, Path(where))
        base = rows[0][1]["total"] / rows[0][0]
        for calls, row in rows:
            per_call = row["total"] / calls
            growth = per_call / base
            targets = [f"linear <= {LINEAR}"]
            ok = growth <= LINEAR
            if calls == TARGET_CALLS:
                targets.append(f"< {TARGET_SECONDS:g} s")
                ok = ok and row["total"] < TARGET_SECONDS
            met = met and ok
            print(f"{provider:<17} {calls:>6,} {row['receive']:>8.3f} {row['results']:>8.3f} "
                  f"{row['next body']:>9.3f} {row['total']:>7.3f} {row['floor']:>7.3f} "
                  f"{row['total'] / row['floor']:>7.2f} {per_call * 1e6:>8.1f} {growth:>7.2f}"
                  f"  {', '.join(targets)}: {'met' if ok else 'NOT met'}")
    print("all targets met" if met else "some targets not met")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
