"""Templates and conditions see plain data only, and reach nothing outside an allow-list.

A template is untrusted code. Before, the compile input reached it as it was:
``workspace_root`` a live ``pathlib.Path`` (``.read_text()``, ``.write_text()``,
``.unlink()``), ``limits`` a pydantic model (``parse_file`` opens any file). Now every
value is made plain data where it enters a render (strings, numbers, booleans, ``None``,
read-only lists and mappings of them), and the sandbox allows an attribute or a call only
from an allow-list. These tests hold both: the attacks of the report through the real
commands, a walk of everything every built-in and test profile hands its templates, and
a property test of random attribute chains over random values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, ItemsView, Iterator, KeysView, ValuesView
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.runtime import Macro
from pydantic import BaseModel
from support import run_cli

from pioneer import (
    PioneerError,
    PioneerSettings,
    PromptCompileInput,
    PromptCompiler,
    TemplateError,
)
from pioneer.compile import sandbox as sandbox_module
from pioneer.compile.compiler import representative_input
from pioneer.compile.inputs import PromptLimits
from pioneer.compile.readonly import PLAIN_TYPES, FrozenDict, FrozenList, plain
from pioneer.compile.sandbox import JINJA_HELPERS, PLAIN_METHODS, Sandbox, render_parts
from pioneer.compile.templates import build_environment
from pioneer.files import builtin_dir
from pioneer.sections import (
    DEFAULT_TOOL_DOMAINS,
    MemoryItem,
    MemoryRecall,
    PermissionProfile,
    ThreadSnippet,
    render_current_permissions,
    render_hidden_tool_domains,
    render_memory_recall,
    render_thread_context,
)
from pioneer.sections.runtime import retry_instruction, runtime_block

TESTS = Path(__file__).parent
CASES = sorted(p for p in (TESTS / "cases").iterdir() if (p / "input.json").is_file())


# -- the attacks of the report, through the commands that render -----------------------

PROFILE = """name = "acme"

[[sections]]
id = "identity_base"
title = "Identity"
stability = "stable"
template = "evil.md.j2"
{when}
"""


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' relative paths (``--home home``, the lock file) land in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)


def _deployment(tmp_path: Path, template: str, when: str = "") -> list[str]:
    (tmp_path / "p").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "p" / "acme.toml").write_text(PROFILE.format(when=when))
    (tmp_path / "t" / "evil.md.j2").write_text(template)
    (tmp_path / "home").mkdir()
    return ["--profile-path", str(tmp_path / "p"), "--template-path", str(tmp_path / "t")]


#: What each command runs: every one of them renders the section or evaluates its condition.
COMMANDS = {
    "compile": ["compile", "--profile", "acme", "--home", "home"],
    "check": ["check", "acme"],
    "lock": ["lock", "--profile", "acme", "--lock", "acme.lock"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_template_cannot_read_a_file_through_the_workspace_root(
    tmp_path: Path, command: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret")
    paths = _deployment(tmp_path, (
        "{%- set root = workspace_root.resolve().parents|last -%}\n"
        f"{{{{ (root / {json.dumps(str(secret).lstrip('/'))}).read_text() }}}}\n"))
    code, out, err = run_cli(*COMMANDS[command], *paths)
    assert code == 1
    assert "the secret" not in out + err
    assert "'str object' has no attribute 'resolve'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_template_cannot_write_a_file(tmp_path: Path, command: str) -> None:
    paths = _deployment(tmp_path, '{{ (workspace_root / "written.pth").write_text("x") }}\n')
    code, _, err = run_cli(*COMMANDS[command], *paths)
    assert code == 1
    assert not list(tmp_path.rglob("written.pth"))
    assert "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_condition_cannot_delete_a_file(tmp_path: Path, command: str) -> None:
    victim = tmp_path / "home" / "victim.txt"
    paths = _deployment(tmp_path, "Hello.\n",
                        when="when = '(workspace_root / \"victim.txt\").unlink() is none'")
    victim.write_text("keep me")
    code, _, err = run_cli(*COMMANDS[command], *paths)
    assert code == 1
    assert victim.read_text() == "keep me"
    assert 'sections[0] (id "identity_base") → when: condition failed: ' in err
    assert "unsupported operand type(s) for /: 'str' and 'str'" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_model_offers_no_class_methods(tmp_path: Path, command: str) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text('{"password": "hunter2"}')
    paths = _deployment(tmp_path, f"{{{{ limits.parse_file({json.dumps(str(creds))}) }}}}\n")
    code, out, err = run_cli(*COMMANDS[command], *paths)
    assert code == 1
    assert "hunter2" not in out + err
    assert "`limits` has no attribute `parse_file`" in err
    assert "`limits` has `max_chars_per_file`, `max_chars_total`" in err


def test_the_workspace_root_reaches_a_template_as_its_text(tmp_path: Path) -> None:
    paths = _deployment(tmp_path, "root={{ workspace_root }} kind={{ workspace_root is string }}\n")
    code, out, err = run_cli("compile", "--profile", "acme", "--home", "home", *paths)
    assert (code, err) == (0, "")
    assert out == "## Identity\nroot=home kind=True\n"


def test_a_record_prints_as_json_and_self_as_jinja2_prints_it(tmp_path: Path) -> None:
    # A read-only mapping is written by tojson as the object it is a view of; ``self``
    # (jinja2's reference to the template) prints, with nothing of what it holds.
    paths = _deployment(tmp_path, "{{ limits|tojson }} {{ {'r': [limits]}|tojson }} "
                                  "{{ self }}\n")
    code, out, err = run_cli("compile", "--profile", "acme", "--home", "home", *paths)
    assert (code, err) == (0, "")
    limits = '{"max_chars_per_file": null, "max_chars_total": null}'
    assert out == (f"## Identity\n{limits} {{\"r\": [{limits}]}} "
                   "<TemplateReference 'evil.md.j2'>\n")


def test_a_nested_record_names_itself_in_a_missing_key(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, "{{ runtime_sections[0].nope }}\n")
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(
            workspace_root=tmp_path, profile="acme",
            runtime_sections=[{"id": "dynamic_x", "content": "c"}]))  # type: ignore[list-item]
    assert ("`runtime_sections[0]` has no attribute `nope`; `runtime_sections[0]` has `id`, "
            "`title`, `content`, `max_chars`, `truncated`") in str(info.value)


def _compiler(tmp_path: Path, template: str) -> PromptCompiler:
    paths = _deployment(tmp_path, template)
    return PromptCompiler(profile_path=[Path(paths[1])], template_path=[Path(paths[3])])


# -- every value any template or condition is handed is plain data ---------------------


def _strictly_plain(value: Any) -> bool:
    """Plain data as the render context holds it: plain types, all the way down."""
    if type(value) not in PLAIN_TYPES:
        return False
    if type(value) is FrozenList or type(value) is frozenset:
        return all(map(_strictly_plain, value))
    if type(value) is FrozenDict:
        return all(type(k) in (str, int) and _strictly_plain(v) for k, v in value.items())
    return True


def _plain_or_made_by_a_template(value: Any, seen: set[int] | None = None) -> bool:
    """Plain data, containers a template built of it, or one of jinja2's own helpers."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return True
    seen.add(id(value))
    if value is None or isinstance(value, (str, int, float, bytes, range, *JINJA_HELPERS)):
        return True
    if isinstance(value, (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)):
        return all(_plain_or_made_by_a_template(item, seen) for item in value)
    if isinstance(value, (dict, FrozenDict)):
        return all(_plain_or_made_by_a_template(k, seen)
                   and _plain_or_made_by_a_template(v, seen) for k, v in value.items())
    return False


class _Recorder:
    """Everything the sandbox hands template code: each render's context (at the one
    entry, and in every jinja2 context made below it) and each macro's arguments."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries: list[dict[str, Any]] = []
        self.contexts: list[dict[str, Any]] = []
        self.arguments: list[Any] = []
        entry = sandbox_module.render_context
        recorder = self

        def recording_entry(values: Any) -> dict[str, Any]:
            made = entry(values)
            recorder.entries.append(made)
            return made

        class Context(jinja2.runtime.Context):
            def __init__(self, environment: jinja2.Environment, parent: dict[str, Any],
                         *args: Any, **kwargs: Any) -> None:
                super().__init__(environment, parent, *args, **kwargs)
                recorder.contexts.append({
                    name: value for name, value in parent.items()
                    if environment.globals.get(name, _MISSING) is not value})

        invoke = Macro._invoke

        def recording_invoke(macro: Macro, arguments: list[Any], autoescape: bool) -> str:
            recorder.arguments.extend(arguments)
            return invoke(macro, arguments, autoescape)

        monkeypatch.setattr(sandbox_module, "render_context", recording_entry)
        monkeypatch.setattr(Sandbox, "context_class", Context)
        monkeypatch.setattr(Macro, "_invoke", recording_invoke)

    def problems(self) -> Iterator[str]:
        for entry in self.entries:
            for name, value in entry.items():
                if not _strictly_plain(value):
                    yield f"{name}: {type(value).__name__} at the render's entry"
        for context in self.contexts:
            for name, value in context.items():
                if not _plain_or_made_by_a_template(value):
                    yield f"{name}: {type(value).__name__} in a jinja2 context"
        for value in self.arguments:
            if not _plain_or_made_by_a_template(value):
                yield f"a macro argument: {type(value).__name__}"


_MISSING = object()


def _profiles() -> list[tuple[list[Path], str]]:
    """(profile path, name) of every built-in profile and every profile of the tests."""
    found = [([], file.stem) for file in sorted(builtin_dir("profiles").glob("*.toml"))]
    found += [([file.parent], file.stem) for file in sorted(TESTS.rglob("profiles/*.toml"))]
    return found


PROFILES = _profiles()


def _renderer_calls(compiler: PromptCompiler) -> list[Callable[[], object]]:
    """One call of every section renderer whose templates are macros."""
    env = compiler.templates.env
    item = MemoryItem(scope="user:1", category="preference", content="likes trains")
    return [
        lambda: render_memory_recall(MemoryRecall(
            tools=["memory_get", "memory_remember"], recalled=[item], active=[item],
            task=[item]), env),
        lambda: render_thread_context([ThreadSnippet(
            turn_id="3", item_id="1", chunk_id="0", role="user",
            context="user_visible_thread_item", score=2.5, text="the gateway is slow",
            thread_id="t1")], env),
        lambda: render_current_permissions(PermissionProfile(
            mode="restricted", network="deny", allowed_tools=("read",)), env),
        lambda: render_hidden_tool_domains(DEFAULT_TOOL_DOMAINS, env),
        lambda: retry_instruction(compiler, "tool_retry", tool="read", reason="not found"),
        lambda: runtime_block(compiler),
    ]


def test_the_walk_covers_every_profile() -> None:
    assert len(PROFILES) >= 10 and len(CASES) >= 10


@pytest.mark.parametrize(("profile_path", "name"), PROFILES,
                         ids=[f"{p[0].parent.name + '/' if p else ''}{n}" for p, n in PROFILES])
def test_every_name_a_profiles_templates_read_is_plain_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, profile_path: list[Path], name: str
) -> None:
    compiler = PromptCompiler(profile_path=profile_path, template_path=[
        folder.parent / "templates" for folder in profile_path
        if (folder.parent / "templates").is_dir()])
    try:
        compiler.load_profile(name)
    except Exception:  # the tests' broken profiles: nothing of them renders
        return
    recorder = _Recorder(monkeypatch)
    compiler.trial(name)  # what check and lock render: every section, every condition
    compiler.compile(representative_input(name).model_copy(update={"workspace_root": tmp_path}))
    assert list(recorder.problems()) == []


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_name_a_golden_case_hands_its_templates_is_plain_data(
    monkeypatch: pytest.MonkeyPatch, case_setup: Any, case: Path
) -> None:
    recorder = _Recorder(monkeypatch)
    try:
        compiler, compile_input = case_setup(case)
        compiler.compile(compile_input)
    except PioneerError:  # the error cases
        pass
    assert list(recorder.problems()) == []


def test_every_renderer_macro_is_handed_plain_data(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = PromptCompiler()
    recorder = _Recorder(monkeypatch)
    for call in _renderer_calls(compiler):
        assert call()
    assert len(recorder.arguments) > 10
    assert list(recorder.problems()) == []


def test_the_walk_finds_a_live_object(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The walk above would see a path if one got in: hand one past the entry.
    recorder = _Recorder(monkeypatch)
    env = build_environment([])
    template = env.from_string("{{ x }}")
    list(template.root_render_func(template.new_context({"x": tmp_path})))
    assert list(recorder.problems()) == ["x: PosixPath in a jinja2 context"]


def test_the_environment_offers_only_jinja2s_plain_globals() -> None:
    env = PromptCompiler().templates.env
    assert sorted(env.globals) == ["cycler", "dict", "joiner", "namespace", "range"]


# -- random values, random attribute chains ---------------------------------------------


class _Secretive(BaseModel):
    """A model, as the compile input's were, with a field and class methods."""

    token: str = "model-field"


class _Live:
    """An object with methods of its own: nothing of it may be reached."""

    def run(self) -> str:
        return "ran"


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8),
    st.builds(Path, st.sampled_from(["/etc/passwd", "home", "."])),
    st.just(PromptLimits(max_chars_total=3)), st.just(_Secretive()),
    st.just(PioneerSettings(home=Path("/tmp/h"))),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
#: Names an attack would try, the allow-list's own, and Python's internals.
_NAMES = sorted({
    *(name for _, names in PLAIN_METHODS for name in names), "read_text", "write_text",
    "unlink", "resolve", "parents", "parse_file", "parse_raw", "model_validate",
    "model_fields", "model_dump", "model_copy", "run", "home", "token", "max_chars_total",
    "__class__", "__mro__", "__subclasses__", "__globals__", "__init__", "__dict__",
    "mro", "_items", "_name", "gi_frame", "f_globals", "cycle", "index0", "next",
})
_STEP = st.one_of(
    st.sampled_from(_NAMES).map(lambda n: f".{n}"),
    st.sampled_from(_NAMES).map(lambda n: f"[{n!r}]"),
    st.integers(-2, 2).map(lambda n: f"[{n}]"),
    st.just("()"), st.just("(1)"), st.just("('a')"),
    st.sampled_from(["|attr('__class__')", "|first", "|list", "|string", "|items",
                     "|map(attribute='token')|list", "|dictsort", "|tojson"]),
    # str.format's fields walk attributes and items too
    st.sampled_from([".format(x)", ".format(y)", ".format_map(x)", ".format(x.items())",
                     ".format(self)", ".format(loop)"]),
)
_START = st.sampled_from(["x", "y", "range", "dict", "cycler", "joiner", "namespace",
                          "cycler(1, 2)", "joiner()", "namespace(a=x)", "loop", "self",
                          "caller", "x.items()", "'{0}'", "section", "'{0.__class__}'",
                          "'{0.read_text}'", "'{0._items}'", "'{0.mapping}'",
                          "'{0[0].token}'", "'{0.items}'", "'{token}'", "'{0[__class__]}'"])


class _Watching(Sandbox):
    """The sandbox, noting every object a lookup or a call hands template code."""

    reached: list[Any]

    def getattr(self, obj: Any, attribute: str) -> Any:
        return self._note(super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        return self._note(super().getitem(obj, argument))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        return __self._note(super().call(__context, __obj, *args, **kwargs))

    def _note(self, value: Any) -> Any:
        self.reached.append(value)
        return value


def _allowed(value: Any, env: Sandbox) -> bool:
    """An object template code may hold: plain data, an allowed method of it, one of
    jinja2's helpers, a global, or an undefined value (whose use raises)."""
    if _plain_or_made_by_a_template(value):
        return True
    if any(value is item for item in env.globals.values()):
        return True
    owner = getattr(value, "__self__", None)
    name = getattr(value, "__name__", "")
    if owner is not None and not isinstance(owner, type):
        names = sandbox_module.plain_methods(owner)
        if names is not None:
            return name in names
        return isinstance(owner, JINJA_HELPERS)
    return callable(value) and getattr(value, "_checked_format", False)


@settings(max_examples=300, deadline=None)
@given(x=_VALUES, y=_VALUES, start=_START, steps=st.lists(_STEP, max_size=5))
def test_random_chains_reach_nothing_outside_the_allow_list(
    x: Any, y: Any, start: str, steps: list[str]
) -> None:
    env = _Watching(undefined=jinja2.StrictUndefined, autoescape=False)
    env.reached = []
    chain = start + "".join(steps)
    source = ("{% for item in [1, 2] %}{% set z = " + chain + " %}{{ z }}{% endfor %}"
              "{% macro m() %}{{ " + chain + " }}{% endmacro %}{% call m() %}c{% endcall %}")
    try:
        template = env.from_string(source)
    except jinja2.TemplateSyntaxError:
        return
    context = {"x": x, "y": y, "section": {"id": "s", "title": "T"}}
    try:
        text = "".join(render_parts(template, context))
    except Exception:  # a refusal, a missing attribute, a type error: all are fine
        text = ""
    outside = [type(value).__name__ for value in env.reached if not _allowed(value, env)]
    assert outside == [], f"{chain} printed {text!r}"


@given(_VALUES)
def test_any_value_made_plain_is_plain_data(value: Any) -> None:
    assert _strictly_plain(plain(value))


def test_a_value_with_no_plain_form_is_refused() -> None:
    with pytest.raises(TypeError, match=r"x\.live: a _Live is not plain data"):
        plain({"live": _Live()}, "x")
