"""Episodic recall over a thread of 10,000 snippets, beside the hook's 1500 ms deadline.

    python benchmarks/recall_bench.py [--snippets N] [--queries N] [--seed N]

Writes one thread through ``SqliteStore.add_turn`` with the index attached (so every
snippet is indexed the way a running gateway indexes it: in the turn's own transaction)
until the thread holds N snippets (default 10,000; each message is one chunk), in a
database that also holds a second, equally large thread, so the FTS5 index is twice the
thread. Words are drawn from a Zipf-like vocabulary with some non-ASCII and Japanese text
mixed in. Then it times each of Q user messages (default 300: short questions, a few long
pasted messages) through:

* ``search``: the FTS5 query for the message, BM25 ordering, 40 candidates, their
  artifact refs (``EpisodicIndex.search``, nothing excluded);
* ``recall, keep window left out``: what the hook does when the turn carries no history
  decision: read the keep window (200 turn ids), search without them, apply the threshold;
* ``hook in a phase``: ``HookRegistry.run_phase`` with the built-in subscription: the
  hook's own thread and deadline wait, the recall, and the Thread Context rendering.

Prints the median and p95 per query for each row beside the deadline. Not a test; run it
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

from pioneer import HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.episodic import (
    DEADLINE_MS,
    EpisodicIndex,
    episodic_recall_subscription,
    recall,
)
from pioneer.history import ArtifactRef
from pioneer.history.open import open_store
from pioneer.hooks.registry import TurnContext
from pioneer.review.terminal import progress

_COMMON = """the a to of and in is it you that for on with this be are as have not at
your we can do if or but will my from so what about all one there up out would like
just they more when which time how use make need should could please thanks""".split()
_TOPICS = """deploy billing gateway latency invoice migration schema postgres kafka
cluster replica cache timeout retry budget forecast roadmap sprint review design api
endpoint token session login password policy audit export report chart dashboard metric
alert incident outage rollback release branch merge commit test fixture mock queue
worker cron backup restore region frankfurt oslo tokyo lisbon vendor contract renewal
pricing discount customer ticket escalation onboarding handbook recipe pasta risotto
garden tomato bicycle marathon training knee physio flight hotel visa passport""".split()
_EXTRAS = ["Grüße aus Köln", "naïve café", "东京で会議", "встреча в Москве", "½ done", "🚀"]


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "ri", "ten", "mar", "vi", "dos", "pel", "an", "tro", "shi", "qu"]
    rare = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(6000)}
    return _COMMON + _TOPICS + sorted(rare)


def _sentence(rng: random.Random, words: list[str], weights: list[float], size: int) -> str:
    picked = rng.choices(words, weights=weights, k=size)
    if rng.random() < 0.1:
        picked.append(rng.choice(_EXTRAS))
    return " ".join(picked).capitalize() + "."


def _text(rng: random.Random, words: list[str], weights: list[float], limit: int) -> str:
    text = _sentence(rng, words, weights, rng.randint(6, 14))
    while True:
        more = text + " " + _sentence(rng, words, weights, rng.randint(6, 14))
        if len(more) > limit or rng.random() < 0.35:
            return text
        text = more


def build(path: Path | str, snippets: int, seed: int) -> tuple[list[str], list[float], float]:
    """Write two threads of ``snippets`` one-chunk snippets each (an SQLite path or a
    PostgreSQL URL, the index attached); return the vocabulary."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(words))]
    started = time.perf_counter()
    with open_store(path) as store, EpisodicIndex(store), \
            progress(sys.stderr, "writing turns", snippets) as update:
        for thread in ("bench", "other"):
            store.ensure_thread(thread)
            for n in range(snippets // 2):
                if n % 100 == 0:
                    update(n + (snippets // 2 if thread == "other" else 0), snippets)
                refs = ([ArtifactRef(f"a{n}", f"report {n}.pdf", "document", version_id="v1",
                                     size_bytes=1024 * n)] if n % 25 == 0 else [])
                store.add_turn(
                    thread, turn_id=f"{thread}-{n}",
                    user_text=_text(rng, words, weights, 300),
                    assistant_text=_text(rng, words, weights, 350),
                    assistant_artifacts=refs,
                )
    return words, weights, time.perf_counter() - started


def _queries(rng: random.Random, words: list[str], weights: list[float], count: int) -> list[str]:
    queries = []
    for n in range(count):
        if n % 20 == 19:  # a long pasted message: the query keeps its 32 longest words
            queries.append(" ".join(rng.choices(words, weights=weights, k=600)))
        else:
            picked = rng.choices(words, weights=weights, k=rng.randint(3, 12))
            picked.append(rng.choice(_TOPICS))
            queries.append(" ".join(picked) + "?")
    return queries


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--snippets", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.db"
        words, weights, build_seconds = build(path, args.snippets, args.seed)
        queries = _queries(random.Random(args.seed + 1), words, weights, args.queries)
        compiler = PromptCompiler(count_tokens=False)
        compile_input = PromptCompileInput(workspace_root=Path(folder))
        with EpisodicIndex(path) as index:
            count = len(index.snippets("bench"))
            hooks = HookRegistry()
            hooks.add(episodic_recall_subscription(index))
            hits: list[int] = []

            def search(text: str) -> object:
                return index.search("bench", text)

            def keep_window(text: str) -> object:
                found = recall(index, "bench", text, retained=index.default_retained("bench"))
                hits.append(len(found.kept))
                return found

            def hook(text: str) -> object:
                outcome = hooks.run_phase(
                    "turn.pre_prompt_context", turn=TurnContext(thread_id="bench", user_text=text),
                    compile_input=compile_input, env=compiler.templates.env,
                )
                assert not outcome.diagnostics, outcome.diagnostics
                return outcome

            rows: dict[str, Callable[[str], object]] = {
                "search (40 candidates)": search,
                "recall, keep window left out": keep_window,
                "hook in a phase (+ render)": hook,
            }
            for row in rows.values():  # warm the page cache and the templates
                row(queries[0])
            timings: dict[str, list[float]] = {name: [] for name in rows}
            names = list(rows)
            for number, text in enumerate(queries):
                shift = number % len(names)  # interleaved, so drift hits every row alike
                for name in names[shift:] + names[:shift]:
                    start = time.perf_counter_ns()
                    rows[name](text)
                    timings[name].append((time.perf_counter_ns() - start) / 1e6)
        size_mb = path.stat().st_size / 2**20

    print(f"recall: thread of {count} snippets ({args.snippets} more in another thread), "
          f"{size_mb:.1f} MB database written in {build_seconds:.1f}s; {len(queries)} queries; "
          f"{statistics.mean(hits):.1f} snippets kept per query on average")
    print(f"{'row':<32} {'median ms':>10} {'p95 ms':>9} {'deadline ms':>12} {'p95 headroom':>13}")
    for name, values in timings.items():
        p95 = _percentile(values, 0.95)
        print(f"{name:<32} {statistics.median(values):>10.2f} {p95:>9.2f} {DEADLINE_MS:>12} "
              f"{DEADLINE_MS / p95:>12.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
