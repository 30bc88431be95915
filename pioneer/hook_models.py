"""Hook contributions: what a hook may hand back to the turn.

These are edge models (hooks can come from other packages through entry points), so they
are pydantic, frozen, ``extra="forbid"``, and validated where they are built: a hook
that builds an invalid contribution has failed, and its failure policy decides what
happens to the turn. A hook returns any mix of:

- :class:`PromptSectionContribution`: text for a named section (``agents_md``,
  ``memory_recall``, or a dynamic id that falls into the profile's slot);
- :class:`PromptContextContribution`: text for the section named by its ``domain``
  (``thread_context`` for recalled thread snippets, for example);
- :class:`HookDiagnostic`: a note for the manifest without any prompt text.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .contributions import check_runtime_id

__all__ = [
    "HookDiagnostic",
    "HookOutput",
    "PromptContextContribution",
    "PromptSectionContribution",
    "SourceRef",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class SourceRef(BaseModel):
    """Where a contribution's text came from (a document, a thread snippet, ...)."""

    model_config = _FROZEN
    kind: str = Field(min_length=1, description="Kind of source, e.g. document or thread_episodic.")
    id: str = Field(min_length=1, description="Id of the source within its kind.")
    label: str | None = Field(None, description="Short human-readable label.")


class _Contribution(BaseModel):
    model_config = _FROZEN
    contribution_id: str = Field(min_length=1, description="Stable id of this contribution.")
    domain: str = Field(min_length=1, description="What the contribution is about.")
    priority: int = Field(
        0, description="Higher first: decides which contribution gets pool room first."
    )
    content: str = Field(description="The text; blank text contributes no section.")
    max_chars: int | None = Field(
        None, ge=0, description="Hook-side cap: the runtime cuts the content to it."
    )
    source_refs: list[SourceRef] = Field(
        default_factory=list, description="Sources the text was built from."
    )
    diagnostics: list[str] = Field(
        default_factory=list, description="Notes for the manifest (never the content itself)."
    )
    truncated: bool = Field(False, description="The hook already cut the content.")
    artifact_ref_count: int = Field(
        0, ge=0, description="Artifact reference lines the content carries (beyond)."
    )


class PromptSectionContribution(_Contribution):
    """Text for one section of the prompt, placed by the profile under ``section_id``."""

    section_id: Annotated[str, AfterValidator(check_runtime_id)] = Field(
        description="A built-in runtime id (agents_md, memory_recall, ...) or a dynamic id."
    )
    title: str | None = Field(None, description="Heading; the profile's default when blank.")


class PromptContextContribution(_Contribution):
    """Context text for the section named by ``domain`` (e.g. ``thread_context``)."""

    domain: Annotated[str, AfterValidator(check_runtime_id)] = Field(
        description="The target section: a built-in runtime id or a dynamic id."
    )


class HookDiagnostic(BaseModel):
    """A manifest note from a hook, with no prompt text."""

    model_config = _FROZEN
    message: str = Field(min_length=1, description="What the hook noticed (no content).")
    section_id: str | None = Field(None, description="Section the note is about, when any.")


HookOutput = PromptSectionContribution | PromptContextContribution | HookDiagnostic
