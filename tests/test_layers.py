"""The layout as docs/architecture.md draws it: the page's folders, modules and layers are
the package's, and the layers are the import-linter contract that the tests run."""

from __future__ import annotations

import re
import tomllib

from doc_pages import ROOT, page

PAGE = page("architecture.md")


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
