"""Settings: the order of sources is the precedence, the deployment file is read only when
asked for (or found by the command line), and every problem names where it was written."""

from __future__ import annotations

import io
import os
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from pioneer import InputError, PioneerError, PioneerSettings, PromptCompiler
from pioneer.cli import main


@pytest.fixture(autouse=True)
def nothing_to_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("PIONEER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_defaults() -> None:
    settings = PioneerSettings()
    assert (settings.home, settings.home_directory, settings.max_context_tokens) == (
        Path.home() / ".pioneer", ".pioneer", None
    )
    assert settings.database == Path.home() / ".pioneer" / "pioneer.db"


def test_home_directory_names_the_home_under_the_users_home() -> None:
    assert PioneerSettings(home_directory=".acme").home == Path.home() / ".acme"
    assert PioneerSettings(home_directory=".acme", home=Path("h")).home == Path("h")


def test_home_directory_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_HOME_DIRECTORY", ".acme")
    assert PioneerSettings().home == Path.home() / ".acme"


def test_precedence_is_overrides_then_environment_then_file_then_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pioneer.toml").write_text(
        "max_context_tokens = 5\nresponse_reserve_tokens = 1\nsummary_timeout = 2.5\n"
    )
    monkeypatch.setenv("PIONEER_MAX_CONTEXT_TOKENS", "6")
    monkeypatch.setenv("pioneer_response_reserve_tokens", "3")  # any case
    settings = PioneerSettings.load(max_context_tokens=7)
    assert (settings.max_context_tokens, settings.response_reserve_tokens,
            settings.summary_timeout, settings.summary_api_key_env) == (7, 3, 2.5,
                                                                         "OPENAI_API_KEY")


def test_the_deployment_file_is_found_from_a_subfolder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pioneer.toml").write_text('max_context_tokens = 5\nprofile_path = ["p"]\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    settings = PioneerSettings.load()
    assert settings.max_context_tokens == 5
    assert [path.resolve() for path in settings.profile_path] == [tmp_path / "p"]
    assert PioneerSettings.load(discover=False).max_context_tokens is None


def test_a_library_caller_reads_no_file_unless_asked(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text("max_context_tokens = 5\n")
    assert PioneerSettings().max_context_tokens is None
    assert PromptCompiler().settings.max_context_tokens is None
    assert PioneerSettings.load(tmp_path / "pioneer.toml").max_context_tokens == 5


def test_pioneer_config_names_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.toml").write_text("max_context_tokens = 9\n")
    monkeypatch.setenv("PIONEER_CONFIG", str(tmp_path / "elsewhere.toml"))
    assert PioneerSettings().max_context_tokens == 9
    monkeypatch.setenv("PIONEER_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(InputError, match=r"PIONEER_CONFIG names .*missing\.toml, which is not"):
        PioneerSettings()


def test_a_file_read_once_is_not_blamed_for_a_later_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere.toml").write_text("max_context_tokens = 9\n")
    monkeypatch.setenv("PIONEER_CONFIG", str(tmp_path / "elsewhere.toml"))
    assert PioneerSettings().max_context_tokens == 9
    monkeypatch.delenv("PIONEER_CONFIG")
    with pytest.raises(InputError) as info:
        PioneerSettings(max_context_tokens="many")
    assert str(info.value) == (
        "settings → max_context_tokens: Input should be a valid integer, unable to parse "
        "string as an integer")


def test_a_deployment_folder_of_that_name_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").mkdir()
    assert PioneerSettings.load().max_context_tokens is None


def _cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(list(args), stdout=io.StringIO(), stderr=err)
    return code, err.getvalue()


def test_an_unknown_key_is_named_at_its_line_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text(
        '# deployment\nmax_context_tokens = 5\nprofile_paths = ["p"]\nnope = 1\n'
    )
    assert _cli("check") == (1, (
        'pioneer.toml:3: profile_paths: unknown key (did you mean "profile_path"?)\n'
        'pioneer.toml:4: nope: unknown key (known: home, home_directory, '
        "profile_path, template_path, max_context_tokens, response_reserve_tokens, "
        "tool_result_clear_batch_tokens, summary_model, summary_base_url, "
        "summary_api_key_env, summary_timeout, "
        "summary_allow_http, store_path, dynamic_placement, truncate_low_water, "
        "keep_recent_tokens, history_tool_rounds, store_url, postgres_lock_timeout, "
        "postgres_statement_timeout, "
        "postgres_idle_in_transaction_timeout, clock_granularity, model_path, locked, "
        "lock_file, "
        "history_cache_bytes, token_cache_bytes, render_step_limit)\n"
        "error: 2 problems\n"
    ))


def test_a_wrong_value_is_named_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text(
        'max_context_tokens = "many"\n\nsummary_timeout = 0\n'
    )
    assert _cli("check") == (1, (
        "pioneer.toml:1: max_context_tokens: Input should be a valid "
        "integer, unable to parse string as an integer\n"
        "pioneer.toml:3: summary_timeout: Input should be greater than 0\n"
        "error: 2 problems\n"
    ))


def test_a_wrong_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_MAX_CONTEXT_TOKENS", "0")
    assert _cli("check") == (1, (
        "settings → max_context_tokens: Input should be greater than or equal to 1\n"
        "error: 1 problem\n"
    ))
    with pytest.raises(PioneerError):
        PromptCompiler()


def test_config_names_the_file_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "custom.toml").write_text("profile_path = [\"mine\"]\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "only.toml").write_text(
        'name = "only"\n[[sections]]\nid = "a"\ntitle = "A"\nstability = "stable"\n'
        'template = "assistant_safety.md.j2"\n'
    )
    out = io.StringIO()
    assert main(["check", "only", "--config", str(tmp_path / "custom.toml")],
                stdout=out, stderr=io.StringIO()) == 0
    assert out.getvalue() == "ok: 1 profile (only)\n"
    assert _cli("check", "--config", "missing.toml") == (
        1, "missing.toml: config file not found\nerror: 1 problem\n"
    )


def test_a_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text("max_context_tokens = \n")
    assert _cli("check") == (1, (
        "pioneer.toml:1:22: invalid value (TOML syntax)\nerror: 1 problem\n"
    ))


def _outcome(values: dict[str, object]) -> object:
    try:
        settings = PioneerSettings.load(discover=False, **values)
    except InputError as error:
        return str(error)
    return settings.model_dump(), settings.model_fields_set


_VALUES = st.fixed_dictionaries({}, optional={
    "home": st.sampled_from([None, "h", Path("~/x"), 3]),
    "home_directory": st.sampled_from([".acme", "", 4]),
    "profile_path": st.sampled_from([[], ["a", Path("b")], "a" + os.pathsep + "b", '["c"]', "[1"]),
    "max_context_tokens": st.sampled_from([1, 0, "7", "many"]),
    "summary_timeout": st.sampled_from([0.5, 0, "2.5"]),
    "dynamic_placement": st.sampled_from(["system", "cache-first", "top"]),
    "store_url": st.sampled_from([None, "postgresql://db", "mysql://db"]),
    "nope": st.just(1),
})


@hypothesis_settings(max_examples=60, deadline=None)
@given(values=_VALUES)
def test_with_nothing_to_read_the_model_gives_what_the_sources_would(
    values: dict[str, object],
) -> None:
    # With nothing to read, pydantic-settings is left out; a variable it ignores makes it
    # read the sources, which then add nothing: the values and problems are the same.
    direct = _outcome(values)
    with mock.patch.dict(os.environ, {"PIONEER_UNUSED": "1"}):
        assert _outcome(values) == direct
