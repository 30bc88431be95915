"""The provider registry: exactly the four APIs, each one object that answers every
capability (a table test through the real adapters, readers and the official SDKs' reply
objects), and no module outside the registry decides anything by a provider's name."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Any, get_args

import pytest
from test_context_errors import (
    ANTHROPIC_TOO_LONG,
    GEMINI_TOO_LONG,
    OPENAI_RESULTED,
    anthropic_body,
    gemini_body,
    openai_body,
)
from test_replies import PARALLEL, reply, sdk_response

from pioneer import InputError, ProviderName
from pioneer.audit.provider_shape import CACHE_FIRST_CARRIERS, CARRIERS
from pioneer.audit.record import PROVIDER_NAMES as TELEMETRY_NAMES
from pioneer.commands._provider import PROVIDER_NAMES as CLI_NAMES
from pioneer.providers import (
    PROVIDER_APIS,
    PROVIDER_NAMES,
    PROVIDERS,
    ChatMessage,
    ChatRequest,
    ProviderApi,
    ReportedUsage,
    provider_api,
)
from pioneer.providers.api import response_api
from pioneer.providers.models import model_facts
from pioneer.providers.window import reply_reserve

PACKAGE = Path(__file__).parents[1] / "pioneer"
NAMES = ("anthropic", "openai-chat", "openai-responses", "gemini")

# name: (title, model table rows, telemetry name, a model, its context-length error body,
#        reads system roles, cache marks, tool_choice in the prefix, system messages in
#        the system part, default max_tokens)
TABLE: dict[str, tuple[Any, ...]] = {
    "anthropic": ("Anthropic Messages", "anthropic", "anthropic", "claude-sonnet-4-5",
                  anthropic_body(ANTHROPIC_TOO_LONG), False, True, True, True, 4096),
    "openai-chat": ("OpenAI Chat Completions", "openai", "openai", "gpt-4.1",
                    openai_body(OPENAI_RESULTED), True, False, False, False, None),
    "openai-responses": ("OpenAI Responses", "openai", "openai", "gpt-4.1",
                         openai_body(OPENAI_RESULTED), True, False, False, False, None),
    "gemini": ("Gemini generateContent", "gemini", "gcp.gemini", "gemini-2.5-flash",
               gemini_body(GEMINI_TOO_LONG), False, False, False, True, None),
}


def test_the_registry_holds_exactly_the_four_apis_in_order() -> None:
    assert tuple(PROVIDER_APIS) == NAMES == PROVIDER_NAMES == get_args(ProviderName)
    assert tuple(PROVIDERS) == NAMES == CLI_NAMES
    assert all(api.name == name for name, api in PROVIDER_APIS.items())
    assert set(TABLE) == set(NAMES)


def test_every_capability_is_answered_by_every_api() -> None:
    """No field is left empty, except the optional ones, and each optional one is set by
    at least one API (so a capability no API has is not kept around)."""
    optional = {"build_with_role", "call_ids", "default_max_tokens"}
    for field in dataclasses.fields(ProviderApi):
        values = [getattr(api, field.name) for api in PROVIDER_APIS.values()]
        if field.name in optional:
            assert any(value is not None for value in values), field.name
        else:
            assert all(value is not None and value != "" for value in values), field.name


@pytest.mark.parametrize("name", NAMES)
def test_each_api_object_answers_for_its_api(name: str) -> None:
    (title, family, telemetry, model, too_long, roles, marks, choice, system_part,
     max_tokens) = TABLE[name]
    api = provider_api(name)
    assert (api.title, api.family, api.telemetry_name) == (title, family, telemetry)
    assert model_facts(model, name).row == model_facts(model, family).row
    assert TELEMETRY_NAMES[name] == telemetry
    assert (CARRIERS[name], CACHE_FIRST_CARRIERS[name]) == (api.system_carrier,
                                                            api.cache_first_carrier)
    assert (api.cache_marks, api.tool_choice_in_prefix, api.system_messages_in_system) \
        == (marks, choice, system_part)
    assert api.default_max_tokens == max_tokens
    assert reply_reserve(None, 10, name).tokens == (max_tokens or 10)
    assert api.call_ids is None or api.call_ids.provider == name

    # The builder, and the body's blocks in cache order (long enough to be cached: marked
    # only where the API takes marks, on a model without explicit breakpoints).
    request = ChatRequest(model=model, messages=[
        ChatMessage(role="system", content="Be brief. " + "Keep to the facts. " * 800),
        ChatMessage(role="user", content="Weather in Oslo?")])
    body = api.build(request)
    assert api.build_body(request) == body == PROVIDERS[name](request)
    head, conversation = api.body_blocks(body)
    assert "Be brief." in json.dumps([block.content for block in [*head, *conversation]])
    assert "Weather in Oslo?" in json.dumps(conversation[-1].content)
    assert any(block.marked for block in [*head, *conversation]) == marks
    # The role of system messages, for the APIs that take one.
    assert api.takes_system_role == roles
    if roles:
        assert '"developer"' in json.dumps(api.build_body(request, system_role="developer"))
    else:
        with pytest.raises(InputError, match=f"{name} has no system role option"):
            api.build_body(request, system_role="developer")

    # The reply reader and the usage mapping, on the wire JSON and the SDK's object.
    data = reply(name, text="Checking both.", calls=PARALLEL)
    for response in (data, sdk_response(name, data)):
        assert response_api(response) is api
        read = api.read_reply(data)
        assert read.text == "Checking both."
        assert [call.id for call in read.tool_calls] == ["call_1", "call_2"]
    usage = api.read_usage(data["usageMetadata" if name == "gemini" else "usage"])
    assert usage == ReportedUsage.from_response(name, data.get("usage", data.get(
        "usageMetadata")))
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == \
        (100, 60, 7)

    # Context-length errors: its own are read, another's shape is not mistaken for one.
    overflow = api.context_errors.read(too_long)
    assert overflow is not None and overflow.maximum_tokens is not None
    assert api.context_errors.read({"error": {"message": "rate limited"}}) is None


@pytest.mark.parametrize("name", NAMES)
def test_a_reply_is_claimed_by_its_own_api_only(name: str) -> None:
    data = reply(name, text="hi")
    claimed = [api.name for api in PROVIDER_APIS.values() if api.claims(data)]
    assert claimed == [name]


def test_an_unknown_name_is_refused_with_the_four_listed() -> None:
    with pytest.raises(InputError, match="unknown provider 'openai'; expected one of "
                                         "anthropic, openai-chat, openai-responses, gemini"):
        provider_api("openai")


# -- no switch on a provider's name outside the registry ---------------------------------

#: The one module that spells the names, and the command line's copy (``compile`` offers
#: ``--provider`` without importing the providers; tests keep it in step, above).
SPELLED_IN = {"providers/names.py"}
CLI_COPY = ("commands/_provider.py", "PROVIDER_NAMES")
NAME_CONSTANTS = {"ANTHROPIC", "OPENAI_CHAT", "OPENAI_RESPONSES", "GEMINI"}
PREFIXES = {"openai", "anthropic", "gemini", "google"}


def name_switches(source: str, where: str = "") -> list[str]:
    """Each place in ``source`` that spells a provider's name outside the registry,
    compares with a name constant, or tests a provider's name by its prefix."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if where == CLI_COPY[0] and isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == CLI_COPY[1]
                for target in node.targets):
            allowed |= {id(child) for child in ast.walk(node.value)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in NAMES and id(node) not in allowed:
            found.append(f"line {node.lineno}: the name {node.value!r} spelled out")
        if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Name | ast.Attribute)
                and (side.id if isinstance(side, ast.Name) else side.attr) in NAME_CONSTANTS
                for part in (node.left, *node.comparators) for side in ast.walk(part)):
            found.append(f"line {node.lineno}: compares with a name constant")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith") and "provider" in \
                ast.unparse(node.func.value).lower() and any(
                    isinstance(arg, ast.Constant) and str(arg.value).rstrip("-") in PREFIXES
                    for arg in node.args):
            found.append(f"line {node.lineno}: tests a provider name by its prefix")
    return found


@pytest.mark.parametrize("source", [
    'if provider == "gemini":\n    pass',
    'ok = provider not in ("anthropic", "gemini")',
    'TABLE = {"openai-chat": 1}',
    'role = x if provider.startswith("openai") else None',
    'role = x if self.agent.provider.startswith("openai-") else None',
    'if provider == GEMINI:\n    pass',
    'if name in (names.ANTHROPIC, names.OPENAI_CHAT):\n    pass',
])
def test_the_check_finds_a_switch(source: str) -> None:
    assert name_switches(source)


def test_the_check_leaves_asking_the_object_alone() -> None:
    assert name_switches("if provider_api(provider).cache_marks:\n    pass\n"
                         'check_prefill(request, GEMINI, ends, model_turn=True)\n'
                         'found = re.search(r"gemini-(\\d+)", model)') == []


def test_no_module_outside_the_registry_switches_on_a_provider_name() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50  # the walk found the package
    found = {}
    for module in modules:
        where = module.relative_to(PACKAGE).as_posix()
        if where in SPELLED_IN:
            continue
        switches = name_switches(module.read_text(encoding="utf-8"), where)
        if switches:
            found[where] = switches
    assert found == {}
