"""Load on the conversation stores: N writer processes x M turns, SQLite and PostgreSQL.

    python benchmarks/store_bench.py [--processes 1,4,8] [--turns 100] [--shared]
                                     [--stores sqlite,postgresql] [--pause MS]
                                     [--postgres-url URL] [--tokens 200]

Each process opens its own store (with the episodic index attached, as a gateway node
does) and, for each of its M turns, runs what a turn costs the store: a budgeting pass
over its thread (``HistoryBudgeter.build``: one snapshot read of the window, the decision
from stored counts) and then ``add_turn`` of the turn's user message and reply (one write
transaction: the turn, its token counts and its snippets). By default every process has a
thread of its own (nodes serving different conversations); ``--shared`` puts all of them
on one thread (the worst case: every write waits for the thread's row, every pass reads
the others' turns).

The processes start together; the table gives, per store and process count, the turns
per second of all processes together (wall clock from the first start to the last end),
the median, 95th and 99th percentile of ``add_turn`` and the median and 95th percentile
of the budgeting pass in milliseconds. ``--pause`` puts a random pause (exponential, of
that mean) before each turn, as a gateway's turns come between model calls; without it
the processes write back to back, the worst case. SQLite writes a file in a temporary
folder; PostgreSQL a database created for the run on the server at ``--postgres-url``
(default: the local socket as user postgres, or ``PIONEER_BENCH_POSTGRES_URL``) and
dropped afterwards. Not a test; run it on demand.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from pioneer.episodic import EpisodicIndex
from pioneer.history import HistoryBudgeter, HistoryLimits
from pioneer.history.open import open_store
from pioneer.tokens import default_counter

_WORDS = """the gateway keeps every turn of a thread with its token counts so a later turn
sums integers while several nodes write their own conversations into one database and the
budgeter reads a window of recent turns with the summary that covers the older ones before
a provider request is built from it""".split()

FORK = multiprocessing.get_context("fork")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _worker(target: str, process: int, turns: int, words: int, shared: bool, pause: float,
            start: Any, queue: Any) -> None:
    rng = random.Random(process)
    thread = "shared" if shared else f"thread-{process}"
    writes: list[float] = []
    passes: list[float] = []
    try:
        with open_store(target) as store, EpisodicIndex(store):
            store.ensure_thread(thread)
            budgeter = HistoryBudgeter(store, HistoryLimits.from_tokens(128_000, 16_000))
            default_counter().count("load the encoding before the clock starts")
            start.wait()
            for n in range(turns):
                if pause:
                    time.sleep(rng.expovariate(1 / pause))
                began = time.perf_counter()
                budgeter.build(thread)
                passes.append(time.perf_counter() - began)
                user, reply = _text(rng, words // 3), _text(rng, words)
                began = time.perf_counter()
                store.add_turn(thread, user_text=user, assistant_text=reply,
                               turn_id=f"p{process}-{n}-{uuid.uuid4().hex[:6]}")
                writes.append(time.perf_counter() - began)
        queue.put((process, time.perf_counter(), writes, passes, None))
    except BaseException as error:  # reported by the parent
        queue.put((process, time.perf_counter(), writes, passes, repr(error)))


def run(target: str, processes: int, turns: int, words: int, shared: bool,
        pause: float = 0.0) -> dict[str, float]:
    """One row: ``processes`` writers of ``turns`` turns each against ``target``."""
    with open_store(target):  # created and migrated once, before the writers race
        pass
    start = FORK.Barrier(processes + 1)
    queue = FORK.Queue()
    workers = [FORK.Process(target=_worker, args=(target, p, turns, words, shared, pause,
                                                 start, queue))
               for p in range(processes)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    results = [queue.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(60)
    failed = [error for *_, error in results if error]
    if failed:
        raise SystemExit(f"a writer failed: {failed[0]}")
    ended = max(result[1] for result in results)
    writes = [w for result in results for w in result[2]]
    passes = [p for result in results for p in result[3]]
    return {
        "turns/s": len(writes) / (ended - began),
        "add p50": 1000 * statistics.median(writes),
        "add p95": 1000 * _percentile(writes, 0.95),
        "add p99": 1000 * _percentile(writes, 0.99),
        "pass p50": 1000 * statistics.median(passes),
        "pass p95": 1000 * _percentile(passes, 0.95),
    }


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--processes", default="1,4,8",
                        help="comma-separated writer process counts (default 1,4,8)")
    parser.add_argument("--turns", type=int, default=100, help="turns per process")
    parser.add_argument("--tokens", type=int, default=200,
                        help="about this many words per turn (a third in the user message)")
    parser.add_argument("--pause", type=float, default=0.0, metavar="MS",
                        help="mean pause before each turn of a process, in ms (drawn "
                        "from an exponential distribution; default 0: back to back)")
    parser.add_argument("--shared", action="store_true",
                        help="all processes on one thread instead of one thread each")
    parser.add_argument("--stores", default="sqlite,postgresql",
                        help="comma-separated stores to run (default sqlite,postgresql)")
    parser.add_argument("--postgres-url", default=os.environ.get(
        "PIONEER_BENCH_POSTGRES_URL", "postgresql://postgres@/postgres?host=/var/run/postgresql"))
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.processes.split(",")]
    stores = [part for part in args.stores.split(",") if part]
    unknown = sorted(set(stores) - {"sqlite", "postgresql"})
    if unknown:
        parser.error(f"unknown store {unknown[0]!r} (known: sqlite, postgresql)")
    database = f"pg_pioneer_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.postgres_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    rows: list[tuple[str, int, dict[str, float]]] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for count in counts:
                for name in stores:
                    if name == "sqlite":
                        target = str(Path(folder) / f"bench-{count}.db")
                    else:
                        with psycopg.connect(_with_database(args.postgres_url, database),
                                             autocommit=True) as admin:
                            admin.execute(f"DROP SCHEMA IF EXISTS b{count} CASCADE")
                            admin.execute(f"CREATE SCHEMA b{count}")
                        target = _with_database(args.postgres_url, database)
                        target += ("&" if "?" in target else "?") + \
                            f"options=-csearch_path%3Db{count}"
                    rows.append((name, count, run(target, count, args.turns, args.tokens,
                                                  args.shared, args.pause / 1000)))
                    print(f"  done: {name}, {count} processes", file=sys.stderr)
    finally:
        with psycopg.connect(args.postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    layout = "one shared thread" if args.shared else "a thread per process"
    print(f"{args.turns} turns per process, {layout}, about {args.tokens} words a turn; "
          "times in ms")
    header = ("store", "procs", "turns/s", "add p50", "add p95", "add p99", "pass p50",
              "pass p95")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for name, count, figures in rows:
        cells = [name, str(count), f"{figures['turns/s']:.0f}"] + [
            f"{figures[key]:.2f}" for key in header[3:]]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
