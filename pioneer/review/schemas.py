"""JSON Schemas: generated from the edge models, committed under ``schemas/``.

``python -m pioneer.review.schemas`` rewrites the committed files; a test regenerates them and
fails when they differ, so the schemas can never drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..audit.record import TurnRecord
from ..compile.derived import ProfileFile
from ..compile.inputs import PromptCompileInput
from ..compile.manifest import PromptManifest
from ..episodic.extractor import MemoryExtraction
from ..hooks.models import PromptSectionContribution
from ..providers.models import ModelTableFile
from ..providers.request import ChatRequest
from ..sections.permissions import PermissionProfile
from ..settings import PioneerSettings

__all__ = ["SCHEMA_MODELS", "generate", "render"]

#: File name → (model, title). Extended by other stages that own an edge model.
SCHEMA_MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "profile.schema.json": (ProfileFile, "pioneer profile"),
    "manifest.schema.json": (PromptManifest, "pioneer prompt manifest"),
    "compile_input.schema.json": (PromptCompileInput, "pioneer compile input"),
    "chat_request.schema.json": (ChatRequest, "pioneer chat request"),
    "hook_contribution.schema.json": (PromptSectionContribution, "pioneer hook contribution"),
    "permissions.schema.json": (PermissionProfile, "pioneer permission profile"),
    "turn_record.schema.json": (TurnRecord, "pioneer turn record"),
    "memory_extraction.schema.json": (MemoryExtraction, "pioneer memory extraction reply"),
    "models.schema.json": (ModelTableFile, "pioneer model table"),
    "deployment.schema.json": (PioneerSettings, "pioneer deployment file (pioneer.toml)"),
}


def generate(name: str) -> dict[str, Any]:
    """The JSON Schema for one committed schema file."""
    model, title = SCHEMA_MODELS[name]
    schema = model.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema, "title": title}


def render(name: str) -> str:
    """The exact committed text of one schema file."""
    return json.dumps(generate(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write every schema into the folder given (default: ./schemas)."""
    target = Path((argv or sys.argv[1:] or ["schemas"])[0])
    for name in SCHEMA_MODELS:
        (target / name).write_text(render(name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
