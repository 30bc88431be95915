"""The turn runner: the one obvious way to run a thread (docs/explain.md, "The turn runner").

:class:`Agent` is what a deployment configures once (store, compiler, hooks, provider and
model, tools, summarizer, permissions, skills); :meth:`Agent.turn` gives a :class:`Turn`,
which calls the stages below in the right order and keeps their state between rounds:
bodies go out, replies come in, and the turn is stored with its record at the end. It
never does model I/O, so any HTTP client or SDK sends the bodies.

The runner's pieces: :mod:`.agent` (the agent) and :mod:`.parts` (the
:class:`AgentParts` a turn takes instead of the agent), :mod:`.turn` (the turn),
:mod:`.hook_tools` (the tools hooks register), :mod:`.window` (each round fitted to the
model's window), :mod:`.recorder` (the turn record, round by round, each round a span)
and :mod:`.async_agent` (the same on an event loop); :mod:`.run` keeps the deprecated
hooks-then-compile helpers of earlier releases.
"""

from __future__ import annotations

from .agent import Agent, ProviderName, ThreadMode
from .async_agent import AsyncAgent, AsyncTurn
from .parts import AgentParts
from .recorder import TurnAudit
from .turn import ENTRY_KEY, RECORD_KEY, FinishedTurn, Step, Turn

__all__ = ["ENTRY_KEY", "RECORD_KEY", "Agent", "AgentParts", "AsyncAgent", "AsyncTurn",
           "FinishedTurn", "ProviderName", "Step", "ThreadMode", "Turn", "TurnAudit"]
