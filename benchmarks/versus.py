"""pioneer's warm turns beside those of an earlier revision, in one process.

    python benchmarks/versus.py REV [--rounds N]

REV is any git revision of this checkout (a commit, a tag, ``HEAD~3``). Its package,
built-in profiles, templates, schemas and ``benchmarks/workload.py`` are taken with
``git archive`` into a temporary folder, the package under another name, so that the two
versions load side by side. Each version compiles its own workload, as its own
``bench.py`` would, in two rows: the warm turn (only dynamic inputs changed) and the turn
after ``USER.md`` was edited. The four rows run interleaved like ``bench.py``'s (a
shuffled order each round, the previous turn run untimed first, the garbage collector
off while timing), and the table gives each row's median and p95 and the ratio of the
current code to REV.

Both versions meet the same moment of the machine, which makes this steadier than
comparing two ``bench.py`` runs. It runs none of ``bench.py``'s other rows between two
turns (those leave jinja2 and the compiler's data out of the CPU caches), so a change in
the cost of a cold render shows less here: ``bench.py`` stays the measure the speed
bounds are stated in. Not a test; run it on demand.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import io
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workload
from bench import (
    Row,
    _fmt,
    _p95,
    _set_mtime,
    run_interleaved,
    settle,
    whole_round,
    write_revision,
)

import pioneer

REPO = Path(__file__).resolve().parent.parent
#: What an earlier revision brings: its package, the data the package reads, its workload.
TAKEN = ["pioneer", "profiles", "templates", "schemas", "models", "benchmarks/workload.py"]
#: An import of the package by its own name, which would load the current code instead.
_ABSOLUTE = re.compile(r"^\s*(?:from|import)\s+pioneer\b", re.MULTILINE)


def _git(*args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False)
    if done.returncode:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise SystemExit(f"versus.py: git {' '.join(args)} failed: {message}")
    return done.stdout


def load_revision(revision: str, folder: Path) -> tuple[ModuleType, ModuleType, str]:
    """The package and workload module of ``revision``, unpacked under ``folder``."""
    commit = _git("rev-parse", "--verify", "--short", f"{revision}^{{commit}}").decode().strip()
    archive = _git("archive", "--format=tar", commit, "--", *TAKEN)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(folder, filter="data")
        else:
            tar.extractall(folder)  # this checkout's own history
    name = f"pioneer_at_{commit}"
    # The data folders sit beside the package, where an installed-from-source package
    # finds them (resources.builtin_dir).
    packages = folder / "packages"
    packages.mkdir()
    shutil.move(folder / "pioneer", packages / name)
    for data in ("profiles", "templates", "schemas", "models"):
        shutil.move(folder / data, packages / data)
    for path in (packages / name).rglob("*.py"):
        if _ABSOLUTE.search(path.read_text("utf-8")):
            raise SystemExit(f"versus.py: {revision} imports pioneer by name in "
                             f"{path.relative_to(packages)}; it cannot load beside this one")
    sys.path.insert(0, str(packages))
    package = importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(
        f"workload_at_{commit}", folder / "benchmarks" / "workload.py")
    assert spec is not None and spec.loader is not None
    then = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = then  # dataclasses look their module up while it loads
    spec.loader.exec_module(then)
    return package, then, commit


def rows_for(label: str, package: Any, work: Any, root: Path, rounds: int) -> list[Row]:
    """The warm row, the edited-file row and the warm whole round of one version, on its
    own workload."""
    made: list[Row] = []
    for edited in (False, True):
        home = root / f"{label}-{'edited' if edited else 'warm'}"
        work.write_home(home)
        for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
            _set_mtime(home / name, 0)
        inputs = [package.PromptCompileInput.model_validate(work.compile_input(home, turn))
                  for turn in range(rounds)]
        compiler = package.PromptCompiler()
        compiler.compile(inputs[-1])

        def run(turn: int, compiler: Any = compiler, inputs: list[Any] = inputs) -> object:
            return compiler.compile(inputs[turn])

        if not edited:
            made.append(Row(f"{label}: warm, only dynamic inputs changed", run))
            continue
        revisions = [work.bootstrap_text("USER.md", turn + 1).encode("utf-8")
                     for turn in range(rounds)]
        user_md = home / "USER.md"

        def prepare(turn: int, revisions: list[bytes] = revisions, user_md: Path = user_md) -> None:
            write_revision(user_md, revisions[turn], turn + 1)

        def check(turn: int, result: Any) -> None:
            if f"(revision {turn + 1})" not in result.stable_system_text:
                raise SystemExit(f"versus.py: the edited USER.md did not reach {label}'s prompt")

        made.append(Row(f"{label}: warm, USER.md edited + new turn", run, prepare, check))
    made.append(whole_round(package, work, root, label))
    return made


def report(rows: list[Row], revision: str, out: Any) -> None:
    width = max(len(row.name) for row in rows) + 2
    print(f"{'row':<{width}}{'median':>11}{'p95':>11}", file=out)
    for row in rows:
        print(f"{row.name:<{width}}{_fmt(statistics.median(row.samples)):>11}"
              f"{_fmt(_p95(row.samples)):>11}", file=out)
    print(file=out)
    half = len(rows) // 2
    for now, then in zip(rows[:half], rows[half:], strict=True):
        kind = now.name.partition(": ")[2]
        ratio = statistics.median(now.samples) / statistics.median(then.samples)
        print(f"current / {revision}, {kind}: {ratio:.3f}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="the git revision to set the current code beside")
    parser.add_argument("--rounds", type=int, default=300, help="interleaved rounds (300)")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (round 0 only warms up)")
    with tempfile.TemporaryDirectory(prefix="pioneer-versus-") as folder:
        root = Path(folder)
        (root / "then").mkdir()
        package, then, commit = load_revision(args.revision, root / "then")
        rows = [*rows_for("current", pioneer, workload, root, args.rounds),
                *rows_for(commit, package, then, root, args.rounds)]
        settle()
        run_interleaved(rows, args.rounds)
        print(f"current code ({pioneer.__file__}) beside {args.revision} ({commit}); "
              f"{args.rounds} interleaved rounds, garbage collector off while timing; "
              f"Python {sys.version.split()[0]}")
        print()
        report(rows, commit, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
