"""An edge model holds what validating its input with every lone surrogate replaced first
would give, at any depth, in keys and values, str subclasses included, and reports an
unknown key at the same place (pioneer/text.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pioneer.providers.request import SamplingOptions, ToolCall
from pioneer.text import json_writer, scrub


class _Text(str):
    """A str subclass: scrubbed as a str is."""


TEXT = st.sampled_from(["", "plain", "héllo 🙂", "a\ud800b", "\udcff", "ok\udfff"]) | st.text(
    st.characters(codec=None, exclude_categories=()), max_size=12)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT | TEXT.map(_Text),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)


@given(arguments=st.dictionaries(TEXT, JSON, max_size=4),
       call_id=(TEXT | TEXT.map(_Text)).filter(bool),
       signature=st.none() | TEXT | TEXT.map(_Text))
def test_an_edge_model_holds_what_scrubbing_first_gives(
    arguments: dict[str, Any], call_id: str, signature: str | None
) -> None:
    data = {"id": call_id, "name": "lookup", "arguments": arguments,
            "thought_signature": signature}
    held = ToolCall.model_validate(data)
    assert held == ToolCall.model_validate(scrub(data))
    held.model_dump_json().encode("utf-8")  # no lone surrogate left anywhere


def test_a_clean_input_is_validated_as_given_and_a_surrogate_anywhere_is_replaced() -> None:
    clean = {"id": "c1", "name": "lookup", "arguments": {"q": ["tea", {"k": "héllo"}]}}
    assert ToolCall.model_validate(clean).arguments == clean["arguments"]
    deep = {"id": "c1", "name": "lookup",
            "arguments": {"q": ["tea", {"k\ud800": _Text("x\udfff")}]}}
    assert ToolCall.model_validate(deep).arguments == {"q": ["tea", {"k\ufffd": "x\ufffd"}]}


@given(stop=st.lists(TEXT.filter(bool), max_size=3) | st.tuples(TEXT.filter(bool)))
def test_a_list_of_texts_is_scrubbed_as_a_mapping_is(stop: list[str] | tuple[str]) -> None:
    held = SamplingOptions.model_validate({"stop": stop})
    assert held == SamplingOptions.model_validate(scrub({"stop": stop}))
    held.model_dump_json().encode("utf-8")


@given(key=TEXT.filter(lambda key: key not in ToolCall.model_fields))
def test_an_unknown_key_is_reported_as_its_replaced_text(key: str) -> None:
    data = {"id": "c1", "name": "lookup", key: 1}
    with pytest.raises(ValidationError) as given_error:
        ToolCall.model_validate(data)
    with pytest.raises(ValidationError) as scrubbed_error:
        ToolCall.model_validate(scrub(data))
    assert [e["loc"] for e in given_error.value.errors()] == [
        e["loc"] for e in scrubbed_error.value.errors()]


_KEYS = st.text(max_size=8) | st.integers() | st.floats(allow_nan=False) | st.booleans() \
    | st.none()
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**70)
    | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(value=_JSON_VALUES,
       separators=st.sampled_from([(",", ":"), (", ", ": ")]), sort_keys=st.booleans())
def test_the_json_writer_writes_what_json_dumps_writes(
    value: Any, separators: tuple[str, str], sort_keys: bool,
) -> None:
    """The same text as ``json.dumps`` with the same options, or the same error (a key
    ``sort_keys`` cannot order)."""
    write = json_writer(sort_keys=sort_keys, separators=separators)
    try:
        expected = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys,
                              separators=separators)
    except TypeError:
        with pytest.raises(TypeError):
            write(value)
        return
    assert write(value) == expected


def test_the_json_writer_refuses_what_json_cannot_write() -> None:
    write = json_writer()
    with pytest.raises(TypeError, match="not JSON serializable"):
        write({"a": object()})
