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
from ..history.calibration import TokenRatio
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
    system_local_tokens,
    tool_local_tokens,
)
from ..settings import PioneerSettings
from ..tokens import TokenCounter, counter_for, message_tokens
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
]

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
                facts: object) -> TokenRatio:
        """What a reply reported for a request of ``local_tokens`` local tokens."""
        ...


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
    #: A floor under the ratio from a context-length error.
    floor: float = 0.0
    #: The history's chat messages, by the decision they were made from (one per turn,
    #: unless a round cuts it).
    _sent: tuple[HistoryDecision, list[ChatMessage]] | None = None

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
        """The calibrated ratio of the agent's model, under the turn's floor."""
        found = self.calibration.ratio(provider, self.model, self.facts(provider))
        if found.ratio < self.floor:
            return replace(found, ratio=self.floor)
        return found

    def counter(self, provider: str) -> TokenCounter:
        """The local counter of the agent's model."""
        return estimate_for(self.facts(provider))

    # -- before the first round ----------------------------------------------------------

    def history_limits(self, provider: str, user_text: str, tools: Sequence[ToolSpec],
                       previous: TurnRecord | None) -> HistoryLimits:
        """The history's share of the window before the prompt is compiled: the window
        less the reserve and the rest of the request, estimated from the previous turn's
        first round (its request less its history) or, for a thread's first recorded
        turn, from the tools and this user message alone. The round's fit corrects it."""
        counter = self.counter(provider)
        rest = message_tokens(counter, user_text) + tool_local_tokens(tools, counter)
        first = previous.rounds[0].window if previous is not None else None
        if first is not None:
            rest = max(rest, first.local_input_tokens - first.local_history_tokens)
        capacity = local_capacity(self.ratio(provider),
                                  self.window(provider).tokens - self.reserve(provider).tokens)
        share = max(0, capacity - rest)
        given = self.limits
        if given is not None and given.budget <= share:
            return given
        return HistoryLimits.for_budget(share, low_water=self.settings.truncate_low_water)

    # -- each round ----------------------------------------------------------------------

    def fit(self, provider: str, round_number: int, decision: HistoryDecision,
            messages: Sequence[ChatMessage], build: Callable[[list[ChatMessage]], ChatRequest],
            budgeter: Callable[[], HistoryBudgeter], *, newest: frozenset[str]) -> Fitted:
        """The round's request within the window: ``messages`` are this turn's (after the
        history), ``build`` makes the request of a whole conversation, ``newest`` are the
        call ids of the newest round (never cleared). Raises :class:`ContextWindowError`
        when it cannot fit."""
        counter = self.counter(provider)
        ratio = self.ratio(provider)
        window, reserve = self.window(provider), self.reserve(provider)
        capacity = local_capacity(ratio, window.tokens - reserve.tokens)
        turn = [self._as_cleared(m) for m in messages]
        request = build(self._history(decision) + turn)
        fixed = system_local_tokens(request, counter) + tool_local_tokens(request.tools, counter)
        sizes = [message_local_tokens(m, counter) for m in turn]
        if fixed + sum(sizes) + decision.sent_tokens > capacity:
            need = fixed + sum(sizes) + decision.sent_tokens - capacity
            if self._clear(turn, sizes, need, newest, counter, request.tool_call_names()):
                turn = [self._as_cleared(m) for m in messages]
                sizes = [message_local_tokens(m, counter) for m in turn]
            rest = fixed + sum(sizes)
            if rest > capacity:
                needed = ratio.budgeted(rest) + reserve.tokens
                raise ContextWindowError(Problem(
                    f"round {round_number}: the request needs about {needed:,} tokens with "
                    f"the reply's reserve of {reserve.tokens:,} ({reserve.source}), over the "
                    f"context window of {window.tokens:,} ({window.source}), even with no "
                    f"history and {len(self.cleared)} older tool result(s) of the turn "
                    "cleared; nothing was sent",
                    path="Turn.next_body"),
                    context_window=window.tokens, reserve_tokens=reserve.tokens,
                    needed_tokens=needed)
            if rest + decision.sent_tokens > capacity:
                decision = budgeter().cut_to(
                    decision, capacity - rest,
                    f"round {round_number}: this turn's messages left the history "
                    f"{capacity - rest} tokens")
            request = build(self._history(decision) + turn)
        local = fixed + sum(sizes) + decision.sent_tokens
        record = WindowRecord(
            context_window=window.tokens, window_from=window.source,
            reserve_tokens=reserve.tokens, reserve_from=reserve.source,
            estimated_input_tokens=ratio.estimate(local),
            history_tokens=math.ceil(ratio.ratio * decision.sent_tokens),
            local_input_tokens=local, local_history_tokens=decision.sent_tokens,
            ratio=ratio.ratio, ratio_samples=ratio.samples, margin=ratio.margin,
            cleared_tool_results=len(self.cleared))
        return Fitted(request, decision, record)

    def _history(self, decision: HistoryDecision) -> list[ChatMessage]:
        """The history as the request carries it (made once per decision)."""
        if self._sent is None or self._sent[0] is not decision:
            self._sent = (decision, conversation(decision.messages)[0])
        return list(self._sent[1])

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
        than that body's true ratio (10% above the one used when the error gives no
        count) and within the maximum it names."""
        found = read_context_error(provider, error)
        if found is None:
            return None
        if found.maximum_tokens:
            self.maximum = min(self.maximum or found.maximum_tokens, found.maximum_tokens)
        if sent is not None and sent.local_input_tokens:
            if found.reported_tokens:
                self.calibration.observe(provider, self.model, sent.local_input_tokens,
                                         found.reported_tokens, self.facts(provider))
                floor = found.reported_tokens / sent.local_input_tokens
            else:
                floor = sent.ratio * 1.1
            self.floor = max(self.floor, floor)
        return found

    def observe(self, provider: str, window: WindowRecord | None) -> None:
        """Set the input the provider reported for a round against its local count."""
        if window is None or not window.reported_input_tokens or not window.local_input_tokens:
            return
        self.calibration.observe(provider, self.model, window.local_input_tokens,
                                 window.reported_input_tokens, self.facts(provider))
