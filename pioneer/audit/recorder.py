"""Building a turn record while the turn runs, one provider round at a time.

An agent loop makes a :class:`TurnAudit` when the turn starts (mode, history decision,
permissions and the execution security snapshot, skills decision), calls
:meth:`TurnAudit.add_round` with what each round sent (the compiled manifest, the tool
round, the request and the provider body) and
:meth:`TurnAudit.record` at the end with the judged tool calls; the store keeps the
resulting :class:`~pioneer.audit.record.TurnRecord`. With OpenTelemetry installed each
round is also a GenAI client span (:mod:`pioneer.audit.telemetry`), open from
``add_round`` until :meth:`TurnAudit.report_usage` gives the provider's usage or the turn
is recorded. ``add_round`` refuses a request
whose tools are not exactly the round's visible tools, so the record can never claim a
tool set that was not sent.

Each round also gets its cache plan (:mod:`~pioneer.audit.cache_report`), against the
earlier rounds of the turn and the ``earlier`` plans the caller passes (the rounds of the
thread's previous turn, say); ``pioneer explain`` sets the usage the provider reported
(:meth:`TurnAudit.report_usage`) against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..compile.manifest import PromptManifest
from ..errors import InputError, Problem
from ..providers.request import ChatRequest
from ..sections.permissions import PermissionProfile
from .cache_report import CacheBlock, CachePlan, plan_cache, request_blocks
from .provider_shape import provider_shape
from .record import (
    ExecutionSecurity,
    HiddenDomain,
    HistorySnapshot,
    ReportedUsage,
    RoundRecord,
    SkillsSnapshot,
    ThreadMode,
    ToolCallRecord,
    TurnRecord,
)
from .telemetry import end_round_span, start_round_span

if TYPE_CHECKING:
    from ..tools.visibility import CallOutcome, ToolRound

__all__ = ["TurnAudit"]


class TurnAudit:
    """Collects one turn's rounds into a :class:`TurnRecord`."""

    def __init__(
        self,
        turn_id: str,
        thread_id: str,
        mode: ThreadMode,
        *,
        history: HistorySnapshot | None = None,
        permissions: PermissionProfile | None = None,
        security: ExecutionSecurity | None = None,
        skills: SkillsSnapshot | None = None,
        earlier: Sequence[CachePlan] = (),
    ) -> None:
        """``security`` is the execution security snapshot
        (:meth:`ExecutionSecurity.from_profile`, with the profile's source and the
        sandbox); without it the snapshot is taken of ``permissions``. Given both, the
        snapshot's profile must be ``permissions``."""
        if security is None:
            security = ExecutionSecurity.from_profile(permissions)
        elif permissions is None:
            permissions = security.profile
        elif security.profile != permissions:
            raise InputError(Problem(
                "the execution security snapshot is of another permission profile than "
                "the one given", path="TurnAudit → security → profile"))
        self.turn_id = turn_id
        self.thread_id = thread_id
        self.mode = mode
        self.history = history
        self.permissions = permissions
        self.security = security
        self.skills = skills
        self._rounds: list[RoundRecord] = []
        self._spans: dict[int, Any] = {}  # round → its open span (None without the API)
        #: Blocks of the thread's earlier requests, oldest first, for the cache plans.
        self._earlier: list[list[CacheBlock]] = [list(plan.blocks) for plan in earlier]

    def add_round(
        self,
        manifest: PromptManifest,
        request: ChatRequest,
        provider: str,
        body: Mapping[str, Any],
        tools: ToolRound | None = None,
    ) -> RoundRecord:
        """Record the next round; ``tools`` is None for a round without tool calling.

        Records of ``manifest`` without a token count are counted from the section texts
        the request carries (``request.compiled_prompt``), so a stored round has its
        per-section tokens even though the compile left them out.
        """
        number = len(self._rounds) + 1
        if request.compiled_prompt is not None:
            manifest = manifest.with_token_counts(request.compiled_prompt.sections)
        sent = [tool.name for tool in request.tools]
        if tools is not None and (tools.number != number or tuple(sent) != tools.names):
            raise InputError(Problem(
                f"round {number}: the request carries tools {sent}, but tool round "
                f"{tools.number} makes visible {list(tools.names)}",
                path="ChatRequest → tools",
            ))
        hidden = tools.hidden if tools is not None else {}
        blocks = request_blocks(provider, request, body, manifest=manifest)
        cache = plan_cache(provider, request.model, blocks, self._earlier)
        self._earlier.append(blocks)
        record = RoundRecord(
            round=number,
            manifest=manifest,
            visible_tools=sent,
            hidden_domains=[HiddenDomain(domain=d, tools=list(names))
                            for d, names in hidden.items()],
            provider=provider_shape(provider, request, body),
            cache=cache,
        )
        self._rounds.append(record)
        self._spans[number] = start_round_span(record, request, provider, turn_id=self.turn_id,
                                               thread_id=self.thread_id, history=self.history)
        return record

    def report_usage(self, round_number: int, usage: ReportedUsage) -> None:
        """The usage the provider reported for a round: it is kept on the round's record
        and goes on the round's span, which ends here. Reporting a round twice, or one not
        added, is an error."""
        if round_number not in self._spans:
            state = "already reported" if 1 <= round_number <= len(self._rounds) else "not added"
            raise InputError(f"round {round_number}: usage {state} "
                             f"(the turn has {len(self._rounds)} round(s))")
        index = round_number - 1
        self._rounds[index] = self._rounds[index].model_copy(update={"usage": usage})
        end_round_span(self._spans.pop(round_number), usage)

    def record(self, calls: Sequence[CallOutcome] = ()) -> TurnRecord:
        """The turn record, each judged call filed under the round it was made in."""
        by_round: dict[int, list[ToolCallRecord]] = {}
        for outcome in calls:
            if not 1 <= outcome.round <= len(self._rounds):
                raise InputError(f"tool call {outcome.call_id!r} names round {outcome.round}, "
                                 f"but the turn has {len(self._rounds)} round(s)")
            by_round.setdefault(outcome.round, []).append(ToolCallRecord.from_outcome(outcome))
        rounds = [r.model_copy(update={"calls": by_round.get(r.round, [])})
                  for r in self._rounds]
        for number in list(self._spans):
            end_round_span(self._spans.pop(number), None)
        return TurnRecord(turn_id=self.turn_id, thread_id=self.thread_id, mode=self.mode,
                          history=self.history, permissions=self.permissions,
                          security=self.security, skills=self.skills, rounds=rounds)
