"""Shared test fixtures: golden files and small file trees."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from stores import SERVER_URL, START_HINT, Server
from support import sqlite_exec

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import parse_compile_input

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


@pytest.fixture(scope="module")
def compiler() -> PromptCompiler:
    """One compiler per test module: profiles and templates load once."""
    return PromptCompiler()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where a test's SQLite store goes."""
    return tmp_path / "pioneer.db"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty runtime home folder."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


CaseSetup = Callable[[Path], tuple[PromptCompiler, PromptCompileInput]]


@pytest.fixture
def case_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CaseSetup:
    """Lay out a golden case in a temporary folder and return its compiler and input.

    The case's ``home/`` (absent means empty) is copied to ``./home`` and the working
    folder is the temporary one, so paths and fingerprints in goldens are portable.
    The input is parsed lazily by the caller's compile so input errors stay testable.
    """

    def setup(case: Path) -> tuple[PromptCompiler, PromptCompileInput]:
        monkeypatch.chdir(tmp_path)
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
        return compiler, parse_compile_input(data)

    return setup


# -- stores: the conformance suite runs each store test on SQLite and on PostgreSQL -----


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """The session's own database on the real PostgreSQL server (dropped at the end)."""
    try:
        server = Server()
    except psycopg.OperationalError as error:
        pytest.fail(f"no PostgreSQL server at {SERVER_URL}: {error}; {START_HINT}")
    yield server
    server.close()


@dataclass
class StoreTarget:
    """Where a test's store lives: ``target`` for open_store, ``dialect`` to branch on,
    ``sql`` to run statements behind the store's back."""

    dialect: str
    target: str | Path
    sql: Callable[..., None]
    schema: str | None = None


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreTarget]:
    """An empty store location: an SQLite file, or a fresh schema on the PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "pioneer.db"

        def sqlite_sql(*statements: str) -> None:
            sqlite_exec(path, *statements)

        yield StoreTarget("sqlite", path, sqlite_sql)
        return
    server: Server = request.getfixturevalue("pg_server")
    schema, url = server.new_schema()
    yield StoreTarget("postgresql", url, lambda *sql: server.execute(schema, *sql), schema)
    server.drop_schema(schema)
