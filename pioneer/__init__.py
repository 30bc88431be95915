"""pioneer: a declarative prompt compiler for LLM agents.

Profiles (TOML) declare the sections, jinja2 templates render them, and
:class:`PromptCompiler` turns one turn's :class:`PromptCompileInput` into stable,
dynamic and full system text plus an auditable :class:`PromptManifest`.

The public names are listed once, in ``__init__.pyi``: type checkers read that stub,
and at run time each name is imported from its stage on first use, so ``import
pioneer`` and the CLI load only the stages they touch.
"""

from __future__ import annotations

from typing import Any

import lazy_loader

_getattr, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__all__ = [*__all__, "__version__"]

#: Names ``import pioneer`` offered up to 0.1 and the modules that hold them now
#: (docs/api.md, "Names that moved"): asking for one says where it went.
_MOVED = {
    "agents_md_subscription": "pioneer.sections.agents_md",
    "artifact_read_tool": "pioneer.tools",
    "ArtifactRef": "pioneer.history",
    "BOUNDARY_MARKER": "pioneer.compile.boundary",
    "BudgetError": "pioneer.errors",
    "build_request_body": "pioneer.providers",
    "cache_stats": "pioneer.caches",
    "CacheStats": "pioneer.caches",
    "ChatMessage": "pioneer.providers",
    "ChatRequest": "pioneer.providers",
    "ClockGranularity": "pioneer.settings",
    "compile_prompt": "pioneer.compile.compiler",
    "compile_turn": "pioneer.turn.run",
    "CompiledSection": "pioneer.compile.manifest",
    "COMPILER_VERSION": "pioneer.compile.manifest",
    "CrudStore": "pioneer.history",
    "Diagnostic": "pioneer.compile.manifest",
    "DynamicSectionInput": "pioneer.compile.inputs",
    "episodic_recall_subscription": "pioneer.episodic",
    "EpisodicIndex": "pioneer.episodic",
    "HistoryBudgeter": "pioneer.history",
    "HistoryMessage": "pioneer.history",
    "HookContext": "pioneer.hooks.registry",
    "HookDiagnostic": "pioneer.hooks.models",
    "load_compile_input": "pioneer.compile.inputs",
    "LruCache": "pioneer.caches",
    "ModelReply": "pioneer.providers",
    "open_store": "pioneer.history.open",
    "OpenAIChatSummarizer": "pioneer.history",
    "PostgresStore": "pioneer.history.postgres_store",
    "Problem": "pioneer.errors",
    "ProfileSyntaxError": "pioneer.errors",
    "PromptContextContribution": "pioneer.hooks.models",
    "PromptLimits": "pioneer.compile.inputs",
    "PromptSectionContribution": "pioneer.hooks.models",
    "read_response": "pioneer.providers",
    "ReportedUsage": "pioneer.audit",
    "retry_instruction": "pioneer.sections.runtime",
    "RetryKind": "pioneer.sections.runtime",
    "runtime_block": "pioneer.sections.runtime",
    "RuntimeSectionInput": "pioneer.compile.inputs",
    "SeedResult": "pioneer.compile.bootstrap",
    "SourceRef": "pioneer.hooks.models",
    "split_prompt_cache_boundary": "pioneer.compile.boundary",
    "SqliteStore": "pioneer.history",
    "strip_prompt_cache_boundary": "pioneer.compile.boundary",
    "Subscription": "pioneer.hooks.registry",
    "summarizer_from_settings": "pioneer.history.summarizer",
    "SummarizerError": "pioneer.history",
    "SummaryRequest": "pioneer.history",
    "TiktokenCounter": "pioneer.tokens",
    "TokenCounter": "pioneer.tokens",
    "ToolArgumentsError": "pioneer.tools",
    "ToolCall": "pioneer.providers",
    "ToolCatalog": "pioneer.tools",
    "ToolContribution": "pioneer.tools",
    "ToolResult": "pioneer.providers",
    "ToolRound": "pioneer.tools",
    "TurnAudit": "pioneer.turn",
    "TurnContext": "pioneer.hooks.registry",
    "TurnRecord": "pioneer.audit",
    "TurnRecords": "pioneer.audit",
    "TurnTools": "pioneer.tools",
    "verify_lock": "pioneer.review.lock",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from ._version import VERSION

        return VERSION
    try:
        return _getattr(name)
    except AttributeError:
        moved = f"; import it from {_MOVED[name]}" if name in _MOVED else ""
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}{moved}") from None
