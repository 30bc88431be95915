"""Golden cases: every folder under tests/cases/ is one compile with expected output.

A case holds ``input.json`` (the compile input; ``workspace_root`` defaults to the
case's ``home/`` copy), optional ``home/`` files, optional ``profiles/`` and
``templates/`` folders (searched before the built-in ones) and ``expected/`` with
``stable.txt``, ``dynamic.txt``, ``full.txt`` and ``manifest.json``, or ``error.txt``
for a case that must fail. Cases run inside a temporary folder with the relative
workspace root ``home``, so paths and fingerprints in the goldens are portable.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pioneer import PioneerError, PromptCompiler
from pioneer.inputs import parse_compile_input

CASES = Path(__file__).parent / "cases"
CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "input.json").is_file())


def test_cases_are_discovered() -> None:
    assert len(CASE_DIRS) >= 10, "golden case discovery found too few cases"


def _run_case(case: Path, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    if (case / "home").is_dir():
        shutil.copytree(case / "home", home, symlinks=True)
    else:
        home.mkdir()
    data = json.loads((case / "input.json").read_text("utf-8"))
    data.setdefault("workspace_root", "home")
    compiler = PromptCompiler(
        profile_path=[case / "profiles"] if (case / "profiles").is_dir() else [],
        template_path=[case / "templates"] if (case / "templates").is_dir() else [],
    )
    try:
        payload = compiler.compile(parse_compile_input(data))
    except PioneerError as error:
        return {"error.txt": error.render().replace(str(case), "$CASE") + "\n"}
    return {
        "stable.txt": payload.stable_system_text,
        "dynamic.txt": payload.dynamic_system_text,
        "full.txt": payload.full_system_text,
        "manifest.json": payload.manifest.to_json() + "\n",
    }


@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_case(
    case: Path,
    tmp_path: Path,
    golden: Callable[[Path, str], None],
    update_goldens: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    outputs = _run_case(case, tmp_path)
    expected_dir = case / "expected"
    for name, text in outputs.items():
        golden(expected_dir / name, text)
    stale = {p.name for p in expected_dir.iterdir()} - set(outputs)
    if update_goldens:
        for name in stale:
            (expected_dir / name).unlink()
    else:
        assert not stale, f"expected files the case no longer produces: {sorted(stale)}"
