"""Print-only templates: rendered without the template engine, exactly as it would."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import PromptCompiler
from pioneer.templates import TemplateSet, build_environment, render_print_only

PRINT_ONLY = {
    "plain.j2": "{{ content }}\n",
    "framed.j2": "<<{{ content }}>>{{ other }}\n\n",
    "bare.j2": "{{content}}",
    "text.j2": "only text, no variable\n",
    "comment.j2": "{# a comment renders nothing #}{{ content }}\n",
}
NOT_PRINT_ONLY = {
    "filtered.j2": "{{ content | upper }}\n",
    "attribute.j2": "{{ content.strip() }}\n",
    "block.j2": "{% if content %}{{ content }}{% endif %}\n",
    "set.j2": "{% set x = content %}{{ x }}\n",
}


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> TemplateSet:
    folder = tmp_path_factory.mktemp("templates")
    for name, source in {**PRINT_ONLY, **NOT_PRINT_ONLY}.items():
        (folder / name).write_text(source, encoding="utf-8")
    loaded = TemplateSet(build_environment([folder]))
    for name in [*PRINT_ONLY, *NOT_PRINT_ONLY]:
        assert not list(loaded.check_template(name, frozenset({"content", "other"}),
                                              context="test"))
    return loaded


def test_which_templates_are_print_only(templates: TemplateSet) -> None:
    assert all(templates.print_only(name) is not None for name in PRINT_ONLY)
    assert all(templates.print_only(name) is None for name in NOT_PRINT_ONLY)
    assert templates.print_only("plain.j2") == ((True, "content"), (False, "\n"))


@given(content=st.text(), other=st.text())
@settings(max_examples=200, deadline=None)
def test_print_only_output_is_the_engines(templates: TemplateSet, content: str,
                                           other: str) -> None:
    context = {"content": content, "other": other}
    for name in PRINT_ONLY:
        pieces = templates.print_only(name)
        assert pieces is not None
        parts = render_print_only(pieces, context)
        assert parts is not None
        assert "".join(parts) == templates.template(name).render(context)
        # Scopes are searched in order, as a context built from them would resolve a name.
        assert render_print_only(pieces, {"content": content}, {"content": "x", "other": other}) \
            == render_print_only(pieces, {**{"content": "x", "other": other}, "content": content})


@pytest.mark.parametrize("value", [3, None, ["a"], 1.5])
def test_anything_but_a_plain_string_goes_to_the_engine(templates: TemplateSet,
                                                         value: Any) -> None:
    pieces = templates.print_only("plain.j2")
    assert pieces is not None
    assert render_print_only(pieces, {"content": value}) is None
    assert render_print_only(pieces, {}) is None  # missing: the engine reports it


def test_the_builtin_content_template_is_print_only() -> None:
    compiler = PromptCompiler()
    compiler.load_profile("full")
    assert compiler.templates.print_only("content.md.j2") == ((True, "content"), (False, "\n"))
    assert compiler.templates.print_only("bootstrap_file.md.j2") is None
