"""The README and docs/ stay true: links, quoted files, runnable examples, reference facts.

Every ``python`` block of README.md and docs/*.md runs as written in an empty folder (and
prints what the page says it prints), and type-checks with ``mypy --strict`` as a caller's
code would, without the pydantic plugin. Files a page quotes (``<!-- file: PATH -->``)
match the repository, and every page the README points to exists.
"""

from __future__ import annotations

import io
import os
import pkgutil
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest
from doc_pages import DOCS, ROOT, Block, blocks, page, pages, shown, table_rows
from pydantic import BaseModel
from stores import Server
from support import run_cli, sqlite_exec

from pioneer import PromptCompileInput, PromptManifest
from pioneer.cli import main
from pioneer.compile.ids import BUILT_IN_SECTION_IDS, RUNTIME_BUILT_IN_IDS
from pioneer.compile.manifest import DiagnosticCode
from pioneer.history import MIGRATIONS, SqliteStore
from pioneer.history.postgres_migrations import MIGRATIONS as POSTGRES_MIGRATIONS
from pioneer.history.postgres_store import PostgresStore
from pioneer.sections.permissions import GUIDANCE_AXES
from pioneer.sections.tool_domains import DEFAULT_TOOL_DOMAINS

PAGES = pages()
README = page("README.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
QUOTED = [
    (path, body)
    for doc in PAGES
    for path, body in re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", doc.read_text("utf-8"),
                                 flags=re.S)
]
PYTHON = [block for doc in PAGES for block in blocks(doc) if block.kind == "python"]


def _slug(heading: str) -> str:
    # The anchor a Markdown renderer gives a heading: lower case, punctuation dropped,
    # spaces to hyphens.
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", path.read_text("utf-8"), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}


# Links -----------------------------------------------------------------------------------


def test_docs_folder_has_pages() -> None:
    assert len(PAGES) > 1, "docs/ holds no pages"


def test_readme_points_to_every_docs_page() -> None:
    linked = {target.split("#")[0] for target in LINK.findall(README)}
    pages_of_docs = {f"docs/{doc.name}" for doc in DOCS.glob("*.md")}
    assert pages_of_docs <= linked, "docs pages missing from the README's map"
    for target in sorted(t for t in linked if t.startswith("docs/")):
        assert (ROOT / target).is_file(), f"README.md links to {target}, which does not exist"


@pytest.mark.parametrize("doc", PAGES, ids=[p.name for p in PAGES])
def test_links_resolve(doc: Path) -> None:
    for target in LINK.findall(doc.read_text("utf-8")):
        if re.match(r"\w+://", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (doc.parent / file).resolve() if file else doc
        assert resolved.exists(), f"{doc.name}: link to {target}: no such file"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{doc.name}: link to {target}: no such heading"


# Quoted files ------------------------------------------------------------------------------


def test_quick_start_is_the_golden_case() -> None:
    quoted = {path for path, _ in re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", README,
                                             flags=re.S)}
    assert quoted == {"tests/cases/quickstart/input.json",
                      "tests/cases/quickstart/expected/full.txt"}
    section = README.split("<!-- quickstart -->", 1)[1]
    listing = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert listing is not None
    home = ROOT / "tests/cases/quickstart"
    rows = [line.split(None, 1) for line in listing.group(1).splitlines()]
    assert sorted(name for name, _ in rows) == sorted(
        f"home/{p.name}" for p in (home / "home").iterdir())
    for name, text in rows:
        assert (home / name).read_text("utf-8").strip() == text, name


@pytest.mark.parametrize(("path", "body"), QUOTED, ids=[q[0] for q in QUOTED])
def test_quoted_file_matches(path: str, body: str) -> None:
    actual = (ROOT / path).read_text("utf-8")
    assert body.rstrip("\n") == actual.rstrip("\n"), f"the docs' quote of {path} is stale"


def test_ci_runs_the_readme_test_command() -> None:
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", setup, flags=re.S)
    assert len(commands) == 2
    ci = (ROOT / ".ci/run").read_text("utf-8").strip().splitlines()
    assert ci[-1] == commands[1]


# Runnable examples ---------------------------------------------------------------------------


def test_pages_have_runnable_examples() -> None:
    assert {block.page for block in PYTHON} >= {"README.md", "docs/history.md"}


@pytest.mark.parametrize("block", PYTHON, ids=[b.name for b in PYTHON])
def test_python_block_runs_as_written(block: Block, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    for name in [name for name in os.environ if name.startswith("PIONEER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    exec(compile(block.body, block.name, "exec"), {"__name__": "__main__"})
    if block.prints is not None:
        assert capsys.readouterr().out == block.prints


@pytest.mark.parametrize("block", PYTHON, ids=[b.name for b in PYTHON])
def test_examples_open_the_configured_store(block: Block) -> None:
    # With PIONEER_STORE_URL set, an example that opened a path would write to SQLite.
    assert not re.search(r"\b(SqliteStore|PostgresStore)\(", block.body), block.name
    for opened in re.findall(r"\b(open_store|Agent)\(([^,)]*)", block.body):
        assert opened == (opened[0], "settings"), block.name


def test_python_blocks_type_check(tmp_path: Path) -> None:
    # A caller's view of the typed API: strict, the package's own modules checked only as
    # far as the examples use them (their errors are the package's mypy run's business),
    # and no pydantic plugin, which a caller cannot be assumed to have.
    files = []
    for number, block in enumerate(PYTHON):
        file = tmp_path / f"example_{number}.py"
        file.write_text(block.body, "utf-8")
        files.append(file)
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file=", "--follow-imports=silent",
         "--cache-dir", str(ROOT / ".mypy_cache" / "doc-examples"), "--no-error-summary",
         *map(str, files)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    report = result.stdout
    for number, block in enumerate(PYTHON):
        report = report.replace(f"example_{number}.py:", f"{block.page} (block at line "
                                f"{block.line}), line ")
    assert result.returncode == 0 and not result.stderr, report + result.stderr


# Reference facts -------------------------------------------------------------------------------


def _table(name: str, page_name: str) -> dict[str, list[str]]:
    return {row[0].strip("`"): row[1:] for row in table_rows(page_name, name)}


@pytest.mark.parametrize(("model", "page_name", "defaults"),
                         [(PromptCompileInput, "compile-input-and-manifest.md", True),
                          (PromptManifest, "compile-input-and-manifest.md", False)],
                         ids=["PromptCompileInput", "PromptManifest"])
def test_model_table_lists_its_fields(model: type[BaseModel], page_name: str,
                                      defaults: bool) -> None:
    rows = _table(model.__name__, page_name)
    assert list(rows) == list(model.model_fields)
    if defaults:
        for key, info in model.model_fields.items():
            expected = shown(info.get_default(call_default_factory=True))
            assert expected is None or rows[key][1] == expected, key


def _code_list(marker: str, text: str) -> list[str]:
    found = re.search(rf"<!-- {marker} -->\n(.*?)\n\n", text, flags=re.S)
    assert found is not None, f"no list {marker}"
    return re.findall(r"`([^`]+)`", found.group(1))


def test_diagnostic_codes_are_listed_in_order() -> None:
    codes = _code_list("diagnostic-codes", page("compile-input-and-manifest.md"))
    assert codes == list(get_args(DiagnosticCode))


def test_contribution_ids_are_listed() -> None:
    text = page("hooks-and-sections.md")
    assert _code_list("runtime-ids", text) == sorted(RUNTIME_BUILT_IN_IDS)
    assert _code_list("built-in-ids", text) == sorted(BUILT_IN_SECTION_IDS)


def test_permission_axes_are_listed_in_order() -> None:
    assert _code_list("permission-axes", page("hooks-and-sections.md")) == list(GUIDANCE_AXES)


def test_tool_domains_are_listed() -> None:
    found = re.search(r"<!-- tool-domains -->\n((?:\|.*\n)+)", page("explain.md"))
    assert found is not None
    rows = [line.split("|")[1:3] for line in found.group(1).splitlines()[2:]]
    listed = {domain.strip(" `"): tuple(re.findall(r"`([^`]+)`", tools)) for domain, tools in rows}
    assert list(listed.items()) == list(DEFAULT_TOOL_DOMAINS.items())


def test_every_command_is_documented() -> None:
    from pioneer import commands

    names = sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if m.name[0] != "_")
    table = page("cli.md").split("## Commands", 1)[1].split("\n## ", 1)[0]
    documented = sorted(set(re.findall(r"^\| `pioneer (\w+)", table, flags=re.M)))
    assert documented == names
    overview = README.split("## Command line", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^pioneer (\w+)", overview, flags=re.M) == sorted(names, key=[
        "init", "compile", "check", "inspect", "diff", "lock", "schema", "history", "recall",
        "explain"].index)



def _sqlite(path: Path, *statements: str, steps: int = len(MIGRATIONS)) -> None:
    """An SQLite store made with the first ``steps`` steps, then changed by ``statements``
    (or, with no steps, a plain SQLite file)."""
    if steps:
        with SqliteStore(path, migrations=MIGRATIONS[:steps]) as store:
            store.ensure_thread("demo")
    sqlite_exec(path, *statements)


def _postgres(server: Server, schema: str, url: str, *statements: str,
              steps: int = len(POSTGRES_MIGRATIONS)) -> None:
    """The PostgreSQL counterpart of _sqlite, in a fresh schema."""
    if steps:
        with PostgresStore(url, migrations=POSTGRES_MIGRATIONS[:steps]) as store:
            store.ensure_thread("demo")
    server.execute(schema, *statements)


#: Each row of the store-refusals table (docs/stores.md): how to make its SQLite file and
#: its PostgreSQL schema.
REFUSALS: dict[str, tuple[Callable[[Path], None], Callable[[Server, str, str], None]]] = {
    "no pioneer schema (another program's file, a schema without pioneer's tables)": (
        lambda path: _sqlite(path, "CREATE TABLE notes (body TEXT)", steps=0),
        lambda server, schema, url: _postgres(server, schema, url, steps=0)),
    "a negative version": (
        lambda path: _sqlite(path, "PRAGMA user_version = -1"),
        lambda server, schema, url: _postgres(server, schema, url,
                                              "UPDATE pioneer_schema SET version = -1")),
    "the latest version, one of its tables dropped": (
        lambda path: _sqlite(path, "DROP TABLE turn_rounds"),
        lambda server, schema, url: _postgres(server, schema, url, "DROP TABLE turn_rounds")),
    "an older version (the first two steps only)": (
        lambda path: _sqlite(path, steps=2),
        lambda server, schema, url: _postgres(server, schema, url, steps=2)),
    "a newer version (one past the latest)": (
        lambda path: _sqlite(path, f"PRAGMA user_version = {len(MIGRATIONS) + 1}"),
        lambda server, schema, url: _postgres(
            server, schema, url,
            f"UPDATE pioneer_schema SET version = {len(POSTGRES_MIGRATIONS) + 1}")),
}


def test_store_refusals_are_what_a_read_command_prints(
    tmp_path: Path, pg_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("PIONEER_")]:
        monkeypatch.delenv(name)
    text = page("stores.md")
    latest = re.search(r"latest schema is version (\d+) on SQLite and version (\d+) on\s+"
                       r"PostgreSQL", text)
    assert latest is not None
    assert latest.groups() == (str(len(MIGRATIONS)), str(len(POSTGRES_MIGRATIONS)))
    rows = _table("store-refusals", "stores.md")
    assert list(rows) == list(REFUSALS)
    for number, (found, (make_file, make_schema)) in enumerate(REFUSALS.items()):
        on_sqlite, on_postgres = (cell.strip("`") for cell in rows[found])
        path = tmp_path / f"case-{number}.db"
        make_file(path)
        assert run_cli("history", "demo", "--db", str(path)) == (
            1, "", f"{path}: {on_sqlite}\nerror: 1 problem\n"), found
        schema, url = pg_server.new_schema()
        try:
            make_schema(pg_server, schema, url)
            assert run_cli("history", "demo", "--db", url) == (
                1, "", f"{url}: {on_postgres}\nerror: 1 problem\n"), found
        finally:
            pg_server.drop_schema(schema)

# Code that points here -----------------------------------------------------------------------

SOURCES = sorted((ROOT / "pioneer").rglob("*.py"))


def _headings(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", path.read_text("utf-8"), flags=re.S | re.M)
    return {h.strip() for h in re.findall(r"^#+ (.*)$", text, flags=re.M)}


def test_code_points_to_docs_that_exist() -> None:
    problems = []
    for source in SOURCES:
        text, name = source.read_text("utf-8"), source.relative_to(ROOT).as_posix()
        if re.search(r"REFERENCE(\.md)? §|DESIGN\.md", text):
            problems.append(f"{name} cites a document outside the repository")
        for page_name in re.findall(r"\bdocs/([\w.-]+\.md)", text):
            if not (DOCS / page_name).is_file():
                problems.append(f"{name} points to docs/{page_name}, which is missing")
        for page_name, heading in re.findall(r'\bdocs/([\w.-]+\.md),[\s#:]+"([^"]+)"', text):
            if (DOCS / page_name).is_file() and heading not in _headings(DOCS / page_name):
                problems.append(f'{name} points to docs/{page_name}, "{heading}": no such heading')
    assert not problems, "\n".join(problems)


def test_quick_start_command_prints_the_golden(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    command = re.search(r"`(pioneer compile [^`]+)` prints the full text", README)
    assert command is not None
    shutil.copytree(ROOT / "tests/cases/quickstart", tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("PIONEER_")]:
        monkeypatch.delenv(name)
    out, err = io.StringIO(), io.StringIO()
    code = main(shlex.split(command.group(1))[1:], stdout=out, stderr=err)
    assert (code, err.getvalue()) == (0, "")
    expected = (tmp_path / "expected/full.txt").read_text("utf-8")
    assert out.getvalue().rstrip("\n") == expected.rstrip("\n")
