"""The turn audit: what the store keeps about each turn, and how it is gathered.

:mod:`.record` holds the stored models (:class:`TurnRecord` and its parts),
:mod:`.provider_shape` reads the shape of a sent provider body, :mod:`.cache_report` plans
what a round should read from the provider's cache and :mod:`.store` keeps records in the
conversation store's database (:class:`TurnRecords`, on SQLite or PostgreSQL). The runner
collects a turn's rounds while it runs (:mod:`pioneer.turn.recorder`); ``pioneer explain``
reads the record back (:mod:`pioneer.audit.explain`).
"""

from __future__ import annotations

from .cache_report import (
    BlockKind,
    BlockStatus,
    CacheBlock,
    CachePlan,
    FirstDifference,
    SectionDigest,
    plan_cache,
    plan_request,
    request_blocks,
)
from .provider_shape import CARRIERS, provider_shape
from .record import (
    ExecutionSecurity,
    HiddenDomain,
    HistoryMessageRecord,
    HistorySnapshot,
    ProviderShape,
    ReplyRecord,
    ReportedUsage,
    RoundRecord,
    SkillOutcomeRecord,
    SkillRecord,
    SkillsSnapshot,
    SystemPartRecord,
    ThreadMode,
    ToolCallRecord,
    ToolRecord,
    TurnRecord,
    WindowRecord,
)
from .store import TurnRecords

__all__ = [
    "CARRIERS",
    "BlockKind",
    "BlockStatus",
    "CacheBlock",
    "CachePlan",
    "ExecutionSecurity",
    "FirstDifference",
    "HiddenDomain",
    "HistoryMessageRecord",
    "HistorySnapshot",
    "ProviderShape",
    "ReplyRecord",
    "ReportedUsage",
    "RoundRecord",
    "SectionDigest",
    "SkillOutcomeRecord",
    "SkillRecord",
    "SkillsSnapshot",
    "SystemPartRecord",
    "ThreadMode",
    "ToolCallRecord",
    "ToolRecord",
    "TurnRecord",
    "TurnRecords",
    "WindowRecord",
    "plan_cache",
    "plan_request",
    "provider_shape",
    "request_blocks",
]
