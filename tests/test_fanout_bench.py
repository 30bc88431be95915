"""benchmarks/fanout_bench.py times parallel tool calls through the runner beside a floor:
run here with a few calls, for what it prints (a row per provider and size, each with its
targets), never for its numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "fanout_bench.py"

ROW = re.compile(
    r"^(?P<provider>[a-z-]+) +(?P<calls>[\d,]+)( +\d+\.\d{3}){5} +\d+\.\d{2} +\d+\.\d +\d+\.\d{2}"
    r"  linear <= 1\.5(?P<second>, < 1 s)?: (met|NOT met)$")


def test_it_prints_a_row_per_provider_and_size_with_its_targets() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "50,100", "--repeats", "1"],
        capture_output=True, text=True, cwd=REPO, timeout=600, check=False)
    assert done.returncode in (0, 1), done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("CPU seconds (median of 1 runs)")
    rows = [ROW.match(line) for line in lines[2:-1]]
    assert all(rows), lines
    assert [(row["provider"], row["calls"]) for row in rows if row] == [
        (provider, calls) for provider in ("anthropic", "openai-chat", "openai-responses",
                                           "gemini") for calls in ("50", "100")]
    assert not any(row["second"] for row in rows if row)  # the 1 s target is 10,000 calls'
    assert lines[-1] in ("all targets met", "some targets not met")
    assert (lines[-1] == "all targets met") == (done.returncode == 0)
