"""docs/profiles.md: its reference tables list exactly the models' keys and defaults, and
its table of built-in profiles their sections."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import pytest
from doc_pages import ROOT, page, shown
from pydantic import BaseModel

from pioneer.compile.declared import InputSpec
from pioneer.compile.derived import DerivedProfileSpec, SectionEdit
from pioneer.compile.profile import BudgetSpec, ContributionSpec, PoolSpec, ProfileSpec, SectionSpec

PROFILES = page("profiles.md")
TABLES = dict(re.findall(r"<!-- table: (\w+) -->\n((?:\|.*\n)+)", PROFILES))
MODELS: dict[str, tuple[type[BaseModel], set[str] | None]] = {
    "ProfileSpec": (ProfileSpec, None),
    "BudgetSpec": (BudgetSpec, None),
    "ContributionSpec": (ContributionSpec, None),
    "SectionSpec": (SectionSpec, None),
    "DerivedProfileSpec": (DerivedProfileSpec, None),
    "SectionEdit": (SectionEdit, {"remove", "replace", "before", "after"}),
    "InputSpec": (InputSpec, None),
}


def _rows(table: str) -> dict[str, str]:
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = cells[2]
    return rows


def _shown(value: Any) -> str | None:
    if isinstance(value, PoolSpec):
        return f"`{{ max_chars = {value.max_chars}, max_sections = {value.max_sections} }}`"
    return shown(value)  # None for a nested table: documented by its own table


def test_every_model_has_a_table() -> None:
    assert sorted(TABLES) == sorted(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_table_matches_model(name: str) -> None:
    model, only = MODELS[name]
    rows = _rows(TABLES[name])
    # a key is written as its alias where it has one (maxLength, as JSON Schema spells it)
    fields = {info.alias or key: info for key, info in model.model_fields.items()
              if only is None or key in only}
    assert sorted(rows) == sorted(fields)
    for key, info in fields.items():
        if info.is_required():
            assert rows[key].startswith("required"), key
        elif model is not DerivedProfileSpec:  # derived keys default to the base's values
            expected = _shown(info.get_default(call_default_factory=True))
            assert expected is None or rows[key] == expected, key


def test_built_in_profiles_table_lists_their_sections() -> None:
    found = re.search(r"<!-- builtin-profiles -->\n((?:\|.*\n)+)", PROFILES)
    assert found is not None
    rows = {cells[1].strip(" `"): re.findall(r"`([^`]+)`", cells[3])
            for cells in (line.split("|") for line in found.group(1).splitlines()[2:])}
    shipped = sorted(path.stem for path in (ROOT / "profiles").glob("*.toml"))
    assert sorted(rows) == shipped
    for name, ids in rows.items():
        spec = tomllib.loads((ROOT / "profiles" / f"{name}.toml").read_text("utf-8"))
        assert ids == [section["id"] for section in spec["sections"]], name
