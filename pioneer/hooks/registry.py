"""Hooks: callables subscribed to turn phases, and the runner that applies their policies.

A :class:`Subscription` ties a hook function to one phase with a priority (higher runs
first, ties in registration order), an await policy (blocking, or a deadline in
milliseconds) and a failure policy. :meth:`HookRegistry.run_phase` calls every
subscription of a phase and returns a :class:`PhaseOutcome`: the contributions (each cut
to its own ``max_chars`` on the hook side), the manifest diagnostics and the manifest
entries for diagnostics and failures.

Deadline hooks of a phase are handed together to the process's deadline pool
(:mod:`pioneer.hooks.deadline`), and each is waited for no longer than its own deadline counted
from that hand-over; a hook that overruns is abandoned (Python cannot stop a thread) and
its late result is discarded. A hook that raises or
overruns is handled by its failure policy: ``fail_closed`` raises :class:`HookError`,
``best_effort`` becomes a ``hook_best_effort_failed`` diagnostic and the turn goes on.
Hooks register in code or through the ``pioneer.hooks.registry`` entry-point group. The values
(phases, subscriptions, contexts, contributions) live in :mod:`pioneer.hooks.models` and
are re-exported here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..compile.manifest import Diagnostic, HookSourceEntry
from ..compile.readonly import read_only
from ..compile.round import HookSection, RoundInput, StructuredSection
from ..errors import HookError, PioneerError, Problem, describe_exception
from .deadline import Outcome, Running, call
from .models import (
    PHASES,
    PROMPT_PHASES,
    TURN_PROMPT_PHASES,
    CollectedContribution,
    ContributionKind,
    FailurePolicy,
    HookContext,
    HookDiagnostic,
    HookFunction,
    Offered,
    PhaseOutcome,
    PromptContextContribution,
    PromptSectionContribution,
    Subscription,
    TurnContext,
    canonical_phase,
)

if TYPE_CHECKING:
    import jinja2

    from ..compile.compiler import PromptCompiler
    from ..compile.inputs import PromptCompileInput

__all__ = [
    "ENTRY_POINT_GROUP",
    "PHASES",
    "PROMPT_PHASES",
    "TURN_PROMPT_PHASES",
    "CollectedContribution",
    "FailurePolicy",
    "HookContext",
    "HookFunction",
    "HookRegistry",
    "HookRun",
    "Offered",
    "PhaseOutcome",
    "Subscription",
    "TurnContext",
    "canonical_phase",
]

ENTRY_POINT_GROUP = "pioneer.hooks"
_DETAIL_CAP = 200

F = TypeVar("F", bound=Callable[..., Any])


class HookRegistry:
    """The hooks of an application, by phase."""

    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []

    def add(self, subscription: Subscription) -> Subscription:
        """Register a subscription; its id must be new."""
        if any(s.subscription_id == subscription.subscription_id for s in self._subscriptions):
            raise HookError(Problem(
                f'subscription id "{subscription.subscription_id}" is already registered'
            ))
        self._subscriptions.append(subscription)
        return subscription

    def hook(
        self,
        hook_id: str,
        *,
        phase: str,
        priority: int = 0,
        deadline_ms: int | None = None,
        failure: FailurePolicy = "fail_closed",
        subscription_id: str = "",
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`add`."""
        phase = canonical_phase(phase)  # a typo fails here, at the decorator line

        def register(function: F) -> F:
            self.add(Subscription(
                hook_id=hook_id, phase=phase, function=function, priority=priority,
                deadline_ms=deadline_ms, failure=failure, subscription_id=subscription_id,
            ))
            return function

        return register

    def subscriptions(self, phase: str | None = None) -> list[Subscription]:
        """Subscriptions of one phase (or all), highest priority first."""
        wanted = None if phase is None else canonical_phase(phase)
        chosen = [s for s in self._subscriptions if wanted is None or s.phase == wanted]
        return sorted(chosen, key=lambda s: -s.priority)

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register the hooks installed packages declare; return the entry-point names.

        An entry point names a :class:`Subscription`, or a callable that takes this
        registry and registers its own hooks.
        """
        loaded = []
        for point in sorted(entry_points(group=group), key=lambda p: p.name):
            where = f"entry point {point.name} = {point.value}"
            try:
                target = point.load()
                if isinstance(target, Subscription):
                    self.add(target)
                elif callable(target):
                    target(self)
                else:
                    raise TypeError(f"expected a Subscription or a callable, got "
                                    f"{type(target).__name__}")
            except PioneerError:
                raise
            except Exception as error:
                raise HookError(Problem(
                    f"cannot register hooks: {_detail(error)}", path=f"{group} → {where}"
                )) from None
            loaded.append(point.name)
        return loaded

    def run_phase(
        self,
        phase: str,
        *,
        turn: TurnContext,
        compile_input: PromptCompileInput,
        env: jinja2.Environment,
        earlier: tuple[CollectedContribution, ...] = (),
        accept: tuple[type, ...] = (),
    ) -> PhaseOutcome:
        """Run every subscription of ``phase`` under its await and failure policies.

        ``accept`` names more types a hook may return in this phase (the turn runner
        takes tool definitions at ``turn.pre_tool_materialization``); they come back in
        :attr:`PhaseOutcome.offered`, with the subscription that returned them.
        """
        phase = canonical_phase(phase)
        subscriptions = self.subscriptions(phase)
        seen = read_only_input(compile_input)

        def context(subscription: Subscription) -> HookContext:
            return HookContext(phase, subscription, turn, seen, env, earlier)

        pending = {
            s.subscription_id: _Pending(s, context(s), accept)
            for s in subscriptions if s.deadline_ms is not None
        }
        collector = _Collector(phase)
        for subscription in subscriptions:
            waiting = pending.get(subscription.subscription_id)
            result = waiting.wait() if waiting else _call(subscription, context(subscription),
                                                          accept)
            collector.add(subscription, result)
        return PhaseOutcome(phase, tuple(collector.records), tuple(collector.diagnostics),
                            tuple(collector.offered))

    def run_hooks(
        self,
        compiler: PromptCompiler,
        compile_input: PromptCompileInput | Mapping[str, Any],
        *,
        turn: TurnContext | None = None,
        phases: Sequence[str] = TURN_PROMPT_PHASES,
        accept: Mapping[str, tuple[type, ...]] | None = None,
    ) -> HookRun:
        """Run ``phases`` for one turn, in order (each with :meth:`run_phase`, later
        phases seeing the earlier contributions); ``accept`` maps a phase to the further
        types its hooks may return. A turn with several provider rounds runs its phases
        once and compiles every round from the one :class:`HookRun`
        (:meth:`HookRun.round_input`)."""
        from ..compile.compiler import as_compile_input

        accept = accept or {}
        compile_input = as_compile_input(compile_input)
        turn = turn or TurnContext()
        env = compiler.templates.env
        collected: list[CollectedContribution] = []
        records: list[CollectedContribution | HookSourceEntry] = []
        diagnostics: list[Diagnostic] = []
        offered: list[Offered] = []
        for phase in phases:
            outcome = self.run_phase(phase, turn=turn, compile_input=compile_input, env=env,
                                     earlier=tuple(collected), accept=accept.get(phase, ()))
            collected.extend(outcome.contributions)
            records.extend(outcome.records)
            diagnostics.extend(outcome.diagnostics)
            offered.extend(outcome.offered)
        return HookRun(tuple(collected), tuple(records), tuple(diagnostics), tuple(offered))


@dataclass(frozen=True, slots=True)
class HookRun:
    """What the hook phases of one turn produced, for each compile of the turn."""

    #: Contributions, in phase and subscription order.
    contributions: tuple[CollectedContribution, ...] = ()
    #: Contributions and ready manifest entries (diagnostics, failures), in order.
    records: tuple[CollectedContribution | HookSourceEntry, ...] = ()
    #: Manifest diagnostics of the hooks, after the compiler's own.
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Values of the accepted types (tool definitions), with their subscriptions.
    offered: tuple[Offered, ...] = ()

    def round_input(
        self,
        compile_input: PromptCompileInput,
        *,
        sections: Sequence[StructuredSection] = (),
        history: Sequence[str] | None = None,
    ) -> RoundInput:
        """One round's whole input to :meth:`PromptCompiler.compile`: ``compile_input``,
        these contributions with their sources and priorities, the structured
        ``sections`` and the ``history`` texts sent with the prompt."""
        return RoundInput(
            compile_input,
            hooks=tuple(_hook_section(r) if isinstance(r, CollectedContribution) else r
                        for r in self.records),
            hook_diagnostics=self.diagnostics,
            sections=tuple(sections),
            history=history,
        )


def _hook_section(record: CollectedContribution) -> HookSection:
    output = record.output
    return HookSection(
        section_id=record.section_id, content=record.content, priority=output.priority,
        source=record.subscription.source(output.contribution_id, record.content_hash),
        kind=record.kind, title=record.title, hook_truncated=record.hook_truncated,
        source_count=len(output.source_refs),
    )


def read_only_input(compile_input: PromptCompileInput) -> PromptCompileInput:
    """The compile input as hooks see it: the read-only view templates get too.

    The input is a frozen model, but its section lists are lists; a hook appending to
    or clearing one would change the caller's input (and every later compile of it).
    In the view every list is a :class:`~pioneer.compile.readonly.FrozenList` of frozen
    sections, so a hook can read everything and change nothing: a write raises
    ``ReadOnlyError`` and fails that hook, under its failure policy.
    """
    view: PromptCompileInput = read_only(compile_input)
    return view


# -- calling hooks -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Result:
    outputs: tuple[object, ...] = ()
    error: BaseException | None = None
    timed_out: bool = False


_OUTPUT_TYPES = (PromptSectionContribution, PromptContextContribution, HookDiagnostic)


def _invoke(subscription: Subscription, context: HookContext) -> object:
    """The hook's own work: its call, and running an iterator it returns to the end.

    This is all that runs on a deadline hook's worker; everything the runtime does
    with the result (:func:`_outputs`) happens on the caller's thread, once the result
    is known to be in time.
    """
    value = subscription.function(context)
    if isinstance(value, Iterator):  # a generator is the hook's code too
        return tuple(value)
    return value


def _outputs(value: object, accept: tuple[type, ...] = ()) -> tuple[object, ...]:
    if value is None:
        return ()
    items: Iterable[Any] = (
        (value,) if isinstance(value, (BaseModel, str, bytes)) or not isinstance(value, Iterable)
        else value
    )
    outputs = tuple(items)
    for item in outputs:
        if not isinstance(item, (*_OUTPUT_TYPES, *accept)):
            more = "".join(f", {kind.__name__}" for kind in accept)
            raise TypeError(
                f"hook returned {type(item).__name__}; expected PromptSectionContribution, "
                f"PromptContextContribution{more} or HookDiagnostic"
            )
    # Validated again: one built with model_construct skipped validation, and invalid data
    # must fail this hook (under its failure policy), not the turn after it.
    return tuple(type(item).model_validate(dict(item)) if isinstance(item, BaseModel) else item
                 for item in outputs)


def _result(outcome: Outcome[object], accept: tuple[type, ...] = ()) -> _Result:
    """A hook's outcome as a result, its output validated here, on the caller's thread."""
    if outcome.late:
        return _Result(timed_out=True)
    if outcome.error is not None:
        return _Result(error=outcome.error)
    validated = call(lambda: _outputs(outcome.value, accept))
    return _Result(validated.value or ()) if validated.ok else _Result(error=validated.error)


def _call(subscription: Subscription, context: HookContext,
          accept: tuple[type, ...] = ()) -> _Result:
    return _result(call(lambda: _invoke(subscription, context)), accept)


class _Pending:
    """A deadline hook handed to the deadline pool, its deadline counted from now."""

    def __init__(self, subscription: Subscription, context: HookContext,
                 accept: tuple[type, ...] = ()):
        self.accept = accept
        self.running: Running[object] = Running(
            lambda: _invoke(subscription, context), (subscription.deadline_ms or 0) / 1000,
            name=f"pioneer-hook:{subscription.subscription_id}",
        )

    def wait(self) -> _Result:
        return _result(self.running.wait(), self.accept)


def _detail(error: BaseException) -> str:
    if isinstance(error, PioneerError):
        return error.render()
    text = describe_exception(error)
    return text if len(text) <= _DETAIL_CAP else text[: _DETAIL_CAP - 3] + "..."


class _Collector:
    """Turns hook results into contributions, diagnostics and manifest entries."""

    def __init__(self, phase: str):
        self.phase = phase
        self.records: list[CollectedContribution | HookSourceEntry] = []
        self.diagnostics: list[Diagnostic] = []
        self.offered: list[Offered] = []

    def add(self, subscription: Subscription, result: _Result) -> None:
        if result.timed_out or result.error is not None:
            self._failed(subscription, result)
            return
        for output in result.outputs:
            if isinstance(output, HookDiagnostic):
                self._note(subscription, output.message, output.section_id)
                self.records.append(HookSourceEntry(
                    source=subscription.source(), section_id=output.section_id,
                    contribution_kind="prompt_manifest_diagnostic", truncation="none",
                ))
            elif isinstance(output, PromptSectionContribution | PromptContextContribution):
                self._contribution(subscription, output)
            else:
                self.offered.append(Offered(subscription, output))

    def _failed(self, subscription: Subscription, result: _Result) -> None:
        if result.timed_out:
            what = f"missed its {subscription.deadline_ms} ms deadline"
        else:
            assert result.error is not None
            what = f"failed: {_detail(result.error)}"
        if subscription.failure == "fail_closed":
            raise HookError(Problem(
                f'hook "{subscription.hook_id}" {what} (fail-closed, the turn stops)',
                path=f"{self.phase} → {subscription.subscription_id}",
            ))
        self.diagnostics.append(Diagnostic(
            code="hook_best_effort_failed",
            message=f"hook `{subscription.hook_id}` at {self.phase} {what}; "
            "the turn went on without it",
            hook_source=subscription.hook_id,
        ))
        self.records.append(HookSourceEntry(
            source=subscription.source(), contribution_kind="runtime_failure", truncation="none",
        ))

    def _note(self, subscription: Subscription, message: str, section_id: str | None) -> None:
        self.diagnostics.append(Diagnostic(
            code="hook_diagnostic", message=f"hook `{subscription.hook_id}`: {message}",
            section_id=section_id, hook_source=subscription.hook_id,
        ))

    def _contribution(
        self, subscription: Subscription,
        output: PromptSectionContribution | PromptContextContribution,
    ) -> None:
        kind: ContributionKind = "prompt_section"
        if isinstance(output, PromptSectionContribution):
            section_id = output.section_id
        else:
            section_id = output.domain
            kind = "thread_context" if output.domain == "thread_context" else "prompt_context"
        for message in output.diagnostics:
            self._note(subscription, message, section_id)
        if self.phase not in PROMPT_PHASES:
            self._note(subscription, f"contribution `{output.contribution_id}` ignored: "
                       f"{self.phase} does not feed the prompt", section_id)
            return
        content = output.content.strip()
        cut = output.max_chars is not None and len(content) > output.max_chars
        if cut:
            content = content[: output.max_chars]
        self.records.append(CollectedContribution(
            subscription=subscription, output=output, section_id=section_id,
            kind=kind, content=content, hook_truncated=cut or output.truncated,
            content_hash=hashlib.sha256(output.content.encode("utf-8")).hexdigest(),
        ))
