"""The library API as a Python caller expects it: every path parameter takes ``str`` and
``os.PathLike``, and every bad input from a public function is a ``PioneerError``."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import run_cli

import pioneer
import pioneer.audit
import pioneer.compile.inputs
import pioneer.compile.manifest
import pioneer.episodic
import pioneer.history
import pioneer.hooks.models
import pioneer.providers
import pioneer.sections
import pioneer.tools
import pioneer.turn
from pioneer import (
    Agent,
    AsyncAgent,
    InputError,
    PioneerError,
    PioneerSettings,
    PromptCompileInput,
    PromptCompiler,
    ToolSpec,
    ensure_runtime_home,
)
from pioneer.audit import ReportedUsage
from pioneer.compile.compiler import compile_prompt
from pioneer.compile.inputs import load_compile_input
from pioneer.episodic import EpisodicIndex
from pioneer.history import SqliteStore
from pioneer.history.open import open_store
from pioneer.hooks.registry import TurnContext
from pioneer.providers import load_chat_request, load_model_table
from pioneer.review.lock import verify_lock
from pioneer.sections.agents_md import agents_md_subscription
from pioneer.turn.run import compile_turn

PathMaker = Callable[[Path], Any]


def _close(value: Any) -> Any:
    close = getattr(value, "close", None)
    if close is not None:
        close()
    return value


def _verified(lock_file: Any) -> Any:
    """``lock_file`` written by ``pioneer lock`` and verified; the path it took."""
    assert run_cli("lock", "--profile", "minimal", "--lock", str(lock_file))[0] == 0
    verify_lock(PromptCompiler(), "minimal", lock_file)
    return lock_file


def _aclosed(agent: AsyncAgent) -> AsyncAgent:
    asyncio.run(agent.aclose())
    return agent


def _files(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text('{"profile": "minimal"}')
    (tmp_path / "pioneer.toml").write_text("max_context_tokens = 5\n")
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "templates").mkdir(exist_ok=True)
    (tmp_path / "models.toml").write_text(
        '[[models]]\nmodel = "claude-fable-5-1"\ncontext_window = 123_456\n'
        'source = "a test"\nsource_date = "2026-12"\n')
    (tmp_path / "messages.json").write_text('[{"role": "user", "content": "hi"}]')


#: Every public callable parameter that takes a path, and a call that passes one: each
#: gets the work folder and a function making the argument (``str`` or ``Path``).
CALLS: dict[str, Callable[[Path, PathMaker], Any]] = {
    "ensure_runtime_home.home": lambda p, a: ensure_runtime_home(a(p / "home")).created,
    "load_compile_input.path": lambda p, a: load_compile_input(a(p / "in.json")).profile,
    "PromptCompiler.__init__.profile_path": lambda p, a: PromptCompiler(
        profile_path=[a(p / "profiles")]).profile_path,
    "PromptCompiler.__init__.template_path": lambda p, a: PromptCompiler(
        template_path=[a(p / "templates")]).template_path,
    "PioneerSettings.load.config_file": lambda p, a: PioneerSettings.load(
        a(p / "pioneer.toml")).max_context_tokens,
    "PioneerSettings.load.discover_from": lambda p, a: PioneerSettings.load(
        discover_from=a(p / "profiles")).max_context_tokens,
    "SqliteStore.__init__.path": lambda p, a: _close(SqliteStore(a(p / "a.db"))).path,
    "EpisodicIndex.__init__.store": lambda p, a: _close(EpisodicIndex(a(p / "b.db"))).path,
    "open_store.target": lambda p, a: _close(open_store(a(p / "c.db"))).where,
    "Agent.__init__.store": lambda p, a: _close(Agent(a(p / "d.db"), provider="anthropic",
                                                      model="m")).store.where,
    "AsyncAgent.__init__.store": lambda p, a: _aclosed(AsyncAgent(
        a(p / "e.db"), provider="anthropic", model="m")).store.where,
    "agents_md_subscription.root": lambda p, a: agents_md_subscription(a(p)).hook_id,
    "verify_lock.lock_file": lambda p, a: _verified(a(p / "pioneer.lock")),
    "load_model_table.paths": lambda p, a: load_model_table([a(p / "models.toml")]).facts(
        "claude-fable-5-1").context_window,
    "load_chat_request.path": lambda p, a: load_chat_request(
        a(p / "messages.json"), model="m").messages[0].content,
}
#: Path-typed parameters that are not a caller's input (the fields of a result).
NOT_INPUTS = {"SeedResult.__init__.created", "SeedResult.__init__.existing"}


#: Where a public callable that takes a path lives: ``pioneer`` and the subpackages'
#: tables, and the functions the docs import from a module of a subpackage.
PATH_TABLES = ["pioneer", "pioneer.turn", "pioneer.audit", "pioneer.episodic",
               "pioneer.history", "pioneer.providers", "pioneer.sections", "pioneer.tools"]
PATH_FUNCTIONS = {"pioneer.compile.inputs": ["load_compile_input"],
                  "pioneer.history.open": ["open_store"],
                  "pioneer.review.lock": ["verify_lock"],
                  "pioneer.sections.agents_md": ["agents_md_subscription"]}


def _path_parameters() -> set[str]:
    found = set()
    tables = {name: importlib.import_module(name).__all__ for name in PATH_TABLES}
    for module_name, names in {**tables, **PATH_FUNCTIONS}.items():
        module = importlib.import_module(module_name)
        for name in names:
            found |= _path_parameters_of(name, getattr(module, name))
    return found


def _path_parameters_of(name: str, obj: Any) -> set[str]:
    found = set()
    members: list[tuple[str, Any]] = []
    if inspect.isclass(obj):
        members = [("__init__", obj.__init__)]
        members += [(attr, getattr(obj, attr)) for attr, value in vars(obj).items()
                    if not attr.startswith("_")
                    and (inspect.isfunction(value) or isinstance(value, classmethod))]
    elif callable(obj):
        members = [("", obj)]
    for attr, function in members:
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            continue
        for parameter in signature.parameters.values():
            if "Path" in str(parameter.annotation):
                found.add(".".join(part for part in (name, attr, parameter.name) if part))
    return found


def test_the_table_names_every_path_parameter() -> None:
    assert _path_parameters() - NOT_INPUTS == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_path_parameter_takes_str_and_path(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    results = []
    for kind in (str, Path):
        where = tmp_path / kind.__name__
        where.mkdir()
        _files(where)
        results.append(CALLS[name](where, kind))
    assert results[0] is not None
    assert str(results[0]).replace("/str", "/Path") == str(results[1])


def test_a_mapping_compiles_and_a_bad_one_is_a_pioneer_error(tmp_path: Path) -> None:
    compiler = PromptCompiler()
    turn = {"profile": "minimal", "workspace_root": str(tmp_path)}
    assert compiler.compile(turn).stable_system_text == compiler.compile(
        PromptCompileInput.model_validate(turn)).stable_system_text
    with pytest.warns(DeprecationWarning, match="compile_prompt is deprecated"):
        assert compile_prompt(turn, compiler=compiler).manifest.profile == "minimal"
    with pytest.warns(DeprecationWarning, match="compile_turn is deprecated"):
        assert compile_turn(compiler, turn).manifest.profile == "minimal"
    with pytest.raises(PioneerError) as info:
        compiler.compile({"profile": "minimal", "artifact_ref_count": "2", "nope": 1})
    assert str(info.value) == (
        "artifact_ref_count: Input should be a valid integer\nnope: unknown field (known: "
        "workspace_root, profile, skills_prompt, retry_instruction, include_tool_recovery_policy, "
        "include_task_orchestration_policy, continue_generation_hint, runtime_sections, "
        "dynamic_sections, artifact_ref_count, dynamic_context, extra_system, limits, inputs)\n"
        "error: 2 problems"
    )
    with pytest.raises(InputError, match="expected a PromptCompileInput or a mapping"):
        compiler.compile("minimal")  # type: ignore[arg-type]


def test_one_folder_instead_of_a_list_is_said_plainly() -> None:
    with pytest.raises(InputError, match="expected a list of folders, got one path"):
        PromptCompiler(profile_path="profiles")  # type: ignore[arg-type]


# -- every public model refuses a wrong type with a PioneerError -------------------------

def _public_models() -> list[type[BaseModel]]:
    found: dict[type[BaseModel], None] = {}
    for module in PUBLIC_MODULES:
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name, None)
            if inspect.isclass(value) and issubclass(value, BaseModel):
                found[value] = None
    return list(found)


PUBLIC_MODULES = [pioneer, pioneer.turn, pioneer.audit, pioneer.episodic, pioneer.history,
                  pioneer.hooks.models, pioneer.compile.inputs, pioneer.compile.manifest,
                  pioneer.providers, pioneer.sections, pioneer.tools]
MODELS = _public_models()


class _Opaque:
    """A value of no type any field takes."""


def test_the_walk_finds_the_public_models() -> None:
    names = {model.__name__ for model in MODELS}
    assert {"ChatRequest", "ToolSpec", "TurnRecord", "ReportedUsage", "PermissionProfile",
            "PromptManifest", "PioneerSettings", "ToolContribution", "CachePlan"} <= names
    assert len(MODELS) >= 40


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_every_public_model_refuses_wrong_types_with_a_pioneer_error(
    model: type[BaseModel],
) -> None:
    for field in model.model_fields:
        with pytest.raises(PioneerError) as info:
            model(**{field: _Opaque()})
        assert f"{model.__name__} → {field}" in str(info.value) or \
            f"settings → {field}" in str(info.value), str(info.value)
    with pytest.raises(PioneerError, match="unknown"):
        model(no_such_field=1)


def test_an_unknown_field_of_a_public_model_names_the_close_one_or_those_there_are() -> None:
    with pytest.raises(PioneerError) as info:
        ToolSpec(name="deploy", descripton="Roll out.")  # type: ignore[call-arg]
    assert str(info.value).startswith(
        'ToolSpec → descripton: unknown field (did you mean "description"?)')
    with pytest.raises(PioneerError) as info:
        ToolSpec(name="deploy", input_schema={"type": "object"})  # type: ignore[call-arg]
    assert str(info.value).startswith(
        "ToolSpec → input_schema: unknown field (known: name, description, parameters)")


#: The public dataclasses an application builds and hands in (the others are results),
#: with a valid value for each field.
INPUT_DATACLASSES: list[tuple[type[Any], dict[str, Any]]] = [
    (TurnContext, {"thread_id": "t", "thread_folder": "api", "user_text": "hi",
                           "touched_paths": ("a.py",), "data": {}, "mode": "chat"}),
    (pioneer.sections.MemoryItem, {"scope": "user:1", "category": "fact", "content": "x"}),
    (pioneer.sections.MemoryRecall, {"policy": "read_only", "tools": ["memory_get"],
                                     "recalled": [], "active": [], "task": []}),
]


@pytest.mark.parametrize(("kind", "valid"), INPUT_DATACLASSES,
                         ids=[kind.__name__ for kind, _ in INPUT_DATACLASSES])
def test_input_dataclasses_refuse_wrong_types_with_a_pioneer_error(
    kind: type[Any], valid: dict[str, Any],
) -> None:
    assert set(valid) == {f.name for f in dataclasses.fields(kind)}
    kind(**valid)
    for name in valid:
        for wrong in (_Opaque(), "text" if not isinstance(valid[name], str) else 5):
            with pytest.raises(PioneerError) as info:
                kind(**{**valid, name: wrong})
            assert f"{kind.__name__} → {name}" in str(info.value), str(info.value)


def test_public_functions_refuse_wrong_types_with_a_pioneer_error(tmp_path: Path) -> None:
    from pioneer.providers import read_response
    from pioneer.turn import TurnAudit

    calls: list[Callable[[], object]] = [
        lambda: read_response("anthropic", 5),  # type: ignore[arg-type]
        lambda: read_response("nope", {}),
        lambda: open_store(5),  # type: ignore[arg-type]
        lambda: TurnAudit("t", "th", "agent", history="kept"),  # type: ignore[arg-type]
        lambda: TurnAudit("t", "th", "sometimes"),  # type: ignore[arg-type]
        lambda: Agent(tmp_path / "a.db", provider="nope", model="m"),  # type: ignore[arg-type]
        lambda: Agent(tmp_path / "a.db", provider="anthropic", model=""),
        lambda: Agent(5, provider="anthropic", model="m"),  # type: ignore[arg-type]
        lambda: ReportedUsage.from_response("nope", {}),
    ]
    for call in calls:
        with pytest.raises(PioneerError):
            call()
