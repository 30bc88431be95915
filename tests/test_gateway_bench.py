"""benchmarks/gateway_bench.py serves threads round robin on both stores and prints its
tables: run here with tiny options, for what it prints, never for its timings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg
from stores import SERVER_URL

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gateway_bench.py"
ROW = r"{row} +{threads} +[\d.]+ (µs|ms|s) +[\d.]+x"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, cwd=REPO, timeout=600, check=False)


def test_the_bench_prints_each_row_per_thread_count_store_and_growth_size() -> None:
    done = _run("--threads", "1,3", "--rounds", "1", "--samples", "2", "--history-turns", "2",
                "--stores", "sqlite,postgresql", "--postgres-url", SERVER_URL,
                "--growth-sizes", "2,4", "--profile-rounds", "2")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("gateway_bench: threads 1,3; stores sqlite,postgresql;")
    database = re.search(r"^postgresql: database (pioneer_gateway_\w+) ", out, re.MULTILINE)
    assert database is not None, out
    with psycopg.connect(SERVER_URL, autocommit=True) as admin:  # dropped at the end
        assert admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                             (database[1],)).fetchone() is None
    tables = re.split(r"^(?=(?:sqlite|postgresql): turns served round robin)", out,
                      flags=re.MULTILINE)[1:]
    assert [table.split(":", 1)[0] for table in tables] == ["sqlite", "postgresql"]
    for table in tables:
        for row in ("compile", "history pass", "whole turn"):
            for threads in (1, 3):
                assert re.search(ROW.format(row=row, threads=threads), table), table
            assert re.search(rf"{row} +1 .* 1\.00x", table), table
        for threads in (1, 3):
            assert re.search(rf"^RSS +{threads} +[\d.]+ MiB +-?[\d.]+ MiB$", table,
                             re.MULTILINE), table
        assert re.search(r"^RSS at 3 threads: -?[\d.]+ MiB over the interpreter; the "
                         r"process's cache budgets \(both compilers and the store\): "
                         r"[\d.]+ MiB: (within|over)$", table, re.MULTILINE), table
        for threads in (1, 3):
            # The compiler keeps no cache of compiles: the compile row has none to show.
            assert f"caches of the compile row at {threads} threads" not in table
            assert re.search(rf"^shared caches at {threads} threads \(seeding, warm-up and "
                             r"timed turns\):\n  history_turns: .*\n  token_counts: [\d.]+ "
                             r"MiB of [\d.]+ MiB, hit rate [\d.]+%", table, re.MULTILINE), table
    for shape in ("plain", "when", "derived"):
        assert re.search(rf"^profile: {shape} 2 .*\n^profile: {shape} 4 .* -?\d\.\d\d", out,
                         re.MULTILINE), out
    for shape in ("same-ids", "new-ids"):
        assert re.search(rf"^contributions: {shape} 4 +[\d.]+ (µs|ms|s) +[\d.]+ (µs|ms) +"
                         r"-?\d+\.\d\d", out, re.MULTILINE), out
    assert "Traceback" not in done.stderr


def test_a_bad_option_is_named() -> None:
    done = _run("--threads", "1,x", "--no-profiles")
    assert done.returncode == 2
    assert "--threads: expected comma-separated counts (got '1,x')" in done.stderr
    done = _run("--stores", "sqlite,mysql", "--no-profiles")
    assert done.returncode == 2
    assert "unknown store 'mysql' (known: sqlite, postgresql)" in done.stderr


def test_without_the_runner_only_the_compile_and_history_rows_are_timed() -> None:
    done = _run("--threads", "1,3", "--samples", "2", "--history-turns", "2",
                "--stores", "sqlite", "--no-profiles", "--no-runner")
    assert done.returncode == 0, done.stderr
    for row in ("compile", "history pass"):
        for threads in (1, 3):
            assert re.search(ROW.format(row=row, threads=threads), done.stdout), done.stdout
    assert "whole turn" not in done.stdout
    assert "Traceback" not in done.stderr
