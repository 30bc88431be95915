"""pioneer: a declarative prompt compiler for LLM agents.

Profiles (TOML) declare the sections, jinja2 templates render them, and
:class:`PromptCompiler` turns one turn's :class:`PromptCompileInput` into stable,
dynamic and full system text plus an auditable :class:`PromptManifest`.
"""

from __future__ import annotations

from .bootstrap import SeedResult, ensure_runtime_home
from .boundary import BOUNDARY_MARKER, split_prompt_cache_boundary, strip_prompt_cache_boundary
from .compiler import PromptCompiler, compile_prompt
from .errors import (
    BudgetError,
    HookError,
    InputError,
    PioneerError,
    Problem,
    ProfileError,
    ProfileSyntaxError,
    StoreError,
    TemplateError,
)
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

__version__ = COMPILER_VERSION

__all__ = [
    "BOUNDARY_MARKER",
    "COMPILER_VERSION",
    "BudgetError",
    "ChatMessage",
    "ChatRequest",
    "CompiledPromptPayload",
    "CompiledSection",
    "Diagnostic",
    "DynamicSectionInput",
    "HookError",
    "InputError",
    "PioneerError",
    "PioneerSettings",
    "Problem",
    "ProfileError",
    "ProfileSyntaxError",
    "PromptCompileInput",
    "PromptCompiler",
    "PromptLimits",
    "PromptManifest",
    "RuntimeSectionInput",
    "SamplingOptions",
    "SeedResult",
    "StoreError",
    "TemplateError",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "__version__",
    "build_request_body",
    "compile_prompt",
    "ensure_runtime_home",
    "load_compile_input",
    "split_prompt_cache_boundary",
    "strip_prompt_cache_boundary",
]
