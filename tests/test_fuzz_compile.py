"""Fuzzing the compile input: any strings, control characters, huge values, lone surrogates.

A compile input either fails validation with an ``InputError`` or compiles; the only
exceptions ever raised are ``PioneerError`` subclasses. Every compile that succeeds
keeps the invariants: the boundary at most once and splitting back into the stable and
dynamic texts, fingerprints that are the sha256 of those texts, a manifest that matches
its schema, every budget respected, and the stable text unchanged when only dynamic
inputs change. Lone surrogates (which UTF-8 cannot encode) become U+FFFD at the edge.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support import assert_same_as_validated, compile_round

from pioneer import InputError, PioneerError, PromptCompileInput, PromptCompiler
from pioneer.compile.boundary import BOUNDARY_MARKER, QUOTED_MARKER, split_prompt_cache_boundary
from pioneer.compile.inputs import parse_compile_input
from pioneer.files import builtin_dir
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext, HookRegistry
from pioneer.text import scrub

FUZZ = settings(max_examples=int(os.environ.get("PIONEER_FUZZ_EXAMPLES", "100")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
COMPILER = PromptCompiler()
MANIFEST_SCHEMA = json.loads((builtin_dir("schemas") / "manifest.schema.json").read_text())

#: Every code point, lone surrogates and control characters included.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
SPECIAL = st.sampled_from([
    "\ud800", "a\udfffb", "\udc80\udcff", "\x00", "\x1b[31m", "\u202e", "\ufeff", "\r\n\r",
    BOUNDARY_MARKER, BOUNDARY_MARKER.strip(), "{{ 7 * 7 }}", "{% raw %}", "## Identity",
    " \t\n ", "",
])
TEXT = st.text(ANY_CHAR, max_size=120) | SPECIAL | st.lists(SPECIAL | st.text(ANY_CHAR, max_size=8),
                                                            max_size=6).map("".join)
HUGE = st.sampled_from([60_000, 9_000]).flatmap(
    lambda size: st.sampled_from(["x", "é ", "\ud800", "\x00", "🙂 word "]).map(
        lambda unit: (unit * size)[:size]))
#: Mostly ordinary text, sometimes huge.
VALUE = st.one_of(TEXT, TEXT, TEXT, HUGE)
IDS = st.from_regex(r"[a-z][a-z0-9_.]{0,10}", fullmatch=True) | st.sampled_from(
    ["agents_md", "memory_recall", "thread_context", "identity_base", "with space", "",
     " lead", "x\ud800", "x\x00"]) | TEXT
SECTION = st.fixed_dictionaries(
    {"id": IDS, "content": VALUE},
    optional={"title": TEXT | st.none(), "max_chars": st.integers(-3, 10**6) | st.none(),
              "truncated": st.booleans()},
)
#: Fields that reach only dynamic sections.
DYNAMIC = st.fixed_dictionaries({}, optional={
    "skills_prompt": VALUE | st.none(),
    "retry_instruction": TEXT | st.none(),
    "dynamic_context": VALUE | st.none(),
    "extra_system": VALUE | st.none(),
    "continue_generation_hint": st.booleans(),
    "include_task_orchestration_policy": st.booleans(),
    "artifact_ref_count": st.integers(-1, 2**64),
    "runtime_sections": st.lists(SECTION, max_size=18),
    "dynamic_sections": st.lists(SECTION, max_size=18),
})
#: Fields that can change the stable text too.
STABLE = st.fixed_dictionaries({}, optional={
    "profile": st.sampled_from(["full", "minimal", "none", "assistant_full"]),
    "include_tool_recovery_policy": st.booleans(),
    "limits": st.fixed_dictionaries({}, optional={
        "max_chars_per_file": st.integers(-1, 50_000), "max_chars_total": st.integers(-1, 200_000),
    }),
})
FILES = st.dictionaries(st.sampled_from(["SOUL.md", "IDENTITY.md", "USER.md"]),
                        st.binary(max_size=300) | TEXT.map(lambda t: t.encode("utf-8",
                                                                             "surrogatepass")),
                        max_size=3)
JUNK = st.dictionaries(st.text(ANY_CHAR, min_size=1, max_size=6), TEXT, max_size=2)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_invariants(payload: Any, compile_input: PromptCompileInput) -> None:
    """What every successful compile promises."""
    stable, dynamic = payload.stable_system_text, payload.dynamic_system_text
    full = payload.full_system_text
    for text in (stable, dynamic, full):
        text.encode("utf-8")  # never a lone surrogate in the output
    # Even when input text carries the marker: the boundary is where the compiler put it.
    assert full.count(BOUNDARY_MARKER) == (1 if dynamic else 0)
    assert BOUNDARY_MARKER.strip() not in stable + dynamic
    if stable and dynamic:
        assert split_prompt_cache_boundary(full) == (stable, dynamic)
    manifest = payload.manifest
    assert (manifest.fingerprint_stable, manifest.fingerprint_dynamic,
            manifest.fingerprint_full) == (_sha(stable), _sha(dynamic), _sha(full))
    assert [s.sha256 for s in manifest.sections] == [_sha(s.text) for s in payload.sections]
    assert [s.chars for s in manifest.sections] == [len(s.text) for s in payload.sections]
    stabilities = [s.stability for s in payload.sections]
    assert stabilities == sorted(stabilities, key=lambda s: s != "stable")
    jsonschema.validate(json.loads(manifest.to_json()), MANIFEST_SCHEMA)
    json.loads(payload.to_json())
    assert_same_as_validated(payload)  # records built without validation are valid ones
    _check_budgets(payload, compile_input)


def _check_budgets(payload: Any, compile_input: PromptCompileInput) -> None:
    limits = compile_input.limits
    per_file = min(20_000, limits.max_chars_per_file if limits.max_chars_per_file is not None
                   else 20_000)
    total = min(150_000, limits.max_chars_total if limits.max_chars_total is not None
                else 150_000)
    entries = payload.manifest.source_manifest
    assert all(entry.chars <= per_file for entry in entries)
    assert sum(entry.chars for entry in entries) <= total
    above = [f"limits.{name} = " for name, asked, budget in (
        ("max_chars_per_file", limits.max_chars_per_file, 20_000),
        ("max_chars_total", limits.max_chars_total, 150_000)) if asked is not None
        and asked > budget]  # each one clamped, and said so
    assert [d.message[:len(d.message.split("=")[0]) + 2] for d in payload.manifest.diagnostics
            if d.code == "limit_clamped"] == above
    for prefix, pool in (("runtime:", 24_000), ("hook:", 16_000)):
        group = [s for s in payload.sections if s.source.startswith(prefix)]
        bodies = [s.text[len(f"## {s.title}\n"):] for s in group]  # titles may hold \n
        assert len(group) <= 16
        assert sum(len(body) for body in bodies) <= pool
        assert all(len(body) <= 20_000 for body in bodies)


def _compile(root: Path, data: dict[str, Any]) -> tuple[Any, PromptCompileInput] | None:
    try:
        compile_input = parse_compile_input({"workspace_root": str(root), **data})
    except InputError:
        return None
    return COMPILER.compile(compile_input), compile_input


@FUZZ
@given(files=FILES, stable=STABLE, dynamic=DYNAMIC, other=DYNAMIC, junk=JUNK)
def test_any_compile_input_compiles_or_is_an_input_error(
    files: dict[str, bytes], stable: dict[str, Any], dynamic: dict[str, Any],
    other: dict[str, Any], junk: dict[str, str],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, content in files.items():
            (root / name).write_bytes(content)
        try:
            first = _compile(root, {**stable, **dynamic})
            second = _compile(root, {**stable, **other})
            if junk:
                assert _compile(root, {**stable, **dynamic, **junk}) is None
        except PioneerError:  # nothing else may escape
            return
    for result in (first, second):
        if result is not None:
            check_invariants(*result)
    if first is not None and second is not None:  # only dynamic inputs differ
        assert first[0].stable_system_text == second[0].stable_system_text
        assert (first[0].manifest.fingerprint_stable
                == second[0].manifest.fingerprint_stable)


@FUZZ
@given(workspace_root=TEXT, profile=TEXT)
def test_any_root_or_profile_name_is_an_input_error_or_compiles(
    workspace_root: str, profile: str
) -> None:
    try:
        compile_input = parse_compile_input({"workspace_root": workspace_root or ".",
                                             "profile": profile})
        payload = COMPILER.compile(compile_input)
    except PioneerError:
        return
    check_invariants(payload, compile_input)


@FUZZ
@given(content=VALUE, title=TEXT | st.none(), section_id=IDS)
def test_any_hook_contribution_compiles_or_fails_the_hook(
    content: str, title: str | None, section_id: str
) -> None:
    registry = HookRegistry()

    @registry.hook("fuzz", phase="turn.pre_prompt_compile", failure="best_effort")
    def contribute(context: HookContext) -> PromptSectionContribution:
        return PromptSectionContribution(contribution_id="c", domain="fuzz", content=content,
                                         title=title, section_id=section_id)

    with tempfile.TemporaryDirectory() as folder:
        compile_input = PromptCompileInput(workspace_root=Path(folder))
        payload = compile_round(COMPILER, compile_input, registry)
    check_invariants(payload, compile_input)


# -- the decided behaviours, one by one -------------------------------------------


@pytest.mark.parametrize("field", ["skills_prompt", "retry_instruction", "dynamic_context",
                                   "extra_system"])
def test_a_lone_surrogate_becomes_the_replacement_character(home: Path, field: str) -> None:
    payload = COMPILER.compile(PromptCompileInput.model_validate(
        {"workspace_root": home, field: "before \ud800 after \udfff"}))
    assert "before \ufffd after \ufffd" in payload.dynamic_system_text
    assert payload.manifest.fingerprint_dynamic == _sha(payload.dynamic_system_text)
    assert "\\ufffd" in payload.to_json() or "\ufffd" in payload.to_json()


def test_lone_surrogates_in_sections_and_titles_are_replaced(home: Path) -> None:
    payload = COMPILER.compile(PromptCompileInput.model_validate({
        "workspace_root": home,
        "runtime_sections": [{"id": "memory_recall", "content": "m\ud800"}],
        "dynamic_sections": [{"id": "acme.x", "title": "T\ud800", "content": "h"}],
    }))
    assert "## Memory Recall\nm\ufffd" in payload.dynamic_system_text
    assert "## T\ufffd\nh" in payload.dynamic_system_text
    # In an id the replacement character is refused: ids are ASCII (docs/profiles.md, "Ids").
    with pytest.raises(ValidationError, match="U\\+FFFD REPLACEMENT CHARACTER"):
        PromptCompileInput.model_validate({"dynamic_sections": [
            {"id": "acme.x\udfff", "title": "T", "content": "h"}]})


def test_a_surrogate_pair_written_as_two_escapes_is_still_one_character(home: Path) -> None:
    # json.loads joins a valid \ud83d\ude42 pair; only a lone half is replaced.
    data = json.loads('{"extra_system": "\\ud83d\\ude42 and \\ud83d alone"}')
    payload = COMPILER.compile(PromptCompileInput.model_validate({"workspace_root": home, **data}))
    assert "\U0001f642 and \ufffd alone" in payload.dynamic_system_text


@pytest.mark.parametrize(("root", "reason"), [
    ("home\x00/x", "it holds a NUL byte"),
    ("home\udfff", "a character cannot be encoded"),
])
def test_a_root_no_file_system_can_hold_is_an_input_error(root: str, reason: str) -> None:
    with pytest.raises(InputError) as info:
        parse_compile_input({"workspace_root": root})
    assert str(info.value) == (
        f"workspace_root: not a valid file-system path ({reason})\nerror: 1 problem"
    )


def test_control_characters_pass_through_verbatim(home: Path) -> None:
    text = "bell\x07 escape\x1b[31m nul\x00 rtl\u202e bom\ufeff"
    payload = COMPILER.compile(PromptCompileInput(workspace_root=home, extra_system=text))
    assert payload.dynamic_system_text.endswith(text)
    assert json.loads(payload.to_json())["dynamic_system_text"].endswith(text)


def test_the_marker_in_input_text_is_not_a_second_boundary(home: Path) -> None:
    (home / "SOUL.md").write_text(f"before{BOUNDARY_MARKER}after")
    payload = COMPILER.compile(PromptCompileInput(
        workspace_root=home, extra_system=f"x{BOUNDARY_MARKER}y {BOUNDARY_MARKER.strip()}"))
    full = payload.full_system_text
    assert full.count(BOUNDARY_MARKER.strip()) == 1
    assert split_prompt_cache_boundary(full) == (payload.stable_system_text,
                                                 payload.dynamic_system_text)
    assert f"before\n{QUOTED_MARKER}\nafter" in payload.stable_system_text
    assert payload.dynamic_system_text.endswith(f"x\n{QUOTED_MARKER}\ny {QUOTED_MARKER}")


def test_a_huge_value_compiles(home: Path) -> None:
    huge = "word " * 400_000  # 2,000,000 chars
    payload = PromptCompiler(count_tokens=False).compile(
        PromptCompileInput(workspace_root=home, extra_system=huge))
    assert payload.dynamic_system_text.endswith(huge.strip())
    assert payload.manifest.fingerprint_full == _sha(payload.full_system_text)


def _problems(error: InputError, prefix: str = "") -> list[tuple[str | None, str]]:
    """(path, message) of each problem; an unknown field's hint (the fields it might
    have meant), which only the located report gives, left out."""
    return [((p.path or "").removeprefix(prefix),
             "unknown field" if p.message.startswith("unknown field") else p.message)
            for p in error.problems]


@FUZZ
@given(stable=STABLE, dynamic=DYNAMIC, junk=JUNK, nested=st.booleans())
def test_a_dict_input_is_its_model_and_fails_as_its_model_fails(
    stable: dict[str, Any], dynamic: dict[str, Any], junk: dict[str, str], nested: bool
) -> None:
    """A dict and the model built from it validate alike; each string is scrubbed once,
    by the model that holds it, and ends as if the whole input had been scrubbed first."""
    with tempfile.TemporaryDirectory() as folder:
        data: dict[str, Any] = {"workspace_root": folder, **stable, **dynamic, **junk}
        if nested:  # sections given as models inside the dict
            for key in ("runtime_sections", "dynamic_sections"):
                with contextlib.suppress(InputError):
                    data[key] = PromptCompileInput(**{key: data.get(key, [])}).__dict__[key]
        # What the edge did before each model scrubbed its own fields: every string of
        # the input but the root scrubbed at once, then validated.
        reference = {scrub(key): value if key == "workspace_root" else scrub(value)
                     for key, value in data.items()}
        try:
            from_dict = parse_compile_input(data)
        except InputError as error:
            with pytest.raises(InputError) as expected:
                parse_compile_input(reference)
            assert [(p.path, p.message, p.line) for p in error.problems] == [
                (p.path, p.message, p.line) for p in expected.value.problems]
            with pytest.raises(InputError) as as_model:
                PromptCompileInput(**data)
            assert sorted(_problems(error)) == sorted(
                _problems(as_model.value, "PromptCompileInput → "))
            return
        model = PromptCompileInput(**data)
        assert from_dict == model == parse_compile_input(reference)
        assert from_dict.model_dump_json() == model.model_dump_json()  # no lone surrogate left
        assert_same_as_validated(from_dict)
        by_dict, by_model = COMPILER.compile(data), COMPILER.compile(model)
        assert by_dict.full_system_text == by_model.full_system_text
        assert by_dict.manifest == by_model.manifest
