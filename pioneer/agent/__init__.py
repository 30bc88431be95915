"""The turn runner: the one obvious way to run a thread (docs/explain.md, "The turn runner").

:class:`Agent` is what a deployment configures once (store, compiler, hooks, provider and
model, tools, summarizer, permissions, skills); :meth:`Agent.turn` gives a :class:`Turn`,
which calls the low-level stages in the right order and keeps their state between rounds:
bodies go out, replies come in, and the turn is stored with its record at the end. It
never does model I/O, so any HTTP client or SDK sends the bodies.
"""

from __future__ import annotations

from .agent import Agent, ProviderName, ThreadMode
from .async_agent import AsyncAgent, AsyncTurn
from .parts import AgentParts
from .turn import ENTRY_KEY, RECORD_KEY, FinishedTurn, Step, Turn

__all__ = ["ENTRY_KEY", "RECORD_KEY", "Agent", "AgentParts", "AsyncAgent", "AsyncTurn",
           "FinishedTurn",
           "ProviderName", "Step", "ThreadMode", "Turn"]
