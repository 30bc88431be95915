"""Direct templates: text, prints and if blocks, filled in without the template engine,
exactly as the engine would fill them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import Undefined
from jinja2.exceptions import SecurityError

from pioneer import PromptCompiler
from pioneer.compile.sandbox import MAX_OUTPUT, TemplateLimitError, render_parts
from pioneer.compile.templates import TemplateSet, build_environment, render_direct

DIRECT = {
    "plain.j2": "{{ content }}\n",
    "framed.j2": "<<{{ content }}>>{{ other }}\n\n",
    "bare.j2": "{{content}}",
    "text.j2": "only text, no variable\n",
    "comment.j2": "{# a comment renders nothing #}{{ content }}\n",
    "block.j2": "{% if content %}{{ content }}{% endif %}\n",
    "branches.j2": (
        "{% if flag %}\n  flag: {{ item.name }}\n{% elif other %}\nother\n"
        "{% else %}\n{{ item.note }}\n{% endif %}\nend\n"
    ),
    "nested.j2": (
        "### {{ item.name }}\n{{ content }}\n{% if flag %}\n{% if item.note %}\n\n"
        "{% endif %}\nremember {{ other }}\n{% endif %}\n"
    ),
    "deep.j2": "{{ holder.item.name }}/{{ section.title }}",
    "trimmed.j2": "a  {%- if flag -%}  b  {%- else -%}  c {%- endif %}  d\n  {{- content -}}  \n",
    "raw.j2": "{% raw %}{{ not a print }}{% endraw %}{{ content }}",
}
NOT_DIRECT = {
    "filtered.j2": "{{ content | upper }}\n",
    "method.j2": "{{ content.strip() }}\n",
    "indexed.j2": "{{ item['name'] }}\n",
    "negated.j2": "{% if not content %}empty{% endif %}\n",
    "set.j2": "{% set x = content %}{{ x }}\n",
    "loop.j2": "{% for c in content %}{{ c }}{% endfor %}\n",
    "self.j2": "{{ self }}\n",
}
NAMES = frozenset({"content", "other", "flag", "item", "holder", "section"})


@dataclass(frozen=True)
class Item:
    name: str
    note: str


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> TemplateSet:
    folder = tmp_path_factory.mktemp("templates")
    for name, source in {**DIRECT, **NOT_DIRECT}.items():
        (folder / name).write_text(source, encoding="utf-8")
    loaded = TemplateSet(build_environment([folder]))
    for name in [*DIRECT, *NOT_DIRECT]:
        assert not list(loaded.check_template(name, NAMES, context="test"))
    return loaded


def _direct(templates: TemplateSet, name: str, *scopes: dict[str, Any]) -> list[str] | None:
    program = templates.direct(name)
    assert program is not None
    return render_direct(program, templates.getattr, *scopes)


def test_which_templates_are_direct(templates: TemplateSet) -> None:
    assert all(templates.direct(name) is not None for name in DIRECT)
    assert all(templates.direct(name) is None for name in NOT_DIRECT)


texts = st.text(alphabet=st.sampled_from("ab \n\t{}%#é🙂"), max_size=20)
tests = st.one_of(st.booleans(), st.none(), st.integers(-1, 1), texts,
                  st.lists(st.integers(), max_size=1))


@given(content=texts, other=tests, flag=tests, name=texts, note=texts, title=texts)
@settings(max_examples=300, deadline=None)
def test_direct_output_is_the_engines(templates: TemplateSet, content: str, other: Any,
                                      flag: Any, name: str, note: str, title: str) -> None:
    item = Item(name, note)
    context = {"content": content, "other": other, "flag": flag, "item": item,
               "holder": {"item": item}, "section": {"id": "s", "title": title}}
    for template in DIRECT:
        parts = _direct(templates, template, context)
        if type(other) is str or "other }}" not in DIRECT[template]:
            assert parts is not None
        if parts is not None:
            assert "".join(parts) == templates.template(template).render(context)
    if type(other) is not str:
        assert _direct(templates, "framed.j2", context) is None  # printed: only a plain str
    # Scopes are searched in order, as a context built from them (later ones first)
    # resolves a name.
    parts = _direct(templates, "framed.j2", {"content": content}, {"content": "x", "other": "o"})
    assert parts is not None
    assert "".join(parts) == templates.template("framed.j2").render(
        {**{"content": "x", "other": "o"}, "content": content})


@pytest.mark.parametrize("value", [3, None, ["a"], 1.5, Item("a", "b")])
def test_only_a_plain_string_is_printed_directly(templates: TemplateSet, value: Any) -> None:
    assert _direct(templates, "plain.j2", {"content": value}) is None


def test_what_the_engine_must_report_goes_to_the_engine(templates: TemplateSet) -> None:
    item = Item("a", "b")
    assert _direct(templates, "plain.j2", {}) is None  # missing: a strict undefined error
    assert _direct(templates, "branches.j2", {"item": item, "other": ""}) is None  # no flag
    # A missing attribute is the engine's to report.
    assert _direct(templates, "deep.j2", {"holder": {}, "section": {"title": "t"}}) is None
    assert _direct(templates, "block.j2", {"content": item}) is None  # truth of an object

    class Raising:
        @property
        def name(self) -> str:
            raise RuntimeError("broken property")

    assert _direct(templates, "deep.j2", {"holder": {"item": Raising()},
                                          "section": {"title": "t"}}) is None


def test_an_attribute_the_sandbox_refuses_is_not_read(tmp_path_factory:
                                                     pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("unsafe")
    # ``__doc__`` is a plain string, so only the sandbox's refusal keeps it out.
    (folder / "unsafe.j2").write_text("{{ item.__doc__ }}", encoding="utf-8")
    loaded = TemplateSet(build_environment([folder]))
    assert not list(loaded.check_template("unsafe.j2", NAMES, context="test"))
    assert type(Item.__doc__) is str
    assert _direct(loaded, "unsafe.j2", {"item": Item("a", "b")}) is None
    with pytest.raises(SecurityError):
        loaded.template("unsafe.j2").render(item=Item("a", "b"))


def test_output_past_the_limit_goes_to_the_engine(tmp_path_factory:
                                                  pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("repeat")
    (folder / "repeat.j2").write_text("{{ content }}" * 3, encoding="utf-8")
    loaded = TemplateSet(build_environment([folder]))
    assert not list(loaded.check_template("repeat.j2", NAMES, context="test"))
    under = "x" * (MAX_OUTPUT // 3)
    assert _direct(loaded, "repeat.j2", {"content": under}) == [under] * 3
    # One more character each and the engine decides (and refuses: its limit grows only
    # with the text handed in, not with how often a template prints it).
    over = under + "x"
    assert _direct(loaded, "repeat.j2", {"content": over}) is None
    large = {"content": "x" * (MAX_OUTPUT * 6 // 10)}
    assert _direct(loaded, "repeat.j2", large) is None
    with pytest.raises(TemplateLimitError):
        render_parts(loaded.template("repeat.j2"), large)


def test_the_builtin_templates_are_direct() -> None:
    compiler = PromptCompiler()
    compiler.load_profile("full")
    assert compiler.templates.direct("content.md.j2") is not None
    assert compiler.templates.direct("bootstrap_file.md.j2") is not None


@dataclass
class Record:
    text: str = "t"
    count: int = 2
    nothing: None = None
    items: list[str] = field(default_factory=lambda: ["a"])
    _private: str = "hidden"
    shown: Any = "{}".format
    held: Any = Item


@dataclass(slots=True)
class Slotted:
    text: str = "s"


@pytest.mark.parametrize(
    ("obj", "attribute"),
    [(Record(), name) for name in ("text", "count", "nothing", "items", "_private", "shown",
                                   "held", "missing", "__class__", "__init__")]
    + [(Record, "text"), (Record, "mro"), (Slotted(), "text"), ({"text": "d"}, "text"),
       (Item("n", "o"), "name"), ("str", "upper")],
)
def test_getattr_is_the_sandboxs(templates: TemplateSet, obj: Any, attribute: str) -> None:
    ours, theirs = templates.getattr(obj, attribute), templates.env.getattr(obj, attribute)
    if isinstance(theirs, Undefined):  # undefined values compare by what they stand for
        assert type(ours) is type(theirs) and ours._undefined_name == theirs._undefined_name
    elif callable(theirs):
        assert type(ours) is type(theirs)  # a method is wrapped or bound anew on each read
    else:
        assert ours == theirs and type(ours) is type(theirs)
