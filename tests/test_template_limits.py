"""Hostile templates: one size limit for all a render builds, no state between compiles,
read-only input, and template names the lock can see.

The size attacks run through the CLI in a child process whose address space is capped
(``RLIMIT_AS``): a template that got past the limit would fail there with a
``MemoryError`` instead of the exact refusal each case expects.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2.utils import Namespace
from support import HOSTILE_LIMIT as LIMIT
from support import HOSTILE_PROFILE as PROFILE
from support import hostile_compiler, run_cli

from pioneer import PromptCompileInput, PromptCompiler, TemplateError
from pioneer.compile.allowance import (
    INPUT_COPIES,
    MAX_OUTPUT,
    Allowance,
    TemplateLimitError,
    text_length,
)
from pioneer.compile.inputs import DynamicSectionInput, RuntimeSectionInput
from pioneer.compile.readonly import FrozenDict, FrozenList, ReadOnlyError, read_only
from pioneer.sections.memory import MemoryRecall, render_memory_recall

#: A ``when`` is handed only the compile input and the profile name.
WHEN_LIMIT = MAX_OUTPUT + INPUT_COPIES * len("acme")
#: The child's address space: far below what any of these attacks would build.
MEMORY_LIMIT = 768 * 1024**2


def _most(limit: int) -> str:
    return f"templates may build at most {limit}"


#: (expression, refusal): each would build about 10**9 characters or items if it ran.
EXPRESSIONS = [
    ("('{0:>999999}'*1000).format(1)", "str.format would build 1000012000 characters"),
    ("('%999999d'*1000) % ((1,)*1000)", "% formatting would build 1000009000 characters"),
    ("('a'*1000).translate({97:'x'*1000000})",
     "str.translate would build 1000000000 characters"),
    ("'x'.encode().center(10**9)", "bytes.center would build 1000000000 characters"),
    ("[1]|batch(10**8, 0)|list", "the batch filter would build 100000000 items"),
    ("([['x'*1000000]]*1000)|string",
     "repeating a list of strings would build 1000006000 characters"),
    ("('y'*1000000).join(range(1000)|map('string'))",
     "join would build 999002890 characters"),
    ("('a\\n'*1000)|indent('y'*1000000)", "the indent filter would build 1001002000 characters"),
    ("('a '*1000)|wordwrap(1, wrapstring='y'*1000000)",
     "the wordwrap filter would build 2001002000 characters"),
    ("(['x'*1000000]*1000)|sum(start=[])",
     "repeating a list of strings would build 1000004000 characters"),
    ("('{0}'*1000).format('x'*1000000)", "str.format would build 1000003000 characters"),
    ("'%(a)s'*1000 % {'a': 'x'*1000000}", "% formatting would build 1000005000 characters"),
]

_OVER = (f"the render built more than its limit of {LIMIT} characters (printed, captured and "
         f"computed text all count: {MAX_OUTPUT} plus {INPUT_COPIES} times the text it is "
         "given)")

#: (template, error): text that is captured, not printed, counts as well; so do values
#: kept in a list or grown in a loop.
TEMPLATES = [
    *((f"fine\n{{{{ {expression} }}}}\n", f"t/evil.md.j2:2: {refusal}; {_most(LIMIT)}")
      for expression, refusal in EXPRESSIONS),
    ("fine\n{% set b %}{% for i in range(1500) %}{{ 'x'*1000000 }}{% endfor %}{% endset %}"
     "{{ b|length }}\n", f"t/evil.md.j2:2: {_OVER}"),
    ("fine\n{% macro m() %}{{ caller() }}{% endmacro %}{% set b %}{% call m() %}"
     "{% for i in range(1500) %}{{ 'x'*1000000 }}{% endfor %}{% endcall %}{% endset %}"
     "{{ b|length }}\n", f"t/evil.md.j2:2: {_OVER}"),
    ("fine\n{% set ns = namespace(s='x'*1000) %}{% for i in range(40) %}"
     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}\n", f"t/evil.md.j2:2: {_OVER}"),
    ("fine\n{% set l = [] %}{% for i in range(3000) %}{% set _ = l.append('x'*999999 ~ i) %}"
     "{% endfor %}{{ l|length }}\n", f"t/evil.md.j2:2: {_OVER}"),
    ("fine\n{% set l = ['x'] %}{% for i in range(40) %}{% set _ = l.extend(l) %}{% endfor %}"
     "{{ l|length }}\n", f"t/evil.md.j2:2: {_OVER}"),
    # a block called as a function: its output is charged as it is joined
    ("{% block b %}{% for i in range(300) %}{% for j in range(100) %}" + "x" * 100
     + "{% endfor %}{% endfor %}{% endblock %}{{ self.b()|length }}\n",
     f"t/evil.md.j2: {_OVER}"),
]

#: The same operations inside a section's ``when``.
CONDITIONS = [
    (expression, "p/acme.toml:8: sections[0] (id \"identity_base\") → when: condition failed: "
                 f"{refusal}; {_most(WHEN_LIMIT)}")
    for expression, refusal in EXPRESSIONS
]

_DRIVER = textwrap.dedent("""
    import contextlib, io, json, sys
    from pathlib import Path
    from pioneer.cli import main

    results = []
    for template, when in json.loads(sys.stdin.read()):
        Path("t/evil.md.j2").write_text(template)
        extra = f"when = '''{when}'''\\n" if when else ""
        Path("p/acme.toml").write_text(sys.argv[1].format(extra=extra))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["compile", "--profile", "acme", "--profile-path", "p",
                         "--template-path", "t", "--home", "h"])
        results.append([code, err.getvalue()])
    print(json.dumps(results))
""")


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _run_capped(tmp_path: Path, cases: list[tuple[str, str | None]]) -> list[list[object]]:
    for folder in ("p", "t", "h"):
        (tmp_path / folder).mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, PROFILE], input=json.dumps(cases), cwd=tmp_path,
        capture_output=True, text=True, preexec_fn=_cap_memory, timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("PIONEER_")},
    )
    assert done.returncode == 0, done.stderr
    results: list[list[object]] = json.loads(done.stdout)
    return results


def test_size_attacks_are_refused_through_the_cli_under_a_memory_limit(tmp_path: Path) -> None:
    cases = [(template, None) for template, _ in TEMPLATES]
    cases += [("fine\n", expression) for expression, _ in CONDITIONS]
    expected = [[1, f"{error}\n  while rendering section \"identity_base\"\nerror: 1 problem\n"]
                for _, error in TEMPLATES]
    expected += [[1, f"{error}\nerror: 1 problem\n"] for _, error in CONDITIONS]
    assert _run_capped(tmp_path, cases) == expected


def test_the_memory_cap_would_catch_an_attack_that_got_through(tmp_path: Path) -> None:
    # The check above means something only if building 10**9 characters fails in the child.
    done = subprocess.run([sys.executable, "-c", "import pioneer.cli; x = 'x' * 10**9"],
                          preexec_fn=_cap_memory,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "MemoryError" in done.stderr


# -- ordinary use stays possible -------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("[[1, 2], [3]]|sum(start=[])", "[1, 2, 3]"),
        ("[1, 2, 3]|sum", "6"),
        ("[1, 2, 3]|batch(2, 0)|list", "[[1, 2], [3, 0]]"),
        ("['a', 'b']|join(', ')", "a, b"),
        ("'ab'.translate({97: 'xy'})", "xyb"),
        ("'a\\nb'|indent('> ', true)", "> a\n> b"),
        ("'a b c'|wordwrap(1, wrapstring='|')", "a|b|c"),
        ("{'a': [1]}|tojson(2)", '{\n  "a": [\n    1\n  ]\n}'),
        ("'{0}-{0}'.format('x')", "x-x"),
        ("'%s=%d' % ('n', 3)", "n=3"),
        ("'%(a)s-%(b)s'|format(a='A', b='B')", "A-B"),
        ("'%s-%s'|format('a', 1)", "a-1"),
        ("('x' * 1000000)|length", "1000000"),
        ("runtime_sections ~ ''", "[]"),
        ("runtime_sections == []", "True"),
        ("namespace(a=1)", "<Namespace {'a': 1}>"),
        ("[namespace(a='x')]", "[<Namespace {'a': 'x'}>]"),
    ],
)
def test_ordinary_use_renders(tmp_path: Path, expression: str, text: str) -> None:
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": f"{{{{ {expression} }}}}\n"})
    payload = compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert payload.stable_system_text == f"## Identity\n{text}"


def test_the_text_of_a_shared_list_is_measured_without_building_it() -> None:
    inner = ["x" * 1000]
    shared = [inner] * 1000  # one inner list, a million characters of text
    assert text_length(shared, 10**7) == len(str(shared))
    assert text_length([shared] * 1000, 10**6) == 10**6 + 1  # stops once past the cap
    # a namespace() keeps its attributes out of __dict__: they are measured all the same
    assert text_length(Namespace(a=shared), 10**7) >= len(str(shared))
    assert text_length(Namespace(a=[shared] * 1000), 10**6) == 10**6 + 1
    allowance = Allowance()
    allowance.charge(MAX_OUTPUT)
    with pytest.raises(TemplateLimitError, match="the render built more than its limit of 2000000"):
        allowance.charge(1)


# -- nothing survives into another compile ---------------------------------------------

STATE = {
    "state.md.j2": "{% set seen = [] %}{% set counter = namespace(n=0) %}",
    "evil.md.j2": (
        '{% import "state.md.j2" as st %}{% set _ = st.seen.append(dynamic_context) %}'
        "{% set c = st.counter %}{% set c.n = c.n + 1 %}"
        '{{ st.seen|join(" | ") }} #{{ c.n }}\n'
    ),
}


def test_an_imported_module_is_not_shared_between_compiles(tmp_path: Path) -> None:
    compiler = hostile_compiler(tmp_path, STATE)
    texts = []
    for context in ("tenant one", "tenant two", "tenant three"):
        compile_input = PromptCompileInput(workspace_root=tmp_path, profile="acme",
                                           dynamic_context=context)
        fresh = hostile_compiler(tmp_path, {}).compile(compile_input)
        payload = compiler.compile(compile_input)
        assert payload.model_dump() == fresh.model_dump()
        texts.append(payload.stable_system_text)
    assert texts == [f"## Identity\n{name} #1" for name in
                     ("tenant one", "tenant two", "tenant three")]


# -- the input is read-only ------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ('runtime_sections.append("junk")', "append: this list is read-only"),
        ("runtime_sections.clear()", "clear: this list is read-only"),
        ("dynamic_sections.extend([1])", "extend: this list is read-only"),
        ("runtime_sections.pop()", "pop: this list is read-only"),
    ],
)
def test_a_template_cannot_change_the_compile_input(tmp_path: Path, statement: str,
                                                    message: str) -> None:
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": f"fine\n{{% set _ = {statement} %}}\n"})
    section = RuntimeSectionInput(id="dynamic:note", content="keep me")
    compile_input = PromptCompileInput(workspace_root=tmp_path, profile="acme",
                                       runtime_sections=[section])
    for _ in range(2):  # and the second compile fails the same way: nothing changed
        with pytest.raises(TemplateError) as info:
            compiler.compile(compile_input)
        assert str(info.value) == (
            f"{tmp_path}/templates/evil.md.j2:2: ReadOnlyError: {message} (a view of the "
            "caller's input)\n  while rendering section \"identity_base\"")
    assert compile_input.runtime_sections == [section]
    assert compile_input.dynamic_sections == []


def test_read_only_views() -> None:
    section = RuntimeSectionInput(id="dynamic:a", content="x")
    compile_input = PromptCompileInput(runtime_sections=[section])
    view = read_only(compile_input)
    assert isinstance(view.runtime_sections, FrozenList)
    assert view.runtime_sections == [section] and str(view.runtime_sections) == str([section])
    assert view.runtime_sections + [1] == [section, 1]  # noqa: RUF005 (the operator is the test)
    with pytest.raises(ReadOnlyError, match="append: this list is read-only"):
        view.runtime_sections.append(section)
    assert compile_input.runtime_sections == [section]  # the caller's value is untouched
    assert read_only(view) is view  # already read-only: nothing copied
    mapping = read_only({"a": [1, {"b": 2}]})
    assert isinstance(mapping, FrozenDict) and mapping == {"a": [1, {"b": 2}]}
    with pytest.raises(ReadOnlyError, match="update: this mapping is read-only"):
        mapping.update(a=2)
    with pytest.raises(TypeError):
        dict.update(mapping, a=2)  # not a dict underneath: the unbound method refuses it
    with pytest.raises(ReadOnlyError):
        mapping["a"][1].setdefault("c", 3)
    assert read_only(frozenset({1})) == frozenset({1}) and read_only("s") == "s"


# -- template names the lock can see ---------------------------------------------------


@pytest.fixture
def computed_include(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "p" / "acme.toml").write_text(PROFILE.format(extra=""))
    (tmp_path / "t" / "evil.md.j2").write_text('fine\n{% include "inner.md.j2" %}\n')
    (tmp_path / "t" / "inner.md.j2").write_text('x\n\n{% include ("acme_" ~ "extra.md.j2") %}\n')
    (tmp_path / "t" / "acme_extra.md.j2").write_text("extra\n")
    (tmp_path / "pioneer.toml").write_text('profile_path = ["p"]\ntemplate_path = ["t"]\n'
                                           'home = "h"\n')
    return tmp_path


_COMPUTED = ("t/inner.md.j2:3: the template name of {% include %} must be a literal string "
             "(a computed name cannot be checked or locked)\n"
             '  while checking section "identity_base" of p/acme.toml\n'
             "error: 1 problem in p/acme.toml\n")


def test_a_computed_template_name_is_refused_by_check_lock_and_compile(
    computed_include: Path,
) -> None:
    assert run_cli("check", "acme")[0] == 1
    assert run_cli("check", "acme")[2].endswith(
        _COMPUTED.replace("in p/acme.toml", "in 1 profile"))
    assert run_cli("lock", "--profile", "acme")[0] == 1
    assert not (computed_include / "pioneer.lock").exists()
    assert run_cli("compile", "--profile", "acme", "--locked") == (1, "", _COMPUTED)
    assert run_cli("compile", "--profile", "acme") == (1, "", _COMPUTED)


@pytest.mark.parametrize(
    ("tag", "source"),
    [
        ("extends", '{% extends "base" ~ ".j2" %}'),
        ("import", '{% import name ~ ".j2" as m %}'),
        ("from", '{% from ["a", x]|first import m %}'),
        ("include", '{% include "a" if x else "b" %}'),
    ],
)
def test_every_kind_of_computed_reference_is_refused(tmp_path: Path, tag: str,
                                                    source: str) -> None:
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": f"fine\n{source}\n"})
    with pytest.raises(TemplateError) as info:
        compiler.load_profile("acme")
    assert str(info.value).startswith(
        f"{tmp_path}/templates/evil.md.j2:2: the template name of {{% {tag} %}} must be a "
        "literal string")


def test_literal_lists_of_names_are_allowed(tmp_path: Path) -> None:
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": '{% include ["missing.j2", "b.j2"] %}\n',
                                           "b.j2": "from b\n"})
    payload = compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert payload.stable_system_text == "## Identity\nfrom b"
    assert set(compiler.load_profile("acme").templates) == {"evil.md.j2", "missing.j2", "b.j2"}


# -- a condition that reads what it may not ----------------------------------------------


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ("profile.__class__", "access to attribute '__class__' of 'str' object is unsafe."),
        ("profile.missing", "'str object' has no attribute 'missing'"),
    ],
)
def test_a_condition_reading_an_unsafe_or_missing_attribute_is_an_error(
    tmp_path: Path, when: str, message: str,
) -> None:
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": "text\n"}, extra=f'when = "{when}"\n')
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert str(info.value) == (
        f'{tmp_path}/profiles/acme.toml:8: sections[0] (id "identity_base") → when: condition '
        f"failed: {message}")


# -- property: a long-lived compiler is a fresh compiler -----------------------------------

#: Section templates a hostile author might write: state kept in an imported module or a
#: namespace, captures, refusals, attempts to change the input, plain text.
POOL = {
    "state": STATE["evil.md.j2"],
    "counter": ('{% import "state.md.j2" as st %}{% set c = st.counter %}'
                "{% for s in runtime_sections %}{% set c.n = c.n + 1 %}{% endfor %}{{ c.n }}\n"),
    "capture": "{% set b %}{{ dynamic_context }}{% endset %}{{ b|upper }}\n",
    "bomb": "{{ 'x' * 10**9 }}\n",
    "mutate": '{% set _ = runtime_sections.append("junk") %}ok\n',
    "plain": "{{ runtime_sections|map(attribute='content')|join(',') }}\n",
}


def _outcome(compiler: PromptCompiler, compile_input: PromptCompileInput) -> str:
    try:
        return json.dumps(compiler.compile(compile_input).model_dump(mode="json"),
                          sort_keys=True)
    except TemplateError as error:
        return f"error: {error}"


@given(
    templates=st.lists(st.sampled_from(sorted(POOL)), min_size=1, max_size=3, unique=True),
    turns=st.lists(
        st.tuples(st.text("abc ", max_size=6),
                  st.lists(st.text("xyz", min_size=1, max_size=4), max_size=3)),
        min_size=1, max_size=5),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_long_lived_compiler_equals_a_fresh_one(
    templates: list[str], turns: list[tuple[str, list[str]]],
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        sections = "".join(
            f'\n[[sections]]\nid = "s{i}"\ntitle = "S{i}"\nstability = '
            f'"{"dynamic" if i else "stable"}"\ntemplate = "{name}.md.j2"\n'
            for i, name in enumerate(templates))
        (root / "profiles").mkdir()
        (root / "profiles" / "acme.toml").write_text(f'name = "acme"\n{sections}')
        (root / "templates").mkdir()
        (root / "templates" / "state.md.j2").write_text(STATE["state.md.j2"])
        for name in templates:
            (root / "templates" / f"{name}.md.j2").write_text(POOL[name])

        def compiler() -> PromptCompiler:
            return PromptCompiler(profile_path=[root / "profiles"],
                                  template_path=[root / "templates"])

        long_lived = compiler()
        for context, contents in turns:
            compile_input = PromptCompileInput(
                workspace_root=root, profile="acme", dynamic_context=context or None,
                runtime_sections=[RuntimeSectionInput(id=f"dynamic:n{i}", content=text)
                                  for i, text in enumerate(contents)])
            assert _outcome(long_lived, compile_input) == _outcome(compiler(), compile_input)


def test_section_inputs_hold_only_plain_values() -> None:
    # The compiler hands templates a shallow read-only view of the input's lists; that is
    # read-only all the way down only while their items are frozen models of plain values.
    plain = {str, bool, int, str | None, int | None}
    for model in (RuntimeSectionInput, DynamicSectionInput):
        assert model.model_config.get("frozen")
        assert {field.annotation for field in model.model_fields.values()} <= plain


def test_a_renderer_macro_runs_against_one_allowance(tmp_path: Path) -> None:
    (tmp_path / "renderers").mkdir()
    (tmp_path / "renderers" / "memory_recall.md.j2").write_text(
        "{% macro section(policy, tools, blocks) %}{% set b %}{% for i in range(3) %}"
        "{{ 'x' * 900000 }}{% endfor %}{% endset %}{{ b|length }}{% endmacro %}\n")
    compiler = PromptCompiler(template_path=[tmp_path], count_tokens=False)
    with pytest.raises(TemplateError) as info:
        render_memory_recall(MemoryRecall(tools=["memory_search"]), compiler.templates.env)
    assert str(info.value).startswith(
        f"{tmp_path}/renderers/memory_recall.md.j2:1: the render built more than its limit of ")
