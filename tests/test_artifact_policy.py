"""The Artifact References policy (five points) and the artifact_read tool it names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jsonschema

from pioneer import PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.history.artifacts import ArtifactRef, ref_line
from pioneer.sections import DEFAULT_TOOL_DOMAINS
from pioneer.tools import ToolCatalog, TurnTools, artifact_read_tool

GOLDENS = Path(__file__).parent / "goldens" / "artifacts"
REF = ArtifactRef("art-1", "q3.xlsx", "spreadsheet", version_id="v4", size_bytes=40_960)


def _policy(compiler: PromptCompiler, tmp_path: Path) -> str:
    payload = compiler.compile(PromptCompileInput(workspace_root=tmp_path, runtime_sections=[
        RuntimeSectionInput(id="thread_context", content="Earlier:\n" + ref_line(REF))]))
    return next(s.text for s in payload.sections if s.id == "artifact_references")


def test_policy_golden(tmp_path: Path, compiler: PromptCompiler,
                       golden: Callable[[Path, str], None]) -> None:
    golden(GOLDENS / "artifact-references.txt", _policy(compiler, tmp_path) + "\n")


def test_policy_has_its_five_points(tmp_path: Path, compiler: PromptCompiler) -> None:
    lines = _policy(compiler, tmp_path).splitlines()
    assert lines[0] == "## Artifact References"
    points = lines[1:]
    assert len(points) == 5
    assert "metadata only" in points[0]
    assert "`artifact` tool domain" in points[1] and "`request_tools`" in points[1]
    assert "`artifact_read`" in points[2] and "only those" in points[2]
    assert points[3] == "Do not ask for every artifact just because refs are listed."
    assert "answer from it" in points[4]


def test_artifact_read_sits_in_the_hidden_artifact_domain() -> None:
    assert DEFAULT_TOOL_DOMAINS["artifact"] == (
        "artifact_read", "artifact_prepare", "artifact_register")
    tool = artifact_read_tool()
    catalog = ToolCatalog.build([tool])
    assert catalog.domains == {"artifact": ("artifact_read",)}
    first = TurnTools(catalog).next_round()
    assert [t.name for t in first.tools] == ["request_tools"]
    assert first.hidden == {"artifact": ("artifact_read",)}


def test_artifact_read_arguments_schema() -> None:
    schema = artifact_read_tool().parameters
    jsonschema.validate({"artifact_id": "art-1", "version_id": "v4"}, schema)
    jsonschema.validate({"artifact_id": "art-1"}, schema)
    for bad in ({}, {"artifact_id": ""}, {"artifact_id": "a", "path": "/etc/passwd"}):
        assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
