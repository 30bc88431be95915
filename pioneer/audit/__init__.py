"""The turn audit: what the store keeps about each turn, and how it is gathered.

:mod:`.record` holds the stored models (:class:`TurnRecord` and its parts),
:mod:`.provider_shape` reads the shape of a sent provider body, :mod:`.recorder` collects
a turn's rounds while it runs, and :mod:`.sqlite` is the SQL behind
``SqliteStore.save_turn_record`` and ``get_turn_record``. ``pioneer explain`` reads the
record back (:mod:`pioneer.audit.explain`).
"""

from __future__ import annotations

from .provider_shape import CARRIERS, provider_shape
from .record import (
    HiddenDomain,
    HistoryMessageRecord,
    HistorySnapshot,
    ProviderShape,
    RoundRecord,
    SkillRecord,
    SkillsSnapshot,
    SystemPartRecord,
    ThreadMode,
    ToolCallRecord,
    TurnRecord,
    TurnRecordStore,
)
from .recorder import TurnAudit

__all__ = [
    "CARRIERS",
    "HiddenDomain",
    "HistoryMessageRecord",
    "HistorySnapshot",
    "ProviderShape",
    "RoundRecord",
    "SkillRecord",
    "SkillsSnapshot",
    "SystemPartRecord",
    "ThreadMode",
    "ToolCallRecord",
    "TurnAudit",
    "TurnRecord",
    "TurnRecordStore",
    "provider_shape",
]
