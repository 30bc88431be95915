"""What a turn is made with: the agent's parts, fixed when the turn is made.

:class:`AgentParts` is how a :class:`~pioneer.turn.turn.Turn` sees its agent: the store,
the compiler, the hooks, the provider and model and everything else the agent was
configured with, as a frozen record :meth:`Agent.turn <pioneer.turn.Agent.turn>` takes.
A turn never holds the :class:`~pioneer.turn.Agent`, so the runner's modules import one
way only (the agent makes turns; a turn and its window and span know the parts), and a
turn keeps the parts it started with (:meth:`Agent.reload <pioneer.turn.Agent.reload>`
is for the turns made after it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..audit.record import ExecutionSecurity
    from ..audit.store import TurnRecords
    from ..compile.compiler import PromptCompiler
    from ..compile.inputs import PromptCompileInput
    from ..history.budget import HistoryBudgeter, HistoryLimits
    from ..history.calibration import Calibrator
    from ..history.store import DatabaseStore
    from ..hooks.registry import HookRegistry
    from ..providers.names import ProviderName
    from ..providers.openai_chat import SystemRole
    from ..providers.request import CacheOptions, SamplingOptions, ToolSpec
    from ..sections.skills import Skill
    from ..settings import HistoryToolRounds, PioneerSettings
    from ._lifecycle import AbandonedWriter, ThreadGuard

__all__ = ["AgentParts", "ThreadMode"]

#: ``agent``: tools per round, the agent profile; ``chat``: no tools, the chat profile.
ThreadMode = Literal["agent", "chat"]


@dataclass(frozen=True, slots=True)
class AgentParts:
    """The agent's parts a turn runs with (``turn.agent``); made by ``Agent.turn``."""

    store: DatabaseStore
    compiler: PromptCompiler
    provider: ProviderName
    model: str
    name: str | None
    settings: PioneerSettings
    #: The base of every turn's compile input.
    compile_input: PromptCompileInput
    chat_profile: str
    tools: Sequence[ToolSpec]
    domains: Mapping[str, Sequence[str]]
    security: ExecutionSecurity
    skills: tuple[Skill, ...]
    #: A cap on the history's budget (None: the history gets what the window leaves).
    limits: HistoryLimits | None
    sampling: SamplingOptions
    cache: CacheOptions
    system_role: SystemRole | None
    runtime_facts: bool
    history_tool_rounds: HistoryToolRounds
    records: TurnRecords
    calibration: Calibrator
    #: The hooks a turn runs, given its ``thread_folder`` (the agent's ``registry``).
    registry: Callable[..., HookRegistry]
    #: The history budgeter of a turn, given its limits (the agent's ``budgeter``).
    budgeter: Callable[[HistoryLimits], HistoryBudgeter]
    #: A block in which the providers' rules come from the agent's model table.
    model_rules: Callable[[], AbstractContextManager[Any]]
    guard: ThreadGuard
    writer: AbandonedWriter
    #: Called with a turn's thread id and the turn when it is over (the thread may then
    #: have another open turn).
    release: Callable[[str, object], None]
