"""The provider round as an OpenTelemetry GenAI client span (``chat {model}``).

:class:`~pioneer.turn.recorder.TurnAudit` starts one span per round in ``add_round``
(the request is about to be sent) and ends it when the application reports the provider's
usage (``TurnAudit.report_usage``) or, at the latest, when the turn is recorded. The span
carries the request side at once (``gen_ai.request.model``, the provider, pioneer's
manifest attributes, the history mode) and the ``gen_ai.usage.*`` counts once reported:
``gen_ai.usage.input_tokens`` is the whole prompt, cached tokens included, whatever the
provider calls it (docs/telemetry.md has the mapping). With
:data:`~pioneer.telemetry.CAPTURE_ENV` on, the stable and dynamic text go into
``gen_ai.system_instructions``. Without ``opentelemetry-api`` every function here is a
no-op that imports nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import telemetry
from ..audit.record import PROVIDER_NAMES, HistorySnapshot, ReportedUsage, RoundRecord
from ..compile._spans import manifest_attributes
from ..providers._system import prompt_parts
from ..providers.replies import ModelReply
from ..providers.request import ChatRequest

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["PROVIDER_NAMES", "ReportedUsage", "end_round_span", "start_round_span"]

def start_round_span(
    record: RoundRecord, request: ChatRequest, provider: str, *,
    turn_id: str, thread_id: str, history: HistorySnapshot | None,
) -> Span | None:
    """A started client span for a round about to be sent, or None without the API."""
    started = telemetry.start_span(f"chat {request.model}", client=True)
    if started is None or not started.is_recording():
        return started
    sampling = request.sampling
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER_NAMES.get(provider, provider),
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": sampling.max_tokens,
        "gen_ai.request.temperature": sampling.temperature,
        "gen_ai.request.top_p": sampling.top_p,
        "gen_ai.request.stop_sequences": sampling.stop or None,
        **manifest_attributes(record.manifest),
        "pioneer.turn_id": turn_id,
        "pioneer.thread_id": thread_id,
        "pioneer.round": record.round,
        "pioneer.history.mode": history.mode if history is not None else None,
        "pioneer.history.sent_tokens": history.sent_tokens if history is not None else None,
        "pioneer.tools": record.visible_tools,
        "pioneer.body_sha256": record.provider.body_sha256,
    }
    if telemetry.capture_content():
        attributes["gen_ai.system_instructions"] = telemetry.system_instructions(
            part.text for part in prompt_parts(request))
    telemetry.set_attributes(started, attributes)
    return started


def end_round_span(started: Span | None, usage: ReportedUsage | None, *,
                   reply: ModelReply | None = None, error: str | None = None) -> None:
    """Set the reported usage and why the model stopped (when known) and end the span;
    ``error`` marks a round that got no reply."""
    if started is None:
        return
    if reply is not None:
        # The conventions' finish reasons are the provider's own words; pioneer's
        # normalised one goes beside them.
        telemetry.set_attributes(started, {
            "gen_ai.response.finish_reasons": [reply.provider_stop_reason or reply.stop_reason],
            "pioneer.stop_reason": reply.stop_reason,
        })
    if error is not None:
        telemetry.set_error(started, error)
    if usage is not None:
        telemetry.set_attributes(started, {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
        })
    started.end()
