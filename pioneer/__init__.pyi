"""Type stub of the public API: the one table of what ``from pioneer import ...`` offers.

The first tier: what a user of the runner and of the compiler needs, every name in
docs/api.md. Everything else is reached through its subpackage (``pioneer.history``,
``pioneer.providers``, ``pioneer.hooks.registry``, ...). ``__init__.py`` reads this file
to import each name on first use, so ``import pioneer`` and the CLI load only the stages
they touch; type checkers read it as the package.
"""

from .audit import ExecutionSecurity as ExecutionSecurity
from .audit import RoundRecord as RoundRecord
from .compile.bootstrap import ensure_runtime_home as ensure_runtime_home
from .compile.compiler import PromptCompiler as PromptCompiler
from .compile.inputs import PromptCompileInput as PromptCompileInput
from .compile.manifest import CompiledPromptPayload as CompiledPromptPayload
from .compile.manifest import PromptManifest as PromptManifest
from .errors import ContextWindowError as ContextWindowError
from .errors import HookError as HookError
from .errors import InputError as InputError
from .errors import LockError as LockError
from .errors import PioneerError as PioneerError
from .errors import ProfileError as ProfileError
from .errors import ProviderError as ProviderError
from .errors import StoreError as StoreError
from .errors import TemplateError as TemplateError
from .errors import ThreadConflictError as ThreadConflictError
from .history import HistoryDecision as HistoryDecision
from .history import HistoryLimits as HistoryLimits
from .history import Summarizer as Summarizer
from .history.store import DatabaseStore as DatabaseStore
from .hooks.registry import HookRegistry as HookRegistry
from .providers import CacheOptions as CacheOptions
from .providers import ContextOverflow as ContextOverflow
from .providers import SamplingOptions as SamplingOptions
from .providers import ToolSpec as ToolSpec
from .providers.openai_chat import SystemRole as SystemRole
from .sections.permissions import PermissionProfile as PermissionProfile
from .sections.skills import Skill as Skill
from .settings import HistoryToolRounds as HistoryToolRounds
from .settings import PioneerSettings as PioneerSettings
from .turn import Agent as Agent
from .turn import AsyncAgent as AsyncAgent
from .turn import AsyncTurn as AsyncTurn
from .turn import FinishedTurn as FinishedTurn
from .turn import ProviderName as ProviderName
from .turn import Step as Step
from .turn import ThreadMode as ThreadMode
from .turn import Turn as Turn

__version__: str
