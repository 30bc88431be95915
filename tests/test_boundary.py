"""The cache boundary: full-text joining rules and the split/strip helpers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.boundary import (
    BOUNDARY_MARKER,
    join_full_text,
    render_section,
    render_sections,
    split_prompt_cache_boundary,
    strip_prompt_cache_boundary,
)


def test_marker_is_exact() -> None:
    assert BOUNDARY_MARKER == "\n<!-- PIONEER_PROMT_CACHE_BOUNDARY -->\n"


@pytest.mark.parametrize(
    ("stable", "dynamic", "full"),
    [
        ("", "", ""),
        ("S", "", "S"),
        ("", "D", BOUNDARY_MARKER + "D"),
        ("S", "D", "S" + BOUNDARY_MARKER + "D"),
        ("  ", "\n", ""),
    ],
)
def test_full_text_rules(stable: str, dynamic: str, full: str) -> None:
    assert join_full_text(stable, dynamic) == full


def test_render_section_trims_and_skips_blank() -> None:
    assert render_section("  Title ", "\n body \n") == "## Title\nbody"
    assert render_section("Title", " \n\t") == ""
    assert render_sections(["a", "", "b"]) == "a\n\nb"


def test_a_title_is_one_line() -> None:
    assert render_section(" Notes\n## Safety\tfake ", "body") == "## Notes ## Safety fake\nbody"


def test_split_and_strip() -> None:
    text = "A  " + BOUNDARY_MARKER + "  B" + BOUNDARY_MARKER + "C"
    assert split_prompt_cache_boundary(text) == ("A", "B" + BOUNDARY_MARKER + "C")
    assert split_prompt_cache_boundary("no marker") is None
    assert strip_prompt_cache_boundary("A" + BOUNDARY_MARKER + "B") == "A\nB"
    assert BOUNDARY_MARKER not in strip_prompt_cache_boundary(text)


def _compile(home: Path, **fields: object) -> tuple[str, str, str, object]:
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home, **fields))  # type: ignore[arg-type]
    return (
        payload.stable_system_text,
        payload.dynamic_system_text,
        payload.full_system_text,
        payload.manifest,
    )


def test_fingerprints_are_sha256_of_texts(home: Path) -> None:
    (home / "SOUL.md").write_text("soul")
    stable, dynamic, full, manifest = _compile(home, extra_system="extra")
    sha = lambda text: hashlib.sha256(text.encode()).hexdigest()  # noqa: E731
    assert manifest.fingerprint_stable == sha(stable)  # type: ignore[attr-defined]
    assert manifest.fingerprint_dynamic == sha(dynamic)  # type: ignore[attr-defined]
    assert manifest.fingerprint_full == sha(full)  # type: ignore[attr-defined]
    assert full == stable + BOUNDARY_MARKER + dynamic


def test_empty_dynamic_hash_is_empty_sha(home: Path) -> None:
    _, dynamic, full, manifest = _compile(home, profile="none")
    assert dynamic == ""
    assert manifest.fingerprint_dynamic == (  # type: ignore[attr-defined]
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert manifest.fingerprint_full == manifest.fingerprint_stable  # type: ignore[attr-defined]
    assert BOUNDARY_MARKER not in full


def test_stable_fingerprint_ignores_dynamic_inputs_but_not_files(home: Path) -> None:
    (home / "SOUL.md").write_text("soul")
    _, _, _, first = _compile(home, extra_system="one", dynamic_context="a")
    _, _, _, second = _compile(
        home, extra_system="two", runtime_sections=[{"id": "x", "content": "y"}]
    )
    assert first.fingerprint_stable == second.fingerprint_stable  # type: ignore[attr-defined]
    assert first.fingerprint_dynamic != second.fingerprint_dynamic  # type: ignore[attr-defined]
    (home / "USER.md").write_text("user")
    _, _, _, third = _compile(home, extra_system="two")
    assert third.fingerprint_stable != first.fingerprint_stable  # type: ignore[attr-defined]


_PART_CHARS = st.sampled_from("ab \n\t\u3000x<!-PIONEER_PROMT_CACHE_BOUNDARY>")


@given(title=st.text(max_size=30),
       parts=st.lists(st.text(alphabet=_PART_CHARS, max_size=40), max_size=6))
def test_a_section_from_parts_is_the_section_of_their_join(title: str, parts: list[str]) -> None:
    from pioneer.compile.boundary import render_section_parts

    assert render_section_parts(title, parts) == render_section(title, "".join(parts))
    assert render_section_parts(title, [BOUNDARY_MARKER, *parts]) == render_section(
        title, BOUNDARY_MARKER + "".join(parts))
