"""``artifact_read``: the tool the Artifact References policy tells the model to call.

History messages carry artifact refs as metadata lines only
(:mod:`pioneer.history.artifacts`); a file's contents reach the model only through this
tool, which sits in the hidden ``artifact`` domain, so the model first asks for that
domain with ``request_tools`` (docs/hooks-and-sections.md, "The artifact_read tool").
pioneer gives the definition (:func:`artifact_read_tool`); the application checks the
arguments against its schema and reads the file.
"""

from __future__ import annotations

from typing import Any

from ..providers.request import ToolSpec

__all__ = ["ARTIFACT_READ", "artifact_read_tool"]

ARTIFACT_READ = "artifact_read"
_DESCRIPTION = (
    "Read the contents of one artifact listed in the conversation, by the artifactId and "
    "versionId of its reference line. Read only the artifacts the answer needs."
)
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "artifact_id": {"type": "string", "minLength": 1,
                        "description": "The artifactId of the reference line."},
        "version_id": {"type": "string", "minLength": 1,
                       "description": "The versionId of the reference line (leave it out "
                       "when the line says versionId=null)."},
    },
    "required": ["artifact_id"],
    "additionalProperties": False,
}


def artifact_read_tool() -> ToolSpec:
    """The ``artifact_read`` definition, for the application's tool list."""
    return ToolSpec(name=ARTIFACT_READ, description=_DESCRIPTION, parameters=_SCHEMA)
