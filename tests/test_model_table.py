"""The model table: built-in rows, lookups by name, a deployment's own file, its errors."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
from doc_pages import example, page
from support import run_cli as run

from pioneer import ChatMessage, ChatRequest, InputError
from pioneer.audit import plan_cache, request_blocks
from pioneer.providers import (
    load_model_table,
    minimum_cacheable_tokens,
    model_facts,
    to_anthropic,
    using_model_table,
)
from pioneer.providers.models import builtin_model_table
from pioneer.resources import builtin_dir, load_schema

TABLE = builtin_dir("models") / "models.toml"


def test_the_built_in_table_validates_against_its_schema() -> None:
    data = tomllib.loads(TABLE.read_text("utf-8"))
    jsonschema.Draft202012Validator(load_schema("models.schema.json")).validate(data)
    assert data["models"] and data["families"]
    for row in [*data["models"], *data["families"]]:
        assert row["source"] and row["source_date"], row


def test_every_built_in_row_is_complete() -> None:
    table = builtin_model_table()
    for name in table.model_names():
        facts = model_facts(name)
        assert facts.matched and facts.row == name
        assert facts.context_window > 0 and facts.source and facts.source_date


#: Anthropic's minimum cacheable lengths as its prompt caching page lists them (2026-10).
ANTHROPIC_MINIMUMS = {
    "claude-fable-5-1": 512, "claude-mythos-5-1": 512, "claude-opus-5-5": 512,
    "claude-opus-5": 512, "claude-sonnet-5-5": 512, "claude-fable-5": 512,
    "claude-mythos-5": 512, "claude-mythos-preview": 2048, "claude-opus-4-7": 2048,
    "claude-sonnet-5": 1024, "claude-opus-4-8": 1024, "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024, "claude-opus-4-1": 1024, "claude-opus-4": 1024,
    "claude-sonnet-4": 1024, "claude-3-7-sonnet": 1024, "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096, "claude-haiku-4-5": 4096, "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}


@pytest.mark.parametrize(("model", "minimum"), ANTHROPIC_MINIMUMS.items())
def test_anthropic_minimums(model: str, minimum: int) -> None:
    assert minimum_cacheable_tokens(model) == minimum
    assert model_facts(model).matched


@pytest.mark.parametrize(("model", "minimum"), [
    ("gemini-2.5-pro", 2048), ("gemini-2.5-flash", 2048), ("gemini-3.5-flash", 4096),
    ("gemini-3.1-pro-preview", 4096), ("gemini-4-argon", 4096),
])
def test_gemini_implicit_minimums(model: str, minimum: int) -> None:
    assert model_facts(model, "gemini").min_cacheable_tokens == minimum


@pytest.mark.parametrize(("model", "prefill"), [
    ("claude-opus-4-5", True), ("claude-haiku-4-5", True), ("claude-sonnet-4-5", True),
    ("claude-sonnet-4-6", False), ("claude-opus-4-6", False), ("claude-opus-4-7", False),
    ("claude-mythos-preview", False), ("claude-opus-5", False), ("claude-fable-5-2", False),
])
def test_claude_4_6_and_later_refuse_a_prefill(model: str, prefill: bool) -> None:
    assert model_facts(model).prefill_allowed is prefill


@pytest.mark.parametrize(("name", "row"), [
    ("claude-opus-4-5-20251101", "claude-opus-4-5"),
    ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
    ("anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
    ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
    ("claude-opus-4@20250514", "claude-opus-4"),
    ("Claude-Sonnet-4-6", "claude-sonnet-4-6"),
    ("gpt-5-2025-08-07", "gpt-5"),
    ("openai/gpt-5.6-sol", "gpt-5.6-sol"),
    ("models/gemini-2.5-pro", "gemini-2.5-pro"),
])
def test_snapshots_and_provider_spellings_find_their_row(name: str, row: str) -> None:
    facts = model_facts(name)
    assert (facts.matched, facts.row, facts.model) == (True, row, name)


@pytest.mark.parametrize(("name", "family", "style"), [
    ("claude-fable-5-2", "claude-fable", "cache_control"),
    ("claude-haiku-5-5", "claude-haiku", "cache_control"),
    ("claude-opus-4-9", "claude-opus", "cache_control"),
    ("gpt-5.6-terra-pro", "gpt-5.6+", "prompt_cache_breakpoint"),
    ("gpt-5.7", "gpt-5.6+", "prompt_cache_breakpoint"),
    ("gpt-5.10-luna", "gpt-5.6+", "prompt_cache_breakpoint"),
    ("gpt-6.1-sol", "gpt-5.6+", "prompt_cache_breakpoint"),
    ("gpt-5.4", "gpt", "implicit"),
    ("gpt-5.1-mini", "gpt", "implicit"),
    ("o3", "gpt", "implicit"),
    ("gemini-3.8-flash", "gemini-3+", "implicit"),
    ("gemini-2.0-flash", "gemini-other", "implicit"),
    ("someone-elses-model", "anthropic", "cache_control"),
])
def test_an_unknown_model_falls_to_its_family_and_says_so(
    name: str, family: str, style: str,
) -> None:
    facts = model_facts(name)
    assert (facts.matched, facts.family, facts.breakpoint_style) == (False, family, style)
    assert facts.note == (f"model {name!r} is not in the model table; the facts of the "
                          f"{family} family are used (models/models.toml)")
    assert model_facts(ANTHROPIC_MINIMUMS.__iter__().__next__()).note is None


def test_a_provider_narrows_the_rows_to_its_own() -> None:
    # A name the other providers know gets this provider's catch-all row.
    facts = model_facts("gpt-5.6", "anthropic")
    assert (facts.provider, facts.family, facts.matched) == ("anthropic", "anthropic", False)
    assert model_facts("m", "openai-chat").family == "openai"
    assert model_facts("m", "openai-responses").cache_step_tokens == 128
    assert model_facts("m", "gemini").min_cacheable_tokens == 4096
    assert model_facts("gpt-5.6", "openai-chat").matched


def test_the_cache_plan_says_when_a_model_is_not_in_the_table() -> None:
    request = ChatRequest(model="claude-fable-5-2", messages=[ChatMessage.user("hi")])
    blocks = request_blocks("anthropic", request, to_anthropic(request))
    plan = plan_cache("anthropic", request.model, blocks)
    assert plan.minimum_tokens == 512
    assert plan.model_note == ("model 'claude-fable-5-2' is not in the model table; the "
                               "facts of the claude-fable family are used (models/models.toml)")
    known = plan_cache("anthropic", "claude-fable-5-1", blocks)
    assert known.model_note is None


# -- a deployment's own file ----------------------------------------------------------------

DEPLOYMENT = """\
# Acme's models: one the release does not know yet, and a minimum measured again.
[[models]]
model = "claude-sonnet-5-7"
family = "claude-sonnet"
min_cacheable_tokens = 768
source = "Anthropic release notes"
source_date = "2026-11-20"

[[models]]
model = "claude-sonnet-4-6"
min_cacheable_tokens = 2048
source = "measured by Acme"
source_date = 2026-11-21
"""


def test_a_deployment_file_adds_a_model_and_changes_a_minimum(tmp_path: Path) -> None:
    (tmp_path / "models.toml").write_text(DEPLOYMENT, "utf-8")
    table = load_model_table([tmp_path])  # a folder stands for its models.toml
    added = table.facts("claude-sonnet-5-7-20261120")
    assert (added.matched, added.min_cacheable_tokens, added.family) == (
        True, 768, "claude-sonnet")
    # The facts it leaves out come from its family's row.
    assert (added.prefill_allowed, added.cache_write_price, added.context_window) == (
        False, 1.25, 1_000_000)
    assert (added.source, added.source_date) == ("Anthropic release notes", "2026-11-20")
    assert added.origin == str(tmp_path / "models.toml")
    changed = table.facts("claude-sonnet-4-6")
    assert (changed.min_cacheable_tokens, changed.source_date) == (2048, "2026-11-21")
    assert changed.context_window == 1_000_000  # the rest of the built-in row stays
    # The built-in table is untouched, and the deployment's table answers inside the block.
    assert minimum_cacheable_tokens("claude-sonnet-4-6") == 1024
    with using_model_table(table):
        assert minimum_cacheable_tokens("claude-sonnet-4-6") == 2048
        assert model_facts("claude-sonnet-5-7").matched
    assert not model_facts("claude-sonnet-5-7").matched


def test_an_earlier_file_on_the_path_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    row = '[[models]]\nmodel = "claude-opus-4-7"\nmin_cacheable_tokens = {}\n' \
          'source = "x"\nsource_date = "2026-11"\n'
    first.write_text(row.format(3000), "utf-8")
    second.write_text(row.format(1000), "utf-8")
    assert load_model_table([first, second]).facts("claude-opus-4-7").min_cacheable_tokens == 3000


def test_a_deployment_family_is_tried_before_the_built_in_ones(tmp_path: Path) -> None:
    file = tmp_path / "models.toml"
    file.write_text(
        '[[families]]\nfamily = "acme-claude"\nprovider = "anthropic"\n'
        'match = "^claude-acme-"\ncontext_window = 50000\nmin_cacheable_tokens = 0\n'
        'prefill_allowed = true\ncache_write_price = 1.25\ncache_read_price = 0.1\n'
        'ttls = ["5m"]\nbreakpoint_style = "cache_control"\nsource = "Acme"\n'
        'source_date = "2026-11"\n', "utf-8")
    facts = load_model_table([file]).facts("claude-acme-7")
    assert (facts.family, facts.min_cacheable_tokens, facts.matched) == ("acme-claude", 0, False)


def test_the_setting_and_the_environment_name_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "acme.toml").write_text(DEPLOYMENT, "utf-8")
    monkeypatch.setenv("PIONEER_MODEL_PATH", str(tmp_path / "acme.toml"))
    assert minimum_cacheable_tokens("claude-sonnet-4-6") == 2048
    monkeypatch.delenv("PIONEER_MODEL_PATH")
    assert minimum_cacheable_tokens("claude-sonnet-4-6") == 1024


def test_compile_provider_reads_the_deployment_model_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A minimum lowered by the deployment's file lets the planner mark a short prefix."""
    (tmp_path / "models.toml").write_text(
        '[[models]]\nmodel = "claude-sonnet-4-6"\nmin_cacheable_tokens = 1\n'
        'source = "test"\nsource_date = "2026-11"\n', "utf-8")
    (tmp_path / "pioneer.toml").write_text('model_path = ["models.toml"]\n', "utf-8")
    monkeypatch.chdir(tmp_path)
    argv = ("compile", "--home", str(tmp_path / "home"), "--profile", "none", "--provider",
            "anthropic", "--model", "claude-sonnet-4-6", "--messages", "chat.json")
    (tmp_path / "chat.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    code, out, err = run(*argv)
    assert code == 0, err
    assert json.loads(out)["system"][0]["cache_control"] == {"type": "ephemeral"}
    (tmp_path / "pioneer.toml").write_text("", "utf-8")
    code, out, err = run(*argv)
    assert code == 0, err
    assert "cache_control" not in json.loads(out)["system"][0]


# -- a malformed file is a located error -----------------------------------------------------


def _error(tmp_path: Path, text: str) -> str:
    file = tmp_path / "models.toml"
    file.write_text(text, "utf-8")
    with pytest.raises(InputError) as caught:
        load_model_table([file])
    return str(caught.value).replace(str(file), "models.toml")


def test_a_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    assert _error(tmp_path, '[[models]]\nmodel = "x\n') == (
        "models.toml:2:11: illegal character '\\n' (TOML syntax)")


def test_schema_problems_name_the_line_the_row_and_the_key(tmp_path: Path) -> None:
    text = ('[[models]]\nmodel = "claude-sonnet-4-6"\nsource = "s"\nsource_date = "2026-11"\n'
            'min_cacheable_tokens = "many"\n\n'
            '[[models]]\nmodel = "claude-opus-4-7"\nsource = "s"\nsource_date = "late 2026"\n'
            'colour = "red"\n')
    assert _error(tmp_path, text) == (
        'models.toml:5: models[0] ("claude-sonnet-4-6") → min_cacheable_tokens: expected '
        "integer or null (got 'many')\n"
        'models.toml:10: models[1] ("claude-opus-4-7") → source_date: has the wrong form '
        "(got 'late 2026')\n"
        'models.toml:11: models[1] ("claude-opus-4-7") → colour: unknown key (known: '
        "breakpoint_style, cache_read_price, cache_step_tokens, cache_write_price, "
        "context_window, family, max_stop_sequences, min_cacheable_tokens, model, "
        "prefill_allowed, provider, source, source_date, ttls)\n"
        "error: 3 problems in models.toml")


def test_a_row_without_its_source_is_refused(tmp_path: Path) -> None:
    assert _error(tmp_path, '[[models]]\nmodel = "claude-opus-4-7"\nmin_cacheable_tokens = 9\n') \
        == ('models.toml:1: models[0] ("claude-opus-4-7"): missing key "source", '
            '"source_date"\nerror: 1 problem in models.toml')


def test_a_new_model_needs_a_family_or_every_fact(tmp_path: Path) -> None:
    text = ('[[models]]\nmodel = "acme-1"\nsource = "s"\nsource_date = "2026-11"\n\n'
            '[[models]]\nmodel = "acme-2"\nfamily = "acme"\nsource = "s"\n'
            'source_date = "2026-11"\n')
    assert _error(tmp_path, text) == (
        'models.toml:1: models[0] ("acme-1"): a new model needs family (the family row '
        "that gives the other facts) or provider, family, context_window, "
        "min_cacheable_tokens, prefill_allowed, cache_write_price, cache_read_price, ttls, "
        "breakpoint_style\n"
        'models.toml:8: models[1] ("acme-2") → family: unknown family \'acme\' (known: '
        "claude-fable, claude-mythos, claude-opus, claude-sonnet, claude-haiku, claude-3, "
        "anthropic, gpt-5.6+, gpt, openai, gemini-2.5, gemini-3+, gemini-other, gemini)\n"
        "error: 2 problems in models.toml")


def test_a_family_pattern_must_be_a_regular_expression(tmp_path: Path) -> None:
    text = ('[[families]]\nfamily = "claude-opus"\nmatch = "^claude-(opus"\nsource = "s"\n'
            'source_date = "2026-11"\n')
    assert _error(tmp_path, text) == (
        'models.toml:3: families[0] ("claude-opus") → match: not a regular expression: '
        "missing ), unterminated subpattern at position 8\n"
        "error: 1 problem in models.toml")


def test_the_cli_reports_a_malformed_deployment_file_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Named by --config: exit 1 and the located problem, never a traceback."""
    (tmp_path / "models.toml").write_text(
        '[[models]]\nmodel = "claude-sonnet-4-6"\nsource = "s"\nsource_date = "2026-11"\n'
        'min_cacheable_tokens = "many"\n', "utf-8")
    (tmp_path / "deploy.toml").write_text('model_path = ["models.toml"]\n', "utf-8")
    (tmp_path / "chat.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    monkeypatch.chdir(tmp_path)
    code, out, err = run("compile", "--config", "deploy.toml", "--home", "home", "--profile",
                         "none", "--provider", "anthropic", "--model", "claude-sonnet-4-6",
                         "--messages", "chat.json")
    assert (code, out) == (1, "")
    assert err == ('models.toml:5: models[0] ("claude-sonnet-4-6") → min_cacheable_tokens: '
                   "expected integer or null (got 'many')\nerror: 1 problem in models.toml\n")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_model_table([tmp_path / "nowhere.toml"])
    assert str(caught.value) == (
        f"{tmp_path / 'nowhere.toml'}: cannot read model table: No such file or directory")


# -- docs/providers.md states the table as it is ----------------------------------------


def _doc_rows(name: str) -> list[list[str]]:
    text = page("providers.md")
    found = re.search(rf"<!-- table: {name} -->\n((?:\|.*\n)+)", text)
    assert found is not None, f"no table {name} in docs/providers.md"
    return [[cell.strip() for cell in line.split("|")[1:-1]]
            for line in found.group(1).splitlines()[2:]]


def test_the_docs_list_every_model_row() -> None:
    data = tomllib.loads(TABLE.read_text("utf-8"))
    rows = _doc_rows("models")
    assert [row[0].strip("`") for row in rows] == [row["model"] for row in data["models"]]
    for row in rows:
        facts = model_facts(row[0].strip("`"))
        assert row[1:] == [facts.provider, facts.family, f"{facts.context_window:,}",
                           f"{facts.min_cacheable_tokens:,}",
                           "yes" if facts.prefill_allowed else "no", facts.breakpoint_style,
                           facts.source_date]


def test_the_docs_list_every_family_in_order() -> None:
    rows = _doc_rows("families")
    assert [row[0] for row in rows] == builtin_model_table().family_names()
    data = {row["family"]: row for row in tomllib.loads(TABLE.read_text("utf-8"))["families"]}
    for row in rows:
        family = data[row[0]]
        assert row[1] == family["provider"]
        assert row[3:6] == [f"{family['context_window']:,}",
                            f"{family['min_cacheable_tokens']:,}",
                            "yes" if family["prefill_allowed"] else "no"]
        assert row[8] == family["breakpoint_style"]
        assert row[10] == family["source_date"]


def test_the_docs_deployment_example_loads(tmp_path: Path) -> None:
    body, _ = example("models-deployment", "providers.md")
    (tmp_path / "models.toml").write_text(body, "utf-8")
    table = load_model_table([tmp_path / "models.toml"])
    assert table.facts("claude-sonnet-5-7").min_cacheable_tokens == 768
    assert table.facts("claude-sonnet-4-6").min_cacheable_tokens == 2048
