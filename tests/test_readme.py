"""The README stays true: quoted files match the repository and the API example runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")
QUOTED = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", README, flags=re.S)


def test_readme_quotes_files() -> None:
    assert QUOTED, "the README quotes no golden files"


@pytest.mark.parametrize(("path", "body"), QUOTED, ids=[q[0] for q in QUOTED])
def test_quoted_file_matches(path: str, body: str) -> None:
    actual = (ROOT / path).read_text("utf-8")
    assert body.rstrip("\n") == actual.rstrip("\n"), f"README quote of {path} is stale"


def test_python_api_example_runs(tmp_path: Path) -> None:
    section = README.split("<!-- api -->", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert code is not None
    namespace: dict[str, object] = {"home": tmp_path / "home"}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    payload = namespace["payload"]
    assert payload.dynamic_system_text == "## Extra System\nBe brief."  # type: ignore[attr-defined]
