"""pioneer inspect: golden tables and JSON over golden cases, and the command line."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pioneer import PromptCompiler
from pioneer.cli import main
from pioneer.inputs import parse_compile_input
from pioneer.inspect import inspect_prompt, render_json, render_table

CASES = Path(__file__).parent / "cases"
GOLDENS = Path(__file__).parent / "goldens" / "inspect"
INSPECTED = [
    "contribution-pools",
    "derived-deployment",
    "empty-files",
    "full-everything",
    "per-file-truncation",
    "total-budget-zero",
]


def _inspect(case: Path, tmp_path: Path) -> tuple[str, str]:
    shutil.copytree(case / "home", tmp_path / "home")
    data = json.loads((case / "input.json").read_text("utf-8"))
    data.setdefault("workspace_root", "home")
    compiler = PromptCompiler(
        profile_path=[case / "profiles"] if (case / "profiles").is_dir() else [],
        template_path=[case / "templates"] if (case / "templates").is_dir() else [],
    )
    inspection = inspect_prompt(compiler, parse_compile_input(data))
    return render_table(inspection) + "\n", render_json(inspection) + "\n"


@pytest.mark.parametrize("name", INSPECTED)
def test_inspect_golden(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    golden: Callable[[Path, str], None],
) -> None:
    monkeypatch.chdir(tmp_path)
    table, data = _inspect(CASES / name, tmp_path)
    golden(GOLDENS / f"{name}.txt", table)
    golden(GOLDENS / f"{name}.json", data)


def test_rows_cover_every_kept_section_and_totals_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, data = _inspect(CASES / "full-everything", tmp_path)
    manifest = json.loads((CASES / "full-everything" / "expected" / "manifest.json").read_text())
    report = json.loads(data)
    kept = [row for row in report["sections"] if row["status"] != "omitted"]
    assert [row["id"] for row in kept] == manifest["section_ids"]
    assert [row["tokens"] for row in kept] == [s["tokens"] for s in manifest["sections"]]
    stable = (CASES / "full-everything" / "expected" / "stable.txt").read_text()
    assert report["totals"]["stable"]["chars"] == len(stable)


def test_inspect_command_never_seeds_the_home(tmp_path: Path) -> None:
    out = io.StringIO()
    home = tmp_path / "absent"
    assert main(["inspect", "--home", str(home), "--profile", "minimal"], stdout=out) == 0
    assert not home.exists()
    lines = out.getvalue().splitlines()
    assert lines[1].split() == ["SECTION", "STABILITY", "CHARS", "TOKENS", "SOURCE", "STATUS"]
    assert "soul_core              stable         -       -  -        omitted: SOUL.md is " \
        "missing" in lines
    out = io.StringIO()
    assert main(["inspect", "--home", str(home), "--profile", "none", "--json"], stdout=out) == 0
    assert json.loads(out.getvalue())["sections"] == [{
        "chars": 97, "id": "identity_base", "reason": None, "source": "builtin",
        "stability": "stable", "status": "kept", "tokens": 20,
    }]
