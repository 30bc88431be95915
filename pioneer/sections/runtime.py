"""Built-in runtime texts: the runtime block for ``extra_system`` and the retry instruction
for ``retry_instruction``.

Data in, text out, like the other renderers: :func:`runtime_block` tells the local date,
time, time-zone abbreviation and operating system, with the time cut down to the clock
granularity (the ``clock_granularity`` setting), so the text is byte-identical for every
instant of one minute, hour or day; :func:`retry_instruction` tells the model what to do
after a failed tool call (``tool_retry``), when a tool's retries are used up
(``tool_exhausted``), or that it must stop calling tools and answer (``final_answer``).
The clock is a ``now`` argument, so a caller (and a test) can fix it. The words come from
``templates/renderers/runtime.md.j2`` and ``templates/renderers/retry_instruction.md.j2``,
rendered in the compiler's sandboxed environment (docs/compile-input-and-manifest.md,
"Built-in runtime texts").
"""

from __future__ import annotations

import platform
from datetime import datetime
from typing import TYPE_CHECKING, Literal, get_args

from ..errors import InputError, Problem, did_you_mean
from ..settings import CLOCK_GRANULARITIES, ClockGranularity
from ._macros import call_macro

if TYPE_CHECKING:
    from ..compile.compiler import PromptCompiler

__all__ = ["RETRY_KINDS", "RetryKind", "retry_instruction", "runtime_block"]

RUNTIME_TEMPLATE = "renderers/runtime.md.j2"
RETRY_TEMPLATE = "renderers/retry_instruction.md.j2"
#: What a retry instruction is about: a failed tool call to correct, a tool whose retries
#: are used up, or the end of the tool loop.
RetryKind = Literal["tool_retry", "tool_exhausted", "final_answer"]
RETRY_KINDS: tuple[RetryKind, ...] = get_args(RetryKind)
#: Weekday names, written out so the text does not follow the process's locale.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
#: ``platform.system()`` names shown under the name users know.
_SYSTEM_NAMES = {"Darwin": "macOS"}


def runtime_block(
    compiler: PromptCompiler,
    *,
    now: datetime | None = None,
    granularity: ClockGranularity | None = None,
    system: str | None = None,
) -> str:
    """The ``## Runtime`` block for ``extra_system``.

    ``now`` defaults to the current local time; a naive ``now`` is taken as local time.
    ``granularity`` defaults to the compiler's ``clock_granularity`` setting and
    ``system`` to this machine's operating system; either way it is a ``platform.system()``
    name, shown under the name users know (``Darwin`` as ``macOS``).
    """
    if granularity is None:
        granularity = compiler.settings.clock_granularity
    if granularity not in CLOCK_GRANULARITIES:
        raise InputError(Problem(
            f"expected one of {', '.join(CLOCK_GRANULARITIES)} (got {granularity!r})",
            path="granularity",
        ))
    if now is None:
        now = datetime.now()
    elif not isinstance(now, datetime):
        raise InputError(Problem(f"expected a datetime (got {type(now).__name__})", path="now"))
    local = _cut(now if now.tzinfo is not None else now.astimezone(), granularity)
    time = None if granularity == "day" else local.strftime("%H:%M")
    zone = local.tzname() or local.strftime("UTC%z")
    return call_macro(
        compiler.templates.env, RUNTIME_TEMPLATE, "block",
        local.date().isoformat(), _WEEKDAYS[local.weekday()], time, zone, granularity,
        _system_name(platform.system() if system is None else system),
    )


def retry_instruction(
    compiler: PromptCompiler,
    kind: RetryKind,
    *,
    tool: str | None = None,
    reason: str | None = None,
) -> str:
    """The text for ``retry_instruction``: for ``tool_retry`` and ``tool_exhausted``, which
    ``tool`` failed and why (``reason``, the error it gave); for ``final_answer``, an
    optional ``reason`` (the tool-round limit was reached, say)."""
    if kind not in RETRY_KINDS:
        hint = did_you_mean(str(kind), RETRY_KINDS) or f" (known: {', '.join(RETRY_KINDS)})"
        raise InputError(Problem(f"unknown kind {kind!r}{hint}", path="kind"))
    env = compiler.templates.env
    if kind == "final_answer":
        if tool is not None:
            raise InputError(Problem(
                "final_answer takes no tool (it ends the tool loop): leave tool out", path="tool"
            ))
        return call_macro(env, RETRY_TEMPLATE, kind, (reason or "").strip())
    problems = [
        Problem(f"{kind} needs {what}", path=name)
        for name, value, what in (("tool", tool, "the name of the tool that failed"),
                                  ("reason", reason, "the error the tool gave"))
        if not isinstance(value, str) or not value.strip()
    ]
    if problems:
        raise InputError(problems)
    assert tool is not None and reason is not None
    return call_macro(env, RETRY_TEMPLATE, kind, tool.strip(), reason.strip())


def _cut(moment: datetime, granularity: ClockGranularity) -> datetime:
    """``moment`` cut down to the start of its minute, hour or day (local wall time)."""
    if granularity == "minute":
        return moment.replace(second=0, microsecond=0)
    if granularity == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _system_name(name: str) -> str:
    return _SYSTEM_NAMES.get(name, name) or "unknown"
