"""Fitting each round of a turn into the model's context window.

A :class:`TurnWindow` belongs to one turn. Before the first round it gives the history
budgeter its share (:meth:`TurnWindow.history_limits`): the window less the reply's
reserve and an estimate of the rest of the request, so summarising at 80% and
truncating mean 80% and 100% of what the history can really have. Each round, after
the one compile, :meth:`TurnWindow.fit` counts the whole request (system text, tools,
history, this turn's messages and tool rounds) and makes it fit ``context_window -
reserve`` in the provider's tokens: the local count times the calibrated ratio, with
the safety margin while the ratio has few samples. When it does not fit, this turn's
oldest tool results are cleared to a one-line placeholder, at least
``tool_result_clear_batch_tokens`` at a time and never the newest round's; then the
history is cut further (the stored cut moves); and only when the request cannot fit
with no history and every older result cleared is it a :class:`ContextWindowError`,
before anything is sent. :meth:`TurnWindow.observe` and :meth:`TurnWindow.overflow`
give the calibration what each reply says (docs/history.md, "Budgeting" and "A turn
that grows past the window").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from ..audit.record import TurnRecord, WindowRecord
from ..errors import ContextWindowError, Problem
from ..history.budget import HistoryBudgeter, HistoryDecision, HistoryLimits
from ..history.calibration import PROSE, TokenRatio, no_kinds, text_kind
from ..history.models import HistoryEntry
from ..providers.api import read_context_error
from ..providers.models import ModelFacts, model_facts
from ..providers.overflow import ContextOverflow
from ..providers.request import ChatMessage, ChatRequest, SamplingOptions, ToolResult, ToolSpec
from ..providers.window import (
    ContextWindow,
    ReplyReserve,
    context_window,
    message_local_tokens,
    reply_reserve,
)
from ..settings import PioneerSettings
from ..text import json_writer
from ..tokens import MESSAGE_OVERHEAD, TokenCounter, counter_for
from ._history import conversation

if TYPE_CHECKING:
    from .parts import AgentParts

__all__ = [
    "Calibration",
    "Fitted",
    "TurnWindow",
    "cleared_text",
    "estimate_for",
    "local_capacity",
    "message_kinds",
    "system_kinds",
    "tool_kinds",
]

#: Below this many local tokens, a recorded history's estimate is too rounded to give the
#: history's ratio.
_SMALL_HISTORY = 1_000


def estimate_for(facts: ModelFacts) -> TokenCounter:
    """The local token counter of ``facts``'s model: the tokenizer its model table row
    names (cl100k or o200k)."""
    return counter_for(facts.tokenizer)


def local_capacity(ratio: TokenRatio, limit: int) -> int:
    """The most local tokens a request can have with ``ratio.budgeted`` within ``limit``
    (-1 when not even an empty request fits)."""
    if ratio.budgeted(0) > limit:
        return -1
    low, high = 0, 1
    while ratio.budgeted(high) <= limit:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if ratio.budgeted(middle) <= limit:
            low = middle
        else:
            high = middle
    return low


def _add(counts: list[int], counter: TokenCounter, text: str) -> None:
    if text:
        counts[text_kind(text)] += counter.count(text)


#: A value as compact JSON with sorted keys.
_compact = json_writer()


def message_kinds(message: ChatMessage, counter: TokenCounter) -> list[int]:
    """``message_local_tokens`` split by kind of text (the overhead and a call's name as
    prose, each text by :func:`~pioneer.history.calibration.text_kind`)."""
    counts = no_kinds()
    counts[PROSE] += MESSAGE_OVERHEAD
    _add(counts, counter, message.content)
    for call in message.tool_calls:
        _add(counts, counter, call.name)
        _add(counts, counter, _compact(call.arguments))
    if message.tool_result is not None:
        _add(counts, counter, message.tool_result.content)
    return counts


def system_kinds(request: ChatRequest, counter: TokenCounter) -> list[int]:
    """The compiled system text's local tokens (each part with its message overhead),
    split by kind of text."""
    counts = no_kinds()
    payload = request.compiled_prompt
    if payload is not None:
        for text in (payload.stable_system_text, payload.dynamic_system_text):
            if text:
                counts[PROSE] += MESSAGE_OVERHEAD
                _add(counts, counter, text)
    return counts


def tool_kinds(tools: Sequence[ToolSpec], counter: TokenCounter) -> list[int]:
    """The tool definitions' local tokens (each as compact JSON), split by kind of text."""
    counts = no_kinds()
    for tool in tools:
        text = _compact(tool.model_dump(mode="json"))
        counts[text_kind(text)] += counter.count(text)
    return counts


def _sum(*parts: Sequence[int]) -> list[int]:
    return [sum(values) for values in zip(*parts, strict=True)]


def cleared_text(name: str, call_id: str, tokens: int) -> str:
    """The one line a cleared tool result is sent as."""
    return (f"[result cleared to fit the context window: {name} call {call_id}, "
            f"{tokens:,} tokens; call the tool again if it is still needed]")


@dataclass(frozen=True, slots=True)
class Fitted:
    """One round made to fit: the request, the history it carries, and the record."""

    request: ChatRequest
    decision: HistoryDecision
    window: WindowRecord


class Calibration(Protocol):
    """Where the ratio of provider tokens to local ones is kept and learnt
    (:class:`~pioneer.history.calibration.Calibrator`)."""

    def ratio(self, provider: str, model: str, facts: object) -> TokenRatio:
        """The ratio of ``model`` as ``provider`` counts it."""
        ...

    def observe(self, provider: str, model: str, local_tokens: int, reported_tokens: int,
                facts: object, by_kind: Sequence[int] | None = None) -> TokenRatio:
        """What a reply reported for a request of ``local_tokens`` local tokens
        (``by_kind``: the same split by kind of text)."""
        ...


@dataclass(frozen=True, slots=True)
class _Parts:
    """A round's request counted part by part, by kind of text."""

    fixed: list[int]
    turn: list[list[int]]
    history: list[int]

    @property
    def rest(self) -> list[int]:
        """Everything but the history."""
        return _sum(self.fixed, *self.turn)

    @property
    def whole(self) -> list[int]:
        return _sum(self.rest, self.history)


@dataclass(slots=True)
class TurnWindow:
    """The window of one turn: what it has cleared and learnt from errors so far.

    ``limits`` caps the history's budget (None: the history gets what the rest of the
    request leaves)."""

    model: str
    settings: PioneerSettings
    sampling: SamplingOptions
    calibration: Calibration
    limits: HistoryLimits | None = None
    #: Call id → its result as cleared; a cleared result stays cleared for the turn.
    cleared: dict[str, ToolResult] = field(default_factory=dict)
    #: A context-length error's limit, when it was below the window.
    maximum: int | None = None
    #: Bodies a context-length error counted: (local count, by kind when known, and the
    #: provider's count); later rounds are budgeted at no less than each one's true ratio.
    floors: list[tuple[int, list[int] | None, int]] = field(default_factory=list)
    #: The history's chat messages and their local counts by kind, by the decision they
    #: were made from (one per turn, unless a round cuts it).
    _sent: tuple[HistoryDecision, list[ChatMessage], list[int]] | None = None
    #: The local count by kind of the last body fitted (what its reply calibrates).
    _body: list[int] | None = None

    @classmethod
    def of(cls, agent: AgentParts) -> TurnWindow:
        """The window of a turn made with ``agent``'s parts."""
        return cls(agent.model, agent.settings, agent.sampling, agent.calibration, agent.limits)

    # -- the pieces ---------------------------------------------------------------------

    def facts(self, provider: str) -> ModelFacts:
        """The model table's row for the agent's model, as ``provider`` names it."""
        return model_facts(self.model, provider)

    def window(self, provider: str) -> ContextWindow:
        """The window (the override, else the model's), lowered to an error's maximum."""
        found = context_window(self.model, provider, self.settings.max_context_tokens)
        if self.maximum is not None and self.maximum < found.tokens:
            return ContextWindow(self.maximum, "the provider's maximum in a context-length "
                                 f"error (the window was {found.tokens:,}, {found.source})")
        return found

    def reserve(self, provider: str) -> ReplyReserve:
        """The reply's reserve: ``max_tokens``, else ``response_reserve_tokens``."""
        return reply_reserve(self.sampling, self.settings.response_reserve_tokens, provider)

    def ratio(self, provider: str) -> TokenRatio:
        """The calibrated ratio of the agent's model, raised so that no body a
        context-length error counted would be estimated below its count."""
        found = self.calibration.ratio(provider, self.model, self.facts(provider))
        factor = max((reported / max(1, found.estimate(local, kinds))
                      for local, kinds, reported in self.floors), default=1.0)
        return found.scaled(factor) if factor > 1 else found

    def counter(self, provider: str) -> TokenCounter:
        """The local counter of the agent's model."""
        return estimate_for(self.facts(provider))

    # -- before the first round ----------------------------------------------------------

    def history_limits(self, provider: str, user_text: str, tools: Sequence[ToolSpec],
                       previous: TurnRecord | None,
                       previous_turn: HistoryEntry | None = None) -> HistoryLimits:
        """The history's share of the window before the prompt is compiled: the window
        less the reserve and the rest of the request, in the provider's tokens as
        estimated. The rest is this user message, the tools and the system text; the
        system text is taken from the previous turn's first round (its request less its
        history and less the user message of ``previous_turn``, that turn as stored) or,
        for a thread's first recorded turn, left to the round's fit, which corrects the
        share.

        The summarise threshold is 80% of that share as estimated (no margin): where the
        history really has 80% of its room. The budget that truncation keeps to and a
        summary must fit is the share with the margin. Both are in local tokens at the
        history's ratio: the previous turn's first round's history and that turn's own
        messages (what this history is, unless a cut moved), by kind of text."""
        counter = self.counter(provider)
        ratio = self.ratio(provider)
        user = message_kinds(ChatMessage.user(user_text), counter)
        rest = ratio.convert(_sum(user, tool_kinds(tools, counter))) + ratio.overhead
        first = previous.rounds[0].window if previous is not None else None
        history_ratio = ratio.ratio
        if first is not None:
            others = float(first.estimated_input_tokens - first.history_tokens)
            # The record's history estimate is rounded up: on a few tokens (a summary
            # alone) that is a ratio off by a few percent, so it then counts for nothing.
            small = first.local_history_tokens < _SMALL_HISTORY
            history_local = 0 if small else first.local_history_tokens
            history_tokens = 0.0 if small else float(first.history_tokens)
            if previous_turn is not None:
                messages = conversation(previous_turn.messages())[0]
                added = [message_kinds(m, counter) for m in messages]
                if messages and messages[0].role == "user":
                    others -= ratio.convert(added[0])
                history_local += sum(sum(kinds) for kinds in added)
                history_tokens += sum(ratio.convert(kinds) for kinds in added)
            rest = max(rest, others + ratio.convert(user))
            if history_local > 0 and history_tokens > 0:
                history_ratio = history_tokens / history_local
        limit = self.window(provider).tokens - self.reserve(provider).tokens
        share = max(0.0, limit - rest)
        budget = max(0, math.floor((limit / ratio.margin - rest) / history_ratio))
        threshold = min(budget, math.floor(0.8 * share / history_ratio))
        given = self.limits
        if given is not None and given.budget <= budget:
            return given
        low_water = self.settings.truncate_low_water
        ours = HistoryLimits.for_budget(budget, low_water=low_water)
        return replace(ours, threshold=threshold)

    # -- each round ----------------------------------------------------------------------

    def fit(self, provider: str, round_number: int, decision: HistoryDecision,
            messages: Sequence[ChatMessage], build: Callable[[list[ChatMessage]], ChatRequest],
            budgeter: Callable[[], HistoryBudgeter], *, newest: frozenset[str]) -> Fitted:
        """The round's request within the window: ``messages`` are this turn's (after the
        history), ``build`` makes the request of a whole conversation, ``newest`` are the
        call ids of the newest round (never cleared). Raises :class:`ContextWindowError`
        when it cannot fit.

        The request is counted part by part and by kind of text, in the provider's tokens
        as calibrated. Room is judged with the margin: this turn's oldest tool results are
        cleared, then the history cut, until the estimate times the margin fits. Refusal is
        judged without it: a request whose estimate fits with no history and every older
        result cleared is sent, never refused."""
        counter = self.counter(provider)
        ratio = self.ratio(provider)
        window, reserve = self.window(provider), self.reserve(provider)
        limit = window.tokens - reserve.tokens
        turn = [self._as_cleared(m) for m in messages]
        history, history_kinds = self._history(decision, counter)
        request = build(history + turn)
        fixed = _sum(system_kinds(request, counter), tool_kinds(request.tools, counter))
        parts = _Parts(fixed, [message_kinds(m, counter) for m in turn], history_kinds)
        if ratio.budgeted(0, parts.whole) > limit:
            over = ratio.budgeted(0, parts.whole) - limit
            turn_local = sum(sum(kinds) for kinds in parts.turn)
            turn_ratio = ratio.convert(_sum(*parts.turn)) / max(1, turn_local) \
                if turn_local else ratio.ratio
            need = math.ceil(over / (ratio.body_margin(parts.whole) * max(turn_ratio, 1e-6)))
            sizes = [sum(kinds) for kinds in parts.turn]
            if self._clear(turn, sizes, need, newest, counter, request.tool_call_names()):
                turn = [self._as_cleared(m) for m in messages]
                parts = _Parts(fixed, [message_kinds(m, counter) for m in turn],
                               history_kinds)
            rest = ratio.estimate(0, parts.rest)
            if rest > limit:
                needed = rest + reserve.tokens
                raise ContextWindowError(Problem(
                    f"round {round_number}: the request needs about {needed:,} tokens with "
                    f"the reply's reserve of {reserve.tokens:,} ({reserve.source}), over the "
                    f"context window of {window.tokens:,} ({window.source}), even with no "
                    f"history and {len(self.cleared)} older tool result(s) of the turn "
                    "cleared; nothing was sent",
                    path="Turn.next_body"),
                    context_window=window.tokens, reserve_tokens=reserve.tokens,
                    needed_tokens=needed)
            # The history is cut to the room the rest leaves it, budgeted as a whole body
            # is (ratio.budgeted: the amounts past what the samples covered at the upper
            # ratio, the margin of the body's mix); a cut changes the history's mix, so
            # the body is checked again and cut once more while it is still over.
            for _ in range(4):
                if ratio.budgeted(0, parts.whole) <= limit or not sum(history_kinds):
                    break
                room = (limit / ratio.body_margin(parts.whole) - ratio.overhead
                        - ratio.guarded(parts.rest))
                history_ratio = ratio.guarded(history_kinds, after=parts.rest) \
                    / max(1, sum(history_kinds))
                allowed = max(0, math.floor(room / max(history_ratio, 1e-6)))
                allowed = min(allowed, max(0, decision.sent_tokens - 1))
                decision = budgeter().cut_to(
                    decision, allowed,
                    f"round {round_number}: this turn's messages left the history "
                    f"{allowed} tokens")
                history, history_kinds = self._history(decision, counter)
                parts = _Parts(fixed, parts.turn, history_kinds)
            request = build(history + turn)
        whole = parts.whole
        local = sum(whole)
        self._body = whole
        record = WindowRecord(
            context_window=window.tokens, window_from=window.source,
            reserve_tokens=reserve.tokens, reserve_from=reserve.source,
            estimated_input_tokens=ratio.estimate(local, whole),
            history_tokens=math.ceil(ratio.convert(parts.history) - 1e-9),
            local_input_tokens=local, local_history_tokens=decision.sent_tokens,
            ratio=ratio.ratio, ratio_samples=ratio.samples, margin=ratio.margin,
            cleared_tool_results=len(self.cleared))
        return Fitted(request, decision, record)

    def _history(self, decision: HistoryDecision,
                 counter: TokenCounter) -> tuple[list[ChatMessage], list[int]]:
        """The history as the request carries it, and its local count by kind (adding up
        to the decision's stored count; made once per decision)."""
        if self._sent is None or self._sent[0] is not decision:
            messages = conversation(decision.messages)[0]
            kinds = _sum(no_kinds(), *(message_kinds(m, counter) for m in messages))
            # The stored counts are what the budget used: the difference (a count made
            # with another tokenizer, a stored summary) goes to the largest kind.
            largest = max(range(len(kinds)), key=lambda k: kinds[k])
            kinds[largest] = max(0, kinds[largest] + decision.sent_tokens - sum(kinds))
            if sum(kinds) != decision.sent_tokens:  # nothing to take the difference from
                kinds = no_kinds()
                kinds[PROSE] = decision.sent_tokens
            self._sent = (decision, messages, kinds)
        return list(self._sent[1]), list(self._sent[2])

    def _as_cleared(self, message: ChatMessage) -> ChatMessage:
        result = message.tool_result
        if result is None or result.call_id not in self.cleared:
            return message
        return message.model_copy(update={"tool_result": self.cleared[result.call_id]})

    def _clear(self, turn: Sequence[ChatMessage], sizes: Sequence[int], need: int,
               newest: frozenset[str], counter: TokenCounter, names: dict[str, str]) -> bool:
        """Clear the oldest results not yet cleared (never the newest round's) until the
        tokens freed reach ``need`` and the batch size, or none is left."""
        batch = max(need, self.settings.tool_result_clear_batch_tokens)
        freed = 0
        for message, size in zip(turn, sizes, strict=True):
            result = message.tool_result
            if freed >= batch:
                break
            if result is None or result.call_id in newest or result.call_id in self.cleared:
                continue
            name = names.get(result.call_id, "tool")
            tokens = counter.count(result.content)
            line = cleared_text(name, result.call_id, tokens)
            self.cleared[result.call_id] = result.model_copy(update={"content": line})
            freed += size - message_local_tokens(
                message.model_copy(update={"tool_result": self.cleared[result.call_id]}),
                counter)
        return freed > 0

    # -- after each reply ----------------------------------------------------------------

    def overflow(self, provider: str, error: object,
                 sent: WindowRecord | None) -> ContextOverflow | None:
        """Read ``error`` (an SDK exception or an error body) as a context-length error of
        ``provider``; when it is one, the count it names calibrates against the local
        count of the body ``sent``, and the turn's later bodies are budgeted at no less
        than that body's true ratio (10% above the estimate when the error gives no
        count) and within the maximum it names."""
        found = read_context_error(provider, error)
        if found is None:
            return None
        if found.maximum_tokens:
            self.maximum = min(self.maximum or found.maximum_tokens, found.maximum_tokens)
        if sent is not None and sent.local_input_tokens:
            kinds = self._sent_kinds(sent)
            if found.reported_tokens:
                self.calibration.observe(provider, self.model, sent.local_input_tokens,
                                         found.reported_tokens, self.facts(provider), kinds)
                reported = found.reported_tokens
            else:
                reported = math.ceil(sent.estimated_input_tokens * 1.1)
            self.floors.append((sent.local_input_tokens, kinds, reported))
        return found

    def observe(self, provider: str, window: WindowRecord | None) -> None:
        """Set the input the provider reported for a round against its local count."""
        if window is None or not window.reported_input_tokens or not window.local_input_tokens:
            return
        self.calibration.observe(provider, self.model, window.local_input_tokens,
                                 window.reported_input_tokens, self.facts(provider),
                                 self._sent_kinds(window))

    def _sent_kinds(self, sent: WindowRecord) -> list[int] | None:
        """The local count by kind of the body ``sent`` records (the last one fitted;
        None when the record is not that body's)."""
        if self._body is not None and sum(self._body) == sent.local_input_tokens:
            return list(self._body)
        return None
