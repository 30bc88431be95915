"""The compiler builds its output records without validating them again
(``pioneer.compile.manifest.built``): each must be exactly the record validation would
give. A record is compared with a validated copy of itself, recursively: the same field
values, the same ``model_fields_set`` (what ``exclude_unset`` leaves out) and the fields
in declared order. ``test_fuzz_compile`` runs the same check on every fuzzed compile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import assert_same_as_validated

from pioneer import CompiledPromptPayload, PromptCompiler
from pioneer.compile.compiler import representative_input
from pioneer.compile.manifest import (
    CompiledSection,
    ManifestSection,
    Omission,
    Placement,
    PromptManifest,
    built,
)


@pytest.mark.parametrize("values", [
    {"id": "a", "reason": "condition_false", "detail": "x"},
    {"id": "a", "reason": "budget", "detail": "x", "pool": "hook", "index": 2},
])
def test_an_omission_takes_its_defaults_and_leaves_them_unset(values: dict[str, Any]) -> None:
    record = built(Omission, **values)
    assert record == Omission(**values)
    assert record.model_fields_set == set(values)
    assert record.model_dump(exclude_unset=True) == values
    assert_same_as_validated(record)


def test_records_given_every_field_match_validation() -> None:
    cases: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (Placement, {"id": "p", "pool": "runtime", "index": 0, "section": None, "chars": 0,
                     "cut": True}),
        (CompiledSection, {"id": "s", "title": "S", "stability": "stable", "text": "## S\nx",
                           "chars": 6, "fingerprint": "f", "source": "builtin",
                           "truncated": False}),
        (ManifestSection, {"id": "s", "stability": "dynamic", "chars": 6, "tokens": None,
                           "sha256": "f", "source": "builtin", "truncated": False}),
    ]
    for cls, values in cases:
        record = built(cls, **values)
        assert record == cls(**values)
        assert_same_as_validated(record)


def test_a_built_record_is_frozen_and_hashable() -> None:
    record = built(Placement, id="p", pool="hook", index=1, section="s", chars=3, cut=False)
    with pytest.raises(Exception, match="frozen"):
        record.chars = 4  # type: ignore[misc]
    assert hash(record) == hash(Placement(id="p", pool="hook", index=1, section="s", chars=3,
                                          cut=False))


def test_a_missing_required_field_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        built(Placement, id="p", pool="hook", index=1)


@pytest.mark.parametrize("profile", ["full", "minimal", "none", "assistant_full"])
def test_every_compile_output_is_what_validation_gives(profile: str, tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("calm\n")
    compile_input = representative_input(profile).model_copy(update={"workspace_root": tmp_path})
    compiler = PromptCompiler()
    for _turn in range(2):  # the second turn reuses records from the first
        payload = compiler.compile(compile_input)
        assert_same_as_validated(payload)
        assert isinstance(payload.manifest, PromptManifest)
        assert CompiledPromptPayload.model_validate_json(payload.to_json()) == payload
