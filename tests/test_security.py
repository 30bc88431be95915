"""Templates are untrusted code; input text is never template source.

Every attack here must end in a ``TemplateError`` naming the template and the line, never
in Python internals, a crash or gigabytes of memory; and text that arrives as input
(skills, context, memory, AGENTS.md, identity files, hook contributions) comes out
verbatim even when it looks like jinja.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import HOSTILE_LIMIT as LIMIT
from support import compile_round, hostile_compiler, within

from pioneer import PioneerError, PromptCompileInput, PromptCompiler, TemplateError
from pioneer.compile.sandbox import INPUT_COPIES, MAX_OUTPUT
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext, HookRegistry
from pioneer.sections.agents_md import agents_md_subscription
from pioneer.sections.memory import MemoryItem, MemoryRecall, render_memory_recall

#: A generous watchdog: these renders are refused at once; only a broken guard runs on.
NEVER_HANGS = 60.0


def _compiler(tmp_path: Path, template: str, *, extra: str = "") -> PromptCompiler:
    return hostile_compiler(tmp_path, {"evil.md.j2": template}, extra=extra)


def _render_error(tmp_path: Path, template: str) -> str:
    compiler = _compiler(tmp_path, template)
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    return str(info.value).replace(f"{tmp_path}/", "")  # errors name the file on disk


def _located(message: str) -> str:
    """The error for line 2 of the template, as the compiler renders it."""
    return f'templates/evil.md.j2:2: {message}\n  while rendering section "identity_base"'


# -- attribute walks to Python internals ---------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("profile.__class__", "access to attribute '__class__' of 'str' object is unsafe."),
        ("''.__class__.__mro__[1].__subclasses__()",
         "access to attribute '__class__' of 'str' object is unsafe."),
        ("cycler.__init__.__globals__",
         "access to attribute '__init__' of 'type' object is unsafe."),
        ("joiner().__call__.__globals__",
         "access to attribute '__call__' of 'Joiner' object is unsafe."),
        ("namespace.__init__.__globals__['__builtins__']['__import__']('os')",
         "access to attribute '__init__' of 'type' object is unsafe."),
        ("dict.mro()", "access to attribute 'mro' of 'type' object is unsafe."),
        ("profile|attr('__class__')", "access to attribute '__class__' of 'str' object is unsafe."),
        ("self._TemplateReference__context",
         "access to attribute '_TemplateReference__context' of 'TemplateReference' object is "
         "unsafe."),
        # format-string tricks reach attributes inside the replacement field
        ("'{0.__class__}'.format(profile)",
         "access to attribute '__class__' of 'str' object is unsafe."),
        ("'{x.__class__.__mro__}'.format_map({'x': section})",
         "access to attribute '__class__' of 'FrozenDict' object is unsafe."),
        ("'{x.__class__.__mro__}'.format_map({'x': {}})",
         "access to attribute '__class__' of 'dict' object is unsafe."),
        # a class's methods are not on the allow-list, even jinja2's own helpers'
        ("'{x.__globals__}'.format_map({'x': cycler.reset})",
         "access to attribute 'reset' of 'type' object is unsafe."),
        ("'{x.__globals__}'.format_map({'x': cycler(1).reset})",
         "access to attribute '__globals__' of 'method' object is unsafe."),
        ("'%s'|format(section.__class__)",
         "access to attribute '__class__' of 'FrozenDict' object is unsafe."),
    ],
)
def test_internals_are_refused_with_template_and_line(
    tmp_path: Path, expression: str, message: str
) -> None:
    assert _render_error(tmp_path, f"fine\n{{{{ {expression} }}}}\n") == _located(message)


def test_lipsum_is_not_offered(tmp_path: Path) -> None:
    # lipsum(n) makes n paragraphs of filler text: a memory bomb with no use in a prompt.
    compiler = _compiler(tmp_path, "fine\n{{ lipsum(10**9) }}\n")
    with pytest.raises(TemplateError, match='"lipsum" is undefined'):
        compiler.load_profile("acme")


# -- exhaustion: refused before anything is built ------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("range(10**12)|list",
         "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE "
         "(100000)."),
        ("'x' * 10**10",
         f"repeating a sequence would build 10000000000 characters; templates may build at "
         f"most {LIMIT}"),
        ("10**10 * 'x'",
         f"repeating a sequence would build 10000000000 characters; templates may build at "
         f"most {LIMIT}"),
        ("[1, 2] * 10**9",
         f"repeating a sequence would build 2000000000 characters; templates may build at "
         f"most {LIMIT}"),
        # The text of a list, not its memory: [s] * n holds s once but prints it n times.
        ("['abc'] * 500000",
         f"repeating a list of strings would build 3500000 characters; templates may build "
         f"at most {LIMIT}"),
        ("[['x' * 1000000]] * 1000",
         f"repeating a list of strings would build 1000006000 characters; templates may "
         f"build at most {LIMIT}"),
        ("2 ** 100000000",
         "a power would build 200000000 bits; templates may build at most 100000"),
        ("'{:>1000000000}'.format(1)",
         f"a format width or precision would build 1000000000 characters; templates may "
         f"build at most {LIMIT}"),
        ("'{:.999999999f}'.format(1.5)",
         f"a format width or precision would build 999999999 characters; templates may "
         f"build at most {LIMIT}"),
        ("'{0:{1}}'.format(1, 10**9)",
         "a replacement field inside a format spec is not allowed in templates; write the "
         "number"),
        ("'%1000000000d' % 1",
         f"a % format width would build 1000000000 characters; templates may build at most "
         f"{LIMIT}"),
        ("'%*d' % (10**9, 1)",
         "a '*' width or precision in % formatting is not allowed in templates; write the "
         "number"),
        ("'%.*f'|format(10**9, 1.0)",
         "a '*' width or precision in % formatting is not allowed in templates; write the "
         "number"),
        ("'x'|center(10**10)",
         f"the center filter would build 10000000000 characters; templates may build at "
         f"most {LIMIT}"),
        ("'x'|indent(10**10, true)",
         f"the indent filter would build 10000000001 characters; templates may build at "
         f"most {LIMIT}"),
        ("'x'.ljust(10**10)",
         f"str.ljust would build 10000000000 characters; templates may build at most "
         f"{LIMIT}"),
        ("'x'.zfill(10**10)",
         f"str.zfill would build 10000000000 characters; templates may build at most "
         f"{LIMIT}"),
        ("'\\t\\t'.expandtabs(10**9)",
         f"str.expandtabs would build 2000000002 characters; templates may build at most "
         f"{LIMIT}"),
        ("('y' * 2000).replace('', 'x' * 1000)",
         f"replace would build 2003000 characters; templates may build at most {LIMIT}"),
        ("('y' * 1000)|replace('y', 'x' * 2001)",
         f"replace would build 2001000 characters; templates may build at most {LIMIT}"),
        ("('ab' * 1000)|join('x' * 1000)",
         f"join would build 2001000 characters; templates may build at most {LIMIT}"),
        # 2,890 characters of items and 999 separators of 3,000
        ("('x' * 3000).join(range(1000)|map('string'))",
         f"join would build 2999890 characters; templates may build at most {LIMIT}"),
        ("(1).to_bytes(10**10, 'big')",
         f"int.to_bytes would build 10000000000 bytes; templates may build at most "
         f"{LIMIT}"),
    ],
)
def test_exhaustion_is_refused_before_it_is_built(
    tmp_path: Path, expression: str, message: str
) -> None:
    # The message says "would build": the size is refused before anything is built.
    template = f"fine\n{{{{ {expression} }}}}\n"
    rendered = within(NEVER_HANGS, lambda: _render_error(tmp_path, template))
    assert rendered == _located(message)


@pytest.mark.parametrize(
    "expression",
    ["'-' * 40", "'x' * 1000000", "2 ** 64", "'{:>12}'.format('ok')", "'%5.2f' % 3.14159",
     "'%-10s|'|format('a')", "'ab'|center(9)", "'a\\nb'|indent(4)", "'abc'.replace('b', 'XY')",
     "['a', 'b']|join(', ')"],
)
def test_ordinary_use_of_the_same_operations_renders(tmp_path: Path, expression: str) -> None:
    compiler = _compiler(tmp_path, f"{{{{ {expression} }}}}\n")
    payload = compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert payload.stable_system_text.startswith("## Identity\n")


def test_a_loop_that_emits_without_end_is_stopped_at_the_output_limit(tmp_path: Path) -> None:
    # 10**8 characters if it ran to the end; it stops a little past MAX_OUTPUT, after
    # some 20,000 of its steps.
    template = ("{% for i in range(1000) %}{% for j in range(1000) %}" + "x" * 100
                + "{% endfor %}{% endfor %}\n")
    message = within(NEVER_HANGS, lambda: _render_error(tmp_path, template))
    assert message == (
        f"templates/evil.md.j2: the render built more than its limit of {LIMIT} characters "
        f"(printed, captured and computed text all count: {MAX_OUTPUT} plus {INPUT_COPIES} "
        'times the text it is given)\n  while rendering section "identity_base"')


def test_the_output_limit_grows_with_the_input_it_passes_through(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, "{{ extra_system }}\n")
    big = "z" * (MAX_OUTPUT * 2)
    payload = compiler.compile(
        PromptCompileInput(workspace_root=tmp_path, profile="acme", extra_system=big))
    assert payload.stable_system_text == "## Identity\n" + big


# -- any other runtime failure -------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "ZeroDivisionError: division by zero"),
        ("'x'|wordwrap(0)", "ValueError: invalid width 0 (must be > 0)"),
        ("10 ** 5000", "ValueError: Exceeds the limit (4300 digits) for integer string "
                       "conversion; use sys.set_int_max_str_digits() to increase the limit"),
    ],
)
def test_runtime_failures_are_template_errors(tmp_path: Path, expression: str,
                                               message: str) -> None:
    assert _render_error(tmp_path, f"fine\n{{{{ {expression} }}}}\n") == _located(message)


def test_a_failing_condition_is_a_template_error(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, "text\n", extra='when = "1 / 0 > 1"\n')
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert str(info.value) == (
        f'{tmp_path}/profiles/acme.toml:8: sections[0] (id "identity_base") → when: condition '
        "failed: ZeroDivisionError: division by zero"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", "cannot compile: RecursionError"),
        ("{% if 1 %}" * 2000 + "{% endif %}" * 2000, "cannot compile: RecursionError"),
    ],
    ids=["nested-parentheses", "nested-blocks"],
)
def test_templates_too_deep_to_parse_are_template_errors(tmp_path: Path, source: str,
                                                          message: str) -> None:
    compiler = _compiler(tmp_path, source)
    with pytest.raises(TemplateError) as info:
        compiler.load_profile("acme")
    assert message in str(info.value)
    assert "evil.md.j2" in str(info.value)


def test_a_condition_too_deep_to_parse_is_a_located_error(tmp_path: Path) -> None:
    deep = "(" * 3000 + "true" + ")" * 3000
    compiler = _compiler(tmp_path, "text\n", extra=f'when = "{deep}"\n')
    with pytest.raises(PioneerError) as info:
        compiler.load_profile("acme")
    assert str(info.value).startswith(
        f"{tmp_path}/profiles/acme.toml:8: sections[0] (id \"identity_base\") → when: "
        "invalid condition: RecursionError")


def test_a_renderer_template_that_is_not_utf8_is_a_template_error(tmp_path: Path) -> None:
    (tmp_path / "renderers").mkdir()
    (tmp_path / "renderers" / "memory_recall.md.j2").write_bytes(b"caf\xe9\n")
    compiler = PromptCompiler(template_path=[tmp_path], count_tokens=False)
    with pytest.raises(TemplateError) as info:
        render_memory_recall(MemoryRecall(tools=["memory_search"]), compiler.templates.env)
    assert str(info.value) == (
        f"{tmp_path}/renderers/memory_recall.md.j2: cannot be read: not valid UTF-8\n"
        '  while rendering macro "section"')


def test_a_template_that_is_not_utf8_is_a_template_error(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, "")
    (tmp_path / "templates" / "evil.md.j2").write_bytes(b"caf\xe9 {{ profile }}\n")
    with pytest.raises(TemplateError) as info:
        compiler.load_profile("acme")
    assert str(info.value).startswith(
        f"{tmp_path}/templates/evil.md.j2: cannot be read: not valid UTF-8\n"
        '  while checking section "identity_base"')


def test_an_included_template_that_does_not_parse_fails_the_render(tmp_path: Path) -> None:
    compiler = _compiler(tmp_path, 'fine\n{% include "broken.j2" %}\n')
    (tmp_path / "templates" / "broken.j2").write_text("ok\n{% if %}\n")
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    # The error names the file that does not parse, not the one including it.
    assert str(info.value) == (
        f"{tmp_path}/templates/broken.j2:2: Expected an expression, got 'end of statement "
        "block'\n  while rendering section \"identity_base\"")


def test_a_deployment_renderer_template_that_fails_is_a_template_error(tmp_path: Path) -> None:
    (tmp_path / "renderers").mkdir()
    (tmp_path / "renderers" / "memory_recall.md.j2").write_text(
        "{% macro section(policy, tools, blocks) %}\n{{ 1 / 0 }}\n{% endmacro %}\n")
    compiler = PromptCompiler(template_path=[tmp_path], count_tokens=False)
    recall = MemoryRecall(tools=["memory_search"])
    with pytest.raises(TemplateError) as info:
        render_memory_recall(recall, compiler.templates.env)
    assert str(info.value) == (
        f"{tmp_path}/renderers/memory_recall.md.j2:2: ZeroDivisionError: division by zero\n"
        '  while rendering macro "section"'
    )


# -- input text is never template source --------------------------------------------

#: Jinja that would print 49, leak a class, fail on an undefined name or fail to parse
#: if anything compiled it.
POISON = (
    "{{ 7 * 7 }} {{ ''.__class__.__mro__ }} {% for x in range(3) %}{{ x }}{% endfor %} "
    "{{ undefined_name }} {% if %} {# note #} {% raw %}{{ x }}"
)


def _assert_verbatim(text: str, count: int) -> None:
    assert text.count(POISON) == count
    assert "49" not in text.replace(POISON, "")
    assert "<class" not in text


def test_text_inputs_are_never_rendered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
        (home / name).write_text(f"# {name}\n{POISON}\n")
    section = {"id": "acme.note", "title": f"T {POISON}", "content": POISON}
    payload = PromptCompiler().compile(PromptCompileInput.model_validate({
        "workspace_root": home,
        "skills_prompt": POISON,
        "retry_instruction": POISON,
        "dynamic_context": POISON,
        "extra_system": POISON,
        "runtime_sections": [{**section, "id": "memory_recall"}],
        "dynamic_sections": [section],
    }))
    # 3 identity files, skills, retry, context, extra, and a body and a title each for
    # the runtime and the hook section
    # The home's path is in the text (file headings): keep its digits out of the check.
    _assert_verbatim(payload.full_system_text.replace(str(tmp_path), "<tmp>"), 11)


def test_hook_and_agents_md_text_is_never_rendered(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "web").mkdir(parents=True)
    (workspace / "AGENTS.md").write_text(POISON)
    registry = HookRegistry()
    registry.add(agents_md_subscription(workspace))

    @registry.hook("acme.memory", phase="turn.pre_prompt_context")
    def memory(context: HookContext) -> object:
        recall = MemoryRecall(tools=["memory_search"],
                              recalled=[MemoryItem(scope="user", category="fact", content=POISON)])
        text = render_memory_recall(recall, context.env)
        return PromptSectionContribution(contribution_id="m", domain="memory",
                                         section_id="memory_recall", content=text or "")

    payload = compile_round(PromptCompiler(), PromptCompileInput(workspace_root=tmp_path),
                           registry)
    text = payload.dynamic_system_text
    assert "<AGENTS_MD>\n" + POISON + "\n</AGENTS_MD>" in text
    assert "- user fact: " + POISON[:280] in text  # memory items are cut at 280 chars
    assert "49" not in text.replace(POISON, "").replace(POISON[:280], "")


def test_an_error_names_the_template_never_the_input(tmp_path: Path) -> None:
    # A failing template must not echo the (possibly private) input it was rendering.
    compiler = _compiler(tmp_path, "{{ extra_system }}\n{{ 1 / 0 }}\n")
    with pytest.raises(PioneerError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme",
                                            extra_system="secret-token-123"))
    assert "secret-token-123" not in str(info.value)
