"""benchmarks/window_bench.py drives threads through the runner against a provider that
counts differently and prints its tables: run here in its quick mode, for what it prints
(the rows, beside the ideal and the target), never for its numbers or timings; and its
scripted provider's count, which the rows rest on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "window_bench.py"
sys.path.insert(0, str(SCRIPT.parent))

import window_bench  # noqa: E402

from pioneer.tokens import TiktokenCounter  # noqa: E402

ROWS = ("overflows (first 3 replies apart)", "estimate error, median",
        "estimate error, 90th percentile", "summarise at (true share)",
        "window use when cut (mean)", "requests refused before sending")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, cwd=REPO, timeout=900, check=False)


def test_the_quick_mode_prints_every_row_per_window() -> None:
    done = _run("--quick", "--turns", "12")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("window_bench: 12 turns per thread; windows 32,000, 200,000; "
                          "provider ratios english 1.15, code 1.35, json 1.8, "
                          "other-script 0.6; seed 7\n")
    tables = re.split(r"^(?=window [\d,]+ tokens: )", out, flags=re.MULTILINE)[1:]
    assert [table.split(" tokens:")[0] for table in tables] == \
        ["window 32,000", "window 200,000"]
    for table in tables:
        assert re.search(r"^window [\d,]+ tokens: 12 turns, \d+ rounds \(summarise "
                         r"[\d.]+s, truncate [\d.]+s\)$", table, re.MULTILINE), table
        for row in ROWS:
            line = next((line for line in table.splitlines()
                         if line.strip().startswith(row)), None)
            assert line is not None, (row, table)
            assert re.fullmatch(rf"  {re.escape(row)} +(\d+ \(\d+\)|[\d.]+%|-|\d+) +"
                                r"(\d+ \(\d+\)|[\d.]+%|-|\d+)( .*)?", line), line
        for row in ("one ratio x whole body", "previous round + ratio x added",
                    "one ratio per guessed kind"):
            assert re.search(rf"^    {re.escape(row)} +[\d.]+% / [\d.]+% +[\d.]+% / "
                             r"[\d.]+% +median / 90th percentile$", table, re.MULTILINE), table
        assert re.search(r"^    best constant ratio in hindsight +[\d.]+% / [\d.]+% +"
                         r"[\d.]+% / [\d.]+% +the floor of one ratio per model$", table,
                         re.MULTILINE), table
    assert "Traceback" not in done.stderr


def test_the_kind_of_a_text_is_guessed_from_its_characters() -> None:
    texts = window_bench.Texts(5, TiktokenCounter())
    for kind in window_bench.KINDS:
        for _ in range(5):
            assert window_bench.text_class(texts.make(kind, 1_500)) == kind


def test_a_bad_window_is_named() -> None:
    done = _run("--windows", "32000,x")
    assert done.returncode == 2
    assert "expected comma-separated token counts (got '32000,x')" in done.stderr


def test_the_provider_counts_each_kind_at_its_ratio() -> None:
    texts = window_bench.Texts(3, TiktokenCounter())
    code = texts.make("code", 2_000)
    russian = texts.make("other-script", 2_000)
    provider = window_bench.Provider(texts, window_bench.RATIOS)
    body = {"system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": code},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "c1", "name": "read_mail", "input": {"q": "x"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": russian}]}]}
    counter = TiktokenCounter()
    expected = (counter.count("Be brief.") * 1.15 + counter.count(code) * 1.35
                + counter.count('{"q": "x"}') * 1.15 + counter.count(russian) * 0.6
                + 3 * window_bench.PER_MESSAGE)
    assert provider.count(body) == round(expected)
    assert texts.local(code) >= 2_000 and texts.local(russian) >= 2_000
