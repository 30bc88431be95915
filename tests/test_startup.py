"""Start-up: ``import pioneer`` and the CLI load only what they use, and the lazy
exports of the package stay in step with ``__all__`` and the type-checking imports."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pioneer
from pioneer import cli, commands
from pioneer.commands._provider import PROVIDER_NAMES

STUB = Path(pioneer.__file__).with_suffix(".pyi")


def _environment() -> dict[str, str]:
    """This environment without PIONEER_* variables (settings come from defaults only)."""
    return {name: value for name, value in os.environ.items()
            if not name.upper().startswith("PIONEER_")}


def _loaded_after(
    code: str, cwd: Path | None = None, variables: dict[str, str] | None = None
) -> set[str]:
    script = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run(  # a deployment file would be looked for in ``cwd``
        [sys.executable, "-c", script], capture_output=True, text=True, check=True,
        env={**_environment(), **(variables or {})}, cwd=cwd,
    )
    return set(result.stdout.split())


def test_importing_the_package_loads_no_stage() -> None:
    loaded = _loaded_after("import pioneer")
    assert not {name for name in loaded if name.startswith("pioneer.")}
    assert "jinja2" not in loaded and "pydantic" not in loaded


def test_a_named_command_imports_only_its_module(tmp_path: Path) -> None:
    loaded = _loaded_after(
        "import io\nfrom pioneer.cli import main\n"
        f"assert main(['init', '--home', {str(tmp_path / 'home')!r}], stdout=io.StringIO()) == 0"
    )
    assert {name for name in loaded if name.startswith("pioneer.commands.")} == {
        "pioneer.commands.init", "pioneer.commands._common"
    }


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_the_version_imports_no_command_and_no_stage(flag: str) -> None:
    loaded = _loaded_after(
        "import io, contextlib\nfrom pioneer.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main([{flag!r}]) == 0"
    )
    ours = {name for name in loaded if name.startswith("pioneer.")}
    # pioneer.review.terminal escapes what the output streams write (a leaf: os and re
    # only; its package's __init__ is a docstring).
    assert ours == {"pioneer.cli", "pioneer.commands", "pioneer.errors", "pioneer._version",
                    "pioneer.review", "pioneer.review.terminal"}
    assert not {"pydantic", "jinja2", "tiktoken", "jsonschema"} & loaded


def test_command_modules_are_named_after_their_command() -> None:
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(commands.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"pioneer.commands.{info.name}")
            assert info.name == module.NAME


def _stub_names() -> set[str]:
    tree = ast.parse(STUB.read_text("utf-8"))
    return {
        alias.asname or alias.name
        for node in tree.body if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_all_is_the_stub_table() -> None:
    assert _stub_names() | {"__version__"} == set(pioneer.__all__)


@pytest.mark.parametrize("name", sorted(pioneer.__all__))
def test_every_export_resolves(name: str) -> None:
    assert getattr(pioneer, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pioneer.nope  # noqa: B018


def test_compile_text_loads_only_what_it_uses(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    loaded = _loaded_after(
        "import io\nfrom pioneer.cli import main\n"
        f"assert main(['compile', '--home', {home!r}], stdout=io.StringIO()) == 0",
        cwd=tmp_path,
    )
    unused = {
        "jsonschema",  # only to word an invalid profile's problems
        "tiktoken",  # token counts are left out of a text compile
        "pioneer.providers",  # --provider only
        "pioneer.review.lock",  # --locked only
        "pioneer.compile.derived",  # derived profiles only
        "difflib",  # did-you-mean, for a wrong name only
        "rich",  # progress bars only, on a terminal
        "opentelemetry",  # spans of compile_turn and audited rounds only
        "pioneer.review.context_map",  # inspect/explain --html only
        "pydantic_settings",  # reads PIONEER_* variables and pioneer.toml, here there are none
        "pioneer.history",  # the commands that open a conversation store only
    }
    assert not loaded & unused


def test_compile_reads_the_settings_sources_when_a_variable_is_set(tmp_path: Path) -> None:
    home = tmp_path / "from-the-environment"
    loaded = _loaded_after(
        "import io\nfrom pioneer.cli import main\n"
        "assert main(['compile'], stdout=io.StringIO()) == 0",
        cwd=tmp_path, variables={"PIONEER_HOME": str(home)},
    )
    assert (home / "SOUL.md").is_file()
    assert "pydantic_settings" in loaded


def test_compile_reads_the_deployment_file_of_a_parent_folder(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text(f"home = {str(tmp_path / 'home')!r}\n")
    (tmp_path / "sub").mkdir()
    loaded = _loaded_after(
        "import io\nfrom pioneer.cli import main\n"
        "assert main(['compile'], stdout=io.StringIO()) == 0",
        cwd=tmp_path / "sub",
    )
    assert (tmp_path / "home" / "SOUL.md").is_file()
    assert "pydantic_settings" in loaded


def test_provider_names_are_the_providers_in_order() -> None:
    from pioneer.providers import PROVIDERS

    assert tuple(PROVIDERS) == PROVIDER_NAMES


def test_compile_names_the_default_lock_file_as_the_lock_module_does() -> None:
    from pioneer.commands import compile as compile_command
    from pioneer.review import lock

    assert compile_command.DEFAULT_LOCK_FILE == lock.DEFAULT_LOCK_FILE


@pytest.mark.parametrize(
    ("args", "code"), [(["compile"], 0), (["compile", "--profile", "nope"], 1)],
    ids=["ok", "user-error"],
)
def test_the_console_command_prints_and_exits_as_main_returns(
    tmp_path: Path, args: list[str], code: int
) -> None:
    argv = [*args, "--home", str(tmp_path / "home")]
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(argv, stdout=out, stderr=err) == code
    result = subprocess.run(
        [sys.executable, "-m", "pioneer", *argv], capture_output=True, text=True,
        env=_environment(), cwd=tmp_path,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        code, out.getvalue(), err.getvalue()
    )


def test_the_console_entry_freezes_the_heap_after_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 3)
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    with pytest.raises(SystemExit) as info:
        cli.entry()
    assert (info.value.code, calls) == (3, ["main", "freeze"])
