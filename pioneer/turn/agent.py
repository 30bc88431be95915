"""The agent: what a deployment configures once, and the turns it hands out.

:class:`Agent` holds the long-lived parts of running threads: the store (opened from a
URL, a path or :class:`~pioneer.settings.PioneerSettings`, or given), the compiler, the
hooks, the provider and model, the tool catalog, the summarizer, the permission profile
and the skills. It holds nothing of one turn: :meth:`Agent.turn` makes a
:class:`~pioneer.turn.turn.Turn`, which keeps its own state, so many turns of many
threads run at once over one agent (from threads, or from one asyncio loop through
``asyncio.to_thread``). Model I/O is never done here: a turn hands out request bodies and
takes the provider's replies.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, get_args

from ..audit.record import ExecutionSecurity
from ..audit.store import TurnRecords
from ..compile.bootstrap import ensure_runtime_home
from ..compile.compiler import PromptCompiler, as_compile_input
from ..compile.inputs import PromptCompileInput
from ..episodic.index import EpisodicIndex
from ..episodic.recall import episodic_recall_subscription
from ..errors import InputError, Problem, StoreError, did_you_mean
from ..history.budget import HistoryBudgeter, HistoryLimits
from ..history.calibration import Calibrator
from ..history.open import open_store
from ..history.store import DatabaseStore
from ..history.summarizer import Summarizer, summarizer_from_settings
from ..hooks.registry import HookRegistry
from ..providers import PROVIDERS
from ..providers.models import ModelTable, load_model_table, model_facts, using_model_table
from ..providers.names import ProviderName
from ..providers.openai_chat import SystemRole
from ..providers.request import CacheOptions, SamplingOptions, ToolSpec
from ..review.lock import verify_lock
from ..sections.agents_md import HOOK_ID as AGENTS_MD_HOOK
from ..sections.agents_md import agents_md_subscription
from ..sections.permissions import PermissionProfile
from ..sections.skills import Skill
from ..sections.tool_domains import DEFAULT_TOOL_DOMAINS
from ..settings import HistoryToolRounds, PioneerSettings
from ..tokens import TiktokenCounter, counter_for
from ..tools.visibility import ToolCatalog, checked_shapes
from ._lifecycle import AbandonedWriter, ThreadGuard
from ._rounds import check_max_rounds
from .parts import AgentParts, ThreadMode
from .turn import Turn

__all__ = ["Agent", "AgentParts", "ProviderName", "ThreadMode"]

#: What a store given as an object must offer (a DatabaseStore: SQLite, PostgreSQL).
_STORE_METHODS = ("read", "write", "subscribe", "add_turn", "get_history_window")



class Agent:
    """Runs turns of any thread: configured once per deployment, shared by every turn."""

    def __init__(
        self,
        store: DatabaseStore | PioneerSettings | str | os.PathLike[str],
        *,
        provider: ProviderName,
        model: str,
        compiler: PromptCompiler | None = None,
        hooks: HookRegistry | None = None,
        tools: Sequence[ToolSpec] = (),
        domains: Mapping[str, Sequence[str]] = DEFAULT_TOOL_DOMAINS,
        summarizer: Summarizer | None = None,
        permissions: PermissionProfile | ExecutionSecurity | None = None,
        skills: Sequence[Skill] = (),
        settings: PioneerSettings | None = None,
        compile_input: PromptCompileInput | Mapping[str, Any] | None = None,
        chat_profile: str = "minimal",
        limits: HistoryLimits | None = None,
        sampling: SamplingOptions | None = None,
        cache: CacheOptions | None = None,
        system_role: SystemRole | None = None,
        recall: bool = True,
        runtime_facts: bool = True,
        name: str | None = None,
        max_rounds: int | None = None,
        history_tool_rounds: HistoryToolRounds | None = None,
    ) -> None:
        """``store`` is a store, its URL or path, or the settings that name it
        (:func:`~pioneer.history.open.open_store`); a store opened here is closed by
        :meth:`close`. ``compile_input`` is the base of every turn's compile input
        (``workspace_root`` defaults to the settings' runtime home; its ``profile`` is
        the agent turns' profile). ``recall`` indexes every stored turn and recalls
        earlier ones into the Thread Context section (the episodic index). ``max_rounds``
        is every turn's round limit unless :meth:`turn` gives its own (None: no limit):
        the last round tells the model to answer and lets it call no tool.
        ``history_tool_rounds`` (default: the settings') says whether a stored turn keeps
        its tool calls and results for later turns (``keep``) or drops them (``drop``).

        The settings are the agent's: without a ``summarizer``, the one the summary
        settings configure (:func:`~pioneer.history.summarizer.summarizer_from_settings`);
        with ``locked``, both profiles are checked against ``lock_file``
        (:func:`~pioneer.review.lock.verify_lock`, a :class:`LockError` here and in
        :meth:`reload`); the runtime home (``workspace_root``) is created and seeded as
        ``pioneer init`` does; a turn with a ``thread_folder`` runs the AGENTS.md hook;
        and ``runtime_facts`` puts the runtime block (local date and time cut to
        ``clock_granularity``, the operating system) first in every turn's Extra System."""
        if isinstance(store, PioneerSettings):
            settings = settings or store
        _check_choice("provider", provider, tuple(PROVIDERS))
        if not isinstance(model, str) or not model.strip():
            raise InputError(Problem(f"expected a model name (got {model!r})",
                                     path="Agent → model"))
        for label, value, kind in (
            ("compiler", compiler, PromptCompiler), ("hooks", hooks, HookRegistry),
            ("settings", settings, PioneerSettings), ("limits", limits, HistoryLimits),
            ("sampling", sampling, SamplingOptions), ("cache", cache, CacheOptions),
        ):
            if value is not None and not isinstance(value, kind):
                raise InputError(Problem(f"expected {kind.__name__} (got {type(value).__name__})",
                                         path=f"Agent → {label}"))
        if permissions is not None and not isinstance(permissions,
                                                      PermissionProfile | ExecutionSecurity):
            raise InputError(Problem("expected a PermissionProfile or ExecutionSecurity (got "
                                     f"{type(permissions).__name__})", path="Agent → permissions"))
        self.settings = settings or (compiler.settings if compiler is not None
                                     else PioneerSettings.load(discover=False))
        self.provider: ProviderName = provider
        self.model = model
        self.name = name
        self.max_rounds = check_max_rounds(max_rounds, "Agent → max_rounds")
        if history_tool_rounds is not None:
            _check_choice("history_tool_rounds", history_tool_rounds, get_args(HistoryToolRounds))
        #: ``keep``: each turn is stored with its tool rounds, which later turns send.
        self.history_tool_rounds: HistoryToolRounds = (
            history_tool_rounds or self.settings.history_tool_rounds)
        self.compiler = compiler or PromptCompiler(self.settings)
        self.hooks = hooks or HookRegistry()
        self.tools, self.domains = checked_shapes(tools, domains)
        ToolCatalog.build(self.tools, self.domains)  # every problem with the tools, now
        self.summarizer = summarizer if summarizer is not None \
            else summarizer_from_settings(self.settings)
        self.runtime_facts = runtime_facts
        self.security = permissions if isinstance(permissions, ExecutionSecurity) \
            else ExecutionSecurity.from_profile(permissions)
        if isinstance(skills, Skill | str) or not all(isinstance(s, Skill) for s in skills):
            raise InputError(Problem(f"expected a list of Skill (got {skills!r:.80})",
                                     path="Agent → skills"))
        self.skills = tuple(skills)
        base = as_compile_input(compile_input or {})
        if "workspace_root" not in base.model_fields_set:  # None given: no runtime home
            base = base.model_copy(update={"workspace_root": self.settings.home})
        self.compile_input = base
        self.chat_profile = chat_profile
        self._load_profiles(self.compiler)  # a wrong profile fails here, not mid-turn
        if base.workspace_root is not None:
            ensure_runtime_home(base.workspace_root)
        #: A cap on the history's budget (None: the history gets what the window leaves).
        self.limits = limits
        self.sampling = sampling or SamplingOptions()
        self.cache = cache or CacheOptions(dynamic_placement=self.settings.dynamic_placement)
        #: The model table with the deployment's rows (``settings.model_path``) over it, or
        #: None for the table in use (docs/providers.md, "The model table").
        self.model_table: ModelTable | None = (
            load_model_table(self.settings.model_path) if self.settings.model_path else None)
        self.system_role = system_role
        self.store: DatabaseStore
        if isinstance(store, PioneerSettings | str | os.PathLike):
            self.store, self._owned = self._open_store(store), True
        elif all(callable(getattr(store, name, None)) for name in _STORE_METHODS):
            self.store, self._owned = store, False
        else:
            raise InputError(Problem("expected a store, a store URL, an SQLite path or "
                                     f"PioneerSettings (got {type(store).__name__})",
                                     path="Agent → store"))
        self.records = TurnRecords(self.store)
        #: The ratio of provider tokens to local ones, per provider and model, learnt from
        #: the replies (docs/history.md, "Budgeting").
        self.calibration = Calibrator(self.store)
        self.index = EpisodicIndex(self.store) if recall else None
        self._guard = ThreadGuard(self.store)
        self._writer = AbandonedWriter(self.records)
        # The open turn of each thread; a turn garbage-collected unfinished leaves by itself.
        self._open: weakref.WeakValueDictionary[str, Turn] = weakref.WeakValueDictionary()
        self._open_lock = threading.Lock()

    def _load_profiles(self, compiler: PromptCompiler) -> None:
        """Load both profiles with ``compiler``; with ``locked``, check them against the
        lock file."""
        profiles = [self.compile_input.profile, self.chat_profile]
        for profile in profiles:
            compiler.load_profile(profile)
        if self.settings.locked:
            verify_lock(compiler, profiles, self.settings.lock_file)

    def reload(self) -> None:
        """Read the profiles and templates again (a new compiler with the same settings
        and search paths), for the turns started from now on. With ``locked``, a profile
        that no longer matches the lock file is a :class:`LockError` and the agent keeps
        the compiler it had."""
        compiler = PromptCompiler(self.compiler.settings,
                                  profile_path=self.compiler.profile_path,
                                  template_path=self.compiler.template_path)
        self._load_profiles(compiler)
        self.compiler = compiler

    def _open_store(self, target: PioneerSettings | str | os.PathLike[str]) -> DatabaseStore:
        """The store ``target`` names, opened with the agent's settings."""
        return open_store(target, settings=self.settings, counter=self._history_counter())

    def _history_counter(self) -> TiktokenCounter:
        """The counter a store the agent opens counts the stored turns with: the model's
        tokenizer (its model table row), so the history is counted as the rest of the
        request is."""
        with self.model_rules():
            tokenizer = model_facts(self.model, self.provider).tokenizer
        return counter_for(tokenizer, self.settings.token_cache_bytes)

    def model_rules(self) -> AbstractContextManager[Any]:
        """A block in which the providers' rules come from the agent's model table."""
        return using_model_table(self.model_table) if self.model_table is not None \
            else nullcontext()

    def budgeter(self, limits: HistoryLimits) -> HistoryBudgeter:
        """The history budgeter of a turn (its ``limits``: the history's share of the
        window; the agent's summarizer and settings)."""
        return HistoryBudgeter(
            self.store, limits, summarizer=self.summarizer,
            summary_model=self.settings.summary_model,
            summary_deadline=self.settings.summary_timeout,
            keep_recent_tokens=self.settings.keep_recent_tokens,
        )

    def registry(self, *, thread_folder: str | None = None) -> HookRegistry:
        """The hooks a turn runs: the application's, thread episodic recall, and (for a
        turn with a ``thread_folder``) the AGENTS.md hook, unless the application
        subscribed one itself."""
        root = self.compile_input.workspace_root
        agents_md = thread_folder is not None and root is not None and not any(
            s.hook_id == AGENTS_MD_HOOK for s in self.hooks.subscriptions())
        if self.index is None and not agents_md:
            return self.hooks
        registry = HookRegistry()
        for subscription in self.hooks.subscriptions():
            registry.add(subscription)
        if self.index is not None:
            registry.add(episodic_recall_subscription(self.index))
        if agents_md:
            assert root is not None
            registry.add(agents_md_subscription(root))
        return registry

    def turn(
        self,
        thread_id: str,
        user_text: str,
        *,
        mode: ThreadMode = "agent",
        turn_id: str | None = None,
        touched_paths: Sequence[str] = (),
        thread_folder: str | None = None,
        explicit_skills: Sequence[str] = (),
        dynamic_context: str = "",
        extra_system: str = "",
        data: Mapping[str, Any] | None = None,
        max_rounds: int | None = None,
        inputs: Mapping[str, Any] | None = None,
        visible_domains: Sequence[str] = (),
    ) -> Turn:
        """A new turn of ``thread_id`` answering ``user_text`` (nothing is read yet: the
        first :meth:`Turn.next_body` loads the history). ``turn_id`` defaults to a new
        random id; ``touched_paths`` and ``explicit_skills`` choose the skills;
        ``data`` is handed to the hooks (:attr:`~pioneer.hooks.TurnContext.data`);
        ``max_rounds`` (default the agent's) makes the turn's last round a final answer;
        ``inputs`` are values of the inputs the profile declares, over those of the
        agent's ``compile_input``.
        ``visible_domains`` opens hidden tool domains from the first round (a preflight
        selection, recorded as granted by the application), where the model would
        otherwise ask for them with ``request_tools``.

        A thread has at most one open turn per agent: while one is neither finished nor
        closed, another is an :class:`InputError` naming it."""
        _check_choice("mode", mode, get_args(ThreadMode))
        opened = self._checked_domains(visible_domains, mode)
        turn = Turn(self._parts(), thread_id, user_text, mode=mode, turn_id=turn_id,
                    touched_paths=tuple(touched_paths), thread_folder=thread_folder,
                    explicit_skills=tuple(explicit_skills), dynamic_context=dynamic_context,
                    extra_system=extra_system, data=dict(data or {}),
                    max_rounds=self.max_rounds if max_rounds is None else max_rounds,
                    inputs=dict(inputs or {}), visible_domains=opened)
        with self._open_lock:
            other = self._open.get(thread_id)
            if other is not None:  # the new turn sent nothing: dropping it keeps nothing
                raise InputError(Problem(
                    f"thread {thread_id!r} already has an open turn, {other.turn_id!r}: "
                    "finish() or close() it first (one open turn per thread per agent)",
                    path="Agent.turn → thread_id"))
            self._open[thread_id] = turn
        return turn

    def _checked_domains(self, domains: object, mode: ThreadMode) -> tuple[str, ...]:
        """``visible_domains`` of :meth:`turn`: domain names of the agent's domain map."""
        path = "Agent.turn → visible_domains"
        if isinstance(domains, str | bytes) or not isinstance(domains, Sequence):
            raise InputError(Problem(f"expected a list of domain names (got {domains!r:.80})",
                                     path=path))
        if domains and mode == "chat":
            raise InputError(Problem("a chat turn offers no tools, so it opens no domain",
                                     path=path))
        problems = [
            Problem(f"unknown tool domain {name!r}"
                    f"{did_you_mean(str(name), self.domains) or ''} (known: "
                    f"{', '.join(self.domains) or 'none'})", path=f"{path}[{index}]")
            for index, name in enumerate(domains) if name not in self.domains]
        if problems:
            raise InputError(problems)
        return tuple(domains)

    def _parts(self) -> AgentParts:
        """The agent's parts as they are now: what a turn made now runs with."""
        return AgentParts(
            store=self.store, compiler=self.compiler, provider=self.provider,
            model=self.model, name=self.name, settings=self.settings,
            compile_input=self.compile_input, chat_profile=self.chat_profile,
            tools=self.tools, domains=self.domains, security=self.security,
            skills=self.skills, limits=self.limits, sampling=self.sampling, cache=self.cache,
            system_role=self.system_role, runtime_facts=self.runtime_facts,
            history_tool_rounds=self.history_tool_rounds, records=self.records,
            calibration=self.calibration, registry=self.registry, budgeter=self.budgeter,
            model_rules=self.model_rules, guard=self._guard, writer=self._writer,
            release=self._release,
        )

    def _release(self, thread_id: str, turn: object) -> None:
        """``turn`` of ``thread_id`` is over: the thread may have another open turn."""
        with self._open_lock:
            if self._open.get(thread_id) is turn:
                del self._open[thread_id]

    def close(self) -> None:
        """Store the abandoned turns still waiting, stop indexing and recording the
        store's writes, close a store opened here. Abandoned turns that could not be
        stored are a :class:`StoreError` (after everything is closed)."""
        self._writer.drain()
        self._guard.close()
        if self.index is not None:
            self.index.close()
        self.records.close()
        if self._owned:
            self.store.close()
        if self._writer.failed:
            failed, self._writer.failed = self._writer.failed, []
            raise StoreError([Problem(f"abandoned turn {item.record.turn_id!r} of thread "
                                      f"{item.record.thread_id!r} could not be stored: {error}")
                              for item, error in failed])

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_choice(label: str, value: object, choices: Sequence[str]) -> None:
    if value not in choices:
        raise InputError(Problem(f"expected one of {', '.join(choices)} (got {value!r})",
                                 path=f"Agent → {label}"))
