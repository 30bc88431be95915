"""History budgeting with stored token counts against re-counting with tiktoken.

    python benchmarks/history_bench.py [--rounds N] [--turns N] [--tokens N]

Builds a SQLite store holding N turns (default 200) of about T cl100k tokens each
(default 300: a third in the user message, the rest in the reply), then times, in
interleaved rounds so machine drift hits every row alike:

* ``tiktoken recount``: encoding every stored message again, as a budgeter without
  stored counts must do on every turn (the floor that storing counts removes);
* ``budget pass``: ``HistoryBudgeter.build`` end to end: one SQLite read of the window,
  the keep decision from stored counts, and the messages with their artifact blocks
  (turns already read by this store come from its in-memory cache, the usual case on a
  busy thread: each turn adds one new turn);
* ``budget pass, no cache``: the same with the store's turn cache off, so every turn's
  text is read from SQLite again (a process's first pass over a thread);
* ``decision only``: summing the stored counts of an already loaded window.

Prints one table of medians and the ratio of the recount to the budget pass (the
issue's target: the budget pass costs at most 1/50 of the recount). Not a test; run it
on demand.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pioneer.history import ArtifactRef, HistoryBudgeter, HistoryLimits, SqliteStore
from pioneer.history.budget import window_tokens
from pioneer.tokens import TiktokenCounter, message_tokens

_WORDS = """the store keeps every turn with its token count so that a later turn sums
integers instead of encoding old text again while the budgeter decides whether to keep
summarise or truncate and the provider adapters receive plain role and content values
with artifact blocks next to the message they belong to""".split()
_EXTRAS = ["Grüße aus Köln", "東京で会議", "naïve café", "→ ≤ ≥ ½", "🚀", "<|endoftext|>",
           "def f(x: int) -> int:\n    return x * 2\n", "SELECT seq FROM turns;"]


def _text(rng: random.Random, counter: TiktokenCounter, tokens: int) -> str:
    words: list[str] = []
    while True:
        words.extend(rng.choice(_WORDS) for _ in range(16))
        words.append(rng.choice(_EXTRAS))
        text = " ".join(words)
        if counter.count(text) >= tokens:
            return text


def build_store(path: Path, turns: int, tokens: int, seed: int = 7) -> list[str]:
    """Write the workload thread; return every stored message text in order."""
    rng = random.Random(seed)
    counter = TiktokenCounter(cache_bytes=0)
    texts: list[str] = []
    with SqliteStore(path, counter=counter) as store:
        store.ensure_thread("bench", model="bench-model")
        for n in range(turns):
            user = _text(rng, counter, tokens // 3)
            reply = _text(rng, counter, tokens - tokens // 3)
            refs = ([ArtifactRef(f"a{n}", f"result {n}.csv", "spreadsheet", version_id="v1",
                                 size_bytes=4096 * n)] if n % 20 == 0 else [])
            entry = store.add_turn("bench", user_text=user, assistant_text=reply,
                                   assistant_artifacts=refs, turn_id=f"turn-{n}")
            texts.extend(message.content for message in entry.messages())
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=300, help="tokens per turn")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.db"
        started = time.perf_counter()
        texts = build_store(path, args.turns, args.tokens)
        write_seconds = time.perf_counter() - started
        raw = TiktokenCounter(cache_bytes=0)  # no cache: every call really encodes
        raw.count("warm up the encoding")
        limits = HistoryLimits.from_tokens(128_000, 16_000)
        with SqliteStore(path, counter=raw) as store, \
                SqliteStore(path, counter=raw, cache_bytes=0) as uncached:
            budgeter = HistoryBudgeter(store, limits)
            cold = HistoryBudgeter(uncached, limits)
            window = store.get_history_window("bench")
            stored_total = window_tokens(window)
            recount_total = sum(message_tokens(raw, text) for text in texts)
            assert stored_total == recount_total, (stored_total, recount_total)
            decision = budgeter.build("bench")

            rows: dict[str, Callable[[], object]] = {
                "tiktoken recount": lambda: sum(message_tokens(raw, t) for t in texts),
                "budget pass (stored counts)": lambda: budgeter.build("bench"),
                "budget pass, no cache": lambda: cold.build("bench"),
                "decision only (stored counts)": lambda: window_tokens(window),
            }
            timings: dict[str, list[float]] = {name: [] for name in rows}
            names = list(rows)
            for round_ in range(args.rounds):
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    start = time.perf_counter_ns()
                    rows[name]()
                    timings[name].append((time.perf_counter_ns() - start) / 1e6)

    medians = {name: statistics.median(values) for name, values in timings.items()}
    floor = medians["tiktoken recount"]
    print(f"history: {args.turns} turns, {len(texts)} messages, {stored_total} tokens "
          f"(~{stored_total // max(1, args.turns)} per turn); decision {decision.mode}, "
          f"{len(decision.messages)} messages; {args.rounds} rounds; "
          f"store written in {write_seconds:.2f}s")
    print(f"{'row':<32} {'median ms':>10} {'min ms':>9} {'recount / row':>14}")
    for name, values in timings.items():
        print(f"{name:<32} {medians[name]:>10.3f} {min(values):>9.3f} "
              f"{floor / medians[name]:>13.1f}x")
    ratio = floor / medians["budget pass (stored counts)"]
    verdict = "meets" if ratio >= 50 else "misses"
    print(f"target: budget pass <= 1/50 of the recount -> {ratio:.0f}x, {verdict} the target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
