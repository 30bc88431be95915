"""The package's stages import downwards only: the import-linter contract in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# telemetry: the span helpers both the turn stage and the audit use; terminal: colour and
# progress for the review tables, the commands and the benchmarks; files: opening a file
# beneath a root (the compile and sections stages share it); deadline: running a callable
# with a deadline (hooks and summaries); caches: the one cache type every stage keeps
# its caches in; _version: the version, which --version prints without importing a stage.
BASICS = {"__init__", "__main__", "_version", "caches", "cli", "deadline", "errors", "files",
          "resources", "settings", "telemetry", "terminal", "text", "tokens"}


def test_the_layers_contract_is_kept() -> None:
    script = (
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_only_the_basics_sit_at_the_package_root() -> None:
    modules = {path.stem for path in (ROOT / "pioneer").glob("*.py")}
    assert modules <= BASICS, sorted(modules - BASICS)
