"""Deprecated: the hooks-then-compile helpers of earlier releases.

A round is one call, :meth:`PromptCompiler.compile
<pioneer.compile.compiler.PromptCompiler.compile>`, with a
:class:`~pioneer.compile.round.RoundInput`: the hook phases run once per turn
(:meth:`HookRegistry.run_hooks <pioneer.hooks.registry.HookRegistry.run_hooks>`), and
:meth:`HookRun.round_input <pioneer.hooks.registry.HookRun.round_input>` gives each
round's whole input. :func:`compile_turn` and :func:`run_hooks` do exactly that and warn
(:class:`DeprecationWarning`); they go in the next release.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..compile._spans import cache_attributes, compile_attributes, manifest_attributes
from ..compile.compiler import PromptCompiler, as_compile_input
from ..compile.inputs import PromptCompileInput
from ..compile.manifest import CompiledPromptPayload
from ..compile.round import StructuredSection
from ..hooks.registry import TURN_PROMPT_PHASES, HookRegistry, HookRun, TurnContext
from ..sections.permissions import CurrentPermissions, PermissionProfile
from ..sections.tool_domains import HiddenToolDomains

__all__ = [
    "HistoryText", "HookRun", "cache_attributes", "compile_attributes", "compile_turn",
    "manifest_attributes", "run_hooks",
]


class HistoryText(Protocol):
    """A history message as the turn sees it: its text."""

    @property
    def content(self) -> str:
        """The message text as sent."""
        ...


def _structured(
    permissions: PermissionProfile | None = None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None = None,
) -> tuple[StructuredSection, ...]:
    """The round's structured sections, in the order the profile is offered them."""
    found: list[StructuredSection] = []
    if permissions is not None:
        found.append(CurrentPermissions(permissions))
    if hidden_tool_domains:
        found.append(HiddenToolDomains(hidden_tool_domains))
    return tuple(found)


def run_hooks(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput | Mapping[str, Any],
    hooks: HookRegistry | None = None,
    *,
    turn: TurnContext | None = None,
    phases: Sequence[str] = TURN_PROMPT_PHASES,
    accept: Mapping[str, tuple[type, ...]] | None = None,
) -> HookRun:
    """Deprecated: :meth:`HookRegistry.run_hooks` (``hooks.run_hooks(compiler, ...)``)."""
    warnings.warn("pioneer.turn.run.run_hooks is deprecated and goes in the next release: "
                  "call hooks.run_hooks(compiler, compile_input, ...)",
                  DeprecationWarning, stacklevel=2)
    return (hooks or HookRegistry()).run_hooks(compiler, compile_input, turn=turn,
                                               phases=phases, accept=accept)


def compile_turn(
    compiler: PromptCompiler,
    compile_input: PromptCompileInput | Mapping[str, Any],
    hooks: HookRegistry | None = None,
    *,
    turn: TurnContext | None = None,
    permissions: PermissionProfile | None = None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None = None,
    phases: Sequence[str] = TURN_PROMPT_PHASES,
    history: Sequence[HistoryText | str] | None = None,
    hook_run: HookRun | None = None,
) -> CompiledPromptPayload:
    """Deprecated: run the hook phases (unless ``hook_run`` is given), then one
    ``compiler.compile(hook_run.round_input(...))``."""
    warnings.warn("pioneer.compile_turn is deprecated and goes in the next release: call "
                  "compiler.compile(hooks.run_hooks(compiler, compile_input, ...)"
                  ".round_input(compile_input, ...))", DeprecationWarning, stacklevel=2)
    compile_input = as_compile_input(compile_input)
    if hook_run is None:
        hook_run = (hooks or HookRegistry()).run_hooks(compiler, compile_input, turn=turn,
                                                       phases=phases)
    return compiler.compile(hook_run.round_input(
        compile_input, sections=_structured(permissions, hidden_tool_domains),
        history=None if history is None else _history_texts(history),
    ))


def _history_texts(history: Sequence[HistoryText | str]) -> tuple[str, ...]:
    """The texts of the history messages (a string is its own text)."""
    return tuple(m if isinstance(m, str) else m.content for m in history)
