"""pioneer: a declarative prompt compiler for LLM agents.

Profiles (TOML) declare the sections, jinja2 templates render them, and
:class:`PromptCompiler` turns one turn's :class:`PromptCompileInput` into stable,
dynamic and full system text plus an auditable :class:`PromptManifest`.
"""

from __future__ import annotations

from .agents_md import agents_md_subscription
from .bootstrap import SeedResult, ensure_runtime_home
from .boundary import BOUNDARY_MARKER, split_prompt_cache_boundary, strip_prompt_cache_boundary
from .compiler import PromptCompiler, compile_prompt
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
from .turn import compile_turn

__version__ = COMPILER_VERSION

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
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TurnContext",
    "__version__",
    "agents_md_subscription",
    "build_request_body",
    "compile_prompt",
    "compile_turn",
    "ensure_runtime_home",
    "load_compile_input",
    "split_prompt_cache_boundary",
    "strip_prompt_cache_boundary",
]
