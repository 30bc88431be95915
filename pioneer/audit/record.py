"""The turn record: what the store keeps so a turn can be explained later.

One :class:`TurnRecord` per turn: the thread mode, the history decision (counts and
tokens, never the message text), the permission profile and the execution security
snapshot, the skills decision (each skill considered: resolved and why, or left out and
why), and one
:class:`RoundRecord` per provider round with that round's prompt manifest, visible tools,
still-hidden domains, the provider shape sent and how each tool call was judged. These
are edge models (stored as JSON, printed by ``pioneer explain --json``), so they are
pydantic, frozen, ``extra="forbid"``, and ``schemas/turn_record.schema.json`` is
generated from :class:`TurnRecord`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from ..compile.manifest import PromptManifest
from ..sections.permissions import AXES, PermissionProfile
from ..sections.skills import ActivationReason, ExclusionReason, SkillResolution, SkillStatus
from ..text import EDGE_CONFIG
from .cache_report import CachePlan

if TYPE_CHECKING:
    from ..history.budget import HistoryDecision
    from ..sections.skills import ActiveSkill, SkillsPrompt
    from ..tools.visibility import CallOutcome

__all__ = [
    "PROVIDER_NAMES",
    "ExecutionSecurity",
    "HiddenDomain",
    "HistoryMessageRecord",
    "HistorySnapshot",
    "ProviderShape",
    "ReportedUsage",
    "RoundRecord",
    "SkillOutcomeRecord",
    "SkillRecord",
    "SkillsSnapshot",
    "SystemPartRecord",
    "ThreadMode",
    "ToolCallRecord",
    "TurnRecord",
]

ThreadMode = Literal["chat", "agent"]


class HistoryMessageRecord(BaseModel):
    """One history message as sent: its role and stored token count (no text)."""

    model_config = EDGE_CONFIG
    role: Literal["system", "user", "assistant"] = Field(description="Message role.")
    tokens: int = Field(ge=0, description="cl100k_base tokens, per-message overhead included.")


class HistorySnapshot(BaseModel):
    """The history decision of the turn: kept, summarised or truncated, with token totals."""

    model_config = EDGE_CONFIG
    mode: Literal["keep", "summarise", "truncate"] = Field(description="What the budgeter did.")
    reason: str = Field(description="Why, in one line.")
    budget: int = Field(ge=0, description="max_context_tokens - response_reserve_tokens.")
    threshold: int = Field(ge=0, description="Tokens at which summarising starts (80%).")
    summary_target: int = Field(ge=0, description="Target size of a summary (10%).")
    total_tokens: int = Field(ge=0, description="Tokens of the summary and every loaded turn.")
    sent_tokens: int = Field(ge=0, description="Tokens of the messages sent.")
    turns_loaded: int = Field(ge=0, description="Turns loaded after the summary's coverage.")
    turns_sent: int = Field(ge=0, description="Turns sent in full.")
    summary_sent: bool = Field(description="Whether a summary message was sent.")
    summary_stored: bool = Field(description="Whether this turn stored a new summary.")
    summary_turn_count: int = Field(ge=0, description="Turns the sent summary covers.")
    artifact_ref_count: int = Field(ge=0, description="Artifact refs in the sent messages.")
    messages: list[HistoryMessageRecord] = Field(description="Sent messages, oldest first.")
    turn_ids: list[str] = Field(
        default_factory=list, description="Turns whose messages were sent, oldest first."
    )
    cut_turn_id: str | None = Field(
        default=None, description="Truncation: the first turn sent (the cut on the thread)."
    )
    cut_stored: bool = Field(default=False, description="Whether this turn moved the cut.")

    @classmethod
    def from_decision(cls, decision: HistoryDecision) -> HistorySnapshot:
        """The snapshot of a budgeter decision, message text left out."""
        limits = decision.limits
        return cls(
            mode=decision.mode, reason=decision.reason, budget=limits.budget,
            threshold=limits.threshold, summary_target=limits.target,
            total_tokens=decision.total_tokens, sent_tokens=decision.sent_tokens,
            turns_loaded=decision.turns_loaded, turns_sent=decision.turns_sent,
            summary_sent=decision.summary_sent, summary_stored=decision.summary_stored,
            summary_turn_count=decision.summary_turn_count,
            artifact_ref_count=decision.artifact_ref_count,
            messages=[HistoryMessageRecord(role=m.role, tokens=t)
                      for m, t in zip(decision.messages, decision.message_tokens, strict=True)],
            turn_ids=list(decision.turn_ids),
            cut_turn_id=decision.cut_turn_id, cut_stored=decision.cut_stored,
        )


class SkillRecord(BaseModel):
    """One skill resolved for the turn."""

    model_config = EDGE_CONFIG
    skill_id: str = Field(description="The exact read_skill value, {source}:{slug}.")
    reason: ActivationReason = Field(description="Why it is active.")


class SkillOutcomeRecord(BaseModel):
    """What the resolver decided for one skill it was given."""

    model_config = EDGE_CONFIG
    skill_id: str = Field(description="The exact read_skill value, {source}:{slug}.")
    status: SkillStatus = Field(
        description="resolved: active; disabled: model invocation is disabled and it was not "
        "named; non_implicit: nothing activated it and it is not implicitly invocable."
    )
    reason: ActivationReason | ExclusionReason = Field(
        description="resolved: explicit, path_match or implicit; disabled: "
        "disable_model_invocation; non_implicit: implicit_off (the turn allows no implicit "
        "skills) or not_user_invocable."
    )


class SkillsSnapshot(BaseModel):
    """The skills decision of the turn and what the Skills Runtime text left out."""

    model_config = EDGE_CONFIG
    active: list[SkillRecord] = Field(description="Active skills in resolver order.")
    outcomes: list[SkillOutcomeRecord] | None = Field(
        default=None,
        description="Every skill the resolver was given, active ones first (None: not "
        "recorded, in records written before outcomes were kept or built from an active list).",
    )
    omitted: list[str] = Field(default_factory=list, description="Skill ids left out or cut.")
    truncated: bool = Field(default=False, description="Whether the skills text was cut.")
    diagnostics: list[str] = Field(
        default_factory=list, description="Why the skills text was left out, when it was."
    )

    @classmethod
    def from_resolution(
        cls, resolution: SkillResolution | Sequence[ActiveSkill],
        prompt: SkillsPrompt | None = None,
    ) -> SkillsSnapshot:
        """The snapshot of the resolver's decision and the built ``[Skills]`` text.

        A :class:`~pioneer.sections.skills.SkillResolution` keeps the outcome of every
        skill considered; a bare active list keeps only the active skills.
        """
        if isinstance(resolution, SkillResolution):
            active: Sequence[ActiveSkill] = resolution.active
            outcomes: list[SkillOutcomeRecord] | None = [
                SkillOutcomeRecord(skill_id=o.skill.skill_id, status=o.status, reason=o.reason)
                for o in resolution.outcomes]
        else:
            active, outcomes = resolution, None
        return cls(
            active=[SkillRecord(skill_id=a.skill.skill_id, reason=a.reason) for a in active],
            outcomes=outcomes,
            omitted=list(prompt.omitted) if prompt else [],
            truncated=prompt.truncated if prompt else False,
            diagnostics=list(prompt.diagnostics) if prompt else [],
        )


class ExecutionSecurity(BaseModel):
    """The execution security the turn ran under, as known when the turn started.

    The permission profile with every axis, what it leaves to an approval (``ask``) or
    refuses (``deny``), whether it calls for the Current Permissions section, and what
    the application says about where the profile came from and the sandbox its tools
    run in. pioneer tells the model these limits; the application enforces them.
    """

    model_config = EDGE_CONFIG
    profile: PermissionProfile | None = Field(
        description="The permission profile in force (None: the application gave none)."
    )
    source: str | None = Field(
        default=None, description="Who set the profile, as the application names it."
    )
    sandbox: str | None = Field(
        default=None,
        description="The sandbox the application runs the turn's tools in, as it names it.",
    )
    ask: list[str] = Field(default_factory=list,
                           description="Axes that need an approval, in axis order.")
    deny: list[str] = Field(default_factory=list, description="Axes refused, in axis order.")
    guidance: bool = Field(
        default=False,
        description="Whether the profile calls for the Current Permissions section "
        "(anything but plain full access with nothing narrowed).",
    )

    @classmethod
    def from_profile(cls, profile: PermissionProfile | None, *, source: str | None = None,
                     sandbox: str | None = None) -> ExecutionSecurity:
        """The snapshot of ``profile`` (None: no profile given)."""
        if profile is None:
            return cls(profile=None, source=source, sandbox=sandbox)
        return cls(
            profile=profile, source=source, sandbox=sandbox,
            ask=[axis for axis in AXES if getattr(profile, axis) == "ask"],
            deny=[axis for axis in AXES if getattr(profile, axis) == "deny"],
            guidance=profile.guidance(),
        )


class HiddenDomain(BaseModel):
    """A tool domain still hidden in a round, and its tools."""

    model_config = EDGE_CONFIG
    domain: str = Field(description="Domain name.")
    tools: list[str] = Field(description="Its tools, in domain-map order.")


class ToolCallRecord(BaseModel):
    """How one tool call of a round was judged."""

    model_config = EDGE_CONFIG
    call_id: str = Field(description="Call id.")
    name: str = Field(description="Called tool.")
    verdict: Literal["run", "granted", "invalid", "refused"] = Field(
        description="run: executed by the application; granted: request_tools succeeded; "
        "invalid: request_tools arguments failed the schema; refused: the tool was not visible."
    )
    granted: list[str] = Field(default_factory=list, description="Domains made visible.")
    error: str | None = Field(default=None, description="The error result sent back, when any.")

    @classmethod
    def from_outcome(cls, outcome: CallOutcome) -> ToolCallRecord:
        """The record of a judged call."""
        result = outcome.result
        return cls(call_id=outcome.call_id, name=outcome.name, verdict=outcome.verdict,
                   granted=list(outcome.granted),
                   error=result.content if result is not None and result.is_error else None)


class SystemPartRecord(BaseModel):
    """One piece of system content as the adapter sent it."""

    model_config = EDGE_CONFIG
    kind: Literal["stable", "dynamic", "message"] = Field(
        description="stable or dynamic prompt text, or a system message (history summary)."
    )
    chars: int = Field(ge=0, description="Characters sent, boundary marker removed.")


class ProviderShape(BaseModel):
    """Which provider request shape was sent for a round."""

    model_config = EDGE_CONFIG
    provider: str = Field(description="Provider name as the CLI spells it.")
    carrier: str = Field(description="Where the system prompt travels in the body.")
    dynamic_placement: Literal["cache-first", "system"] = Field(
        default="system",
        description="Where the dynamic text went: after the history (cache-first) or in the "
        "system prompt (system; every record written before the cache-first layout).",
    )
    system: list[SystemPartRecord] = Field(description="System pieces, in the order sent.")
    cache_breakpoints: list[str] = Field(
        description="Places marked with cache_control (Anthropic), e.g. system[0] (stable)."
    )
    prompt_cache_key: str | None = Field(
        default=None, description="OpenAI prompt_cache_key, when sent."
    )
    tool_count: int = Field(ge=0, description="Tool definitions in the body.")
    body_sha256: str = Field(description="sha256 of the body as canonical JSON.")


#: pioneer's provider names → ``gen_ai.provider.name`` values of the OpenTelemetry GenAI
#: conventions (docs/telemetry.md).
PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "gcp.gemini",
}


class ReportedUsage(BaseModel):
    """The token usage a provider reported for one round, in one set of terms.

    ``input_tokens`` counts the whole prompt, the cached part included (Anthropic reports
    the uncached rest apart: its three input counts are added); docs/telemetry.md has the
    mapping per provider.
    """

    model_config = EDGE_CONFIG
    input_tokens: int = Field(ge=0, description="Prompt tokens, cached ones included.")
    output_tokens: int | None = Field(None, ge=0, description="Reply tokens.")
    cache_read_input_tokens: int | None = Field(
        None, ge=0, description="Prompt tokens served from the provider's cache."
    )
    cache_creation_input_tokens: int | None = Field(
        None, ge=0, description="Prompt tokens written to the cache (Anthropic)."
    )

    @classmethod
    def from_response(cls, provider: str, usage: Mapping[str, Any]) -> ReportedUsage:
        """The ``usage`` object of a provider's response (JSON as the API sends it)."""
        if provider == "anthropic":
            read = _int(usage, "cache_read_input_tokens")
            written = _int(usage, "cache_creation_input_tokens")
            rest = _int(usage, "input_tokens") or 0
            return cls(input_tokens=rest + (read or 0) + (written or 0),
                       output_tokens=_int(usage, "output_tokens"),
                       cache_read_input_tokens=read, cache_creation_input_tokens=written)
        if provider == "openai-chat":
            details = usage.get("prompt_tokens_details") or {}
            return cls(input_tokens=_int(usage, "prompt_tokens") or 0,
                       output_tokens=_int(usage, "completion_tokens"),
                       cache_read_input_tokens=_int(details, "cached_tokens"))
        if provider == "openai-responses":
            details = usage.get("input_tokens_details") or {}
            return cls(input_tokens=_int(usage, "input_tokens") or 0,
                       output_tokens=_int(usage, "output_tokens"),
                       cache_read_input_tokens=_int(details, "cached_tokens"))
        if provider == "gemini":
            return cls(input_tokens=_int(usage, "promptTokenCount") or 0,
                       output_tokens=_int(usage, "candidatesTokenCount"),
                       cache_read_input_tokens=_int(usage, "cachedContentTokenCount"))
        raise ValueError(f"unknown provider {provider!r}; expected one of "
                         f"{', '.join(PROVIDER_NAMES)}")


def _int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key) if isinstance(data, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class RoundRecord(BaseModel):
    """One provider round of the turn."""

    model_config = EDGE_CONFIG
    round: int = Field(ge=1, description="Round number, from 1.")
    manifest: PromptManifest = Field(description="The prompt manifest compiled for the round.")
    visible_tools: list[str] = Field(description="Tools in ChatRequest.tools, in order.")
    hidden_domains: list[HiddenDomain] = Field(
        description="Domains still hidden, as the Hidden Tool Domains section lists them."
    )
    provider: ProviderShape = Field(description="The provider shape sent.")
    cache: CachePlan | None = Field(
        default=None,
        description="The round's cache plan (None in records written before there was one).",
    )
    calls: list[ToolCallRecord] = Field(
        default_factory=list, description="Tool calls the model made in this round."
    )
    usage: ReportedUsage | None = Field(
        None, description="Token usage the provider reported for the round, when given."
    )


class TurnRecord(BaseModel):
    """Everything kept about one turn, for ``pioneer explain``."""

    model_config = EDGE_CONFIG
    turn_id: str = Field(min_length=1, description="Turn id (a stored turn).")
    thread_id: str = Field(min_length=1, description="Thread of the turn.")
    mode: ThreadMode = Field(description="chat: no tool calling; agent: tools per round.")
    history: HistorySnapshot | None = Field(default=None, description="The history decision.")
    permissions: PermissionProfile | None = Field(
        default=None, description="The permission profile in force (None: not given)."
    )
    security: ExecutionSecurity | None = Field(
        default=None,
        description="The execution security snapshot (None: a record written before it "
        "was kept).",
    )
    skills: SkillsSnapshot | None = Field(
        default=None, description="The skills decision (None: not given)."
    )
    rounds: list[RoundRecord] = Field(min_length=1, description="Provider rounds, in order.")

    @model_validator(mode="after")
    def _numbered(self) -> TurnRecord:
        numbers = [r.round for r in self.rounds]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"rounds: must be numbered 1, 2, 3… in order (got {numbers})")
        return self
