"""The turn as an OpenTelemetry GenAI span: ``invoke_agent``, parent of the turn's spans.

A :class:`~pioneer.turn.turn.Turn` starts its span when its first round is built and
ends it when the turn is stored (or left unfinished). The compile spans and the ``chat
{model}`` span of every round start while it is the current span, so a turn is one
trace. It carries the conventions' agent attributes (``gen_ai.operation.name =
invoke_agent``, ``gen_ai.conversation.id`` = the thread id, the provider, the model,
``gen_ai.request.max_tokens`` when set) and, at the end, the finish reason of the last
reply and the usage summed over the rounds (docs/telemetry.md). Without
``opentelemetry-api`` both functions do nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import telemetry
from ..audit.record import PROVIDER_NAMES
from ..providers.replies import ModelReply

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .parts import AgentParts

__all__ = ["end_agent_span", "start_agent_span"]


def start_agent_span(agent: AgentParts, thread_id: str, turn_id: str) -> Span | None:
    """The started ``invoke_agent`` span of a turn, or None without the API."""
    name = f"invoke_agent {agent.name}" if agent.name else "invoke_agent"
    started = telemetry.start_span(name)
    telemetry.set_attributes(started, {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "gen_ai.conversation.id": thread_id,
        "gen_ai.provider.name": PROVIDER_NAMES.get(agent.provider, agent.provider),
        "gen_ai.request.model": agent.model,
        "gen_ai.request.max_tokens": agent.sampling.max_tokens,
        "pioneer.turn_id": turn_id,
    })
    return started


def end_agent_span(started: Span | None, replies: Sequence[ModelReply], *,
                   error: str | None = None) -> None:
    """Set the last finish reason and the summed usage of ``replies``, and end the span."""
    if started is None:
        return
    if replies:
        last = replies[-1]
        reported = [r.usage for r in replies if r.usage is not None]
        telemetry.set_attributes(started, {
            "gen_ai.response.finish_reasons": [last.provider_stop_reason or last.stop_reason],
            "pioneer.stop_reason": last.stop_reason,
            "pioneer.rounds": len(replies),
            "gen_ai.usage.input_tokens": sum(u.input_tokens for u in reported)
            if reported else None,
            "gen_ai.usage.output_tokens": sum(u.output_tokens or 0 for u in reported)
            if reported else None,
            "gen_ai.usage.cache_read.input_tokens": sum(
                u.cache_read_input_tokens or 0 for u in reported) if reported else None,
        })
    if error is not None:
        telemetry.set_error(started, error)
    started.end()
