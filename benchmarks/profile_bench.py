"""Profile loading against the number of sections: the cost of one load and its growth.

    python benchmarks/profile_bench.py [--rounds N] [--against REV]

Each row loads one profile with a fresh ``PromptCompiler`` (TOML, extends, schema,
structural rules, every template and condition), as a process that starts does. The
profiles have 10, 100 and 1,000 sections in three shapes: ``plain`` (stable text
sections over three templates), ``when`` (each section has its own condition) and
``derived`` (a profile that ``extends = "full"`` and adds the sections, each placed
``after`` the one before). The rows run interleaved (``bench.py``'s
``run_interleaved``), and the table gives each row's median, the cost per section and
the growth exponent from the size before (``log(t2 / t1) / log(n2 / n1)``): 1.0 is
linear, the ideal for a load that reads each section once; the target is at most 1.1.

``--against REV`` loads the same profiles with a git revision's package beside the
current one (``versus.py``'s ``load_revision``), interleaved with them, and prints both
tables. Not a test; run it on demand.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import Row, _fmt, run_interleaved, settle

import pioneer

SIZES = (10, 100, 1000)
SHAPES = ("plain", "when", "derived")
#: The growth exponent a row is held to.
TARGET = 1.1
_TEMPLATES = {"a.md.j2": "Rule {{ section }} of {{ profile }}.\n",
              "b.md.j2": "{% if include_tool_recovery_policy %}Tools may fail.{% endif %}\n",
              "c.md.j2": "Plain text.\n"}


def profile_text(shape: str, size: int) -> str:
    """A profile of ``size`` sections of ``shape``."""
    head = 'name = "bench"\nextends = "full"\n' if shape == "derived" else 'name = "bench"\n'
    parts = [head]
    for index in range(size):
        anchor = "assistant_safety" if index == 0 else f"s{index - 1}"
        parts.append(
            f'\n[[sections]]\nid = "s{index}"\ntitle = "Section {index}"\n'
            f'stability = "stable"\ntemplate = "{"abc"[index % 3]}.md.j2"\n'
            + (f'after = "{anchor}"\n' if shape == "derived" else "")
            + (f"when = \"extra_system != 'v{index}'\"\n" if shape == "when" else ""))
    return "".join(parts)


def write_profiles(root: Path, sizes: Sequence[int] = SIZES) -> dict[tuple[str, int], Path]:
    """One folder per profile, each with the templates beside it."""
    folders = {}
    for shape in SHAPES:
        for size in sizes:
            folder = root / f"{shape}-{size}"
            folder.mkdir()
            (folder / "bench.toml").write_text(profile_text(shape, size))
            for name, text in _TEMPLATES.items():
                (folder / name).write_text(text)
            folders[(shape, size)] = folder
    return folders


def rows_for(label: str, package: Any, folders: dict[tuple[str, int], Path]) -> list[Row]:
    """A row per profile: a fresh compiler of ``package`` loads it."""
    rows = []
    base = len(pioneer.PromptCompiler().load_profile("full").spec.sections)
    for (shape, size), folder in folders.items():
        def run(_round: int, folder: Path = folder) -> object:
            compiler = package.PromptCompiler(profile_path=[folder], template_path=[folder])
            return compiler.load_profile("bench")

        def check(_round: int, loaded: Any, size: int = size, shape: str = shape) -> None:
            if len(loaded.spec.sections) != size + (base if shape == "derived" else 0):
                raise SystemExit(f"profile_bench.py: {label} loaded the wrong profile")

        run(0)  # a profile that does not load would fail every round
        rows.append(Row(f"{label}: {shape} {size}", run, check=check))
    return rows


def report(rows: list[Row], out: Any, unit: str = "section") -> None:
    """Each row's median, per ``unit`` (rows are named ``label: shape COUNT``) and growth
    exponent from the count before."""
    width = max(len(row.name) for row in rows) + 2
    print(f"{'row':<{width}}{'median':>11}{f'per {unit}':>17}  exponent (target ≤ {TARGET})",
          file=out)
    before: dict[str, tuple[int, float]] = {}
    for row in rows:
        label_shape, _, size_text = row.name.rpartition(" ")
        size, median = int(size_text), statistics.median(row.samples)
        exponent = ""
        if label_shape in before:
            last_size, last = before[label_shape]
            value = math.log(median / last) / math.log(size / last_size)
            exponent = f"{value:.2f}" + ("" if value <= TARGET else " (over)")
        before[label_shape] = (size, median)
        print(f"{row.name:<{width}}{_fmt(median):>11}{_fmt(median / size):>17}"
              f"  {exponent}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--against", metavar="REV",
                        help="also load the profiles with this git revision's package")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        (root / "profiles").mkdir()
        folders = write_profiles(root / "profiles")
        rows = rows_for("current", pioneer, folders)
        if args.against:
            from versus import load_revision

            (root / "revision").mkdir()
            package, _, commit = load_revision(args.against, root / "revision")
            rows += rows_for(commit, package, folders)
        settle()
        run_interleaved(rows, args.rounds, cold=True)
    report(rows, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
