"""The model table: built-in rows, lookups by name, a deployment's own file, its errors."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
from doc_pages import example, table_rows
from support import run_cli as run

from pioneer import InputError
from pioneer.audit import plan_cache, request_blocks
from pioneer.files import builtin_dir, load_schema
from pioneer.providers import (
    ChatMessage,
    ChatRequest,
    load_model_table,
    minimum_cacheable_tokens,
    model_facts,
    to_anthropic,
    using_model_table,
)
from pioneer.providers.models import builtin_model_table
from pioneer.tokens import TOKENIZERS, counter_for

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
        "prefill_allowed, provider, source, source_date, token_ratio, token_ratio_date, "
        "token_ratio_source, tokenizer, ttls)\n"
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
        "anthropic, gpt-5.6+, gpt-pre-4o, gpt, openai, gemini-2.5, gemini-3+, gemini-other, "
        "gemini)\n"
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


def test_the_docs_list_every_model_row() -> None:
    data = tomllib.loads(TABLE.read_text("utf-8"))
    rows = table_rows("providers.md", "models")
    assert [row[0].strip("`") for row in rows] == [row["model"] for row in data["models"]]
    for row in rows:
        facts = model_facts(row[0].strip("`"))
        assert row[1:] == [facts.provider, facts.family, f"{facts.context_window:,}",
                           f"{facts.min_cacheable_tokens:,}",
                           "yes" if facts.prefill_allowed else "no", facts.breakpoint_style,
                           facts.source_date]


def test_the_docs_list_every_family_in_order() -> None:
    rows = table_rows("providers.md", "families")
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


# -- how each model counts tokens -------------------------------------------------------------


@pytest.mark.parametrize(("name", "tokenizer", "ratio"), [
    # OpenAI: o200k from gpt-4o on (snapshots and provider spellings find the row)
    ("gpt-5.1", "o200k", 1.0), ("gpt-5.1-2025-11-13", "o200k", 1.0),
    ("openai/gpt-4o-2024-08-06", "o200k", 1.0), ("gpt-4o-mini", "o200k", 1.0),
    ("gpt-4.1", "o200k", 1.0), ("gpt-5.6-sol", "o200k", 1.0), ("gpt-6.1-sol", "o200k", 1.0),
    ("o3", "o200k", 1.0), ("gpt-4.5-preview", "o200k", 1.0), ("chatgpt-4o-latest", "o200k", 1.0),
    # before gpt-4o: cl100k
    ("gpt-4", "cl100k", 1.0), ("gpt-4-turbo-2024-04-09", "cl100k", 1.0),
    ("gpt-4-0613", "cl100k", 1.0), ("gpt-3.5-turbo", "cl100k", 1.0),
    # Claude before Opus 4.7, by row and by family
    ("claude-opus-4-6", "cl100k", 1.3), ("Claude-Sonnet-4-6", "cl100k", 1.3),
    ("anthropic.claude-opus-4-1-20250805-v1:0", "cl100k", 1.3),
    ("claude-3-5-haiku-latest", "cl100k", 1.3), ("claude-3-opus-20240229", "cl100k", 1.3),
    # Claude Opus 4.7 and later, the 5.x rows, and the families' unknown (new) names
    ("claude-opus-4-7", "cl100k", 1.6), ("us.anthropic.claude-opus-4-8-v1:0", "cl100k", 1.6),
    ("claude-sonnet-5-5", "cl100k", 1.6), ("claude-mythos-preview", "cl100k", 1.6),
    ("claude-fable-5-2", "cl100k", 1.6), ("claude-haiku-5-5", "cl100k", 1.6),
    # Gemini
    ("models/gemini-2.5-pro", "cl100k", 1.1), ("gemini-3.8-flash", "cl100k", 1.1),
    ("gemini-2.0-flash", "cl100k", 1.2),
])
def test_each_model_names_its_tokenizer_and_prior_ratio(
    name: str, tokenizer: str, ratio: float,
) -> None:
    facts = model_facts(name)
    assert (facts.tokenizer, facts.token_ratio) == (tokenizer, ratio)
    assert facts.token_ratio_source and re.fullmatch(r"\d{4}-\d{2}(-\d{2})?",
                                                      facts.token_ratio_date)


def test_every_built_in_row_resolves_a_tokenizer_the_counters_know() -> None:
    table = builtin_model_table()
    for name in table.model_names():
        facts = model_facts(name)
        assert facts.tokenizer in TOKENIZERS, name
        assert counter_for(facts.tokenizer).count("hello world") == 2
        assert 1.0 <= facts.token_ratio <= 1.7, name
    data = tomllib.loads(TABLE.read_text("utf-8"))
    for family in data["families"]:  # every family gives its prior itself
        assert {"tokenizer", "token_ratio", "token_ratio_source", "token_ratio_date"} <= set(
            family), family["family"]


@pytest.mark.parametrize(("provider", "tokenizer", "ratio"), [
    ("anthropic", "cl100k", 1.7), ("openai-chat", "cl100k", 1.05),
    ("openai-responses", "cl100k", 1.05), ("gemini", "cl100k", 1.2),
])
def test_a_catch_all_row_takes_the_cautious_prior(
    provider: str, tokenizer: str, ratio: float,
) -> None:
    facts = model_facts("someone-elses-model", provider)
    assert (facts.matched, facts.tokenizer, facts.token_ratio) == (False, tokenizer, ratio)
    # every other row of the provider counts no more than its catch-all does
    table = builtin_model_table()
    rows = [model_facts(name) for name in table.model_names()]
    assert max(row.token_ratio for row in rows if row.provider == facts.provider) <= ratio


def test_the_current_example_models_are_in_the_table() -> None:
    """The models examples/agent_loop.py and the docs use carry no "not in the model table"
    notice."""
    for name in ("gpt-5.1", "gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"):
        facts = model_facts(name)
        assert (facts.matched, facts.note) == (True, None), name
    assert model_facts("gpt-5.1").context_window == 400_000
    assert (model_facts("gpt-4o-mini").context_window,
            model_facts("gpt-4o-mini").cache_read_price) == (128_000, 0.5)


def test_a_deployment_sets_its_own_ratio(tmp_path: Path) -> None:
    (tmp_path / "models.toml").write_text(
        '[[models]]\nmodel = "claude-opus-4-7"\ntoken_ratio = 1.45\n'
        'token_ratio_source = "measured on our traffic"\ntoken_ratio_date = 2026-11-30\n'
        'source = "ours"\nsource_date = "2026-11"\n\n'
        '[[models]]\nmodel = "acme-gpt"\nfamily = "gpt-pre-4o"\ntokenizer = "o200k"\n'
        'token_ratio = 1.0\ntoken_ratio_source = "Acme"\ntoken_ratio_date = "2026-11"\n'
        'source = "Acme"\nsource_date = "2026-11"\n\n'
        '[[models]]\nmodel = "acme-claude"\nfamily = "claude-3"\nsource = "Acme"\n'
        'source_date = "2026-11"\n\n'
        '[[families]]\nfamily = "acme-gemini"\nprovider = "gemini"\nmatch = "^acme-gem-"\n'
        'context_window = 50000\nmin_cacheable_tokens = 0\nprefill_allowed = false\n'
        'cache_write_price = 1.0\ncache_read_price = 0.1\nttls = []\n'
        'breakpoint_style = "implicit"\nsource = "Acme"\nsource_date = "2026-11"\n', "utf-8")
    table = load_model_table([tmp_path])
    changed = table.facts("claude-opus-4-7")
    assert (changed.tokenizer, changed.token_ratio, changed.token_ratio_source,
            changed.token_ratio_date) == ("cl100k", 1.45, "measured on our traffic",
                                          "2026-11-30")
    assert changed.min_cacheable_tokens == 2048  # the rest of the built-in row stays
    added = table.facts("acme-gpt")
    assert (added.tokenizer, added.token_ratio, added.cache_step_tokens) == ("o200k", 1.0, 128)
    # a model row without its own takes its family's; a new family, its provider's catch-all
    assert (table.facts("acme-claude").token_ratio, table.facts("acme-claude").tokenizer) == (
        1.3, "cl100k")
    family = table.facts("acme-gem-1")
    assert (family.family, family.tokenizer, family.token_ratio) == ("acme-gemini", "cl100k", 1.2)
    assert family.token_ratio_source == model_facts("x", "gemini").token_ratio_source
    assert model_facts("claude-opus-4-7").token_ratio == 1.6  # the built-in table untouched


def test_bad_token_facts_are_located(tmp_path: Path) -> None:
    text = ('[[models]]\nmodel = "claude-opus-4-7"\ntoken_ratio = 5.0\n'
            'token_ratio_source = "x"\ntoken_ratio_date = "2026-11"\nsource = "s"\n'
            'source_date = "2026-11"\n\n'
            '[[models]]\nmodel = "gpt-4o"\ntokenizer = "p50k"\ntoken_ratio = 0.1\n'
            'token_ratio_source = "x"\ntoken_ratio_date = "late 2026"\nsource = "s"\n'
            'source_date = "2026-11"\n')
    assert _error(tmp_path, text) == (
        'models.toml:3: models[0] ("claude-opus-4-7") → token_ratio: must be ≤ 3.0 (got 5.0)\n'
        'models.toml:11: models[1] ("gpt-4o") → tokenizer: expected one of "cl100k", "o200k" '
        "(got 'p50k')\n"
        'models.toml:12: models[1] ("gpt-4o") → token_ratio: must be ≥ 0.3 (got 0.1)\n'
        'models.toml:14: models[1] ("gpt-4o") → token_ratio_date: has the wrong form '
        "(got 'late 2026')\n"
        "error: 4 problems in models.toml")


def test_a_ratio_without_its_source_is_refused(tmp_path: Path) -> None:
    text = ('[[models]]\nmodel = "claude-opus-4-7"\ntoken_ratio = 1.45\nsource = "s"\n'
            'source_date = "2026-11"\n\n'
            '[[families]]\nfamily = "gpt"\ntokenizer = "cl100k"\ntoken_ratio_date = "2026-11"\n'
            'source = "s"\nsource_date = "2026-11"\n')
    assert _error(tmp_path, text) == (
        'models.toml:3: models[0] ("claude-opus-4-7") → token_ratio: needs token_ratio_source '
        "and token_ratio_date too: where the ratio comes from and when it was measured or "
        "read\n"
        'models.toml:9: families[0] ("gpt") → tokenizer: needs token_ratio_source too: where '
        "the ratio comes from and when it was measured or read\n"
        "error: 2 problems in models.toml")


def test_the_docs_list_every_prior() -> None:
    """docs/providers.md's table of priors states each row's tokenizer, ratio and date."""
    data = tomllib.loads(TABLE.read_text("utf-8"))
    stated: dict[str, tuple[str, float, str]] = {}
    for row in table_rows("providers.md", "token-priors"):
        names = re.sub(r" \(.*?\)", "", row[0]).replace(" families", "").replace(
            " family", "")
        for name in re.split(r",\s*", names):
            stated[name] = (row[1], float(row[2]), row[3])
    for row in data["families"]:
        facts = (row["tokenizer"], row["token_ratio"], row["token_ratio_date"])
        assert stated.pop(row["family"]) == facts, row["family"]
    for row in data["models"]:
        if "token_ratio" in row:
            facts = (row["tokenizer"], row["token_ratio"], row["token_ratio_date"])
            assert stated.pop(row["model"]) == facts, row["model"]
    assert not stated
