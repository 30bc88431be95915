"""Building a turn record while the turn runs, one provider round at a time.

An agent loop makes a :class:`TurnAudit` when the turn starts (mode, history decision,
permissions and the execution security snapshot, skills decision), calls
:meth:`TurnAudit.add_round` with what each round sent (the compiled manifest, the tool
round, the request and the provider body) and
:meth:`TurnAudit.record` at the end with the judged tool calls; the store keeps the
resulting :class:`~pioneer.audit.record.TurnRecord`. With OpenTelemetry installed each
round is also a GenAI client span (:mod:`pioneer.turn._round_spans`), open from
``add_round`` until :meth:`TurnAudit.report_usage` gives the provider's usage or the turn
is recorded. ``add_round`` refuses a request
whose tools are not exactly the round's visible tools, so the record can never claim a
tool set that was not sent.

Each round also gets its cache plan (:mod:`~pioneer.audit.cache_report`), against the
earlier rounds of the turn and the ``earlier`` plans the caller passes (the rounds of the
thread's previous turn: the turn runner, :class:`pioneer.Agent`, reads them from the
previous turn record); ``pioneer explain`` sets the usage the provider reported
(:meth:`TurnAudit.report_usage`, or :meth:`TurnAudit.report_reply` with the whole reply)
against it. A round whose body got no reply and is sent again, to the same provider or
another, is recorded again with ``add_round(..., resend=True)``: the record keeps the
body that was answered and names the providers tried before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, get_args

from ..audit.cache_report import CacheBlock, CachePlan, plan_request
from ..audit.provider_shape import provider_shape
from ..audit.record import (
    ExecutionSecurity,
    HiddenDomain,
    HistorySnapshot,
    ReplyRecord,
    ReportedUsage,
    RoundRecord,
    SkillsSnapshot,
    ThreadMode,
    ToolCallRecord,
    ToolRecord,
    TurnRecord,
    WindowRecord,
)
from ..compile.manifest import PromptManifest
from ..errors import InputError, Problem
from ..providers.replies import ModelReply
from ..providers.request import ChatRequest
from ..sections.permissions import PermissionProfile
from ._round_spans import end_round_span, start_round_span

if TYPE_CHECKING:
    from ..history.budget import HistoryDecision
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
        history: HistorySnapshot | HistoryDecision | None = None,
        permissions: PermissionProfile | None = None,
        security: ExecutionSecurity | None = None,
        skills: SkillsSnapshot | None = None,
        earlier: Sequence[CachePlan] = (),
        tools: Sequence[ToolRecord] | None = None,
    ) -> None:
        """``history`` is the budgeter's decision or its snapshot. ``security`` is the
        execution security snapshot (:meth:`ExecutionSecurity.from_profile`, with the
        profile's source and the sandbox); without it the snapshot is taken of
        ``permissions``. Given both, the snapshot's profile must be ``permissions``.
        ``tools`` is the turn's catalog (:meth:`ToolRecord.from_catalog`)."""
        from ..history.budget import HistoryDecision

        _check("turn_id", turn_id, str, "a non-empty string", blank=False)
        _check("thread_id", thread_id, str, "a non-empty string", blank=False)
        if mode not in get_args(ThreadMode):
            raise InputError(Problem(f"expected chat or agent (got {mode!r})",
                                     path="TurnAudit → mode"))
        if isinstance(history, HistoryDecision):
            history = HistorySnapshot.from_decision(history)
        _check("history", history, HistorySnapshot, "a HistorySnapshot or HistoryDecision")
        _check("permissions", permissions, PermissionProfile, "a PermissionProfile")
        _check("security", security, ExecutionSecurity, "an ExecutionSecurity")
        _check("skills", skills, SkillsSnapshot, "a SkillsSnapshot")
        for index, plan in enumerate(earlier):
            _check(f"earlier[{index}]", plan, CachePlan, "a CachePlan")
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
        self.tools = None if tools is None else list(tools)
        for index, tool in enumerate(self.tools or ()):
            _check(f"tools[{index}]", tool, ToolRecord, "a ToolRecord")
        self._rounds: list[RoundRecord] = []
        self._unanswered: dict[int, list[str]] = {}  # round → providers tried before
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
        *,
        resend: bool = False,
        window: WindowRecord | None = None,
    ) -> RoundRecord:
        """Record the next round; ``tools`` is None for a round without tool calling.

        Records of ``manifest`` without a token count are counted from the section texts
        the request carries (``request.compiled_prompt``), so a stored round has its
        per-section tokens even though the compile left them out. With ``resend``, the
        last round got no reply and this body (to the same provider or another) takes
        its place; its provider is kept in the record as tried first. ``window`` is how
        the request fits the context window; the input the provider reports for the round
        is set on it.
        """
        if resend:
            self._drop_unanswered()
        number = len(self._rounds) + 1
        if request.compiled_prompt is not None:
            manifest = manifest.with_token_counts(request.compiled_prompt.sections)
        # With tool_choice none the body carries tools the model may not call: none visible.
        sent = [tool.name for tool in request.tools] if request.tool_choice == "auto" else []
        if tools is not None and (tools.number != number or tuple(sent) != tools.names):
            raise InputError(Problem(
                f"round {number}: the request carries tools {sent}, but tool round "
                f"{tools.number} makes visible {list(tools.names)}",
                path="ChatRequest → tools",
            ))
        hidden = tools.hidden if tools is not None else {}
        cache = plan_request(provider, request, body, self._earlier, manifest=manifest)
        # The plan's blocks are these with their status (which later plans do not read):
        # kept instead, so each block is held once.
        self._earlier.append(cache.blocks)
        record = RoundRecord(
            round=number,
            manifest=manifest,
            visible_tools=sent,
            hidden_domains=[HiddenDomain(domain=d, tools=list(names))
                            for d, names in hidden.items()],
            provider=provider_shape(provider, request, body),
            cache=cache,
            section_titles={s.id: s.title for s in request.compiled_prompt.sections}
            if request.compiled_prompt is not None else {},
            window=window,
        )
        self._rounds.append(record)
        self._spans[number] = start_round_span(record, request, provider, turn_id=self.turn_id,
                                               thread_id=self.thread_id, history=self.history)
        return record

    def _drop_unanswered(self) -> None:
        number = len(self._rounds)
        if number == 0 or number not in self._spans:
            raise InputError("resend: there is no round waiting for its reply "
                             f"(the turn has {len(self._rounds)} round(s))")
        dropped = self._rounds.pop()
        self._earlier.pop()
        tried = [*self._unanswered.pop(number, []), dropped.provider.provider]
        self._unanswered[number] = tried
        end_round_span(self._spans.pop(number), None, error="no reply; the round was sent again")

    @property
    def rounds(self) -> tuple[RoundRecord, ...]:
        """The rounds added so far, as recorded (calls are filed by :meth:`record`)."""
        return tuple(self._rounds)

    def report_usage(self, round_number: int, usage: ReportedUsage) -> None:
        """The usage the provider reported for a round: it is kept on the round's record
        and goes on the round's span, which ends here. Reporting a round twice, or one not
        added, is an error."""
        self._report(round_number, usage, None)

    def report_reply(self, round_number: int, reply: ModelReply) -> None:
        """The reply of a round, as :func:`~pioneer.providers.read_response` read it: its
        usage and why it stopped are kept on the round's record and its span, which ends
        here (reporting a round twice, or one not added, is an error)."""
        self._report(round_number, reply.usage, reply)

    def _report(self, round_number: int, usage: ReportedUsage | None,
                reply: ModelReply | None) -> None:
        if round_number not in self._spans:
            state = "already reported" if 1 <= round_number <= len(self._rounds) else "not added"
            raise InputError(f"round {round_number}: usage {state} "
                             f"(the turn has {len(self._rounds)} round(s))")
        index = round_number - 1
        update: dict[str, Any] = {"usage": usage}
        window = self._rounds[index].window
        if window is not None and usage is not None and usage.input_tokens:
            update["window"] = window.model_copy(
                update={"reported_input_tokens": usage.input_tokens})
        if reply is not None:
            update["reply"] = ReplyRecord.from_reply(
                reply, self._unanswered.get(round_number, ()))
        self._rounds[index] = self._rounds[index].model_copy(update=update)
        end_round_span(self._spans.pop(round_number), usage, reply=reply)

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
        if not rounds:
            raise InputError(f"turn {self.turn_id!r}: no round was added; a turn record "
                             "needs at least one")
        return TurnRecord(turn_id=self.turn_id, thread_id=self.thread_id, mode=self.mode,
                          history=self.history, permissions=self.permissions,
                          security=self.security, skills=self.skills, tools=self.tools,
                          rounds=rounds)


def _check(name: str, value: object, kind: type, expected: str, *, blank: bool = True) -> None:
    """A constructor argument of the wrong type is an InputError naming it."""
    if value is None and blank:
        return
    if not isinstance(value, kind) or (not blank and not value):
        raise InputError(Problem(f"expected {expected} (got {type(value).__name__})",
                                 path=f"TurnAudit → {name}"))
