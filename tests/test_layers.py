"""The package's stages import downwards only and no module imports itself back: the
import-linter contracts in pyproject.toml, and the whole module graph without a cycle.
The layout is the one docs/architecture.md draws: its folders, modules and layers are the
package's."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import grimp
from doc_pages import ROOT, page

PAGE = page("architecture.md")
# telemetry: the span helpers the compile and the turn stage use; files: the built-in
# files' folders and opening a file beneath a root (the compile and sections stages share
# it); documents: reading JSON and TOML with located errors; caches: the one cache type
# the stages keep their caches in; _version: the version, which --version prints without
# importing a stage. At most 12: a module several stages need sits here, one a stage owns
# sits in its folder.
BASICS = {"__init__", "__main__", "_version", "caches", "cli", "documents", "errors",
          "files", "settings", "telemetry", "text", "tokens"}


def test_the_contracts_are_kept() -> None:
    script = (
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_only_the_basics_sit_at_the_package_root() -> None:
    modules = {path.stem for path in (ROOT / "pioneer").glob("*.py")}
    assert modules <= BASICS, sorted(modules - BASICS)
    assert len(BASICS) <= 12


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The module graph's strongly connected components of more than one module (Tarjan's
    algorithm, iterative): each is a set of modules that import each other round."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(
                        graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back() -> None:
    """Every import counts: at run time, inside a function, or for type checking only."""
    graph = grimp.build_graph("pioneer", cache_dir=None)
    assert len(graph.modules) > 100
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(name)
    for importer, imported in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"),
                               ("p.d", "p.a")):
        graph.add_import(importer=importer, imported=imported)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def _contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers"]
    return list(contract["layers"])


def test_the_pages_layers_are_the_contracts() -> None:
    block = re.search(r"<!-- layers -->\n```text\n(.*?)```", PAGE, flags=re.S)
    assert block is not None
    assert block.group(1).splitlines() == _contract_layers()


def test_the_stages_table_names_every_stage_folder_once() -> None:
    table = re.search(r"<!-- table: stages -->\n((?:\|.*\n)+)", PAGE)
    assert table is not None
    folders = [re.findall(r"`(pioneer/\w+/)`", line)[0]
               for line in table.group(1).splitlines()[2:]]
    stages = {f"pioneer/{path.name}/" for path in (ROOT / "pioneer").iterdir()
              if (path / "__init__.py").is_file() and path.name != "commands"}
    assert sorted(folders) == sorted(stages)
    # in the order of the layers, top first
    layers = [layer for layer in _contract_layers() if layer.count(".") == 1 and "|" not in layer]
    order = [f"{layer.replace('.', '/')}/" for layer in layers]
    assert folders == [folder for folder in order if folder in folders]


def test_every_module_the_page_names_exists() -> None:
    named = set(re.findall(r"`(pioneer/[\w/]+(?:\.py|/))`", PAGE))
    assert len(named) > 20
    for path in sorted(named):
        assert (ROOT / path).exists(), path
