"""Compile output models: sections, diagnostics, the manifest and the payload.

These are the edge models a caller persists and audits, so they are pydantic (frozen,
``extra="forbid"``) and ``schemas/manifest.schema.json`` is generated from
:class:`PromptManifest`. ``PromptManifest.to_json`` is the canonical serialisation:
sorted keys, unset optionals left out, byte-identical for identical compiles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    computed_field,
    model_validator,
)

from .._version import VERSION
from ..text import EDGE_CONFIG, CheckedModel, utf8_text
from .boundary import join_full_text

if TYPE_CHECKING:
    from ..tokens import TokenCounter

__all__ = [
    "COMPILER_VERSION",
    "CompiledPromptPayload",
    "CompiledSection",
    "Diagnostic",
    "DiagnosticCode",
    "HookSourceEntry",
    "HookSourceRef",
    "InputRecord",
    "ManifestSection",
    "Omission",
    "OmissionReason",
    "Placement",
    "PromptManifest",
    "SourceManifestEntry",
    "built",
]

COMPILER_VERSION = VERSION

_Record = TypeVar("_Record", bound=BaseModel)
_Shape = tuple[int, dict[str, Any], tuple[tuple[str, Any], ...], frozenset[str]]
_SHAPES: dict[type[BaseModel], _Shape] = {}
_new = object.__new__
_set = object.__setattr__


def _shape(cls: type[BaseModel]) -> _Shape:
    """(field count, every field name in declared order mapped to its default, the
    fields whose default comes from a factory, the required fields) of one record model."""
    defaults: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    required: set[str] = set()
    for name, field in cls.model_fields.items():
        defaults[name] = None
        if field.is_required():
            required.add(name)
        elif field.default_factory is not None:
            # Called with no arguments: none of these models' factories reads other fields.
            factories.append((name, field.default_factory))
        else:
            defaults[name] = field.default
    return len(defaults), defaults, tuple(factories), frozenset(required)


def built(cls: type[_Record], /, **values: Any) -> _Record:
    """A ``cls`` record made by the compiler from values it has already checked.

    The compile output is built from the validated compile input, the validated profile
    and text the compiler rendered itself, so every field already has its declared type;
    validating the records again was a fifth of a warm turn. The record is the one
    ``cls(**values)`` would give: the fields not given take their defaults and are not in
    ``model_fields_set`` (``tests/test_built_records.py`` holds every compile's output to
    a validated copy of itself). Anything from outside (a payload read back, a hook's
    contribution) is validated as usual.
    """
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _shape(cls)
    count, defaults, factories, required = shape
    given = set(values)
    if len(given) != count:  # in declared order, as validation leaves them
        if not required <= given:  # a programming error, never bad input
            raise KeyError(f"{cls.__name__} needs {sorted(required - given)}")
        merged = {**defaults, **values}
        for name, factory in factories:
            if name not in given:
                merged[name] = factory()
        values = merged
    record = _new(cls)
    _set(record, "__dict__", values)
    _set(record, "__pydantic_fields_set__", given)
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record

DiagnosticCode = Literal[
    "missing_file",
    "file_read_error",
    "file_truncated",
    "total_budget_truncated",
    "file_filtered_by_profile",
    "dynamic_section_truncated",
    "dynamic_section_omitted",
    "section_truncated",
    "input_ignored",
    "unknown_contribution",
    "hook_diagnostic",
    "hook_best_effort_failed",
    "capability_rejected",
    "limit_clamped",
]



class Diagnostic(CheckedModel):
    """Something the compiler noticed; never contains the content it is about."""

    model_config = EDGE_CONFIG
    code: DiagnosticCode = Field(description="snake_case diagnostic code.")
    message: str = Field(description="Human-readable message without the content itself.")
    file: str | None = Field(default=None, description="File the diagnostic is about, when any.")
    section_id: str | None = Field(default=None, description="Section the diagnostic is about.")
    hook_source: str | None = Field(default=None, description="Hook id that produced it, when any.")
    level: Literal["info", "warning"] = Field(
        default="warning",
        description="info: worth knowing, nothing is wrong (an optional identity file such as "
        "USER.md is missing); warning: something the author may need to fix.",
    )


class SourceManifestEntry(CheckedModel):
    """One bootstrap file: where it was looked for and what became of it."""

    model_config = EDGE_CONFIG
    file: str = Field(description="Canonical file name, e.g. SOUL.md.")
    path: str = Field(description="Path the file was read from.")
    status: Literal["loaded", "missing", "read_error", "truncated"] = Field(
        description="What became of the file."
    )
    chars: int = Field(ge=0, description="Characters of the file that reached the prompt.")


class ManifestSection(CheckedModel):
    """One kept section as recorded for audit."""

    model_config = EDGE_CONFIG
    id: str = Field(description="Section id (manifest id).")
    stability: Literal["stable", "dynamic"] = Field(description="Cache side of the section.")
    chars: int = Field(ge=0, description="Characters of the rendered section.")
    tokens: int | None = Field(
        default=None, ge=0, description="cl100k_base tokens of the rendered section, when counted."
    )
    sha256: str = Field(description="Lowercase hex sha256 of the rendered section.")
    source: str = Field(
        description="Where the content came from: builtin (text shipped in the package), text (the "
        "deployment's own template), file:NAME, input:FIELD, "
        "runtime:ID or hook:ID."
    )
    truncated: bool = Field(description="Whether the content was cut by a budget.")


OmissionReason = Literal[
    "condition_false",
    "file_missing",
    "file_empty",
    "input_empty",
    "no_contribution",
    "budget",
    "refused",
    "unplaced",
    "rendered_empty",
]


class Omission(CheckedModel):
    """A declared section that rendered nothing, or a contribution left out, and why."""

    model_config = EDGE_CONFIG
    id: str = Field(description="The declared section's id, or the contribution's id.")
    reason: OmissionReason = Field(
        description="condition_false: its `when` was false; file_missing / file_empty: its "
        "bootstrap file was not there / was empty; input_empty: its input field (or the "
        "contribution's content) was blank; no_contribution: nothing was contributed for it; "
        "budget: a pool, count or file budget left no room; refused: the profile's section "
        "refuses this contribution id; unplaced: no section of the profile places this id; "
        "rendered_empty: its template rendered nothing."
    )
    detail: str = Field(description="The reason in words (never the content itself).")
    pool: Literal["runtime", "hook"] | None = Field(
        default=None, description="For a contribution: the pool it came in."
    )
    index: int | None = Field(
        default=None, ge=0,
        description="For a contribution: its position in that pool's input list.",
    )


class Placement(CheckedModel):
    """Where one contribution of the compile input went."""

    model_config = EDGE_CONFIG
    id: str = Field(description="Contribution id.")
    pool: Literal["runtime", "hook"] = Field(description="The pool it came in.")
    index: int = Field(ge=0, description="Its position in that pool's input list.")
    section: str | None = Field(
        default=None,
        description="The declared section that placed it (its own section, or the slot); "
        "null when it was left out (see `omitted`).",
    )
    chars: int = Field(ge=0, description="Characters of its content the prompt holds.")
    cut: bool = Field(
        description="The prompt holds less than the content given: a pool or section cap "
        "cut it, or it was left out."
    )


class HookSourceRef(CheckedModel):
    """Which hook subscription produced a contribution."""

    model_config = EDGE_CONFIG
    hook_id: str = Field(description="Hook id.")
    subscription_id: str = Field(description="Subscription id.")
    phase: str = Field(description="Hook phase, e.g. turn.pre_prompt_compile.")
    contribution_id: str | None = Field(default=None, description="Contribution id.")
    contribution_hash: str | None = Field(default=None, description="sha256 of the contribution.")


class HookSourceEntry(CheckedModel):
    """One hook contribution as recorded in the manifest."""

    model_config = EDGE_CONFIG
    source: HookSourceRef = Field(description="The producing hook subscription.")
    section_id: str | None = Field(default=None, description="Section the contribution targets.")
    contribution_kind: Literal[
        "prompt_context",
        "thread_context",
        "prompt_section",
        "prompt_manifest_diagnostic",
        "runtime_failure",
    ] = Field(description="Kind of contribution.")
    priority: int | None = Field(default=None, description="Contribution priority.")
    source_count: int | None = Field(default=None, ge=0, description="Number of source refs.")
    truncation: Literal["none", "hook", "prompt", "hook_and_prompt", "unknown"] = Field(
        description="Who cut the contribution."
    )


class InputRecord(CheckedModel):
    """One declared input given to a compile: its name and a hash of its value (never
    the value itself)."""

    model_config = EDGE_CONFIG
    name: str = Field(description="The input's name.")
    sha256: str = Field(description="Lowercase hex sha256 of the value's canonical JSON "
                        "(UTF-8, no spaces: \"gold\" for the text gold).")


class PromptManifest(CheckedModel):
    """What compiled a turn, so an audit can reproduce and explain it."""

    model_config = EDGE_CONFIG
    compiler_version: str = Field(description="pioneer compiler version.")
    profile: str = Field(description="Resolved profile name.")
    profile_fingerprint: str = Field(
        description="sha256 over the resolved profile and every template it uses."
    )
    section_ids: list[str] = Field(description="Ids of the kept sections, in order.")
    sections: list[ManifestSection] = Field(description="Per-section audit records.")
    fingerprint_stable: str = Field(description="sha256 of the stable text.")
    fingerprint_dynamic: str = Field(description="sha256 of the dynamic text.")
    fingerprint_full: str = Field(description="sha256 of the full text.")
    source_manifest: list[SourceManifestEntry] = Field(description="Bootstrap files.")
    diagnostics: list[Diagnostic] = Field(description="Diagnostics in pipeline order.")
    hook_sources: list[HookSourceEntry] = Field(
        default_factory=list, description="Hook contributions that fed this compile."
    )
    omitted: list[Omission] = Field(
        default_factory=list,
        description="Declared sections that rendered nothing and contributions left out, "
        "with the reason, in the order the interpreter met them.",
    )
    placements: list[Placement] = Field(
        default_factory=list,
        description="Every contribution of the input (runtime pool, then hook pool, each in "
        "input order) and the section that placed it.",
    )
    ignored_inputs: list[str] = Field(
        default_factory=list,
        description="Compile-input fields given a value that no section of the profile reads, "
        "or that the compiler derives itself (artifact_ref_count).",
    )
    inputs: list[InputRecord] | None = Field(
        default=None, description="The declared inputs the compile input gave, by name, "
        "each with the sha256 of its value (never the value); absent when none was given.",
    )

    def with_token_counts(
        self, sections: Iterable[CompiledSection], counter: TokenCounter | None = None
    ) -> PromptManifest:
        """This manifest with ``tokens`` counted for each record whose text is in ``sections``.

        A record is matched to its text by sha256. Counts come from ``counter`` (default:
        the process-wide cl100k_base counter, which caches them by content); records that
        already have a count, or whose text is not given, are kept as they are, and
        ``self`` comes back unchanged when nothing is left to count.
        """
        if all(record.tokens is not None for record in self.sections):
            return self
        texts = {section.fingerprint: section.text for section in sections}
        if not any(r.tokens is None and r.sha256 in texts for r in self.sections):
            return self
        if counter is None:
            from ..tokens import default_counter

            counter = default_counter()
        counted = [
            record if record.tokens is not None or record.sha256 not in texts
            else record.model_copy(update={"tokens": counter.count(texts[record.sha256])})
            for record in self.sections
        ]
        return self.model_copy(update={"sections": counted})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, optional fields left out when unset."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self, *, indent: int | None = 2) -> str:
        """Canonical JSON: sorted keys, no unset optionals (valid UTF-8: a path's undecodable
        byte shows as U+FFFD)."""
        return utf8_text(json.dumps(self.to_dict(), sort_keys=True, indent=indent,
                                    ensure_ascii=False))


class CompiledSection(CheckedModel):
    """One kept section of a compiled prompt."""

    model_config = EDGE_CONFIG
    id: str = Field(description="Section id.")
    title: str = Field(description="Section title (the ## heading).")
    stability: Literal["stable", "dynamic"] = Field(description="Cache side.")
    text: str = Field(description="The rendered section, heading included.")
    chars: int = Field(ge=0, description="Characters of text.")
    fingerprint: str = Field(description="sha256 of text.")
    source: str = Field(description="Where the content came from.")
    truncated: bool = Field(default=False, description="Whether a budget cut the content.")


_FULL_TEXT = "Stable + boundary marker + dynamic."
_ABSENT = object()


def _full_text_schema(schema: dict[str, Any]) -> None:
    # Read-only in the serialisation schema (a computed field); in the validation schema
    # an optional property, so a payload as it is written out validates as it is read in.
    schema["properties"].setdefault(
        "full_system_text", {"description": _FULL_TEXT, "title": "Full System Text",
                             "type": "string"})


class CompiledPromptPayload(CheckedModel):
    """Everything one compile produces."""

    # ``full_system_text`` is derived from the stable and dynamic text and joined when it
    # is read (no provider adapter needs it: they send the two halves); it is written out
    # with the other fields, and a payload read back may carry it if it is that join.

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_full_text_schema)
    stable_system_text: str = Field(description="Stable sections joined.")
    dynamic_system_text: str = Field(description="Dynamic sections joined.")
    boundary_marker: str = Field(description="The cache boundary marker.")
    sections: list[CompiledSection] = Field(description="Kept sections in order.")
    manifest: PromptManifest = Field(description="Audit record of this compile.")

    @computed_field(description=_FULL_TEXT)  # type: ignore[prop-decorator]
    @property
    def full_system_text(self) -> str:
        """The stable text, the boundary marker and the dynamic text (joined on each read)."""
        return join_full_text(self.stable_system_text, self.dynamic_system_text)

    @model_validator(mode="wrap")
    @classmethod
    def _given_full_text(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        given: Any = _ABSENT
        if isinstance(data, Mapping) and "full_system_text" in data:
            data = dict(data)
            given = data.pop("full_system_text")
        payload = handler(data)
        if given is not _ABSENT and (type(given) is not str
                                     or given != payload.full_system_text):
            raise ValueError("full_system_text is not the stable text, the boundary marker "
                             "and the dynamic text joined")
        return payload

    def with_token_counts(self, counter: TokenCounter | None = None) -> CompiledPromptPayload:
        """This payload with every manifest record's cl100k_base ``tokens`` filled in.

        A compile leaves the counts out unless its compiler was made with
        ``count_tokens=True``: encoding the changed text is the largest cost of a warm
        turn, and most turns are sent, not audited. Call this where the manifest is kept
        or shown; ``self`` comes back unchanged when every record has its count.
        """
        manifest = self.manifest.with_token_counts(self.sections, counter)
        return self if manifest is self.manifest else self.model_copy(update={"manifest": manifest})

    def to_json(self, *, indent: int | None = 2) -> str:
        """Canonical JSON of the whole payload (valid UTF-8, as :meth:`PromptManifest.to_json`)."""
        data = self.model_dump(mode="json", exclude_none=True)
        return utf8_text(json.dumps(data, sort_keys=True, indent=indent, ensure_ascii=False))
