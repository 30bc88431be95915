"""docs/agent.md is the runner's reference: its tables list exactly the arguments, fields
and errors the code has, and every type in Agent's signature is importable from pioneer.
(The page's example runs, and type-checks, with every other docs example in test_docs.)"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from typing import Any

import pytest
from doc_pages import example, page, table_rows

import pioneer
from pioneer import Agent, FinishedTurn, PioneerError, Step

TEXT = page("agent.md")


def _rows(name: str) -> dict[str, list[str]]:
    return {row[0].strip("`"): row[1:] for row in table_rows("agent.md", name)}


def _parameters(function: Any) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


@pytest.mark.parametrize(("table", "function"), [("Agent", Agent.__init__),
                                                 ("Agent.turn", Agent.turn)])
def test_the_argument_tables_are_the_signatures(table: str, function: Any) -> None:
    assert list(_rows(table)) == _parameters(function)


def test_the_field_tables_are_the_dataclasses() -> None:
    properties = [name for name, value in vars(Step).items() if isinstance(value, property)]
    assert list(_rows("Step")) == [f.name for f in dataclasses.fields(Step)] + properties
    assert list(_rows("FinishedTurn")) == [f.name for f in dataclasses.fields(FinishedTurn)]


def test_the_turn_table_names_every_public_member() -> None:
    section = TEXT.split("## `Turn`", 1)[1].split("\n## ", 1)[0]
    public = [name for name in vars(pioneer.Turn) if not name.startswith("_")]
    for name in public:
        assert f"`turn.{name}" in section, name


def test_the_errors_table_names_pioneer_errors() -> None:
    named = [name for cell in _rows("errors") for name in re.findall(r"\w+", cell)]
    assert "ThreadConflictError" in named and "ProviderError" in named
    for name in named:
        error = getattr(pioneer, name)
        assert issubclass(error, PioneerError), name
    assert issubclass(pioneer.ThreadConflictError, pioneer.StoreError)


def _names(annotation: Any) -> set[str]:
    """The named types an annotation is made of (Literal aliases by their alias name)."""
    found: set[str] = set()
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return found
    if origin is None:
        if isinstance(annotation, type) and annotation.__module__.startswith("pioneer"):
            found.add(annotation.__name__)
        return found
    for argument in typing.get_args(annotation):
        found |= _names(argument)
    return found


def test_every_type_in_agents_signature_is_importable_from_pioneer() -> None:
    module = inspect.getmodule(Agent)
    assert module is not None
    hints = typing.get_type_hints(Agent.__init__, vars(module))
    names = set().union(*(_names(hint) for hint in hints.values()))
    # Literal aliases, by the names the signature's source uses for them.
    source = inspect.getsource(Agent.__init__)
    expected = {"ProviderName", "SystemRole", "HistoryToolRounds"}
    aliases = expected & set(re.findall(r"\b[A-Z]\w+", source))
    assert aliases == expected
    assert "ThreadMode" in inspect.getsource(Agent.turn)
    names |= aliases | {"ThreadMode"}
    assert {"PermissionProfile", "ExecutionSecurity", "Skill", "DatabaseStore",
            "PioneerSettings", "HistoryLimits", "ToolSpec"} <= names
    missing = sorted(name for name in names if name not in pioneer.__all__)
    assert missing == []
    for name in names:
        assert getattr(pioneer, name) is not None


def test_every_type_in_turns_signatures_is_importable_from_pioneer() -> None:
    """Turn's methods and properties and Agent.turn: what they take and give back."""
    public = {name: getattr(pioneer, name) for name in pioneer.__all__}
    members = [Agent.turn] + [
        value.fget if isinstance(value, property) else value
        for name, value in vars(pioneer.Turn).items()
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))]
    names: set[str] = set()
    for member in members:
        hints = typing.get_type_hints(member, {**vars(inspect.getmodule(member)), **public})
        names |= set().union(*(_names(hint) for hint in hints.values()))
    assert {"Step", "FinishedTurn", "ContextOverflow", "RoundRecord", "HistoryDecision",
            "Turn"} <= names
    missing = sorted(name for name in names if name not in pioneer.__all__)
    assert missing == []


def test_the_sdk_example_is_marked() -> None:
    body, prints = example("agent-sdks", "agent.md")
    assert "claude.messages.create(**body)" in body and "gpt.responses.create(**body)" in body
    assert prints == "anthropic It says: buy milk. (2 rounds)\n" \
        "openai-responses It says: buy milk. (2 rounds)\n"


@pytest.mark.parametrize(("table", "twin", "prefix"), [
    ("AsyncAgent", pioneer.AsyncAgent, "agent."), ("AsyncTurn", pioneer.AsyncTurn, "turn.")])
def test_the_async_tables_name_every_public_member(table: str, twin: type,
                                                   prefix: str) -> None:
    named = " ".join(_rows(table))
    public = [name for name in vars(twin) if not name.startswith("_")]
    public += ["sync_turn", "agent"] if twin is pioneer.AsyncTurn else ["sync_agent"]
    for name in public:
        assert f"{prefix}{name}" in named, name
    if twin is pioneer.AsyncTurn:  # every method awaited, as the table writes it
        for name, value in vars(twin).items():
            if inspect.iscoroutinefunction(value) and not name.startswith("_"):
                assert f"await turn.{name}(" in named, name


def test_the_async_example_is_marked() -> None:
    body, prints = example("agent-async", "agent.md")
    assert "await claude.messages.create(**body)" in body
    assert "await gpt.responses.create(**body)" in body
    assert "anthropic.AsyncAnthropic" in body and "openai.AsyncOpenAI" in body
    assert prints.count("It says: buy milk. (2 rounds)") == 6
