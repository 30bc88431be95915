"""``load_settings``: the values of ``PioneerSettings``, without pydantic-settings when there
is nothing for it to read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from pydantic_settings import NoDecode

from pioneer import PioneerSettings, PromptCompiler
from pioneer.settings_values import SettingsValues, load_settings

OVERRIDES: list[dict[str, Any]] = [
    {},
    {"home": Path("h")},
    {"home": Path("h"), "profile_path": [Path("p")], "template_path": [Path("t"), Path("u")]},
    {"max_context_tokens": 1000, "summary_timeout": 1, "store_path": "s.db"},
]


@pytest.fixture(autouse=True)
def nothing_to_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("PIONEER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def _values(settings: BaseModel) -> tuple[object, ...]:
    return (settings.model_dump(), settings.model_fields_set, repr(settings).split("(", 1)[1])


@pytest.mark.parametrize("overrides", OVERRIDES)
def test_with_nothing_to_read_the_values_are_pioneer_settings_values(
    overrides: dict[str, Any],
) -> None:
    settings = load_settings(**overrides)
    assert type(settings) is SettingsValues
    assert _values(settings) == _values(PioneerSettings(**overrides))
    assert settings.database == PioneerSettings(**overrides).database


@pytest.mark.parametrize("name", ["PIONEER_HOME", "pioneer_home", "Pioneer_Home"])
def test_a_variable_in_any_case_is_read_by_pioneer_settings(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "from-env")
    settings = load_settings()
    assert type(settings) is PioneerSettings
    assert settings.home == Path("from-env")
    assert load_settings(home=Path("flag")).home == Path("flag")


def test_a_variable_pioneer_settings_ignores_still_goes_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PIONEER_SOMETHING_ELSE", "1")
    assert type(load_settings()) is PioneerSettings


def test_the_deployment_file_is_read_by_pioneer_settings(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text('max_context_tokens = 5\nprofile_path = ["p"]\n')
    settings = load_settings()
    assert type(settings) is PioneerSettings
    assert (settings.max_context_tokens, settings.profile_path) == (5, [Path("p")])


def test_a_deployment_folder_of_that_name_goes_through_pioneer_settings(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").mkdir()
    settings = load_settings()
    assert type(settings) is PioneerSettings
    assert _values(settings) == _values(SettingsValues())


def test_invalid_overrides_fail_alike() -> None:
    errors = []
    for model in (SettingsValues, PioneerSettings):
        with pytest.raises(ValidationError) as info:
            model(max_context_tokens=0, nope=1)
        errors.append([(e["loc"], e["msg"]) for e in info.value.errors()])
    assert errors[0] == errors[1]
    assert len(errors[0]) == 2


def test_pioneer_settings_has_the_same_fields() -> None:
    assert list(SettingsValues.model_fields) == list(PioneerSettings.model_fields)
    for name, field in SettingsValues.model_fields.items():
        other = PioneerSettings.model_fields[name]
        assert (field.annotation, field.default, field.default_factory, field.description) == (
            other.annotation, other.default, other.default_factory, other.description
        ), name
        assert field.metadata == [m for m in other.metadata if m is not NoDecode], name
        assert (NoDecode in other.metadata) == (name in {"profile_path", "template_path"}), name
    assert {**SettingsValues.model_json_schema(), "title": ""} == {
        **PioneerSettings.model_json_schema(), "title": ""
    }


def test_a_compiler_made_without_settings_reads_them() -> None:
    assert type(PromptCompiler().settings) is PioneerSettings
