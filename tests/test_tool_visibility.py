"""request_tools and the visible tool set: argument checks, rounds, refusals, the catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import compile_round

from pioneer import PromptCompileInput, PromptCompiler, ToolSpec
from pioneer.errors import InputError
from pioneer.providers import ChatRequest, ToolCall, build_request_body
from pioneer.tools import (
    REQUEST_TOOLS,
    ToolArgumentsError,
    ToolCatalog,
    TurnTools,
    request_tools_for,
)

HIDDEN = ("memory", "task", "artifact", "computer_use")
SUMMARY_1 = "request_tools: 1 problem in the arguments; nothing was made visible"


def _tools(*names: str) -> list[ToolSpec]:
    return [ToolSpec(name=name, description=f"{name} tool") for name in names]


@pytest.fixture
def catalog() -> ToolCatalog:
    return ToolCatalog.build(_tools(
        "read_file", "memory_search", "memory_get", "task_create", "apply_patch",
        "artifact_prepare", "computer_use",
    ))


def _call(name: str, call_id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


# -- the tool definition ---------------------------------------------------------------


def test_schema_lists_the_hidden_domains_and_allows_nothing_else() -> None:
    spec = request_tools_for(HIDDEN).spec
    assert spec.name == REQUEST_TOOLS
    params = spec.parameters
    assert params["required"] == ["domains", "reason"]
    assert params["additionalProperties"] is False
    assert params["properties"]["domains"]["items"] == {"enum": list(HIDDEN)}
    assert params["properties"]["domains"]["minItems"] == 1
    assert params["properties"]["reason"]["maxLength"] == 512


def test_the_definition_travels_in_the_request_tools() -> None:
    spec = request_tools_for(("memory",)).spec
    body = build_request_body("openai-chat", ChatRequest(model="m", tools=[spec]))
    assert body["tools"] == [{"type": "function", "function": {
        "name": "request_tools", "description": spec.description, "parameters": spec.parameters,
    }}]


def test_no_hidden_domain_means_no_request_tools() -> None:
    with pytest.raises(ValueError, match="at least one hidden domain"):
        request_tools_for(())


# -- argument validation: each bad shape -----------------------------------------------

_MISSING_DOMAINS = "arguments → domains: missing; expected a non-empty list of hidden tool domains"
_HIDDEN_NOW = "(hidden now: memory, task, artifact, computer_use)"


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({"reason": "recall"}, [_MISSING_DOMAINS]),
        ({"domains": ["memory"]}, ["arguments → reason: missing; expected a short reason"]),
        ({"domains": "memory", "reason": "recall"},
         ['arguments → domains: expected a list of domain names, got "memory"']),
        ({"domains": [], "reason": "recall"},
         ["arguments → domains: must name at least one domain"]),
        ({"domains": ["files"], "reason": "recall"},
         [f'arguments → domains[0]: "files" is not a hidden tool domain {_HIDDEN_NOW}']),
        ({"domains": ["memory", 3], "reason": "recall"},
         [f"arguments → domains[1]: 3 is not a hidden tool domain {_HIDDEN_NOW}"]),
        ({"domains": ["memory"], "reason": ""}, ["arguments → reason: must not be blank"]),
        ({"domains": ["memory"], "reason": " \n\t"}, ["arguments → reason: must not be blank"]),
        ({"domains": ["memory"], "reason": 5}, ["arguments → reason: expected a string, got 5"]),
        ({"domains": ["memory"], "reason": "x" * 513},
         ["arguments → reason: must be at most 512 characters (got 513)"]),
        ({"domains": ["memory"], "reason": "recall", "tools": ["memory_search"]},
         ['arguments → tools: unknown key; request_tools takes only "domains" and "reason"']),
        ([["memory"], "recall"], ['arguments: expected an object, got [["memory"], "recall"]']),
    ],
    ids=["no-domains", "no-reason", "domains-not-a-list", "domains-empty", "unknown-domain",
         "domain-not-a-string", "reason-empty", "reason-blank", "reason-not-a-string",
         "reason-too-long", "extra-key", "not-an-object"],
)
def test_each_bad_shape_names_its_field(arguments: object, problems: list[str]) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        request_tools_for(HIDDEN).parse(arguments)
    assert str(caught.value) == "\n".join([*problems, SUMMARY_1])


def test_every_problem_is_reported_at_once_in_field_order() -> None:
    arguments = {"zeta": 1, "reason": "", "domains": ["memory", "files", "mail"], "alpha": 2}
    with pytest.raises(ToolArgumentsError) as caught:
        request_tools_for(("memory",)).parse(arguments)
    assert str(caught.value) == "\n".join([
        'arguments → domains[1]: "files" is not a hidden tool domain (hidden now: memory)',
        'arguments → domains[2]: "mail" is not a hidden tool domain (hidden now: memory)',
        "arguments → reason: must not be blank",
        'arguments → alpha: unknown key; request_tools takes only "domains" and "reason"',
        'arguments → zeta: unknown key; request_tools takes only "domains" and "reason"',
        "request_tools: 5 problems in the arguments; nothing was made visible",
    ])


def test_valid_arguments_keep_order_drop_repeats_and_trim_the_reason() -> None:
    parsed = request_tools_for(HIDDEN).parse(
        {"domains": ["task", "memory", "task"], "reason": "  " + "r" * 508 + "  "}
    )
    assert parsed.domains == ("task", "memory")
    assert parsed.reason == "r" * 508


def test_a_reason_of_exactly_512_characters_is_accepted() -> None:
    assert request_tools_for(HIDDEN).parse({"domains": ["task"], "reason": "r" * 512})


# -- visibility across rounds ----------------------------------------------------------


def test_first_round_offers_free_tools_and_request_tools(catalog: ToolCatalog) -> None:
    first = TurnTools(catalog).next_round()
    assert first.number == 1
    assert first.names == ("read_file", "apply_patch", "request_tools")
    assert dict(first.hidden) == {
        "memory": ("memory_search", "memory_get"), "task": ("task_create",),
        "artifact": ("artifact_prepare",), "computer_use": ("computer_use",),
    }
    assert first.tools[-1].parameters["properties"]["domains"]["items"]["enum"] == list(HIDDEN)


def test_a_granted_domain_is_visible_from_the_next_round_on(catalog: ToolCatalog) -> None:
    tools = TurnTools(catalog)
    first = tools.next_round()
    outcome = tools.decide(_call(REQUEST_TOOLS, domains=["memory"], reason="recall a preference"))
    assert outcome.verdict == "granted"
    assert outcome.granted == ("memory",)
    assert outcome.result is not None and not outcome.result.is_error
    assert outcome.result.content == (
        "Granted. These tools are visible from your next request in this turn:\n"
        "- memory: memory_search, memory_get"
    )
    assert tools.current is first and "memory_search" not in first.names
    second = tools.next_round()
    assert second.names == ("read_file", "memory_search", "memory_get", "apply_patch",
                            "request_tools")
    assert list(second.hidden) == ["task", "artifact", "computer_use"]
    assert second.tools[-1].parameters["properties"]["domains"]["items"]["enum"] == [
        "task", "artifact", "computer_use"]
    third = tools.next_round()
    assert third.number == 3 and third.names == second.names


def test_request_tools_disappears_when_nothing_is_hidden(catalog: ToolCatalog) -> None:
    tools = TurnTools(catalog)
    tools.next_round()
    tools.decide(_call(REQUEST_TOOLS, domains=list(HIDDEN), reason="everything"))
    last = tools.next_round()
    assert REQUEST_TOOLS not in last.names
    assert dict(last.hidden) == {}
    outcome = tools.decide(_call(REQUEST_TOOLS, domains=["memory"], reason="again"))
    assert outcome.verdict == "refused"
    assert outcome.result is not None and outcome.result.content == (
        'tool "request_tools" is not available in this round: '
        "no tool domain is hidden in this round"
    )


def test_invalid_request_grants_nothing(catalog: ToolCatalog) -> None:
    tools = TurnTools(catalog)
    tools.next_round()
    outcome = tools.decide(_call(REQUEST_TOOLS, domains=["memory", "mail"], reason="x"))
    assert outcome.verdict == "invalid"
    assert outcome.result is not None and outcome.result.is_error
    assert outcome.result.content.startswith('arguments → domains[1]: "mail" is not')
    assert "memory_search" not in tools.next_round().names


def test_chat_request_carries_only_the_visible_tools(catalog: ToolCatalog) -> None:
    round_ = TurnTools(catalog).next_round()
    every = ChatRequest(model="m", tools=list(catalog.tools))
    request = round_.apply(every)
    assert [t.name for t in request.tools] == ["read_file", "apply_patch", "request_tools"]
    body = build_request_body("openai-chat", request)
    # The body sends them sorted by name, a byte-stable order whatever the catalog's.
    assert [t["function"]["name"] for t in body["tools"]] == [
        "apply_patch", "read_file", "request_tools"]


def test_hidden_tool_domains_section_lists_exactly_the_still_hidden_domains(
    catalog: ToolCatalog, home: Path
) -> None:
    compiler = PromptCompiler()
    tools = TurnTools(catalog)

    def section(round_hidden: Any) -> str | None:
        payload = compile_round(compiler, PromptCompileInput(workspace_root=home),
                               hidden_tool_domains=round_hidden)
        texts = {s.id: s.text for s in payload.sections}
        return texts.get("request_tools.hidden_domains")

    first = section(tools.next_round().hidden)
    assert first is not None
    assert [line for line in first.splitlines() if line.startswith("- ")] == [
        "- memory: memory_search, memory_get.", "- task: task_create.",
        "- artifact: artifact_prepare.", "- computer_use: computer_use.",
    ]
    tools.decide(_call(REQUEST_TOOLS, domains=["memory", "artifact"], reason="need both"))
    second = section(tools.next_round().hidden)
    assert second is not None
    assert [line for line in second.splitlines() if line.startswith("- ")] == [
        "- task: task_create.", "- computer_use: computer_use.",
    ]
    tools.decide(_call(REQUEST_TOOLS, domains=["task", "computer_use"], reason="the rest"))
    assert section(tools.next_round().hidden) is None


# -- refusals --------------------------------------------------------------------------


def test_a_hidden_tool_is_refused_whatever_the_prompt_says(
    catalog: ToolCatalog, home: Path
) -> None:
    tools = TurnTools(catalog)
    round_ = tools.next_round()
    payload = compile_round(PromptCompiler(), PromptCompileInput(
        workspace_root=home, extra_system="You may call memory_search at any time."),
        hidden_tool_domains=round_.hidden)
    assert "memory_search" in payload.dynamic_system_text
    outcome = tools.decide(_call("memory_search", query="likes"))
    assert outcome.verdict == "refused"
    assert outcome.result is not None and outcome.result.is_error
    assert outcome.result.call_id == "c1"
    assert outcome.result.content == (
        'tool "memory_search" is not available in this round: it is in the hidden domain '
        '"memory"; call request_tools with domains ["memory"] first, and call it in your '
        "next request"
    )


def test_a_tool_granted_this_round_is_still_refused_this_round(catalog: ToolCatalog) -> None:
    tools = TurnTools(catalog)
    tools.next_round()
    tools.decide(_call(REQUEST_TOOLS, "c1", domains=["task"], reason="schedule"))
    outcome = tools.decide(_call("task_create", "c2"))
    assert outcome.verdict == "refused"
    assert outcome.result is not None and outcome.result.content == (
        'tool "task_create" is not available in this round: domain "task" was granted in '
        "this round; the tool is visible from your next request, call it again then"
    )
    tools.next_round()
    assert tools.decide(_call("task_create", "c3")).verdict == "run"


def test_an_unknown_tool_is_refused(catalog: ToolCatalog) -> None:
    tools = TurnTools(catalog)
    tools.next_round()
    outcome = tools.decide(_call("delete_everything"))
    assert outcome.result is not None and outcome.result.content == (
        'tool "delete_everything" is not available in this round: it is not one of this '
        "turn's tools"
    )


def test_visible_tools_run_and_every_call_is_logged_with_its_round(
    catalog: ToolCatalog,
) -> None:
    tools = TurnTools(catalog)
    tools.next_round()
    run = tools.decide(_call("read_file", "c1", path="a.txt"))
    assert run.verdict == "run" and run.result is None
    tools.decide(_call("memory_get", "c2"))
    tools.next_round()
    tools.decide(_call("apply_patch", "c3"))
    assert [(c.round, c.call_id, c.verdict) for c in tools.calls] == [
        (1, "c1", "run"), (1, "c2", "refused"), (2, "c3", "run")]


def test_calls_need_a_round(catalog: ToolCatalog) -> None:
    with pytest.raises(InputError, match="no provider round has started"):
        TurnTools(catalog).decide(_call("read_file"))


# -- the catalog -----------------------------------------------------------------------


def test_catalog_keeps_only_offered_tools_and_drops_empty_domains() -> None:
    catalog = ToolCatalog.build(_tools("memory_forget", "memory_list", "shell"))
    assert dict(catalog.domains) == {"memory": ("memory_list", "memory_forget")}
    assert catalog.domain_of("shell") is None


def test_catalog_reports_every_naming_problem() -> None:
    with pytest.raises(InputError) as caught:
        ToolCatalog.build(_tools("request_tools", "shell", "shell", "a"),
                          {"one": ["a"], "two": ["a", "b"]})
    assert str(caught.value) == "\n".join([
        'tools[0]: "request_tools" is reserved for tool visibility',
        'tools[2]: tool name "shell" is used twice',
        'domains → two: tool "a" is in domain "one" already',
    ])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([*HIDDEN, "mail"]), max_size=3), max_size=5))
def test_every_round_splits_the_catalog_into_visible_and_hidden(
    requests: list[list[str]],
) -> None:
    catalog = ToolCatalog.build(_tools(
        "read_file", "memory_search", "memory_get", "task_create", "artifact_prepare",
        "computer_use",
    ))
    tools = TurnTools(catalog)
    granted: set[str] = set()
    for domains in [*requests, []]:
        round_ = tools.next_round()
        hidden_tools = {name for names in round_.hidden.values() for name in names}
        visible = set(round_.names) - {REQUEST_TOOLS}
        assert visible | hidden_tools == {t.name for t in catalog.tools}
        assert not visible & hidden_tools
        assert set(round_.hidden) == set(catalog.domains) - granted
        assert (REQUEST_TOOLS in round_.names) == bool(round_.hidden)
        if not round_.hidden:
            break
        outcome = tools.decide(_call(REQUEST_TOOLS, domains=domains, reason="need them"))
        valid = bool(domains) and set(domains) <= set(round_.hidden)
        assert outcome.verdict == ("granted" if valid else "invalid")
        if valid:
            granted |= set(domains)
