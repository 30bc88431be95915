"""One gateway process serving many threads: what a turn costs at 1 to 2,048 threads.

    python benchmarks/gateway_bench.py [--threads 1,32,256,2048] [--rounds N]
                                       [--stores sqlite,postgresql] [--samples N]
                                       [--history-turns N] [--profile-rounds N]
                                       [--no-profiles] [--no-runner] [--postgres-url URL]

A gateway runs one long-lived process per node for many threads, each with its own
runtime home (SOUL.md, IDENTITY.md and USER.md of its own, about 4,000 characters in
all) and its own history (``--history-turns`` stored turns, 8 by default, of about 170
tokens each, under a history budget of 1,200 tokens).
For each thread count and store (SQLite: a file; PostgreSQL: a database created on the
server at ``--postgres-url`` and dropped at the end), the threads' turns are served
round robin, thread after thread, and three rows are timed on each visit:

* ``compile``: one long-lived ``PromptCompiler`` compiles the thread's input (its home,
  a new dynamic context and memory recall each turn);
* ``history pass``: the budgeting pass over the thread's stored turns
  (``HistoryBudgeter.build``);
* ``whole turn``: the turn runner (``pioneer.Agent``) runs one turn: ``next_body`` (window,
  budget, recall, hooks, compile, tools, request body, cache plan), a scripted provider
  reply (``examples/agent_loop.py``'s), ``receive`` and ``finish`` (the turn, its record
  and its index in one transaction). The runner's base compile input is pointed at the
  thread's home before each turn (the runner takes one base input per agent).

The stored turns are written before each group is served, through a second store on
the same database with an episodic index of its own (as other processes and nodes would
write them), so the served store's connections are only the ones serving needs, the
same at every count. Every thread gets a warm-up visit (its turn before: compile,
history pass and a whole turn, untimed) and ``--rounds`` timed turns, so every thread's
history is the same size at every count, and every timed visit comes after the
thread's own previous turn; a count that needs more than that for ``--samples`` visits
a row serves several groups of its threads, one group after the other, on the same
homes, compiler, store and runner. Each row's cost is the median per turn, beside its
ratio to the one-thread case and the targets: 256 threads at most 1.5 times one thread,
2,048 threads at most 2 times. Then the process's resident memory after each count
(``VmRSS``) beside what it was before the first home was made (the interpreter with
pioneer imported), the bytes and hit rates of the token counter and the store's turn
cache over the count (``pioneer.caches.cache_stats``; the compiler keeps no cache), and the
growth at the largest count against the byte budgets of every cache alive in the process.

``--no-runner`` runs no turn between the visits: the compile and history rows alone.

Last, the growth exponents of profile loading (``profile_bench.py``'s profiles of 10,
100 and 1,000 sections) and of a compile with 10, 100 and 1,000 contributions (runtime
sections with the same ids each turn, and with ids new each turn); the target is at
most 1.1. Not a test: run it on demand (about 10 minutes on a 2-core machine in full).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import os
import random
import resource
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import profile_bench
import workload
from agent_loop import response, usage
from bench import Row, _fmt, run_interleaved, settle

import pioneer
from pioneer import Agent, PromptCompileInput, PromptCompiler
from pioneer.caches import CacheStats, cache_stats
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.episodic import EpisodicIndex
from pioneer.history import HistoryBudgeter, HistoryLimits
from pioneer.history.open import open_store

PROVIDER, MODEL = "anthropic", "claude-sonnet-4-5"
SIZES = (1, 32, 256, 2048)
#: The targets: a thread count's cost per turn at most this many times one thread's.
TARGETS = {256: 1.5, 2048: 2.0}
#: The contributions' growth exponent target, as profile_bench's.
GROWTH = profile_bench.TARGET
HISTORY_BUDGET = 1200
DEFAULT_URL = os.environ.get("PIONEER_BENCH_POSTGRES_URL",
                             "postgresql://postgres@127.0.0.1:5432/postgres")


# -- the threads ----------------------------------------------------------------------


def write_home(home: Path, number: int) -> None:
    """A runtime home of its own: identity files no other thread has."""
    rng = random.Random(f"home:{number}")
    home.mkdir(parents=True)
    for name, chars in (("SOUL.md", 1500), ("IDENTITY.md", 800), ("USER.md", 1700)):
        (home / name).write_text(workload.text(rng, chars, f"{name} of thread {number}."),
                                 encoding="utf-8")


def turn_input(home: Path, thread: str, turn: int) -> PromptCompileInput:
    """``thread``'s compile input for ``turn``: what changes each turn is dynamic, and new
    to the compiler on every visit (a group served again on the same home is a new
    thread, with turns of its own), so no count is timed on dynamic sections it rendered
    before."""
    rng = random.Random(f"turn:{thread}:{turn}")
    return PromptCompileInput(
        workspace_root=home,
        dynamic_context=workload.text(rng, 400, f"Thread {thread}, turn {turn}."),
        runtime_sections=[RuntimeSectionInput(id="memory_recall",
                                              content=workload.text(rng, 600))],
    )


def seed(store: Any, threads: Sequence[str], turns: int, workers: int) -> None:
    """``turns`` stored turns in each thread (``workers`` writers at once)."""
    def one(thread: str) -> None:
        rng = random.Random(thread)
        store.ensure_thread(thread, model=MODEL)
        for n in range(turns):
            store.add_turn(thread, user_text=workload.text(rng, 150, f"Question {n}."),
                           assistant_text=workload.text(rng, 350, f"Answer {n}."),
                           turn_id=f"{thread}-seed-{n}")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, threads))


# -- memory and caches ----------------------------------------------------------------


def rss_bytes() -> int:
    """The process's resident memory now (``VmRSS``), else its peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cache_lines(stats: Sequence[CacheStats]) -> list[str]:
    """One line per cache: its bytes against its budget, and its hit rate."""
    return [f"  {one.name}: {_mib(one.bytes)} of {_mib(one.budget)}, hit rate "
            f"{one.hit_rate:.1%}, {one.hits:,} hits, {one.misses:,} misses"
            for one in stats]


def _mib(value: Any) -> str:
    return f"{value / 2**20:.1f} MiB" if isinstance(value, (int, float)) else repr(value)


# -- the stores -----------------------------------------------------------------------


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


@contextmanager
def stores(names: Sequence[str], folder: Path, url: str) -> Iterator[dict[str, str]]:
    """Where each store goes; a PostgreSQL database made for the run, dropped after it."""
    targets = {}
    database = None
    if "sqlite" in names:
        targets["sqlite"] = str(folder / "gateway.db")
    if "postgresql" in names:
        import psycopg

        database = f"pioneer_gateway_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        targets["postgresql"] = _with_database(url, database)
        print(f"postgresql: database {database} on {urlsplit(url).hostname or 'the socket'}"
              " (dropped at the end)", flush=True)
    try:
        yield targets
    finally:
        if database is not None:
            import psycopg

            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# -- one thread count on one store ----------------------------------------------------

ROWS = ("compile", "history pass", "whole turn")


class Served(NamedTuple):
    """What serving one thread count measured."""

    medians: dict[str, float]  # each row's median per turn, in ns
    rss: int  # the resident memory after it
    stats: list[CacheStats]  # the compile row's compiler's caches
    budget: int  # the byte budgets of every cache alive in the process, added up
    shared: list[CacheStats]  # the token counter's and the store's caches, over this count


def serve(store: Any, seeder: Any, homes: list[Path], size: int, rounds: int, samples: int,
          history_turns: int, out: Any, runner: bool = True) -> Served:
    """The rows' median per turn for ``size`` threads, the RSS after, the caches.

    Every thread gets the same number of turns at every count (a warm-up and ``rounds``),
    so its history and index are the same size: a small count that needs more visits
    serves several groups of ``size`` threads, one group after the other, on the same
    homes and the same long-lived compiler, store and runner.
    """
    groups = max(1, math.ceil(samples / (size * rounds)))
    before = {one.name: one for one in cache_stats()}
    compiler = PromptCompiler(count_tokens=False)
    limits = HistoryLimits.from_tokens(HISTORY_BUDGET, 0)
    budgeter = HistoryBudgeter(store, limits)
    agent = Agent(store, provider=PROVIDER, model=MODEL, limits=limits,
                  compiler=PromptCompiler(count_tokens=False),
                  compile_input={"workspace_root": homes[0]})
    bases = [PromptCompileInput(workspace_root=homes[n]) for n in range(size)]
    times: dict[str, list[int]] = {row: [] for row in ROWS}
    try:
        for group in range(groups):
            threads = [f"s{size}-g{group}-t{n}" for n in range(size)]
            seed(seeder, threads, history_turns, workers=8)
            serve_group(compiler, budgeter, agent, threads, homes, bases, rounds, times,
                        runner)
            print(f"  {size} threads: group {group + 1} of {groups} served", file=out,
                  flush=True)
        stats = compiler.cache_stats()
        gc.collect()  # the caches of an earlier store's compilers, gone
        budget = sum(one.budget for one in cache_stats())
        shared = [_since(one, before.get(one.name)) for one in cache_stats()
                  if one.name in SHARED]
    finally:
        agent.close()
    return Served({row: statistics.median(values) for row, values in times.items() if values},
                  rss_bytes(), stats, budget, shared)


#: The caches shared by the whole turn rather than kept by the compile row's compiler.
SHARED = ("token_counts", "history_turns")


def _since(now: CacheStats, then: CacheStats | None) -> CacheStats:
    """``now``'s hits, misses and evictions since ``then`` (its size as it is now)."""
    if then is None:
        return now
    return dataclasses.replace(now, hits=now.hits - then.hits, misses=now.misses - then.misses,
                               evictions=now.evictions - then.evictions)


def serve_group(compiler: PromptCompiler, budgeter: HistoryBudgeter, agent: Agent,
                threads: list[str], homes: list[Path], bases: list[PromptCompileInput],
                rounds: int, times: dict[str, list[int]], runner: bool = True) -> None:
    """A warm-up round and ``rounds`` timed rounds over ``threads``, round robin. The
    warm-up is the thread's turn before: the compile row's compile and history pass, then a
    whole turn through the runner, all untimed, so that every timed visit, at every count,
    comes after the thread's own previous turn (a timed visit right after a warm-up that
    only compiled found the home hot in the processor's caches, which made one thread's
    compile about a third cheaper than its turns in a real gateway). Without ``runner``
    no turn runs between the visits: the compile and history rows alone."""
    clock = time.perf_counter_ns
    for turn in range(rounds + 1):
        for n, thread in enumerate(threads):
            given = turn_input(homes[n], thread, turn)
            start = clock()
            compiler.compile(given)
            compiled = clock()
            budgeter.build(thread)
            passed = clock()
            agent.compile_input = bases[n]
            if not turn:  # the warm-up: the thread's turn before, untimed
                if runner:
                    run_turn(agent, thread, turn)
                continue
            times["compile"].append(compiled - start)
            times["history pass"].append(passed - compiled)
            if runner:
                run_turn(agent, thread, turn)
                times["whole turn"].append(clock() - passed)


def run_turn(agent: Agent, thread: str, number: int) -> None:
    """One turn through the runner, answered by a scripted reply."""
    turn = agent.turn(thread, f"Question {number} of {thread}: what is next?",
                      turn_id=f"{thread}-turn-{number}")
    turn.next_body()
    plan = turn.rounds[-1].cache
    assert plan is not None
    step = turn.receive(response(PROVIDER, MODEL, f"Answer {number}: the next step.", [],
                                 usage(PROVIDER, plan, 40)))
    if not step.done:
        raise SystemExit("gateway_bench.py: the scripted reply did not end the turn")
    turn.finish()


def report_store(name: str, results: dict[int, Served],
                 base_rss: int, rounds: int, samples: int, history_turns: int, out: Any) -> None:
    """The table of one store: each row per thread count, beside one thread's."""
    print(f"\n{name}: turns served round robin; every thread {history_turns} stored turns, "
          f"a warm-up visit and {rounds} timed turns; at least {samples} visits a row", file=out)
    print(f"{'row':<14}{'threads':>8}{'per turn':>12}{'x 1 thread':>12}  target", file=out)
    one = results.get(1)
    for row in [row for row in ROWS if one is None or row in one.medians]:
        for size, served in results.items():
            medians = served.medians
            ratio = medians[row] / one.medians[row] if one else float("nan")
            target = ""
            if size in TARGETS and one:
                bound = TARGETS[size]
                target = f"<= {bound:g}x: " + ("met" if ratio <= bound else "missed")
            print(f"{row:<14}{size:>8,}{_fmt(medians[row]):>12}{ratio:>11.2f}x  {target}",
                  file=out)
    # The interpreter: pioneer, the store and the runner loaded, one count served.
    smallest, largest = min(results), max(results)
    interpreter = results[smallest].rss
    print(f"{'RSS':<14}{'threads':>8}{'resident':>12}{'growth':>12}  (over {smallest:,} "
          f"thread{'s' if smallest > 1 else ''}; {_mib(base_rss)} before the first home)",
          file=out)
    for size, served in results.items():
        print(f"{'RSS':<14}{size:>8,}{_mib(served.rss):>12}"
              f"{_mib(served.rss - interpreter):>12}", file=out)
    for size, served in results.items():
        print(f"shared caches at {size:,} threads (seeding, warm-up and timed turns):",
              file=out)
        for line in cache_lines(served.shared):
            print(line, file=out)
    growth = results[largest].rss - interpreter
    budget = results[largest].budget
    verdict = "within" if growth <= budget else "over"
    print(f"RSS at {largest:,} threads: {_mib(growth)} over the interpreter; the process's "
          f"cache budgets (both compilers and the store): {_mib(budget)}: {verdict}",
          file=out)


# -- growth: profiles and contributions ---------------------------------------------


def contribution_rows(home: Path, sizes: Sequence[int]) -> list[Row]:
    """A warm compile with ``size`` runtime contributions, their ids the same each turn
    or new each turn."""
    rows = []
    for shape in ("same-ids", "new-ids"):
        for size in sizes:
            compiler = PromptCompiler(count_tokens=False)

            def run(turn: int, size: int = size, shape: str = shape,
                    compiler: PromptCompiler = compiler) -> object:
                prefix = f"gw.t{turn}" if shape == "new-ids" else "gw"
                return compiler.compile(PromptCompileInput(
                    workspace_root=home, dynamic_context=f"Turn {turn}.",
                    runtime_sections=[RuntimeSectionInput(id=f"{prefix}.c{n}",
                                                          content=f"Contribution {n}, turn {turn}.")
                                      for n in range(size)]))

            run(-1)
            rows.append(Row(f"contributions: {shape} {size}", run))
    return rows


def growth(folder: Path, sizes: Sequence[int], rounds: int, out: Any) -> None:
    """Profile loading and contributions against their count, with growth exponents."""
    (folder / "profiles").mkdir()
    folders = profile_bench.write_profiles(folder / "profiles", sizes)
    profiles = profile_bench.rows_for("profile", pioneer, folders)
    home = folder / "growth-home"
    write_home(home, -1)
    contributions = contribution_rows(home, sizes)
    settle()
    run_interleaved(profiles + contributions, rounds, cold=True)
    print(f"\nprofiles (a fresh compiler loads each), {rounds - 1} timed rounds", file=out)
    profile_bench.report(profiles, out)
    print(f"\ncontributions (a warm compile), {rounds - 1} timed rounds", file=out)
    profile_bench.report(contributions, out, unit="contribution")


# -- main ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default=",".join(map(str, SIZES)),
                        help="comma-separated thread counts (default 1,32,256,2048)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="timed turns of each thread, after its warm-up visit (default 1)")
    parser.add_argument("--samples", type=int, default=32,
                        help="timed visits a row at least (default 32)")
    parser.add_argument("--stores", default="sqlite,postgresql",
                        help="comma-separated stores (default sqlite,postgresql)")
    parser.add_argument("--history-turns", type=int, default=8,
                        help="stored turns a thread starts with (default 8)")
    parser.add_argument("--profile-rounds", type=int, default=4,
                        help="rounds of the growth rows, the first untimed (default 4)")
    parser.add_argument("--growth-sizes", default=",".join(map(str, profile_bench.SIZES)),
                        help="section and contribution counts of the growth rows "
                        "(default 10,100,1000)")
    parser.add_argument("--no-profiles", action="store_true",
                        help="skip the profile and contribution growth rows")
    parser.add_argument("--no-runner", action="store_true",
                        help="run no turn through the runner between the visits: the "
                        "compile and history rows alone, each visit right after the other "
                        "threads' compile and history pass")
    parser.add_argument("--postgres-url", default=DEFAULT_URL,
                        help="the server's maintenance database (PIONEER_BENCH_POSTGRES_URL)")
    args = parser.parse_args(argv)
    # A stop (Ctrl-C, SIGTERM) still drops the PostgreSQL database made for the run.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    sizes, counts = (_counts(parser, option, value) for option, value in (
        ("--threads", args.threads), ("--growth-sizes", args.growth_sizes)))
    names = [part for part in args.stores.split(",") if part]
    unknown = sorted(set(names) - {"sqlite", "postgresql"})
    if unknown:
        parser.error(f"unknown store {unknown[0]!r} (known: sqlite, postgresql)")
    if args.rounds < 1 or args.samples < 1 or args.profile_rounds < 2:
        parser.error("--rounds and --samples must be at least 1, --profile-rounds 2")
    out = sys.stdout
    print(f"gateway_bench: threads {','.join(map(str, sizes))}; stores {','.join(names)}; "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f}", file=out)
    base_rss = rss_bytes()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        homes = [folder / "homes" / f"h{n}" for n in range(max(sizes))]
        for number, home in enumerate(homes):
            write_home(home, number)
        settle()  # the homes' files settle, so their stat signatures are trusted
        with stores(names, folder, args.postgres_url) as targets:
            for name in names:
                store = open_store(targets[name])
                # The stored turns are written by another store (its own connections, an
                # index of its own), as other processes and nodes write them: the writers
                # at once would otherwise leave the served store's PostgreSQL pool with
                # eight connections at every count but one, taking its reads in turn.
                seeder = open_store(targets[name])
                index = EpisodicIndex(seeder)
                results: dict[int, Served] = {}
                try:
                    for size in sizes:
                        results[size] = serve(store, seeder, homes, size, args.rounds,
                                              args.samples, args.history_turns, sys.stderr,
                                              runner=not args.no_runner)
                finally:
                    index.close()
                    seeder.close()
                    store.close()
                report_store(name, results, base_rss, args.rounds, args.samples,
                             args.history_turns, out)
                out.flush()
        if not args.no_profiles:
            growth(folder, counts, args.profile_rounds, out)
    return 0


def _counts(parser: argparse.ArgumentParser, option: str, value: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in value.split(",") if part})
    except ValueError:
        parser.error(f"{option}: expected comma-separated counts (got {value!r})")
    if not counts or counts[0] < 1:
        parser.error(f"{option}: expected counts of at least 1")
    return counts


if __name__ == "__main__":
    raise SystemExit(main())
