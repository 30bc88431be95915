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
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from ..compile.manifest import PromptManifest
from ..providers.api import PROVIDER_APIS
from ..providers.replies import ModelReply, StopReason
from ..providers.usage import ReportedUsage
from ..sections.permissions import AXES, PermissionProfile
from ..sections.skills import ActivationReason, ExclusionReason, SkillResolution, SkillStatus
from ..text import EDGE_CONFIG, CheckedModel
from .cache_report import CachePlan

if TYPE_CHECKING:
    from ..history.budget import HistoryDecision
    from ..sections.skills import ActiveSkill, SkillsPrompt
    from ..tools.visibility import CallOutcome, ToolCatalog

__all__ = [
    "PROVIDER_NAMES",
    "ExecutionSecurity",
    "HiddenDomain",
    "HistoryMessageRecord",
    "HistorySnapshot",
    "ProviderShape",
    "ReplyRecord",
    "ReportedUsage",
    "RoundRecord",
    "SkillOutcomeRecord",
    "SkillRecord",
    "SkillsSnapshot",
    "SystemPartRecord",
    "ThreadMode",
    "ToolCallRecord",
    "ToolRecord",
    "TurnRecord",
    "WindowRecord",
]

ThreadMode = Literal["chat", "agent"]


class HistoryMessageRecord(CheckedModel):
    """One history message as sent: its role and stored token count (no text)."""

    model_config = EDGE_CONFIG
    role: Literal["system", "user", "assistant", "tool"] = Field(
        description="Message role (tool: a tool result kept with its turn).")
    tokens: int = Field(ge=0, description="cl100k_base tokens, per-message overhead included.")


class HistorySnapshot(CheckedModel):
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


class SkillRecord(CheckedModel):
    """One skill resolved for the turn."""

    model_config = EDGE_CONFIG
    skill_id: str = Field(description="The exact read_skill value, {source}:{slug}.")
    reason: ActivationReason = Field(description="Why it is active.")


class SkillOutcomeRecord(CheckedModel):
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


class SkillsSnapshot(CheckedModel):
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


class ExecutionSecurity(CheckedModel):
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


class HiddenDomain(CheckedModel):
    """A tool domain still hidden in a round, and its tools."""

    model_config = EDGE_CONFIG
    domain: str = Field(description="Domain name.")
    tools: list[str] = Field(description="Its tools, in domain-map order.")


class ToolCallRecord(CheckedModel):
    """How one tool call of a round was judged."""

    model_config = EDGE_CONFIG
    call_id: str = Field(description="Call id.")
    name: str = Field(description="Called tool.")
    verdict: Literal["run", "granted", "invalid", "refused"] = Field(
        description="run: executed by the application; granted: request_tools succeeded; "
        "invalid: the arguments were not a JSON object, or request_tools arguments failed "
        "the schema; refused: the tool was not visible."
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


class SystemPartRecord(CheckedModel):
    """One piece of system content as the adapter sent it."""

    model_config = EDGE_CONFIG
    kind: Literal["stable", "dynamic", "message"] = Field(
        description="stable or dynamic prompt text, or a system message (history summary)."
    )
    chars: int = Field(ge=0, description="Characters sent, boundary marker removed.")


class ProviderShape(CheckedModel):
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
PROVIDER_NAMES: Mapping[str, str] = {
    api.name: api.telemetry_name for api in PROVIDER_APIS.values()
}


class ReplyRecord(CheckedModel):
    """What the provider answered in a round, as read back (no text)."""

    model_config = EDGE_CONFIG
    stop_reason: StopReason = Field(
        description="Why the model stopped: end_turn, tool_calls, max_tokens, stop_sequence, "
        "refusal or other."
    )
    provider_stop_reason: str | None = Field(
        default=None, description="The provider's own word for it, as sent."
    )
    text_chars: int = Field(default=0, ge=0, description="Characters of assistant text.")
    tool_calls: int = Field(default=0, ge=0, description="Tool calls the reply made.")
    reasoning_items: int = Field(
        default=0, ge=0, description="Reasoning items skipped (thinking blocks, thought parts)."
    )
    unanswered: list[str] = Field(
        default_factory=list,
        description="Providers this round was sent to first that gave no reply (the round "
        "was built again for the next), in order.",
    )

    @classmethod
    def from_reply(cls, reply: ModelReply, unanswered: Sequence[str] = ()) -> ReplyRecord:
        """The record of a reply read by :func:`~pioneer.providers.read_response`."""
        return cls(stop_reason=reply.stop_reason, provider_stop_reason=reply.provider_stop_reason,
                   text_chars=len(reply.text), tool_calls=len(reply.tool_calls),
                   reasoning_items=reply.reasoning_items, unanswered=list(unanswered))


class ToolRecord(CheckedModel):
    """One tool of the turn's catalog: its domain and who registered it."""

    model_config = EDGE_CONFIG
    name: str = Field(description="Tool name.")
    domain: str | None = Field(
        default=None, description="The hideable domain it belongs to (None: always visible)."
    )
    hook_id: str | None = Field(
        default=None,
        description="The hook that registered it at turn.pre_tool_materialization (None: "
        "the application's own tool).",
    )
    granted_by: Literal["application"] | None = Field(
        default=None,
        description="Who opened its domain before the first round: application (the turn's "
        "visible_domains, a preflight selection). None: always visible, or hidden until the "
        "model calls request_tools.",
    )

    @classmethod
    def from_catalog(cls, catalog: ToolCatalog, registered: Mapping[str, str] | None = None,
                     *, opened: Sequence[str] = ()) -> list[ToolRecord]:
        """Every tool of ``catalog`` in order; ``registered`` maps a tool to its hook,
        ``opened`` lists the domains the application opened before the first round."""
        registered = registered or {}
        records = []
        for tool in catalog.tools:
            domain = catalog.domain_of(tool.name)
            records.append(cls(name=tool.name, domain=domain, hook_id=registered.get(tool.name),
                               granted_by="application" if domain in opened else None))
        return records


class WindowRecord(CheckedModel):
    """How one round's request fits the context window (docs/history.md, "Budgeting").

    Token figures are the provider's tokens as estimated: the local count times the
    calibrated ratio, plus its overhead; the margin the fit multiplies them by is not in
    them.
    """

    model_config = EDGE_CONFIG
    context_window: int = Field(ge=1, description="The window the request must fit.")
    window_from: str = Field(
        default="", description="Where the window comes from: the model table's row, or the "
        "max_context_tokens setting.")
    reserve_tokens: int = Field(ge=0, description="Tokens kept for the reply.")
    reserve_from: Literal["max_tokens", "response_reserve_tokens"] = Field(
        default="response_reserve_tokens",
        description="max_tokens (the request sets it) or response_reserve_tokens.")
    estimated_input_tokens: int = Field(
        ge=0, description="The whole request in the provider's tokens, as estimated "
        "(calibrated ratio and overhead, margin not included).")
    history_tokens: int = Field(
        default=0, ge=0, description="The history's part of the estimate.")
    local_input_tokens: int = Field(
        default=0, ge=0, description="The whole request in local tokens, as counted.")
    local_history_tokens: int = Field(
        default=0, ge=0, description="The history's part of the local count.")
    ratio: float = Field(gt=0, description="Provider tokens per local token used.")
    ratio_samples: int = Field(
        ge=0, description="Replies the ratio was learnt from (0: the model table's prior).")
    margin: float = Field(
        default=1.0, ge=1, description="The factor the fit multiplied the estimate by: the "
        "prior's margin until the ratio has enough samples, then the spread of the recent "
        "ones.")
    cleared_tool_results: int = Field(
        ge=0, description="This turn's tool results sent as a one-line placeholder.")
    reported_input_tokens: int | None = Field(
        default=None, ge=0, description="The input the provider reported for the request "
        "(uncached, cache read and cache write together), once it replied.")


class RoundRecord(CheckedModel):
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
    reply: ReplyRecord | None = Field(
        default=None,
        description="The reply as read back (None: not given, or a record written before "
        "replies were kept).",
    )
    section_titles: dict[str, str] = Field(
        default_factory=dict,
        description="Each section's title by id, as the compiled prompt had it (empty in "
        "records written before titles were kept).",
    )
    window: WindowRecord | None = Field(
        default=None,
        description="How the request fits the context window (None: not given, or a record "
        "written before the window was kept).",
    )


class TurnRecord(CheckedModel):
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
    tools: list[ToolRecord] | None = Field(
        default=None,
        description="The turn's tool catalog: the application's tools and those hooks "
        "registered (None: not given, or a record written before the catalog was kept).",
    )
    rounds: list[RoundRecord] = Field(min_length=1, description="Provider rounds, in order.")
    abandoned: str | None = Field(
        default=None,
        description="Why the turn was not finished: dropped without finish(), or another "
        "turn of its thread stored first (None: a finished turn, stored with its answer; "
        "an abandoned turn is never in a thread's history).",
    )

    @model_validator(mode="after")
    def _numbered(self) -> TurnRecord:
        numbers = [r.round for r in self.rounds]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"rounds: must be numbered 1, 2, 3… in order (got {numbers})")
        return self
