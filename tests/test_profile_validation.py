"""Profile validation: what the pydantic models accept (strict) the JSON Schema generated
from them accepts, so a valid profile is accepted without importing jsonschema, and an
invalid one gets jsonschema's located, worded problems."""

from __future__ import annotations

import copy
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from pioneer import PromptCompiler, documents
from pioneer.compile.compiler import CONDITION_NAMES
from pioneer.compile.derived import DerivedProfileSpec
from pioneer.compile.profile import ProfileSpec, TextLocator, schema_problems
from pioneer.files import load_schema

ROOT = Path(__file__).resolve().parent.parent
VALIDATOR = jsonschema.Draft202012Validator(load_schema("profile.schema.json"))
PROFILES = sorted([*ROOT.glob("profiles/*.toml"), *ROOT.glob("tests/cases/*/profiles/**/*.toml")])
DATA = [tomllib.loads(path.read_text("utf-8")) for path in PROFILES]


def _model(data: Any) -> type[BaseModel]:
    return DerivedProfileSpec if isinstance(data, dict) and "extends" in data else ProfileSpec


def _model_accepts(data: Any) -> bool:
    try:
        _model(data).model_validate(data, strict=True)
    except ValidationError:
        return False
    return True


def test_profiles_are_found() -> None:
    assert len(PROFILES) >= 3


@pytest.mark.parametrize("data", DATA, ids=[str(p.relative_to(ROOT)) for p in PROFILES])
def test_committed_profiles_get_the_same_answer(data: dict[str, Any]) -> None:
    assert _model_accepts(data) is VALIDATOR.is_valid(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5, -0.0])
    | st.sampled_from(["", " ", "a b", "a\x00b", "stable", "dynamic", "x.md.j2", "text",
                       "slot", "2"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "title", "stability", "template", "when", "extra"]), inner,
        max_size=3,
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.integers(0, len(DATA) - 1), value=json_values,
       action=st.sampled_from(["replace", "delete", "add"]))
def test_mutated_profiles_get_the_same_answer(
    data: st.DataObject, which: int, value: Any, action: str
) -> None:
    profile = copy.deepcopy(DATA[which])
    path = data.draw(st.sampled_from(_paths(profile)[1:]))
    parent = profile
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent["unknown_key"] = value
    else:
        parent.append(value)
    # What the model accepts the schema accepts, so skipping jsonschema is safe; the model
    # may refuse a little more (an integral float such as 1.0 for an integer), and then the
    # profile still gets its problems, worded from the model's errors.
    if _model_accepts(profile):
        assert VALIDATOR.is_valid(profile)
    else:
        assert list(schema_problems(profile, TextLocator("p.toml", "", profile), _model(profile)))


def test_loading_a_valid_profile_does_not_import_jsonschema() -> None:
    script = (
        "import sys\nfrom pioneer.compile.compiler import PromptCompiler\n"
        "PromptCompiler().load_profile('full')\nprint('jsonschema' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("derived", [False, True], ids=["standalone", "extends"])
def test_a_sound_profile_is_loaded_without_locating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, derived: bool,
) -> None:
    # A line is found only for a problem: before, each condition's line was looked up
    # in the whole file as it was checked, which made loading quadratic in the sections.
    head = 'name = "many"\nextends = "full"\n' if derived else 'name = "many"\n'
    sections = "".join(
        f'\n[[sections]]\nid = "s{i}"\ntitle = "S{i}"\nstability = "stable"\n'
        f'template = "assistant_safety.md.j2"\nwhen = "extra_system != \'v{i}\'"\n'
        + (f'after = "{f"s{i - 1}" if i else "assistant_safety"}"\n' if derived else "")
        for i in range(200))
    (tmp_path / "many.toml").write_text(head + sections)
    built: list[str] = []
    build = documents.TomlLines._build

    def counted(self: documents.TomlLines) -> Any:
        built.append(self.text)
        return build(self)

    monkeypatch.setattr(documents.TomlLines, "_build", counted)
    compiler = PromptCompiler(profile_path=[tmp_path])
    assert len(compiler.load_profile("many").spec.sections) == 200 + 19 * derived
    assert compiler.check(["many"]) == [] and built == []
    (tmp_path / "many.toml").write_text(head + sections.replace("'v150'", "'v150' and nope"))
    problems = PromptCompiler(profile_path=[tmp_path]).check(["many"])[0].problems
    assert [(p.line, p.message) for p in problems] == [
        (3 + derived + 150 * (7 + derived) + 5, '"nope" is undefined (not in the compile '
         f'context, which holds {", ".join(sorted(CONDITION_NAMES))})')]
    assert len(built) == 1  # the file's lines, indexed once for the problem
