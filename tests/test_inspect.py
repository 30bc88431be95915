"""pioneer inspect: golden tables and JSON over golden cases, and the command line."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.cli import main
from pioneer.review.inspect import inspect_prompt, render_json, render_table

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


CaseSetup = Callable[[Path], tuple[PromptCompiler, PromptCompileInput]]


def _inspect(case: Path, case_setup: CaseSetup) -> tuple[str, str]:
    compiler, turn = case_setup(case)
    if (case / "templates").is_dir():  # beside the home, so the goldens name it portably
        shutil.copytree(case / "templates", "templates")
        compiler = PromptCompiler(profile_path=compiler.profile_path,
                                  template_path=[Path("templates")])
    inspection = inspect_prompt(compiler, turn)
    return render_table(inspection) + "\n", render_json(inspection) + "\n"


@pytest.mark.parametrize("name", INSPECTED)
def test_inspect_golden(
    name: str, case_setup: CaseSetup, golden: Callable[[Path, str], None]
) -> None:
    table, data = _inspect(CASES / name, case_setup)
    golden(GOLDENS / f"{name}.txt", table)
    golden(GOLDENS / f"{name}.json", data)


def test_rows_cover_every_kept_section_and_totals_match(case_setup: CaseSetup) -> None:
    _, data = _inspect(CASES / "full-everything", case_setup)
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
    assert lines[1].split() == ["SECTION", "STABILITY", "CHARS", "TOKENS", "SOURCE", "TEMPLATE",
                                "STATUS"]
    assert "soul_core              stable         -       -  -        <built-in>/templates/" \
        "bootstrap_file.md.j2         omitted: SOUL.md is missing" in lines
    out = io.StringIO()
    assert main(["inspect", "--home", str(home), "--profile", "none", "--json"], stdout=out) == 0
    assert json.loads(out.getvalue())["sections"] == [{
        "chars": 97, "id": "identity_base", "reason": None, "source": "builtin",
        "stability": "stable", "status": "kept", "tokens": 20,
        "template": "<built-in>/templates/identity_base.md.j2", "deployment": False,
    }]


def test_a_section_left_out_by_its_condition_says_which(tmp_path: Path) -> None:
    inspection = inspect_prompt(PromptCompiler(), PromptCompileInput(
        workspace_root=tmp_path, include_tool_recovery_policy=False,
        dynamic_context='Attached:\n- artifactId=a1, versionId=v1, name="a.md", kind=document, '
        'size=1 KB.'))
    rows = {row.id: row for row in inspection.rows}
    left_out = rows["tool_recovery_policy"]
    assert left_out.status == "omitted"
    assert left_out.reason == 'condition "include_tool_recovery_policy" is false'
    assert rows["artifact_references"].status == "kept"
