"""OpenTelemetry spans under the GenAI semantic conventions, free when the extra is absent.

Two spans describe a turn: ``pioneer.compile_turn`` when :func:`~pioneer.turn.compile_turn`
compiles the prompt, and ``chat {model}`` (a client span) for each provider round the
audit records (:mod:`pioneer.turn._round_spans`). This module is the part both share, and
knows nothing of prompts. Attribute names follow the conventions
(``gen_ai.*``) where one exists and use ``pioneer.*`` otherwise; docs/telemetry.md lists
them. Prompt text goes into ``gen_ai.system_instructions`` only when the convention's
switch, the environment variable :data:`CAPTURE_ENV`, asks for content on spans.

Nothing here imports OpenTelemetry before a span is wanted: :func:`tracer` tries the
import once per process and, when ``opentelemetry-api`` is not installed (the ``otel``
extra), every span helper returns at once. Spans go to whatever tracer provider the
application configured; without one the API's no-op tracer records nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "CAPTURE_ENV",
    "capture_content",
    "current",
    "set_attributes",
    "set_error",
    "span",
    "start_span",
    "system_instructions",
    "tracer",
]

#: The GenAI conventions' switch for recording message content on spans.
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Values of :data:`CAPTURE_ENV` that put content on spans: the older boolean form and the
#: newer modes that include spans (``EVENT_ONLY`` and ``NO_CONTENT`` leave spans without it).
_CAPTURE_ON = frozenset({"true", "1", "span_only", "span_and_event"})
_SCOPE = "pioneer"

_api: Any = None  # the opentelemetry.trace module, False once known to be missing


def tracer() -> Tracer | None:
    """pioneer's tracer, or None when ``opentelemetry-api`` is not installed."""
    global _api
    if _api is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _api = False
        else:
            _api = trace
    if _api is False:
        return None
    found: Tracer = _api.get_tracer(_SCOPE)
    return found


def capture_content() -> bool:
    """Whether the environment opts in to prompt text on spans."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in _CAPTURE_ON


@contextmanager
def span(name: str, *, client: bool = False) -> Iterator[Span | None]:
    """A current span named ``name`` (a client span when ``client``), or None without the API.

    An exception leaving the block is recorded on the span and sets its error status, as
    the API's ``start_as_current_span`` does.
    """
    found = tracer()
    if found is None:
        yield None
        return
    kind = _api.SpanKind.CLIENT if client else _api.SpanKind.INTERNAL
    with found.start_as_current_span(name, kind=kind) as current:
        yield current


def start_span(name: str, *, client: bool = False) -> Span | None:
    """A started span that the caller ends (not made current), or None without the API."""
    found = tracer()
    if found is None:
        return None
    kind = _api.SpanKind.CLIENT if client else _api.SpanKind.INTERNAL
    started: Span = found.start_span(name, kind=kind)
    return started


@contextmanager
def current(target: Span | None) -> Iterator[None]:
    """Inside the block, ``target`` is the current span: spans started there are its
    children (nothing happens for None). The span is not ended on leaving."""
    if target is None or _api in (None, False):
        yield
        return
    with _api.use_span(target, end_on_exit=False, record_exception=False,
                       set_status_on_exception=False):
        yield


def set_error(target: Span | None, description: str) -> None:
    """Mark ``target`` as failed, with ``description``."""
    if target is None or not target.is_recording():
        return
    target.set_status(_api.Status(_api.StatusCode.ERROR, description))


def set_attributes(target: Span | None, attributes: Mapping[str, Any]) -> None:
    """Set every attribute whose value is not None (lists become tuples of strings)."""
    if target is None or not target.is_recording():
        return
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            value = tuple(str(item) for item in value)
        target.set_attribute(key, value)


def system_instructions(parts: Iterable[str]) -> str:
    """``gen_ai.system_instructions``: the text parts as the conventions' JSON list."""
    return json.dumps([{"type": "text", "content": text} for text in parts if text],
                      ensure_ascii=False)
