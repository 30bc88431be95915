"""The public face: ``import pioneer`` offers at most 40 names, each documented in docs/,
and the names that left it are reached through their modules (docs/api.md)."""

from __future__ import annotations

import importlib
import re

import pytest
from doc_pages import page, table_rows

import pioneer

PUBLIC = {row[0].strip("`"): row for row in table_rows("api.md", "public")}
MOVED = {row[0].strip("`"): row[1].strip("`") for row in table_rows("api.md", "moved")}


def _named(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` in inline code (``Agent``, ``Agent(...)``, ...)."""
    return re.search(rf"`[^`\n]*(?<![\w.]){re.escape(name)}\b[^`\n]*`", text) is not None


def test_the_first_tier_has_at_most_forty_names() -> None:
    assert len(pioneer.__all__) <= 40
    assert len(set(pioneer.__all__)) == len(pioneer.__all__)


def test_the_api_page_lists_exactly_the_first_tier() -> None:
    rows = [row[0].strip("`") for row in table_rows("api.md", "public")]
    assert sorted(rows) == sorted(pioneer.__all__)  # each once: no repeated row


@pytest.mark.parametrize("name", sorted(pioneer.__all__))
def test_every_public_name_is_documented_on_its_page(name: str) -> None:
    link = re.fullmatch(r"\[([\w-]+\.md)\]\(\1\)", PUBLIC[name][2])
    assert link is not None, f"{name}: the page cell is not a link to a docs page"
    assert _named(page(link.group(1)), name), f"docs/{link.group(1)} does not name {name}"
    assert PUBLIC[name][1], f"{name}: the table does not say what it is"


def test_the_moved_table_is_the_packages() -> None:
    assert MOVED == pioneer._MOVED
    assert not set(MOVED) & set(pioneer.__all__)


@pytest.mark.parametrize("name", sorted(pioneer._MOVED))
def test_a_moved_name_is_in_its_module_and_asking_pioneer_says_where(name: str) -> None:
    module = importlib.import_module(pioneer._MOVED[name])
    assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match=rf"import it from {re.escape(module.__name__)}$"):
        getattr(pioneer, name)


def test_a_name_that_never_was_public_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError) as info:
        pioneer.nope  # noqa: B018
    assert str(info.value) == "module 'pioneer' has no attribute 'nope'"
