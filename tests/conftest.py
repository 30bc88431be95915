"""Shared test fixtures: golden files and small file trees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

CASES = Path(__file__).parent / "cases"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite expected golden files from the current output (review with git diff)",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture
def golden(update_goldens: bool) -> Callable[[Path, str], None]:
    """Compare text with a golden file, or rewrite it under --update-goldens."""

    def check(path: Path, actual: str) -> None:
        if update_goldens:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual, encoding="utf-8")
            return
        assert path.exists(), f"missing golden file {path}; run pytest --update-goldens"
        expected = path.read_text(encoding="utf-8")
        assert actual == expected, f"output differs from {path} (pytest --update-goldens to accept)"

    return check


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty runtime home folder."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder
