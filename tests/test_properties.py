"""Property tests: determinism, the boundary split and budgets hold for any input."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.boundary import BOUNDARY_MARKER, split_prompt_cache_boundary

COMPILER = PromptCompiler()
#: ``full`` with pools and caps small enough for the generated contributions to hit them.
TIGHT_PROFILES = tempfile.TemporaryDirectory(prefix="pioneer-tight-")
(Path(TIGHT_PROFILES.name) / "tight.toml").write_text(
    'name = "tight"\nextends = "full"\n\n[budgets]\n'
    "runtime_pool = { max_chars = 700, max_sections = 4 }\n"
    "hook_pool = { max_chars = 500, max_sections = 3 }\n"
    "contribution_max_chars = 250\n", encoding="utf-8")
TIGHT = PromptCompiler(profile_path=[Path(TIGHT_PROFILES.name)])
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(codec="utf-8"), max_size=300)
dynamic_id = st.from_regex(r"[a-z][a-z0-9_.]{0,12}", fullmatch=True).filter(
    lambda s: s not in {"agents_md", "memory_recall", "thread_context", "current_permissions"}
)
section = st.fixed_dictionaries(
    {"id": dynamic_id, "content": text},
    optional={"title": text, "max_chars": st.integers(0, 9000), "truncated": st.booleans()},
)
dynamic_fields = st.fixed_dictionaries(
    {},
    optional={
        "skills_prompt": text,
        "retry_instruction": text,
        "dynamic_context": text,
        "extra_system": text,
        "continue_generation_hint": st.booleans(),
        "include_task_orchestration_policy": st.booleans(),
        "artifact_ref_count": st.integers(0, 3),
        "runtime_sections": st.lists(section, max_size=20),
        "dynamic_sections": st.lists(section, max_size=20),
    },
)
files = st.fixed_dictionaries({}, optional={"SOUL.md": text, "IDENTITY.md": text, "USER.md": text})
profiles = st.sampled_from(["full", "minimal", "none"])


def _compile(root: Path, profile: str, fields: dict[str, Any], **extra: Any) -> Any:
    data = {"workspace_root": root, "profile": profile, **fields, **extra}
    return COMPILER.compile(PromptCompileInput.model_validate(data))


def _write(root: Path, contents: dict[str, str]) -> None:
    for name, content in contents.items():
        (root / name).write_bytes(content.encode("utf-8"))


@PROPS
@given(profile=profiles, home_files=files, fields=dynamic_fields)
def test_compiling_twice_is_byte_identical(
    profile: str, home_files: dict[str, str], fields: dict[str, Any]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _write(root, home_files)
        first = _compile(root, profile, fields)
        second = PromptCompiler().compile(first_input(root, profile, fields))
    assert first.to_json() == second.to_json()


def first_input(root: Path, profile: str, fields: dict[str, Any]) -> PromptCompileInput:
    return PromptCompileInput.model_validate({"workspace_root": root, "profile": profile, **fields})


@PROPS
@given(profile=profiles, home_files=files, fields=dynamic_fields, other=dynamic_fields)
def test_boundary_and_fingerprint_invariants(
    profile: str, home_files: dict[str, str], fields: dict[str, Any], other: dict[str, Any]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _write(root, home_files)
        payload = _compile(root, profile, fields)
        changed = _compile(root, profile, other)
    full = payload.full_system_text
    stable, dynamic = payload.stable_system_text, payload.dynamic_system_text
    assert full.count(BOUNDARY_MARKER) <= 1
    if stable and dynamic:
        assert split_prompt_cache_boundary(full) == (stable, dynamic)
    manifest = payload.manifest
    sha = lambda value: hashlib.sha256(value.encode()).hexdigest()  # noqa: E731
    assert manifest.fingerprint_stable == sha(stable)
    assert manifest.fingerprint_dynamic == sha(dynamic)
    assert manifest.fingerprint_full == sha(full)
    # Only dynamic inputs differ between the two compiles: the cached prefix is unchanged.
    assert changed.stable_system_text == stable
    assert changed.manifest.fingerprint_stable == manifest.fingerprint_stable
    assert [s.id for s in payload.sections if s.stability == "stable"] == [
        s.id
        for s in payload.sections[: len([x for x in payload.sections if x.stability == "stable"])]
    ]


@PROPS
@given(
    home_files=files,
    per_file=st.integers(0, 400),
    total=st.integers(0, 800),
    fields=dynamic_fields,
)
def test_budgets_are_respected(
    home_files: dict[str, str], per_file: int, total: int, fields: dict[str, Any]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _write(root, home_files)
        payload = TIGHT.compile(PromptCompileInput.model_validate({
            "workspace_root": root, "profile": "tight", **fields,
            "limits": {"max_chars_per_file": per_file, "max_chars_total": total},
        }))
    entries = payload.manifest.source_manifest
    assert all(entry.chars <= per_file for entry in entries)
    assert sum(entry.chars for entry in entries) <= total
    budgets = TIGHT.load_profile("tight").spec.budgets
    runtime = [s for s in payload.sections if s.source.startswith("runtime:")]
    hooks = [s for s in payload.sections if s.source.startswith("hook:")]
    for group, pool in ((runtime, budgets.runtime_pool), (hooks, budgets.hook_pool)):
        bodies = [s.text.split("\n", 1)[1] for s in group]
        assert len(bodies) <= pool.max_sections
        assert sum(len(body) for body in bodies) <= pool.max_chars
        assert all(len(body) <= budgets.contribution_max_chars for body in bodies)


ref_text = st.lists(
    st.sampled_from(["- artifactId=a1", "  - artifactId=b2", "x - artifactId=c3", "\n", "\r\n",
                     "\r", "\x0b", "\u2028", "\t", " ", "word", "artifactId=", "- artifact"]),
    max_size=30,
).map("".join)


@PROPS
@given(texts=st.lists(st.one_of(ref_text, text), max_size=4))
def test_ref_lines_are_the_lines_that_start_with_a_ref(texts: list[str]) -> None:
    from pioneer.compile.refs import REF_LINE_START, count_ref_lines

    expected = sum(line.lstrip().startswith(REF_LINE_START)
                   for item in texts for line in item.splitlines())
    assert count_ref_lines(texts) == expected
