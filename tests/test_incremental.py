"""The incremental compile: a long-lived compiler reuses what did not change, and its
output is byte-identical to a fresh compiler's for changed and unchanged inputs alike."""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler
from pioneer.compile import bootstrap as bootstrap_module
from pioneer.compile.bootstrap import MISSING, RACY_NS, BootstrapLoader, FileReader, file_signature
from pioneer.compile.plan import freeze

PAST_NS = 1_600_000_000 * 10**9


def _input(root: Path, **fields: Any) -> PromptCompileInput:
    return PromptCompileInput.model_validate({"workspace_root": root, **fields})


def _cold(compile_input: PromptCompileInput, **options: Any) -> str:
    return PromptCompiler(**options).compile(compile_input).to_json()


def _write(path: Path, text: str, stamp_ns: int) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stamp_ns, stamp_ns))


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust files written a moment ago, so the bootstrap memo engages within a test."""
    monkeypatch.setattr(bootstrap_module, "RACY_NS", 0)


class RenderLog:
    """Counts template renders of one compiler, by template name."""

    def __init__(self, compiler: PromptCompiler):
        self.counts: Counter[str] = Counter()
        original = compiler.templates.template

        def counting(name: str) -> jinja2.Template:
            self.counts[name] += 1
            return original(name)

        compiler.templates.template = counting  # type: ignore[method-assign]

    def take(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts


@pytest.fixture
def full_home(home: Path) -> Path:
    _write(home / "SOUL.md", "Calm and direct.", PAST_NS)
    _write(home / "IDENTITY.md", "- Name: Pioneer", PAST_NS)
    _write(home / "USER.md", "Ada, a backend engineer.", PAST_NS)
    return home


TURNS: list[dict[str, Any]] = [
    {"dynamic_context": "turn one"},
    {"dynamic_context": "turn two"},
    {"dynamic_context": "turn two", "include_tool_recovery_policy": True},
    {"dynamic_context": "turn three", "include_tool_recovery_policy": True,
     "runtime_sections": [{"id": "memory_recall", "content": "- prefers tea"}]},
    {"profile": "minimal", "dynamic_context": "turn four"},
    {"dynamic_context": "turn five", "limits": {"max_chars_per_file": 5}},
    {"dynamic_context": "turn five", "limits": {"max_chars_total": 20}},
    {"profile": "none", "extra_system": "be brief"},
    {"dynamic_context": "turn one"},
]


def test_every_turn_matches_a_fresh_compiler(full_home: Path, trusted: None) -> None:
    warm = PromptCompiler()
    for fields in TURNS:
        compile_input = _input(full_home, **fields)
        payload = warm.compile(compile_input)
        assert payload.to_json() == _cold(compile_input), fields
        # Reused records and sections still make a payload that validates as itself.
        assert CompiledPromptPayload.model_validate(payload.model_dump()) == payload


def test_unchanged_stable_inputs_render_only_what_changed(full_home: Path, trusted: None) -> None:
    compiler = PromptCompiler()
    log = RenderLog(compiler)
    compiler.compile(_input(full_home, dynamic_context="one", extra_system="x"))
    assert log.take()["bootstrap_file.md.j2"] == 3
    compiler.compile(_input(full_home, dynamic_context="two", extra_system="x"))
    assert log.take() == Counter({"content.md.j2": 1})


def test_a_changed_stable_input_renders_only_its_section(full_home: Path, trusted: None) -> None:
    compiler = PromptCompiler()
    log = RenderLog(compiler)
    compiler.compile(_input(full_home))
    log.take()
    payload = compiler.compile(_input(full_home, include_tool_recovery_policy=True))
    assert log.take() == Counter({"tool_recovery_policy.md.j2": 1})
    assert "tool_recovery_policy" in payload.manifest.section_ids
    assert payload.to_json() == _cold(_input(full_home, include_tool_recovery_policy=True))


@pytest.mark.parametrize("same_size", [True, False], ids=["same-size", "new-size"])
def test_bootstrap_file_edited_between_turns(
    full_home: Path, trusted: None, same_size: bool
) -> None:
    compiler = PromptCompiler()
    log = RenderLog(compiler)
    before = compiler.compile(_input(full_home, dynamic_context="one"))
    edit = "Bob, a frontend develop." if same_size else "Bob."
    assert (len(edit) == len("Ada, a backend engineer.")) is same_size
    _write(full_home / "USER.md", edit, PAST_NS + 10**9)
    log.take()
    after = compiler.compile(_input(full_home, dynamic_context="one"))
    assert "Bob" in after.stable_system_text and "Ada" not in after.stable_system_text
    assert after.manifest.fingerprint_stable != before.manifest.fingerprint_stable
    assert after.to_json() == _cold(_input(full_home, dynamic_context="one"))
    assert log.take() == Counter({"bootstrap_file.md.j2": 1})  # only USER.md's section


def test_a_file_appearing_and_disappearing(full_home: Path, trusted: None) -> None:
    compiler = PromptCompiler()
    (full_home / "USER.md").unlink()
    without = compiler.compile(_input(full_home))
    assert "user_persona" not in without.manifest.section_ids
    _write(full_home / "USER.md", "Ada again.", PAST_NS)
    again = compiler.compile(_input(full_home))
    assert "user_persona" in again.manifest.section_ids
    assert again.to_json() == _cold(_input(full_home))


def test_eager_token_counts_match_a_fresh_compiler_and_counting_on_demand(
    full_home: Path,
) -> None:
    eager, lazy = PromptCompiler(count_tokens=True), PromptCompiler()
    for fields in TURNS:
        compile_input = _input(full_home, **fields)
        payload = eager.compile(compile_input)
        assert all(record.tokens is not None for record in payload.manifest.sections)
        assert payload.to_json() == _cold(compile_input, count_tokens=True)
        assert lazy.compile(compile_input).with_token_counts().to_json() == payload.to_json()


@pytest.fixture
def partial_templates(tmp_path: Path) -> Iterator[Path]:
    """A deployment override whose stable section reads a dynamic field through an include."""
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "identity_base.md.j2").write_text(
        "You are Pioneer.\n{% include 'partial.md.j2' %}\n", encoding="utf-8"
    )
    (folder / "partial.md.j2").write_text("Mode: {{ extra_system }}\n", encoding="utf-8")
    yield folder


def test_names_read_through_an_include_are_part_of_the_key(
    full_home: Path, partial_templates: Path, trusted: None
) -> None:
    compiler = PromptCompiler(template_path=[partial_templates])
    assert compiler.templates.names_read("partial.md.j2") == frozenset({"extra_system"})
    for extra in ("alpha", "beta", "alpha"):
        compile_input = _input(full_home, extra_system=extra)
        payload = compiler.compile(compile_input)
        assert f"Mode: {extra}" in payload.stable_system_text
        assert payload.to_json() == _cold(compile_input, template_path=[partial_templates])


def test_a_recently_changed_file_is_not_trusted(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = home / "SOUL.md"
    _write(path, "fresh", PAST_NS)  # mtime in the past, but the ctime is now
    changed = os.lstat(path).st_ctime_ns
    monkeypatch.setattr(time, "time_ns", lambda: changed + RACY_NS - 1)  # still too new
    assert file_signature(path) is None
    assert file_signature(home / "absent.md") == MISSING
    assert file_signature(home) is None  # a folder is never trusted


def test_a_file_is_trusted_once_its_change_is_old_enough(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = home / "SOUL.md"
    _write(path, "settled", PAST_NS)
    later = time.time_ns() + 3 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: later)
    signature = file_signature(path)
    assert signature is not None and signature[0] == PAST_NS


def test_untrusted_files_are_read_again_every_time(home: Path) -> None:
    loader = BootstrapLoader()
    path = home / "SOUL.md"
    files = [("SOUL.md", True)]
    path.write_text("one", encoding="utf-8")
    first = loader.load(home, files, max_chars_per_file=100, max_chars_total=100)
    path.write_text("two", encoding="utf-8")  # same size, same tick: only distrust saves it
    second = loader.load(home, files, max_chars_per_file=100, max_chars_total=100)
    assert (first.files["SOUL.md"].content, second.files["SOUL.md"].content) == ("one", "two")


def test_trusted_unchanged_files_give_the_same_result(home: Path, trusted: None) -> None:
    loader = BootstrapLoader()
    _write(home / "SOUL.md", "one", PAST_NS)
    args: dict[str, Any] = {"max_chars_per_file": 100, "max_chars_total": 100}
    first = loader.load(home, [("SOUL.md", True)], **args)
    assert loader.load(home, [("SOUL.md", True)], **args) is first
    assert loader.load(home, [("SOUL.md", True)], max_chars_per_file=2, max_chars_total=100) \
        is not first


@pytest.mark.parametrize(
    ("left", "right"),
    [(True, 1), (1, 1.0), (0.0, -0.0), ([1], (1,)), ("1", 1), ({"a": 1}, {"a": True})],
)
def test_freeze_keeps_values_that_render_differently_apart(left: Any, right: Any) -> None:
    assert freeze(left) != freeze(right)


def test_freeze_rejects_what_it_cannot_hash() -> None:
    with pytest.raises(TypeError):
        freeze([{1, 2}])


text = st.text(st.sampled_from("ab \n\r"), max_size=8)
turn = st.fixed_dictionaries(
    {},
    optional={
        "profile": st.sampled_from(["full", "minimal", "none"]),
        "dynamic_context": text,
        "extra_system": text,
        "include_tool_recovery_policy": st.booleans(),
        "limits": st.fixed_dictionaries(
            {}, optional={"max_chars_per_file": st.integers(0, 6),
                          "max_chars_total": st.integers(0, 12)}
        ),
    },
)
edit = st.one_of(st.none(), st.tuples(st.sampled_from(["SOUL.md", "USER.md"]), text))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(edit, turn), min_size=1, max_size=6))
def test_any_sequence_of_turns_and_edits_matches_fresh_compiles(
    steps: list[tuple[tuple[str, str] | None, dict[str, Any]]],
) -> None:
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(bootstrap_module, "RACY_NS", 0)
        root = Path(folder)
        for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
            _write(root / name, f"{name} text", PAST_NS)
        warm = PromptCompiler()
        for number, (change, fields) in enumerate(steps, start=1):
            if change is not None:
                _write(root / change[0], change[1], PAST_NS + number * 10**9)
            compile_input = _input(root, **fields)
            assert warm.compile(compile_input).to_json() == _cold(compile_input)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_symlink_repointed_outside_the_root_is_seen(
    full_home: Path, tmp_path: Path, trusted: None
) -> None:
    # The outside name is a hard link to the inside file: following the symlink finds
    # the very same file (same inode, times and size) both times.
    inside, outside = full_home / "user-v1.md", tmp_path / "outside.md"
    _write(inside, "Ada inside.", PAST_NS)
    os.link(inside, outside)
    (full_home / "USER.md").unlink()
    (full_home / "USER.md").symlink_to(inside)
    compiler = PromptCompiler()
    assert "Ada inside." in compiler.compile(_input(full_home)).stable_system_text
    (full_home / "USER.md").unlink()
    (full_home / "USER.md").symlink_to(outside)
    payload = compiler.compile(_input(full_home))
    assert "Ada inside." not in payload.stable_system_text
    assert [d.code for d in payload.manifest.diagnostics] == ["file_read_error"]
    assert payload.to_json() == _cold(_input(full_home))


def test_the_render_limit_counts_the_same_input_text(
    full_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pioneer.compile import render as render_module
    from pioneer.compile.sandbox import render_parts, text_size

    seen: list[int] = []

    def checked(
        template: jinja2.Template, context: dict[str, Any], *, given: Callable[[], int]
    ) -> list[str]:
        # The compiler measures lazily (only a render past MAX_OUTPUT needs it), but what it
        # would measure must equal the size of the whole context.
        assert given() == text_size(context.values())
        seen.append(given())
        return render_parts(template, context, given=given)

    # Filters take these templates past what is filled in without the engine.
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "content.md.j2").write_text("{{ content | string }}\n", encoding="utf-8")
    (folder / "bootstrap_file.md.j2").write_text(
        "### {{ file.name }}\n{{ file.content | string }}\n", encoding="utf-8")
    monkeypatch.setattr(render_module, "render_parts", checked)
    PromptCompiler(template_path=[folder]).compile(_input(
        full_home, **TURNS[3], extra_system="x", skills_prompt="y", continue_generation_hint=True,
        dynamic_sections=[{"id": "hook.a", "content": "from a hook"}],
    ))
    assert len(seen) >= 6  # three identity files and at least three inputs


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
@pytest.mark.parametrize(
    ("name", "target", "readable"),
    [
        ("SOUL.md", "outside", False),  # a symlink out of the root
        ("SOUL.md", "inside", True),  # a symlink within the root
        ("../outside.md", None, False),  # a name that climbs out
        ("SOUL.md", None, True),  # a plain file, no resolving needed
    ],
)
def test_only_files_inside_the_root_are_read(
    tmp_path: Path, name: str, target: str | None, readable: bool
) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    home = tmp_path / "home"
    home.symlink_to(real, target_is_directory=True)  # the root itself may be a link
    (tmp_path / "outside.md").write_text("secret", encoding="utf-8")
    (real / "inside.md").write_text("fine", encoding="utf-8")
    if target == "outside":
        (real / name).symlink_to(tmp_path / "outside.md")
    elif target == "inside":
        (real / name).symlink_to(real / "inside.md")
    elif "/" not in name:
        (real / name).write_text("plain", encoding="utf-8")
    result = BootstrapLoader().load(home, [(name, True)], max_chars_per_file=100,
                                    max_chars_total=100)
    assert (name in result.files) is readable
    if not readable:
        assert [d.code for d in result.diagnostics] == ["file_read_error"]


def test_the_render_context_holds_exactly_the_input_fields(full_home: Path) -> None:
    # The renderer copies the input's ``__dict__`` as the base context; pydantic must keep
    # every field there and nothing else, or a template would see a different context.
    compile_input = _input(full_home, dynamic_context="x")
    assert set(vars(compile_input)) == set(PromptCompileInput.model_fields)


def test_a_bootstrap_file_hashes_its_ends_and_compares_its_whole_content() -> None:
    from pioneer.compile.bootstrap import BootstrapFile

    def file(content: str) -> BootstrapFile:
        return BootstrapFile("USER.md", "home/USER.md", content, len(content), False)

    middle = "x" * 600
    first, second = file("rev 1\n" + middle), file("rev 2\n" + middle)
    # Same size, different head: different buckets, so revisions do not pile up in one.
    assert hash(first) != hash(second)
    # Different only in the middle: same hash, and still unequal.
    left, right = file("a" * 300 + "1" + "a" * 300), file("a" * 300 + "2" + "a" * 300)
    assert hash(left) == hash(right) and left != right
    assert file("same") == file("same") and hash(file("same")) == hash(file("same"))


def test_a_file_read_again_unchanged_keeps_its_object(full_home: Path) -> None:
    # Inside the 2 s window the file is re-read on every compile; the same content must
    # come back as the same object, so the memos keep comparing it by identity.
    loader = BootstrapLoader()
    files = (("SOUL.md", False), ("USER.md", False))

    def load() -> dict[str, Any]:
        return loader.load(full_home, files, max_chars_per_file=1000,
                           max_chars_total=2000).files

    first = load()
    _write(full_home / "USER.md", "Ada, a backend engineer.", time.time_ns())
    again = load()
    assert again["USER.md"] is first["USER.md"] and again["SOUL.md"] is first["SOUL.md"]
    _write(full_home / "USER.md", "Bob, a backend engineer.", time.time_ns())
    edited = load()
    assert edited["USER.md"] is not first["USER.md"]
    assert edited["USER.md"].content == "Bob, a backend engineer."


def test_a_reused_read_is_not_compared_with_its_file_again() -> None:
    # A read made while the file was too new to trust, then one from the cache: equal
    # texts in different strings. The cached read's string is compared once, then matched
    # by identity on every later turn.
    class Counting(str):
        compared = 0

        def __eq__(self, other: object) -> bool:
            Counting.compared += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    reader = FileReader()
    made = reader.file("USER.md", "/home/USER.md", "Ada, a backend engineer.", 24, False)
    cached = Counting("Ada, a backend engineer.")
    for _ in range(3):
        assert reader.file("USER.md", "/home/USER.md", cached, 24, False) is made
    assert Counting.compared == 1
    edited = reader.file("USER.md", "/home/USER.md", "Bob, a backend engineer.", 24, False)
    assert edited is not made and edited.content == "Bob, a backend engineer."
