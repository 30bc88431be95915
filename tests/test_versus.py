"""benchmarks/versus.py loads an earlier revision beside the current code and times both:
run here with a few rounds, for what it prints, never for its timings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "versus.py"
KINDS = ["warm, only dynamic inputs changed", "warm, USER.md edited + new turn",
         "warm whole round (Agent turn, next_body)"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300, check=False)


def test_the_current_code_beside_a_revision_prints_both_versions_rows_and_ratios() -> None:
    done = _run("HEAD", "--rounds", "3")
    assert done.returncode == 0, done.stderr
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    for label in ("current", commit):
        for kind in KINDS:
            assert re.search(rf"^{re.escape(f'{label}: {kind}')} +[\d.]+ (µs|ms)", done.stdout,
                             re.MULTILINE), done.stdout
    ratios = re.findall(rf"^current / {commit}, (.+): (\d+\.\d{{3}})$", done.stdout, re.MULTILINE)
    assert [kind for kind, _ in ratios] == KINDS


def test_a_revision_git_does_not_know_is_named_in_the_error() -> None:
    done = _run("no-such-revision-here")
    assert done.returncode == 1
    assert "versus.py: git rev-parse" in done.stderr and "no-such-revision-here" in done.stderr
    assert "Traceback" not in done.stderr
