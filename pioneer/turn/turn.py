"""One turn of a thread, run by the agent in the right order: bodies out, replies in.

The loop an application writes (docs/explain.md, "The turn runner")::

    turn = agent.turn(thread_id, user_text)
    while True:
        body = turn.next_body()            # send it with any HTTP client or SDK
        step = turn.receive(response)      # the provider's JSON, read back
        if step.done:
            break
        for call in step.runnable:
            turn.add_tool_result(call.id, run(call))
    turn.finish()

The first :meth:`Turn.next_body` loads the thread's history window and budgets it
(summarising or truncating at the stored cut), resolves the skills, runs the hook phases
once for the turn (tools registered at ``turn.pre_tool_materialization``, then the
prompt phases, thread episodic recall among them) and reads the cache plans of the
thread's previous turn record. Every call then compiles the round with the history's
artifact refs, fixes the round's visible tools, fits the whole request to the model's
context window (:mod:`pioneer.turn.window`: this turn's oldest tool results cleared,
then the history cut, else :class:`~pioneer.errors.ContextWindowError` before
sending), builds the provider body and audits the round (its cache plan against the
thread's earlier requests, its window). :meth:`Turn.receive` reads
the reply (:func:`~pioneer.providers.read_response`), reports its usage (which
calibrates the token ratio) and judges each tool call; :meth:`Turn.receive_error` reads
a context-length error instead; :meth:`Turn.finish` stores the turn and its record in
one transaction (the episodic index writes its snippets in the same one) and runs the
``turn.post_turn`` hooks. One ``invoke_agent`` span covers the turn, parent of the
compile and ``chat`` spans. ``next_body`` (its first call) and ``finish`` block on the store and the
summarizer: from asyncio, call them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import uuid
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import telemetry
from ..audit.record import (
    HistorySnapshot,
    RoundRecord,
    SkillsSnapshot,
    ToolRecord,
    TurnRecord,
)
from ..compile.inputs import PromptCompileInput
from ..compile.manifest import Diagnostic
from ..compile.round import StructuredSection
from ..episodic.recall import HISTORY_KEY
from ..errors import InputError, Problem, ThreadConflictError, describe_exception
from ..history.budget import HistoryDecision
from ..history.models import HistoryEntry
from ..history.store import check_id
from ..hooks.models import TURN_PROMPT_PHASES, TurnContext
from ..hooks.registry import HookRun
from ..providers import PROVIDER_APIS, build_request_body, provider_api, read_response
from ..providers.overflow import ContextOverflow
from ..providers.replies import ModelReply
from ..providers.request import ChatMessage, ChatRequest, ToolCall, ToolResult
from ..sections.permissions import CurrentPermissions
from ..sections.runtime import runtime_block
from ..sections.skills import build_skills_prompt, resolve_skill_outcomes
from ..sections.tool_domains import TASK_DOMAIN, HiddenToolDomains
from ..tools._permissions import forbidden_tools
from ..tools.visibility import CallOutcome, ToolRound, TurnTools
from ._history import call_ids, kept_rounds
from ._lifecycle import Abandoned, warn_abandoned
from ._rounds import RoundFacts, check_max_rounds, round_input
from ._telemetry import end_agent_span, start_agent_span
from .hook_tools import HOOK_TOOL_PHASE, HOOK_TOOL_TYPES, catalog_with_hook_tools
from .recorder import TurnAudit
from .window import Fitted, TurnWindow

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ..compile.manifest import CompiledPromptPayload
    from ..providers.names import ProviderName
    from .parts import AgentParts, ThreadMode

__all__ = ["ENTRY_KEY", "RECORD_KEY", "FinishedTurn", "Step", "Turn"]

#: Keys of ``TurnContext.data`` for the ``turn.post_turn`` hooks: the stored turn and its
#: record.
ENTRY_KEY = "pioneer.turn_entry"
RECORD_KEY = "pioneer.turn_record"
_POST_TURN = "turn.post_turn"
#: The user message that asks for the rest of a reply the output limit cut off (the
#: Recovery Continuation section says what to do; a request may not end with the
#: model's own message on every provider).
CONTINUE_TEXT = "Continue."


@dataclass(frozen=True, slots=True)
class Step:
    """What one reply asks of the application."""

    round: int
    reply: ModelReply
    #: How each tool call of the reply was judged, in order.
    outcomes: tuple[CallOutcome, ...]
    #: The reply's tool calls as kept in the conversation (ids made unique in the turn).
    calls: tuple[ToolCall, ...]
    #: The round was the turn's last (``max_rounds``): its calls are refused.
    last: bool = False
    #: What the runner did with the reply that the application should know (a chat
    #: turn's tool calls dropped, say); also in :attr:`FinishedTurn.diagnostics`.
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def done(self) -> bool:
        """The turn can finish: the model answered without a tool call, or this was the
        turn's last round (``max_rounds``; any call it made is refused)."""
        return not self.calls or self.last

    @property
    def runnable(self) -> tuple[ToolCall, ...]:
        """The calls the application runs (verdict ``run``); the rest are answered."""
        run = {o.call_id for o in self.outcomes if o.verdict == "run"}
        return tuple(call for call in self.calls if call.id in run)

    @property
    def text(self) -> str:
        """The assistant text of the reply."""
        return self.reply.text


@dataclass(frozen=True, slots=True)
class FinishedTurn:
    """A stored turn: its history entry, its record, and what the post-turn hooks said."""

    entry: HistoryEntry
    record: TurnRecord
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass(slots=True)
class _Started:
    """What the first round fixed for the whole turn."""

    decision: HistoryDecision
    compile_input: PromptCompileInput
    context: TurnContext
    hook_run: HookRun
    tools: TurnTools
    audit: TurnAudit
    #: The position of the thread's newest turn when the window was loaded (0: none).
    seen_seq: int = 0


@dataclass(slots=True)
class _Pending:
    """What a dropped turn's finalizer needs to keep it as abandoned (never the turn)."""

    started: _Started | None = None
    span: Span | None = None
    replies: list[ModelReply] = field(default_factory=list)


def _abandoned_record(started: _Started | None, reason: str) -> TurnRecord | None:
    """The record of a turn ended without ``finish()``, or None when it sent no body."""
    if started is None or not started.audit.rounds:
        return None
    return started.audit.record(started.tools.calls).model_copy(update={"abandoned": reason})


def _dropped(agent: AgentParts, pending: _Pending, user_text: str) -> None:
    """The finalizer of a turn garbage-collected unfinished: its record goes to the agent's
    writer (stored off this thread), then a ResourceWarning. Never raises."""
    try:
        end_agent_span(pending.span, pending.replies,
                       error="the turn was dropped without finish()")
        record = _abandoned_record(pending.started,
                                   "dropped without finish() or close() (garbage-collected)")
        if record is None:
            return
        last = pending.replies[-1].text if pending.replies else None
        agent.writer.put(Abandoned(record, user_text, last))
        warn_abandoned(record, stacklevel=2)
    except BaseException:
        pass


def _without_calls(reply: ModelReply) -> tuple[ModelReply, tuple[Diagnostic, ...]]:
    """A chat turn's reply without the tool calls it offered no tools for: the turn ends
    with the reply's text (a tool result would need a ``tools`` list the body lacks)."""
    names = ", ".join(call.name for call in reply.tool_calls)
    text = reply.text
    message = ChatMessage.assistant(text) if text.strip() else None
    return replace(reply, message=message, argument_errors={}), (Diagnostic(
        code="input_ignored",
        message=f"a chat turn offers no tools, but the reply asked for "
        f"{len(reply.tool_calls)} tool call(s) ({names}): they were dropped, and the turn "
        "ends with the reply's text"),)


class Turn:
    """One turn of a thread; made by :meth:`Agent.turn`, used by one caller at a time.

    Use it as ``with agent.turn(...) as turn:``: a turn that sent a body and ends without
    :meth:`finish` (closed, left in its block, garbage-collected) is kept as an abandoned
    turn (its record, outside the thread's history) with a ``ResourceWarning``.
    """

    def __init__(
        self, agent: AgentParts, thread_id: str, user_text: str, *, mode: ThreadMode,
        turn_id: str | None, touched_paths: tuple[str, ...], thread_folder: str | None,
        explicit_skills: tuple[str, ...], dynamic_context: str, extra_system: str,
        data: dict[str, Any], max_rounds: int | None = None,
        inputs: dict[str, Any] | None = None,
        visible_domains: tuple[str, ...] = (),
    ) -> None:
        for label, value in (("thread_id", thread_id), ("turn_id", turn_id)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(Problem(f"expected a non-empty string (got {value!r})",
                                         path=f"Agent.turn → {label}"))
            check_id(value, f"Agent.turn → {label}")
        if not isinstance(user_text, str):
            raise InputError(Problem(f"expected a string (got {type(user_text).__name__})",
                                     path="Agent.turn → user_text"))
        self.max_rounds = check_max_rounds(max_rounds, "Agent.turn → max_rounds")
        #: The agent's parts the turn was made with (fixed: a reload is for later turns).
        self.agent = agent
        self.thread_id = thread_id
        self.turn_id = turn_id or f"turn-{uuid.uuid4().hex}"
        self.user_text = user_text
        self.mode: ThreadMode = mode
        self._touched = touched_paths
        self._folder = thread_folder
        self._explicit = explicit_skills
        self._inputs = {"dynamic_context": dynamic_context, "extra_system": extra_system}
        self._data = data
        self._given = inputs or {}
        self._visible_domains = visible_domains
        self._started: _Started | None = None
        self._messages: list[ChatMessage] = []
        self._first = 0  # where this turn's messages start, after its user message
        self._provider: ProviderName | None = None  # of the body waiting for its reply
        self._round: ToolRound | None = None
        self._last: Step | None = None
        #: The last step's runnable calls, id → tool name, made once per reply (it may
        #: carry thousands, and each result added is checked against them).
        self._runnable: dict[str, str] = {}
        self._results: dict[str, ToolResult] = {}
        self._ids: set[str] = set()
        self._span: Span | None = None
        self._replies: list[ModelReply] = []
        self._finished = False
        self._errors: list[tuple[str, str]] = []  # error results the application added
        self._failed: tuple[tuple[str, str], ...] = ()  # ... to the calls of the last round
        self._cut: list[str] = []  # texts of replies continued by a later round
        self._continuing = False  # the round being sent continues a cut reply
        self._window = TurnWindow.of(agent)
        self._newest: frozenset[str] = frozenset()  # call ids of the newest tool round
        self._diagnostics: tuple[Diagnostic, ...] = ()
        self._pending = _Pending(replies=self._replies)
        self._finalizer = weakref.finalize(self, _dropped, agent, self._pending, user_text)

    # -- the loop ------------------------------------------------------------------------

    def next_body(self, provider: ProviderName | None = None, *,
                  continue_generation: bool = False) -> dict[str, Any]:
        """The body of the next provider request (for ``provider``, default the agent's).

        Called again before :meth:`receive`, it builds the same round again (to retry,
        or to send to another provider; ``continue_generation`` is then the round's own):
        the record keeps the body that was answered.
        ``continue_generation`` asks the model to go on with a reply the output limit cut
        off (the Recovery Continuation section); after a reply without tool calls, the
        next round then continues it, and :meth:`finish` stores the joined text.
        """
        self._check_open()
        provider = provider or self.agent.provider
        if provider not in PROVIDER_APIS:
            raise InputError(Problem(f"unknown provider {provider!r}",
                                     path="Turn.next_body → provider"))
        if not isinstance(continue_generation, bool):
            raise InputError(Problem(
                f"expected true or false (got {type(continue_generation).__name__})",
                path="Turn.next_body → continue_generation"))
        resend = self._provider is not None
        if not resend:
            self._check_limit()
            self._take_results(continue_generation)
            self._continuing = continue_generation
        if self._started is None:
            self._span = self._pending.span = start_agent_span(self.agent, self.thread_id,
                                                               self.turn_id)
        with telemetry.current(self._span), self.agent.model_rules():
            started = self._started or self._start(provider)
            if not resend:
                self._round = started.tools.next_round(closed=self._next_is_last())
            round_ = self._round
            assert round_ is not None
            task_tools = started.tools.catalog.domains.get(TASK_DOMAIN, ())
            facts = RoundFacts(
                failed=self._failed,
                final_of=self.max_rounds if round_.closed else None,
                continuation=self._continuing,
                task_tools=any(name in task_tools for name in round_.names),
            )
            permissions = started.audit.permissions
            sections: list[StructuredSection] = []
            if permissions is not None:
                sections.append(CurrentPermissions(permissions))
            if round_.hidden:
                sections.append(HiddenToolDomains(round_.hidden))
            payload = self.agent.compiler.compile(started.hook_run.round_input(
                round_input(self.agent.compiler, started.compile_input, facts),
                sections=sections,
                history=[m.content for m in started.decision.messages],
            ))
            fitted = self._fit(provider, payload, round_)
            request = fitted.request
            body = build_request_body(provider, request, system_role=self._system_role(provider))
            started.audit.add_round(payload.manifest, request, provider, body, round_,
                                    resend=resend, window=fitted.window)
        self._provider = provider
        return body

    def receive(self, response: Any) -> Step:
        """Read the provider's reply to the last body (its JSON, or an SDK response object)
        and judge its tool calls; non-runnable calls are answered here."""
        self._check_open()
        started = self._started
        if started is None or self._provider is None or self._round is None:
            raise InputError("no request is waiting for its reply; call next_body() first")
        reply = read_response(self._provider, response)
        number = self._round.number
        # The calibration (a store write) first: when it fails, nothing of the reply is
        # taken yet, and the same response can be received again.
        sent = started.audit.rounds[number - 1].window
        if sent is not None and reply.usage is not None and reply.usage.input_tokens:
            self._window.observe(self._provider, sent.model_copy(
                update={"reported_input_tokens": reply.usage.input_tokens}))
        started.audit.report_reply(number, reply)
        diagnostics: tuple[Diagnostic, ...] = ()
        if self.mode == "chat" and reply.tool_calls:
            reply, diagnostics = _without_calls(reply)
            self._diagnostics += diagnostics
        self._provider = None
        self._replies.append(reply)
        calls = tuple(self._unique(call, number) for call in reply.tool_calls)
        errors = {new.id: reply.argument_errors[old.id]
                  for old, new in zip(reply.tool_calls, calls, strict=True)
                  if old.id in reply.argument_errors}
        if reply.message is not None:
            self._messages.append(reply.message.model_copy(update={"tool_calls": list(calls)}))
        outcomes = tuple(started.tools.decide(call, arguments_error=errors.get(call.id))
                         for call in calls)
        self._results = {o.call_id: o.result for o in outcomes if o.result is not None}
        self._last = Step(number, reply, outcomes, calls, last=self._round.closed,
                          diagnostics=diagnostics)
        self._runnable = {call.id: call.name for call in self._last.runnable}
        return self._last

    def receive_error(self, error: object) -> ContextOverflow | None:
        """What the provider answered instead of a reply to the last body: the official
        SDK's exception, or the error body (JSON as a dict, text or bytes).

        A context-length error is returned as a
        :class:`~pioneer.providers.ContextOverflow`: the count it names calibrates the
        model's ratio against the body sent, and the next :meth:`next_body` builds the
        round again so that it fits
        (docs/history.md, "A turn that grows past the window").
        Any other error gives None. Either way the body stays unanswered: call
        :meth:`next_body` to build it again, or end the turn with
        ``finish(assistant_text=...)``."""
        self._check_open()
        started = self._started
        if started is None or self._provider is None:
            raise InputError("no request is waiting for its reply; call next_body() first")
        return self._window.overflow(self._provider, error, started.audit.rounds[-1].window)

    def add_tool_result(self, call_id: str, content: str, *, is_error: bool = False) -> None:
        """The result of a call the application ran (one of :attr:`Step.runnable`)."""
        self._check_open()
        runnable = self._runnable
        if call_id not in runnable:
            raise InputError(Problem(
                f"call {call_id!r} is not a call of the last reply that the application runs "
                f"(those are: {', '.join(sorted(runnable)) or 'none'})",
                path="Turn.add_tool_result → call_id"))
        if call_id in self._results:
            raise InputError(Problem(f"call {call_id!r} already has a result",
                                     path="Turn.add_tool_result → call_id"))
        if not isinstance(content, str):
            raise InputError(Problem(f"expected the result as text (got {type(content).__name__})",
                                     path="Turn.add_tool_result → content"))
        self._results[call_id] = ToolResult(call_id=call_id, content=content, is_error=is_error)
        if is_error:
            self._errors.append((runnable[call_id], content))

    def finish(self, *, assistant_text: str | None = None) -> FinishedTurn:
        """Store the turn (the last reply's text, unless ``assistant_text``) and its record
        in one transaction, then run the ``turn.post_turn`` hooks.

        A turn whose last body has no reply yet, or whose last reply asked for tool calls,
        ends here only with an ``assistant_text`` (what the application stores instead:
        a round limit, a provider that failed); without one it is an :class:`InputError`,
        so a loop that stops early does not store an empty answer."""
        self._check_open()
        started = self._started
        if started is None:
            raise InputError("nothing to finish: no round was sent; call next_body() first")
        if assistant_text is None and self._provider is not None:
            raise InputError(Problem(
                "the last body has no reply yet; receive() it first, or end the turn here "
                "with finish(assistant_text=...)", path="Turn.finish"))
        if assistant_text is None and self._last is not None and not self._last.done:
            raise InputError(Problem(
                "the model's last reply asked for tool calls "
                f"({', '.join(call.id for call in self._last.calls)}); add their results and "
                "call next_body(), or end the turn here with finish(assistant_text=...)",
                path="Turn.finish"))
        if assistant_text is not None and not isinstance(assistant_text, str):
            raise InputError(Problem(f"expected a string (got {type(assistant_text).__name__})",
                                     path="Turn.finish → assistant_text"))
        text = assistant_text if assistant_text is not None else "".join(
            [*self._cut, self._last.text if self._last is not None else ""])
        record = started.audit.record(started.tools.calls)
        agent = self.agent
        try:
            rounds = kept_rounds(self._messages[self._first:]) \
                if agent.history_tool_rounds == "keep" else ()
            with telemetry.current(self._span), agent.records.expecting(record), \
                    agent.guard.expecting(self.turn_id, seen_seq=started.seen_seq,
                                           user_text=self.user_text):
                entry = agent.store.add_turn(self.thread_id, turn_id=self.turn_id,
                                             user_text=self.user_text,
                                             assistant_text=text or None,
                                             tool_rounds=rounds)
        except ThreadConflictError as conflict:
            self._end()
            end_agent_span(self._span, self._replies, error=describe_exception(conflict))
            kept = record.model_copy(update={"abandoned": (
                f"another turn of the thread ({', '.join(conflict.conflicting)}) was stored "
                "after this one loaded its history")})
            try:
                agent.records.abandon(kept, user_text=self.user_text, assistant_text=text)
            except Exception as failure:
                conflict.add_note(f"its record could not be kept as abandoned either: {failure}")
            raise
        # Any other failure stored nothing: the turn stays open, to finish() again or to
        # close() (kept as abandoned), like a turn any other call of which raised.
        self._end()
        try:
            diagnostics = self._post_turn(started, entry, record)
        except BaseException as error:
            end_agent_span(self._span, self._replies, error=describe_exception(error))
            raise
        end_agent_span(self._span, self._replies)
        return FinishedTurn(entry, record, (*self._diagnostics, *diagnostics))

    def close(self) -> None:
        """End the turn without storing an answer.

        A turn that sent a body is kept as an abandoned turn (its record, with the
        reason, readable by ``pioneer explain``; never in the thread's history) and a
        ``ResourceWarning`` is emitted; a turn that sent none is just discarded. A
        finished or closed turn is left as it is."""
        self._abandon("closed without finish()")

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 *rest: object) -> None:
        if self._finished:
            return
        if error is None:
            self._abandon("left its with block without finish()")
            return
        try:
            self._abandon(f"left its with block on {describe_exception(error)}")
        except Warning:  # the ResourceWarning made an error by a filter: the record is kept
            raise
        except Exception as failure:  # the record could not be kept: the block's own error
            error.add_note(  # is the one to see, with this one noted on it
                f"turn {self.turn_id!r} could not be kept as abandoned: {failure}")

    def _abandon(self, reason: str) -> None:
        if self._finished:
            return
        self._end()
        end_agent_span(self._span, self._replies, error=f"the turn was {reason}")
        record = _abandoned_record(self._started, reason)
        if record is None:
            return
        self.agent.records.abandon(record, user_text=self.user_text,
                                   assistant_text=self._replies[-1].text if self._replies
                                   else None)
        warn_abandoned(record, stacklevel=4)

    def _end(self) -> None:
        """The turn is over: no finalizer, no longer the thread's open turn."""
        self._finished = True
        self._finalizer.detach()
        self.agent.release(self.thread_id, self)

    @property
    def rounds(self) -> tuple[RoundRecord, ...]:
        """The rounds recorded so far (each with its cache plan; usage once received)."""
        return () if self._started is None else self._started.audit.rounds

    @property
    def history(self) -> HistoryDecision | None:
        """The history decision of the turn (None before the first body)."""
        return None if self._started is None else self._started.decision

    # -- what the first round fixes ------------------------------------------------------

    def _start(self, provider: ProviderName) -> _Started:
        agent = self.agent
        agent.store.ensure_thread(self.thread_id, model=agent.model)
        # Read before the window, so a turn stored in between is a conflict at finish().
        newest = agent.store.get_thread_conversation_history(self.thread_id, 1)
        previous = self._previous_record(newest)
        limits = self._window.history_limits(
            provider, self.user_text, agent.tools, previous,
            newest[-1] if newest and previous is not None else None)
        decision = agent.budgeter(limits).build(self.thread_id)
        earlier = self._earlier_plans(previous)
        chat = self.mode == "chat"
        resolution = prompt = None
        if agent.skills and not chat:
            resolution = resolve_skill_outcomes(agent.skills, explicit=self._explicit,
                                                touched_paths=self._touched)
            prompt = build_skills_prompt(resolution.active, agent.compiler.templates.env)
        base = agent.compile_input
        inputs = {k: v for k, v in self._inputs.items() if v}
        if agent.runtime_facts:
            extra = inputs.get("extra_system", base.extra_system)
            inputs["extra_system"] = "\n\n".join(
                text for text in (runtime_block(agent.compiler), extra) if text)
        compile_input = PromptCompileInput.model_validate({
            **{name: getattr(base, name) for name in PromptCompileInput.model_fields},
            "profile": agent.chat_profile if chat else base.profile,
            "skills_prompt": prompt.text if prompt is not None else base.skills_prompt,
            **inputs,
            "inputs": {**base.inputs, **self._given},
        })
        context = TurnContext(thread_id=self.thread_id, thread_folder=self._folder,
                              user_text=self.user_text, touched_paths=self._touched,
                              data={HISTORY_KEY: decision, **self._data}, mode=self.mode)
        phases = TURN_PROMPT_PHASES if chat else (HOOK_TOOL_PHASE, *TURN_PROMPT_PHASES)
        hook_run = agent.registry(thread_folder=self._folder).run_hooks(
            agent.compiler, compile_input, turn=context, phases=phases,
            accept={HOOK_TOOL_PHASE: HOOK_TOOL_TYPES})
        hook_tools = catalog_with_hook_tools(() if chat else agent.tools, agent.domains,
                                             hook_run.offered)
        if hook_tools.diagnostics:
            hook_run = replace(hook_run, diagnostics=(*hook_run.diagnostics,
                                                      *hook_tools.diagnostics))
        forbidden = forbidden_tools(agent.security.profile, hook_tools.catalog)
        catalog = hook_tools.catalog.without(forbidden)
        tools = TurnTools(catalog, forbidden)
        opened = tools.open(self._visible_domains)
        audit = TurnAudit(
            self.turn_id, self.thread_id, self.mode,
            history=HistorySnapshot.from_decision(decision), security=agent.security,
            skills=SkillsSnapshot.from_resolution(resolution, prompt)
            if resolution is not None else None,
            earlier=earlier,
            tools=ToolRecord.from_catalog(catalog, hook_tools.registered, opened=opened),
        )
        # The history's messages come from the decision each round (a round may cut it
        # further); this turn's start with its user message.
        self._ids = call_ids(decision.messages)
        self._messages = [ChatMessage.user(self.user_text)]
        self._first = len(self._messages)
        self._started = _Started(decision, compile_input, context, hook_run, tools, audit,
                                 seen_seq=newest[-1].seq if newest else 0)
        self._pending.started = self._started
        return self._started

    def _previous_record(self, newest: tuple[HistoryEntry, ...]) -> TurnRecord | None:
        """The record of the thread's previous turn (``newest``), when it has one."""
        return self.agent.records.get(newest[-1].turn_id) if newest else None

    def _earlier_plans(self, previous: TurnRecord | None) -> list[Any]:
        """The cache plans of the thread's previous turn record (same provider and model):
        what the provider may still hold from the thread's earlier requests."""
        agent = self.agent
        if previous is None:
            return []
        return [r.cache for r in previous.rounds if r.cache is not None
                and r.cache.provider == agent.provider and r.cache.model == agent.model]

    def _fit(self, provider: ProviderName, payload: CompiledPromptPayload,
             round_: ToolRound) -> Fitted:
        """The round's request made to fit the window (docs/history.md, "Budgeting"); a
        history cut further here holds for the rest of the turn."""
        started = self._started
        assert started is not None
        agent = self.agent

        def build(messages: list[ChatMessage]) -> ChatRequest:
            return round_.apply(ChatRequest(
                model=agent.model, compiled_prompt=payload, messages=messages,
                sampling=agent.sampling, cache=agent.cache))

        fitted = self._window.fit(provider, round_.number, started.decision, self._messages,
                                  build, lambda: agent.budgeter(started.decision.limits),
                                  newest=self._newest)
        if fitted.decision is not started.decision:
            started.decision = fitted.decision
            started.audit.history = HistorySnapshot.from_decision(fitted.decision)
        return fitted

    # -- small helpers -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._finished:
            raise InputError(f"turn {self.turn_id!r} is finished")

    def _system_role(self, provider: str) -> Any:
        return self.agent.system_role if provider_api(provider).takes_system_role else None

    def _unique(self, call: ToolCall, round_number: int) -> ToolCall:
        """``call`` with an id no earlier call of the turn has (Gemini may send none, and
        every provider needs each result to name exactly one call)."""
        call_id = call.id
        if call_id in self._ids:
            call_id = f"{call.id}_r{round_number}"
            suffix = 2
            while call_id in self._ids:
                call_id, suffix = f"{call.id}_r{round_number}_{suffix}", suffix + 1
        self._ids.add(call_id)
        return call if call_id == call.id else call.model_copy(update={"id": call_id})

    def _check_limit(self) -> None:
        """A round past ``max_rounds`` is an error: the last one let the model call nothing."""
        number = self._round.number + 1 if self._round is not None else 1
        if self.max_rounds is not None and number > self.max_rounds:
            raise InputError(Problem(
                f"the turn has had its {self.max_rounds} round(s) (max_rounds); the last "
                "reply ends it: finish() the turn", path="Turn.next_body"))

    def _next_is_last(self) -> bool:
        number = self._round.number + 1 if self._round is not None else 1
        return self.max_rounds is not None and number >= self.max_rounds

    def _take_results(self, continuation: bool) -> None:
        """The results of the last reply's calls join the conversation, in call order;
        a reply without calls that is to be continued stays, and the user asks for more."""
        step = self._last
        self._failed = ()
        if step is None:
            if continuation:
                raise InputError(Problem("there is no reply to continue yet; "
                                         "continue_generation is for a later round",
                                         path="Turn.next_body → continue_generation"))
            return
        if step.done and continuation and not step.calls:
            self._cut.append(step.text)
            self._messages.append(ChatMessage.user(CONTINUE_TEXT))
            self._newest = frozenset()
            self._last = None
            return
        if step.done:
            raise InputError("the model answered without a tool call; finish() the turn")
        missing = [call.id for call in step.calls if call.id not in self._results]
        if missing:
            raise InputError(Problem(
                f"calls {', '.join(missing)} have no result; add_tool_result() for each "
                "call in Step.runnable first", path="Turn.next_body"))
        self._messages += [ChatMessage(role="tool", tool_result=self._results[call.id])
                           for call in step.calls]
        self._failed, self._errors = tuple(self._errors), []
        self._newest = frozenset(call.id for call in step.calls)
        self._last = None
        self._results = {}

    def _post_turn(self, started: _Started, entry: HistoryEntry,
                   record: TurnRecord) -> tuple[Diagnostic, ...]:
        registry = self.agent.registry()
        if not registry.subscriptions(_POST_TURN):
            return ()
        context = replace(started.context, data={**started.context.data, ENTRY_KEY: entry,
                                                 RECORD_KEY: record})
        outcome = registry.run_phase(_POST_TURN, turn=context,
                                     compile_input=started.compile_input,
                                     env=self.agent.compiler.templates.env)
        return outcome.diagnostics
