"""The README's Python API example runs and compiles what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_pages import page


def test_python_api_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    section = page("README.md").split("<!-- api -->", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    payload = namespace["payload"]
    assert payload.dynamic_system_text == "## Extra System\nBe brief."  # type: ignore[attr-defined]
    assert (tmp_path / "home" / "SOUL.md").is_file()
    assert "## Extra System\nBe brief.\n" in capsys.readouterr().out
