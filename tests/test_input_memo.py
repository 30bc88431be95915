"""A compile input given as a mapping: the parts validated on an earlier turn are reused.

:class:`~pioneer.compile.inputs.InputMemo` (the compiler's ``compile_inputs`` cache)
hands a section mapping equal to one validated before the model made then, and a root
string its path. Whatever it reuses, :meth:`InputMemo.parse` must give what
:func:`parse_compile_input` gives: the same model, or the same problems at the same
places.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import PioneerSettings, PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import InputMemo, parse_compile_input
from pioneer.errors import InputError

#: Values that compare equal across types (``1 == True == 1.0``), which strict
#: validation tells apart, and texts with a lone surrogate.
CONFUSABLE = st.sampled_from([0, 1, True, False, 1.0, None, "1", "", "a\ud800"])
TEXT = st.sampled_from(["", " ", "hello", "héllo 🙂", "a\ud800b", "\udcff", "x" * 300])
IDS = st.sampled_from(["memory_recall", "agents_md", "note_a", "note b", "identity_base",
                       "", "x\ud800", "hook.one"])
#: Sections that pass (with flags and counts, or texts only), and anything.
VALID_SECTION = st.fixed_dictionaries(
    {"id": st.sampled_from(["memory_recall", "agents_md", "note_a"]), "content": TEXT},
    optional={"title": TEXT | st.none(), "max_chars": st.sampled_from([0, 1, 9, None]),
              "truncated": st.booleans()},
)
ODD_SECTION = st.fixed_dictionaries(
    {"id": IDS, "content": TEXT},
    optional={"title": TEXT | st.none() | CONFUSABLE, "max_chars": CONFUSABLE,
              "truncated": CONFUSABLE, "unknown": TEXT},
) | CONFUSABLE | st.lists(TEXT, max_size=2)
TEXT_SECTION = st.fixed_dictionaries(
    {"id": st.sampled_from(["memory_recall", "agents_md", "note_a"]), "content": TEXT},
    optional={"title": TEXT | st.none()},
)
SECTION = st.integers(0, 3).flatmap(
    lambda n: (ODD_SECTION, VALID_SECTION, TEXT_SECTION, TEXT_SECTION)[n])
INPUT = st.fixed_dictionaries({
    "runtime_sections": st.lists(SECTION, max_size=5) | CONFUSABLE,
}, optional={
    "workspace_root": st.sampled_from(["HOME", "HOME/sub", "", "a\x00b", "x\ud800"])
    | CONFUSABLE,
    "profile": st.sampled_from(["full", "minimal", "assistant_none", ""]),
    "dynamic_context": TEXT | st.none(),
    "dynamic_sections": st.lists(SECTION, max_size=5),
})


def _outcome(parse: Any, data: dict[str, Any]) -> tuple[str, object]:
    """What parsing ``data`` gives: the model as JSON with its fields set, or the
    problems (path, message, line)."""
    try:
        model = parse(data)
    except InputError as error:
        return "problems", [(p.path, p.message, p.line) for p in error.problems]
    return "model", (model.model_dump_json(), _fields_set(model))


def _fields_set(model: PromptCompileInput) -> list[object]:
    return [sorted(model.model_fields_set),
            [sorted(s.model_fields_set) for s in model.runtime_sections],
            [sorted(s.model_fields_set) for s in model.dynamic_sections]]


def _other_type(value: object) -> object:
    """A value equal to ``value`` of another type where there is one (a flag as a count,
    a count of 0 or 1 as a flag), else ``value``."""
    if type(value) is bool:
        return int(value)
    if type(value) is int and value in (0, 1):
        return bool(value)
    return value


def _twin(item: Any) -> Any:
    """A section equal to ``item`` by its values alone: a flag or a count of another
    type, or the same values in the same order under other keys (title and content
    swapped)."""
    if not isinstance(item, dict):
        return item
    twin = {key: _other_type(value) for key, value in item.items()}
    if twin == item and type(twin.get("title")) is str:  # the same values, in order
        other = {"title": "content", "content": "title"}
        twin = dict(zip([other.get(key, key) for key in item], item.values(), strict=True))
    return twin


def _rooted(data: dict[str, Any], home: str) -> dict[str, Any]:
    root = data.get("workspace_root")
    if isinstance(root, str) and root.startswith("HOME"):
        return {**data, "workspace_root": root.replace("HOME", home)}
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.lists(INPUT, min_size=1, max_size=4), reuse=st.booleans())
def test_a_remembered_part_validates_as_the_whole_input_does(
    inputs: list[dict[str, Any]], reuse: bool
) -> None:
    memo = InputMemo(1 << 20)
    with tempfile.TemporaryDirectory() as home:
        turns = [_rooted(data, home) for data in inputs]
        if reuse:  # each turn also sent with the sections of the turn before, and twins
            turns += [{**later, "runtime_sections": earlier.get("runtime_sections", [])}
                      for earlier, later in itertools.pairwise(turns)]
            turns += [{**data, "runtime_sections": list(map(_twin, sections))}
                      for data in turns
                      if isinstance(sections := data.get("runtime_sections"), list)]
        for data in turns * 2:
            assert _outcome(memo.parse, data) == _outcome(parse_compile_input, data)


def test_an_equal_section_is_the_model_made_before(tmp_path: Path) -> None:
    memo = InputMemo(1 << 20)

    def turn(context: str) -> dict[str, Any]:  # new objects each turn, as from JSON
        return {"workspace_root": str(tmp_path), "dynamic_context": context,
                "runtime_sections": [{"id": "agents_md", "content": "".join(["Be ", "brief."])},
                                     {"id": "thread_context", "content": context}]}

    first, second = memo.parse(turn("one")), memo.parse(turn("two"))
    assert second.runtime_sections[0] is first.runtime_sections[0]
    assert second.runtime_sections[1] is not first.runtime_sections[1]
    assert second.workspace_root is first.workspace_root
    stats = memo.cache.stats()
    assert (stats.name, stats.entries, stats.hits, stats.misses) == ("compile_inputs", 4, 2, 4)
    assert second == parse_compile_input(turn("two"))


def test_a_flag_or_count_equal_to_a_remembered_one_is_still_checked(tmp_path: Path) -> None:
    """``True == 1`` in Python, yet a strict field takes only one of them: a section
    with a flag or a count is validated each time, never matched by value."""
    memo = InputMemo(1 << 20)
    good = {"id": "agents_md", "content": "x", "truncated": True, "max_chars": 5}
    bad = {"id": "agents_md", "content": "x", "truncated": 1, "max_chars": True}
    assert memo.parse({"runtime_sections": [good]}).runtime_sections[0].truncated is True
    with pytest.raises(InputError) as error:
        memo.parse({"runtime_sections": [bad]})
    assert [p.path for p in error.value.problems] == [
        "runtime_sections[0] → max_chars", "runtime_sections[0] → truncated"]
    assert memo.cache.stats().entries == 0


def test_a_problem_is_reported_at_its_place_among_remembered_sections() -> None:
    memo = InputMemo(1 << 20)
    kept = {"id": "agents_md", "content": "Be brief."}
    memo.parse({"runtime_sections": [kept]})
    with pytest.raises(InputError) as error:
        memo.parse({"runtime_sections": [kept, {"id": "agents_md", "contnet": "typo"}],
                    "dynamic_sections": [{"id": "identity_base", "content": "x"}]})
    assert [(p.path, p.message) for p in error.value.problems] == [
        ("runtime_sections[1] → content", "Field required"),
        ("runtime_sections[1] → contnet", 'unknown field (did you mean "content"?)'),
        ("dynamic_sections[0] → id",
         "'identity_base' is a built-in section id and cannot be used as a dynamic id"),
    ]


def test_a_lone_surrogate_is_replaced_on_every_turn() -> None:
    memo = InputMemo(1 << 20)
    for _ in range(2):
        given_input = memo.parse({"runtime_sections": [{"id": "x\ud800", "content": "a\udfff"}]})
        section = given_input.runtime_sections[0]
        assert (section.id, section.content) == ("x\ufffd", "a\ufffd")


def test_a_root_no_file_system_can_hold_is_refused_each_time() -> None:
    memo = InputMemo(1 << 20)
    for _ in range(2):
        with pytest.raises(InputError) as error:
            memo.parse({"workspace_root": "a\x00b"})
        assert [p.path for p in error.value.problems] == ["workspace_root"]
    assert memo.cache.stats().entries == 0


def test_the_budget_bounds_what_is_kept_and_changes_no_result(tmp_path: Path) -> None:
    small, none = InputMemo(3_000), InputMemo(0)
    for turn in range(20):
        data = {"workspace_root": str(tmp_path),
                "runtime_sections": [{"id": f"note_{turn % 7}", "content": "y" * 400}]}
        assert small.parse(data) == none.parse(data) == parse_compile_input(data)
        assert small.cache.stats().bytes <= 3_000
    assert small.cache.stats().evictions > 0
    assert none.cache.stats().entries == 0


def test_the_compiler_reuses_parts_of_a_mapping_and_compiles_it_as_its_model(
    tmp_path: Path,
) -> None:
    (tmp_path / "SOUL.md").write_text("Calm.", encoding="utf-8")
    compiler = PromptCompiler(PioneerSettings(input_cache_bytes=1 << 20))
    for turn in range(3):
        data = {"workspace_root": str(tmp_path), "dynamic_context": f"turn {turn}",
                "runtime_sections": [{"id": "memory_recall", "content": "- tea"}]}
        from_mapping = compiler.compile(data)
        assert from_mapping.to_json() == PromptCompiler().compile(
            parse_compile_input(data)).to_json()
    stats = next(s for s in compiler.cache_stats() if s.name == "compile_inputs")
    assert (stats.entries, stats.hits, stats.misses, stats.budget) == (2, 4, 2, 1 << 20)
