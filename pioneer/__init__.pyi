"""Type stub of the public API: the one table of what ``from pioneer import ...`` offers.

``__init__.py`` reads this file to import each name on first use, so ``import pioneer``
and the CLI load only the stages they touch; type checkers read it as the package.
"""

from .agent import (
    Agent as Agent,
)
from .agent import (
    AsyncAgent as AsyncAgent,
)
from .agent import (
    AsyncTurn as AsyncTurn,
)
from .agent import (
    FinishedTurn as FinishedTurn,
)
from .agent import (
    ProviderName as ProviderName,
)
from .agent import (
    Step as Step,
)
from .agent import (
    ThreadMode as ThreadMode,
)
from .agent import (
    Turn as Turn,
)
from .audit import (
    ExecutionSecurity as ExecutionSecurity,
)
from .audit import (
    ReportedUsage as ReportedUsage,
)
from .audit import (
    TurnAudit as TurnAudit,
)
from .audit import (
    TurnRecord as TurnRecord,
)
from .audit import (
    TurnRecords as TurnRecords,
)
from .caches import (
    CacheStats as CacheStats,
)
from .caches import (
    LruCache as LruCache,
)
from .caches import (
    cache_stats as cache_stats,
)
from .compile.bootstrap import (
    SeedResult as SeedResult,
)
from .compile.bootstrap import (
    ensure_runtime_home as ensure_runtime_home,
)
from .compile.boundary import (
    BOUNDARY_MARKER as BOUNDARY_MARKER,
)
from .compile.boundary import (
    split_prompt_cache_boundary as split_prompt_cache_boundary,
)
from .compile.boundary import (
    strip_prompt_cache_boundary as strip_prompt_cache_boundary,
)
from .compile.compiler import (
    PromptCompiler as PromptCompiler,
)
from .compile.compiler import (
    compile_prompt as compile_prompt,
)
from .compile.inputs import (
    DynamicSectionInput as DynamicSectionInput,
)
from .compile.inputs import (
    PromptCompileInput as PromptCompileInput,
)
from .compile.inputs import (
    PromptLimits as PromptLimits,
)
from .compile.inputs import (
    RuntimeSectionInput as RuntimeSectionInput,
)
from .compile.inputs import (
    load_compile_input as load_compile_input,
)
from .compile.manifest import (
    COMPILER_VERSION as COMPILER_VERSION,
)
from .compile.manifest import (
    CompiledPromptPayload as CompiledPromptPayload,
)
from .compile.manifest import (
    CompiledSection as CompiledSection,
)
from .compile.manifest import (
    Diagnostic as Diagnostic,
)
from .compile.manifest import (
    PromptManifest as PromptManifest,
)
from .episodic import (
    EpisodicIndex as EpisodicIndex,
)
from .episodic import (
    episodic_recall_subscription as episodic_recall_subscription,
)
from .errors import (
    BudgetError as BudgetError,
)
from .errors import (
    ContextWindowError as ContextWindowError,
)
from .errors import (
    HookError as HookError,
)
from .errors import (
    InputError as InputError,
)
from .errors import (
    LockError as LockError,
)
from .errors import (
    PioneerError as PioneerError,
)
from .errors import (
    Problem as Problem,
)
from .errors import (
    ProfileError as ProfileError,
)
from .errors import (
    ProfileSyntaxError as ProfileSyntaxError,
)
from .errors import (
    ProviderError as ProviderError,
)
from .errors import (
    StoreError as StoreError,
)
from .errors import (
    TemplateError as TemplateError,
)
from .errors import (
    ThreadConflictError as ThreadConflictError,
)
from .history import (
    ArtifactRef as ArtifactRef,
)
from .history import (
    CrudStore as CrudStore,
)
from .history import (
    HistoryBudgeter as HistoryBudgeter,
)
from .history import (
    HistoryDecision as HistoryDecision,
)
from .history import (
    HistoryLimits as HistoryLimits,
)
from .history import (
    HistoryMessage as HistoryMessage,
)
from .history import (
    OpenAIChatSummarizer as OpenAIChatSummarizer,
)
from .history import (
    SqliteStore as SqliteStore,
)
from .history import (
    Summarizer as Summarizer,
)
from .history import (
    SummarizerError as SummarizerError,
)
from .history import (
    SummaryRequest as SummaryRequest,
)
from .history.open import (
    open_store as open_store,
)
from .history.postgres_store import (
    PostgresStore as PostgresStore,
)
from .history.store import (
    DatabaseStore as DatabaseStore,
)
from .history.summarizer import (
    summarizer_from_settings as summarizer_from_settings,
)
from .hooks.models import (
    HookDiagnostic as HookDiagnostic,
)
from .hooks.models import (
    PromptContextContribution as PromptContextContribution,
)
from .hooks.models import (
    PromptSectionContribution as PromptSectionContribution,
)
from .hooks.models import (
    SourceRef as SourceRef,
)
from .hooks.registry import (
    HookContext as HookContext,
)
from .hooks.registry import (
    HookRegistry as HookRegistry,
)
from .hooks.registry import (
    Subscription as Subscription,
)
from .hooks.registry import (
    TurnContext as TurnContext,
)
from .providers import (
    CacheOptions as CacheOptions,
)
from .providers import (
    ChatMessage as ChatMessage,
)
from .providers import (
    ChatRequest as ChatRequest,
)
from .providers import (
    ModelReply as ModelReply,
)
from .providers import (
    SamplingOptions as SamplingOptions,
)
from .providers import (
    ToolCall as ToolCall,
)
from .providers import (
    ToolResult as ToolResult,
)
from .providers import (
    ToolSpec as ToolSpec,
)
from .providers import (
    build_request_body as build_request_body,
)
from .providers import (
    read_response as read_response,
)
from .providers.openai_chat import (
    SystemRole as SystemRole,
)
from .review.lock import (
    verify_lock as verify_lock,
)
from .sections.agents_md import (
    agents_md_subscription as agents_md_subscription,
)
from .sections.permissions import (
    PermissionProfile as PermissionProfile,
)
from .sections.runtime import (
    RetryKind as RetryKind,
)
from .sections.runtime import (
    retry_instruction as retry_instruction,
)
from .sections.runtime import (
    runtime_block as runtime_block,
)
from .sections.skills import (
    Skill as Skill,
)
from .settings import (
    ClockGranularity as ClockGranularity,
)
from .settings import (
    HistoryToolRounds as HistoryToolRounds,
)
from .settings import (
    PioneerSettings as PioneerSettings,
)
from .tokens import (
    TiktokenCounter as TiktokenCounter,
)
from .tokens import (
    TokenCounter as TokenCounter,
)
from .tools import (
    ToolArgumentsError as ToolArgumentsError,
)
from .tools import (
    ToolCatalog as ToolCatalog,
)
from .tools import (
    ToolContribution as ToolContribution,
)
from .tools import (
    ToolRound as ToolRound,
)
from .tools import (
    TurnTools as TurnTools,
)
from .tools import (
    artifact_read_tool as artifact_read_tool,
)
from .turn.run import (
    compile_turn as compile_turn,
)

__version__: str
