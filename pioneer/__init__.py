"""pioneer: a declarative prompt compiler for LLM agents.

Profiles (TOML) declare the sections, jinja2 templates render them, and
:class:`PromptCompiler` turns one turn's :class:`PromptCompileInput` into stable,
dynamic and full system text plus an auditable :class:`PromptManifest`.

Names are imported on first use (PEP 562), so ``import pioneer`` and the CLI load only
the stages they touch. An export is listed twice: under ``TYPE_CHECKING`` for type
checkers and in ``_EXPORTS`` for the lazy import (a test keeps the two and ``__all__``
in step).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agents_md import agents_md_subscription
    from .audit import TurnAudit, TurnRecord
    from .bootstrap import SeedResult, ensure_runtime_home
    from .boundary import BOUNDARY_MARKER, split_prompt_cache_boundary, strip_prompt_cache_boundary
    from .compiler import PromptCompiler, compile_prompt
    from .episodic import EpisodicIndex, episodic_recall_subscription
    from .errors import (
        BudgetError,
        HookError,
        InputError,
        LockError,
        PioneerError,
        Problem,
        ProfileError,
        ProfileSyntaxError,
        StoreError,
        TemplateError,
    )
    from .history import (
        ArtifactRef,
        CrudStore,
        HistoryBudgeter,
        HistoryDecision,
        HistoryLimits,
        HistoryMessage,
        OpenAIChatSummarizer,
        SqliteStore,
        Summarizer,
        SummarizerError,
        SummaryRequest,
    )
    from .hook_models import (
        HookDiagnostic,
        PromptContextContribution,
        PromptSectionContribution,
        SourceRef,
    )
    from .hooks import HookContext, HookRegistry, Subscription, TurnContext
    from .inputs import (
        DynamicSectionInput,
        PromptCompileInput,
        PromptLimits,
        RuntimeSectionInput,
        load_compile_input,
    )
    from .manifest import (
        COMPILER_VERSION,
        CompiledPromptPayload,
        CompiledSection,
        Diagnostic,
        PromptManifest,
    )
    from .providers import (
        ChatMessage,
        ChatRequest,
        SamplingOptions,
        ToolCall,
        ToolResult,
        ToolSpec,
        build_request_body,
    )
    from .settings import PioneerSettings
    from .tokens import TiktokenCounter, TokenCounter
    from .tools import ToolArgumentsError, ToolCatalog, ToolRound, TurnTools
    from .turn import compile_turn

    __version__: str

#: Module (relative to this package) → the names it exports here.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "agents_md": ("agents_md_subscription",),
    "audit": ("TurnAudit", "TurnRecord"),
    "bootstrap": ("SeedResult", "ensure_runtime_home"),
    "boundary": ("BOUNDARY_MARKER", "split_prompt_cache_boundary", "strip_prompt_cache_boundary"),
    "compiler": ("PromptCompiler", "compile_prompt"),
    "episodic": ("EpisodicIndex", "episodic_recall_subscription"),
    "errors": (
        "BudgetError", "HookError", "InputError", "LockError", "PioneerError", "Problem",
        "ProfileError", "ProfileSyntaxError", "StoreError", "TemplateError",
    ),
    "history": (
        "ArtifactRef", "CrudStore", "HistoryBudgeter", "HistoryDecision", "HistoryLimits",
        "HistoryMessage", "OpenAIChatSummarizer", "SqliteStore", "Summarizer",
        "SummarizerError", "SummaryRequest",
    ),
    "hook_models": (
        "HookDiagnostic", "PromptContextContribution", "PromptSectionContribution",
        "SourceRef",
    ),
    "hooks": ("HookContext", "HookRegistry", "Subscription", "TurnContext"),
    "inputs": (
        "DynamicSectionInput", "PromptCompileInput", "PromptLimits", "RuntimeSectionInput",
        "load_compile_input",
    ),
    "manifest": (
        "COMPILER_VERSION", "CompiledPromptPayload", "CompiledSection", "Diagnostic",
        "PromptManifest",
    ),
    "providers": (
        "ChatMessage", "ChatRequest", "SamplingOptions", "ToolCall", "ToolResult",
        "ToolSpec", "build_request_body",
    ),
    "settings": ("PioneerSettings",),
    "tokens": ("TiktokenCounter", "TokenCounter"),
    "tools": ("ToolArgumentsError", "ToolCatalog", "ToolRound", "TurnTools"),
    "turn": ("compile_turn",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    source = "COMPILER_VERSION" if name == "__version__" else name
    module = _MODULE_OF.get(source)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), source)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BOUNDARY_MARKER",
    "COMPILER_VERSION",
    "ArtifactRef",
    "BudgetError",
    "ChatMessage",
    "ChatRequest",
    "CompiledPromptPayload",
    "CompiledSection",
    "CrudStore",
    "Diagnostic",
    "DynamicSectionInput",
    "EpisodicIndex",
    "HistoryBudgeter",
    "HistoryDecision",
    "HistoryLimits",
    "HistoryMessage",
    "HookContext",
    "HookDiagnostic",
    "HookError",
    "HookRegistry",
    "InputError",
    "LockError",
    "OpenAIChatSummarizer",
    "PioneerError",
    "PioneerSettings",
    "Problem",
    "ProfileError",
    "ProfileSyntaxError",
    "PromptCompileInput",
    "PromptCompiler",
    "PromptContextContribution",
    "PromptLimits",
    "PromptManifest",
    "PromptSectionContribution",
    "RuntimeSectionInput",
    "SamplingOptions",
    "SeedResult",
    "SourceRef",
    "SqliteStore",
    "StoreError",
    "Subscription",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "TemplateError",
    "TiktokenCounter",
    "TokenCounter",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCatalog",
    "ToolResult",
    "ToolRound",
    "ToolSpec",
    "TurnAudit",
    "TurnContext",
    "TurnRecord",
    "TurnTools",
    "__version__",
    "agents_md_subscription",
    "build_request_body",
    "compile_prompt",
    "compile_turn",
    "ensure_runtime_home",
    "episodic_recall_subscription",
    "load_compile_input",
    "split_prompt_cache_boundary",
    "strip_prompt_cache_boundary",
]
