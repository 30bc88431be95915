"""Recall on SQLite (FTS5, BM25) beside PostgreSQL (tsvector, idf-weighted ts_rank).

    python benchmarks/recall_compare.py [--snippets N] [--queries N] [--seed N]
                                        [--postgres-url URL]

Writes the workload of ``recall_bench.py`` (two threads of N/2 turns each, default
N = 2000 snippets, Zipf-like words with non-ASCII and Japanese text mixed in) into an
SQLite file and into a PostgreSQL database created for the run (dropped afterwards), then
runs Q user messages (default 300) through ``recall`` on both with the same threshold
(floor 1.0, half the best) and prints:

* the ``ts_rank`` values the PostgreSQL score is built on, read from the server: one term
  found once, three times, in a long text, one of two query terms, both of two;
* per store: the mean number of candidates and of kept hits, and the median search time;
* the agreement of the kept hits: the share of messages whose kept set is the same on
  both stores, the mean Jaccard overlap of the kept sets, and the share of messages whose
  best hit is the same.

This is how the PostgreSQL threshold rule in docs/stores.md was checked. Not a test; run it
on demand.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from recall_bench import _queries, build

from pioneer.episodic import EpisodicIndex, recall
from pioneer.history.open import open_store

_RANKS = [
    ("one term, found once", "billing service moved", "'billing'"),
    ("one term, found three times", "billing billing billing service", "'billing'"),
    ("one term, once in a 20-word text", "billing " + "other words " * 10, "'billing'"),
    ("one of two terms found", "billing service moved", "'billing' | 'frankfurt'"),
    ("both of two terms found", "billing service in frankfurt", "'billing' | 'frankfurt'"),
    ("one of four terms found", "billing service", "'billing' | 'a1' | 'b2' | 'c3'"),
]


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--snippets", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--postgres-url", default=os.environ.get(
        "PIONEER_BENCH_POSTGRES_URL", "postgresql://postgres@/postgres?host=/var/run/postgresql"))
    args = parser.parse_args(argv)
    database = f"pg_pioneer_recall_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
        print("ts_rank (config english, default weights and normalisation):")
        for label, text, query in _RANKS:
            (rank,) = admin.execute("SELECT ts_rank(to_tsvector('english', %s), "
                                    "to_tsquery('english', %s))", (text, query)).fetchone()
            print(f"  {label:<34} {rank:.7f}")
    try:
        with tempfile.TemporaryDirectory() as folder:
            targets = {"sqlite": str(Path(folder) / "recall.db"),
                       "postgresql": _with_database(args.postgres_url, database)}
            words: list[str] = []
            weights: list[float] = []
            for target in targets.values():
                words, weights, _ = build(target, args.snippets, args.seed)
            queries = _queries(random.Random(args.seed + 1), words, weights, args.queries)
            kept: dict[str, list[list[str]]] = {}
            print(f"\n{args.snippets} snippets in two threads, {len(queries)} messages")
            print("| store | candidates | kept | search ms p50 |")
            print("| --- | --- | --- | --- |")
            for name, target in targets.items():
                with open_store(target, read_only=True) as store, EpisodicIndex(store) as index:
                    recall(index, "bench", queries[0])  # warm up
                    times, candidates, sets = [], [], []
                    for text in queries:
                        began = time.perf_counter()
                        found = recall(index, "bench", text)
                        times.append(time.perf_counter() - began)
                        candidates.append(len(found.candidates))
                        # Item ids are drawn anew per store: compare turn, role and chunk.
                        sets.append([f"{hit.turn_id}/{hit.role}/{hit.chunk_id}"
                                     for hit in found.kept])
                kept[name] = sets
                print(f"| {name} | {statistics.mean(candidates):.1f} | "
                      f"{statistics.mean(len(s) for s in sets):.2f} | "
                      f"{1000 * statistics.median(times):.2f} |")
    finally:
        with psycopg.connect(args.postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    pairs = list(zip(kept["sqlite"], kept["postgresql"], strict=True))
    same = sum(1 for a, b in pairs if set(a) == set(b))
    overlap = [len(set(a) & set(b)) / len(set(a) | set(b)) if a or b else 1.0 for a, b in pairs]
    best = sum(1 for a, b in pairs if a[:1] == b[:1])
    print(f"\nsame kept set: {same}/{len(pairs)} ({100 * same / len(pairs):.0f}%); "
          f"mean Jaccard overlap {statistics.mean(overlap):.2f}; "
          f"same best hit: {best}/{len(pairs)} ({100 * best / len(pairs):.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
