"""The post-turn memory extractor: its prompt, and strict parsing of the model's reply."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import jinja2
import pytest

from pioneer import PromptCompiler
from pioneer.episodic.extractor import (
    ExtractionError,
    MemoryExtraction,
    MemoryFact,
    memory_extraction_prompt,
    parse_memory_extraction,
    store_extraction,
)
from pioneer.files import builtin_dir
from pioneer.history.models import HistoryEntry
from pioneer.sections.tool_domains import DEFAULT_TOOL_DOMAINS


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[MemoryFact, ...], str, str]] = []

    def remember(self, facts: Sequence[MemoryFact], *, thread_id: str, turn_id: str) -> None:
        self.calls.append((tuple(facts), thread_id, turn_id))


@pytest.fixture(scope="module")
def env() -> jinja2.Environment:
    return PromptCompiler(count_tokens=False).templates.env


def entry(user: str | None, reply: str | None) -> HistoryEntry:
    return HistoryEntry(seq=1, turn_id="turn-1", thread_id="t1", user_item_id="u",
                        assistant_item_id="a", user_text=user, assistant_text=reply,
                        user_tokens=0, assistant_tokens=0)


def fact(scope: object = "user", category: object = "preference",
         content: object = "Prefers metric units.", **extra: object) -> dict[str, object]:
    return {"scope": scope, "category": category, "content": content, **extra}


def reply(data: object) -> str:
    return json.dumps(data, ensure_ascii=False)


# -- replies --------------------------------------------------------------------------


def test_valid_reply_is_stored() -> None:
    sink = RecordingSink()
    text = reply({"facts": [fact(), fact("workspace", "decision", "Deploys go through CI.")]})
    result = store_extraction(text, sink, thread_id="t1", turn_id="turn-1")
    assert result == MemoryExtraction(facts=[
        MemoryFact(scope="user", category="preference", content="Prefers metric units."),
        MemoryFact(scope="workspace", category="decision", content="Deploys go through CI."),
    ])
    assert sink.calls == [(tuple(result.facts), "t1", "turn-1")]  # type: ignore[union-attr]


def test_empty_list_is_valid_and_stores_nothing() -> None:
    sink = RecordingSink()
    assert store_extraction('{"facts": []}', sink, thread_id="t1", turn_id="turn-1") == (
        MemoryExtraction(facts=[]))
    assert sink.calls == []


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        ({"facts": [fact()], "notes": "x"}, ['reply: unknown key "notes"']),
        ({"facts": [fact(confidence=0.9, source="chat")]},
         ['facts[0]: unknown key "confidence", "source"']),
        ({"facts": [fact()], "x" * 60: 1},
         ['reply: unknown key "' + "x" * 37 + '..."']),
    ],
    ids=["top-level", "in-a-fact", "long-key"],
)
def test_extra_keys_are_refused(data: object, problems: list[str]) -> None:
    assert parse_memory_extraction(reply(data)) == ExtractionError("invalid", tuple(problems))


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        ({"facts": "Prefers tea."}, ["facts: expected array"]),
        ({"facts": [fact(content=7)]}, ["facts[0] → content: expected string"]),
        ({"facts": [fact(scope=["user"])]}, ["facts[0] → scope: expected string"]),
        ({"facts": [fact(category="mood")]},
         ["facts[0] → category: expected one of \"preference\", \"fact\", \"decision\", "
          '"goal", "constraint"']),
        ({"facts": ["Prefers tea."]}, ["facts[0]: expected object"]),
        ({"facts": [fact(content="  ")]}, ["facts[0] → content: must not be blank"]),
        ({"facts": [fact(content="x" * 281)]},
         ["facts[0] → content: longer than 280 characters"]),
        ({"facts": [fact()] * 21}, ["facts: more than 20 items"]),
        ({"facts": [{"scope": "user"}]}, ['facts[0]: missing key "category", "content"']),
        ({}, ['reply: missing key "facts"']),
        ([], ["reply: expected object"]),
        ({"facts": [fact(), fact(content=None)], "extra": 1},
         ['reply: unknown key "extra"', "facts[1] → content: expected string"]),
    ],
    ids=["facts-string", "content-number", "scope-list", "unknown-category", "fact-string",
         "blank-content", "long-content", "too-many", "missing-keys", "no-facts", "bare-list",
         "every-problem"],
)
def test_wrong_types_are_refused(data: object, problems: list[str]) -> None:
    sink = RecordingSink()
    result = store_extraction(reply(data), sink, thread_id="t1", turn_id="turn-1")
    assert result == ExtractionError("invalid", tuple(problems))
    assert sink.calls == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Sure! The user prefers metric units.", "line 1 column 1: expecting value"),
        ('```json\n{"facts": []}\n```', "line 1 column 1: expecting value"),
        ('{"facts": []} and that is all', "line 1 column 15: extra data"),
        ("", "line 1 column 1: expecting value"),
        ('{"facts": [], "facts": []}', 'duplicate key "facts"'),
        ('{"facts": [{"scope": NaN}]}', "NaN is not a JSON number"),
    ],
    ids=["prose", "code-fence", "trailing-text", "empty", "duplicate-key", "nan"],
)
def test_replies_that_are_not_json_are_refused(text: str, problem: str) -> None:
    sink = RecordingSink()
    result = store_extraction(text, sink, thread_id="t1", turn_id="turn-1")
    assert result == ExtractionError("not_json", (problem,))
    assert sink.calls == []


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ("[" * 100_000 + "]" * 100_000,
         ExtractionError("not_json", ("lists or objects nested too deeply to read",))),
        ('{"facts": [' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "]}",
         ExtractionError("not_json", ("lists or objects nested too deeply to read",))),
        ('{"facts": [' + "[" * 500 + "]" * 500 + "]}",
         ExtractionError("invalid", ("reply: lists or objects nested deeper than 32",))),
        ('{"facts": [], "n": ' + "7" * 5000 + "}",
         ExtractionError("not_json", ("a number of 5000 digits (at most 100)",))),
        ('{"facts": [-' + "1" * 101 + "]}",
         ExtractionError("not_json", ("a number of 101 digits (at most 100)",))),
    ],
    ids=["deep-list", "deep-object", "deeper-than-the-limit", "5000-digits", "101-digits"],
)
def test_hostile_replies_are_refused_never_raised(text: str, result: ExtractionError) -> None:
    sink = RecordingSink()
    assert store_extraction(text, sink, thread_id="t1", turn_id="turn-1") == result
    assert sink.calls == []


def test_a_reply_at_the_nesting_limit_is_checked_as_usual() -> None:
    text = '{"facts": [' + "[" * 29 + "]" * 29 + "]}"  # 32 levels with the object and list
    assert parse_memory_extraction(text) == ExtractionError("invalid",
                                                            ("facts[0]: expected object",))


def test_lone_surrogates_in_facts_become_replacement_characters() -> None:
    result = parse_memory_extraction('{"facts": [' + json.dumps(fact(content="Likes \ud800 tea."))
                                     + "]}")
    assert isinstance(result, MemoryExtraction)
    assert result.facts[0].content == "Likes \ufffd tea."


def test_error_message_names_the_kind_and_never_quotes_the_reply() -> None:
    secret = "my password is hunter2"
    result = parse_memory_extraction(reply({"facts": [fact(content=[secret])]}))
    assert isinstance(result, ExtractionError)
    assert result.message == (
        "memory extraction reply does not match the schema: facts[0] → content: expected string"
    )
    prose = parse_memory_extraction(secret)
    assert isinstance(prose, ExtractionError)
    assert prose.message == "memory extraction reply is not JSON: line 1 column 1: expecting value"


# -- the prompt -----------------------------------------------------------------------


def test_prompt_holds_the_turn_as_text(env: jinja2.Environment) -> None:
    prompt = memory_extraction_prompt(
        entry("I live in Oslo {{ 7 * 7 }} {% raw %}", "Noted: Oslo."), env)
    assert "<user>\nI live in Oslo {{ 7 * 7 }} {% raw %}\n</user>" in prompt
    assert "<assistant>\nNoted: Oslo.\n</assistant>" in prompt


def test_prompt_offers_no_tools_and_lists_the_schema_values(env: jinja2.Environment) -> None:
    prompt = memory_extraction_prompt(entry("hi", "hello"), env)
    assert not [tool for tool in DEFAULT_TOOL_DOMAINS["memory"] if tool in prompt]
    assert "tool" not in prompt.lower()
    schema = json.loads((builtin_dir("schemas") / "memory_extraction.schema.json").read_text())
    fact_schema = schema["$defs"]["MemoryFact"]["properties"]
    for value in fact_schema["scope"]["enum"] + fact_schema["category"]["enum"]:
        assert f"- {value}: " in prompt


def test_prompts_example_reply_is_valid(env: jinja2.Environment) -> None:
    prompt = memory_extraction_prompt(entry("hi", "hello"), env)
    examples = re.findall(r'^(\{"facts".*\})$', prompt, flags=re.M)
    assert examples
    for example in examples:
        assert isinstance(parse_memory_extraction(example), MemoryExtraction)


def test_long_turns_are_cut(env: jinja2.Environment) -> None:
    prompt = memory_extraction_prompt(entry("u" * 10_000, None), env)
    body = prompt.split("<user>\n", 1)[1].split("\n</user>", 1)[0]
    assert len(body) == 6000
    assert body.endswith("...[truncated]")
    assert "<assistant>\n\n</assistant>" in prompt


def test_the_extractor_is_not_part_of_any_assistant_profile() -> None:
    for profile in Path(builtin_dir("profiles")).glob("*.toml"):
        assert "memory_extraction" not in profile.read_text("utf-8"), profile.name
