"""Golden cases: every folder under tests/cases/ is one compile with expected output.

A case holds ``input.json`` (the compile input; ``workspace_root`` defaults to the
case's ``home/`` copy), optional ``home/`` files, optional ``profiles/`` and
``templates/`` folders (searched before the built-in ones) and ``expected/`` with
``stable.txt``, ``dynamic.txt``, ``full.txt`` and ``manifest.json``, or ``error.txt``
for a case that must fail. Cases run inside a temporary folder with the relative
workspace root ``home``, so paths and fingerprints in the goldens are portable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pioneer import PioneerError, PromptCompileInput, PromptCompiler

CaseSetup = Callable[[Path], tuple[PromptCompiler, PromptCompileInput]]

CASES = Path(__file__).parent / "cases"
CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "input.json").is_file())


def test_cases_are_discovered() -> None:
    assert len(CASE_DIRS) >= 10, "golden case discovery found too few cases"


def _run_case(case: Path, case_setup: CaseSetup) -> dict[str, str]:
    try:
        compiler, compile_input = case_setup(case)
        payload = compiler.compile(compile_input)
    except PioneerError as error:
        return {"error.txt": error.render().replace(str(case), "$CASE") + "\n"}
    # The goldens carry token counts: counted on demand here, and an eager-counting
    # compiler must produce the very same manifest.
    assert all(record.tokens is None for record in payload.manifest.sections)
    counted = payload.with_token_counts()
    eager = PromptCompiler(compiler.settings, profile_path=compiler.profile_path,
                           template_path=compiler.template_path, count_tokens=True)
    assert eager.compile(compile_input).to_json() == counted.to_json()
    payload = counted
    return {
        "stable.txt": payload.stable_system_text,
        "dynamic.txt": payload.dynamic_system_text,
        "full.txt": payload.full_system_text,
        "manifest.json": payload.manifest.to_json() + "\n",
    }


@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_case(
    case: Path,
    case_setup: CaseSetup,
    golden: Callable[[Path, str], None],
    update_goldens: bool,
) -> None:
    outputs = _run_case(case, case_setup)
    expected_dir = case / "expected"
    for name, text in outputs.items():
        golden(expected_dir / name, text)
    stale = {p.name for p in expected_dir.iterdir()} - set(outputs)
    if update_goldens:
        for name in stale:
            (expected_dir / name).unlink()
    else:
        assert not stale, f"expected files the case no longer produces: {sorted(stale)}"
