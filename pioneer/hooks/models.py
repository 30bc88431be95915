"""Hook values: the phases, a subscription, what a hook receives and what it hands back.

The phases are fixed (:data:`PHASES`); a :class:`Subscription` ties a hook function to
one of them with its policies; a hook receives a :class:`HookContext` and what a phase
produced is a :class:`PhaseOutcome`. Running them is :mod:`pioneer.hooks.registry`.

Contributions are edge models (hooks can come from other packages through entry
points), so they are pydantic, frozen, ``extra="forbid"``, and validated where they are
built: a hook that builds an invalid contribution has failed, and its failure policy
decides what happens to the turn. Lone surrogates in their text become U+FFFD
(:mod:`pioneer.text`). A hook returns any mix of:

- :class:`PromptSectionContribution`: text for a named section (``agents_md``,
  ``memory_recall``, or a dynamic id that falls into the profile's slot);
- :class:`PromptContextContribution`: text for the section named by its ``domain``
  (``thread_context`` for recalled thread snippets, for example);
- :class:`HookDiagnostic`: a note for the manifest without any prompt text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, Field

from ..compile.ids import ID_SCHEMA, check_runtime_id
from ..compile.manifest import Diagnostic, HookSourceEntry, HookSourceRef
from ..errors import HookError, InputError, Problem, wrong_field
from ..text import EDGE_CONFIG, EdgeModel, texts

if TYPE_CHECKING:
    import jinja2

    from ..compile.inputs import PromptCompileInput

__all__ = [
    "PHASES",
    "PROMPT_PHASES",
    "TURN_PROMPT_PHASES",
    "CollectedContribution",
    "ContributionKind",
    "FailurePolicy",
    "HookContext",
    "HookDiagnostic",
    "HookFunction",
    "HookOutput",
    "HookResult",
    "Offered",
    "PhaseOutcome",
    "PromptContextContribution",
    "PromptSectionContribution",
    "SourceRef",
    "Subscription",
    "TurnContext",
    "canonical_phase",
]



class SourceRef(EdgeModel):
    """Where a contribution's text came from (a document, a thread snippet, ...)."""

    model_config = EDGE_CONFIG
    kind: str = Field(min_length=1, description="Kind of source, e.g. document or thread_episodic.")
    id: str = Field(min_length=1, description="Id of the source within its kind.")
    label: str | None = Field(default=None, description="Short human-readable label.")


class _Contribution(EdgeModel):
    model_config = EDGE_CONFIG
    contribution_id: str = Field(min_length=1, description="Stable id of this contribution.")
    domain: str = Field(min_length=1, description="What the contribution is about.")
    priority: int = Field(
        default=0, description="Higher first: decides which contribution gets pool room first."
    )
    content: str = Field(description="The text; blank text contributes no section.")
    max_chars: int | None = Field(
        default=None, ge=0, description="Hook-side cap: the runtime cuts the content to it."
    )
    source_refs: list[SourceRef] = Field(
        default_factory=list, description="Sources the text was built from."
    )
    diagnostics: list[str] = Field(
        default_factory=list, description="Notes for the manifest (never the content itself)."
    )
    truncated: bool = Field(default=False, description="The hook already cut the content.")
    artifact_ref_count: int = Field(
        default=0, ge=0, description="Artifact reference lines the content carries, as its "
        "renderer counted them (informational: the compiler counts the ref lines in the content).",
    )


class PromptSectionContribution(_Contribution):
    """Text for one section of the prompt, placed by the profile under ``section_id``."""

    section_id: Annotated[str, AfterValidator(check_runtime_id)] = Field(
        description="A built-in runtime id (agents_md, memory_recall, ...) or a dynamic id.",
        json_schema_extra=ID_SCHEMA,
    )
    title: str | None = Field(
        default=None, description="Heading; the profile's default when blank."
    )


class PromptContextContribution(_Contribution):
    """Context text for the section named by ``domain`` (e.g. ``thread_context``)."""

    domain: Annotated[str, AfterValidator(check_runtime_id)] = Field(
        description="The target section: a built-in runtime id or a dynamic id.",
        json_schema_extra=ID_SCHEMA,
    )


class HookDiagnostic(EdgeModel):
    """A manifest note from a hook, with no prompt text."""

    model_config = EDGE_CONFIG
    message: str = Field(min_length=1, description="What the hook noticed (no content).")
    section_id: str | None = Field(default=None, description="Section the note is about, when any.")


HookOutput = PromptSectionContribution | PromptContextContribution | HookDiagnostic


#: Every phase, in the order a turn passes through them.
PHASES: tuple[str, ...] = (
    "turn.pre_policy",
    "turn.pre_tool_materialization",
    "turn.pre_prompt_context",
    "turn.post_preflight_prompt_context",
    "runtime.turn_pre_context",
    "turn.pre_prompt_compile",
    "turn.post_prompt_compile",
    "turn.post_turn",
    "turn.pre_compaction",
)
#: Phases whose contributions reach the prompt; contributions anywhere else are ignored.
PROMPT_PHASES: frozenset[str] = frozenset(
    {
        "turn.pre_prompt_context",
        "turn.post_preflight_prompt_context",
        "runtime.turn_pre_context",
        "turn.pre_prompt_compile",
    }
)
#: The phases :func:`pioneer.turn.run.compile_turn` runs before compiling an assistant turn.
TURN_PROMPT_PHASES: tuple[str, ...] = (
    "turn.pre_prompt_context",
    "turn.post_preflight_prompt_context",
    "turn.pre_prompt_compile",
)
# Older hook code spells phases with underscores only (turn_pre_prompt_compile); both
# spellings are accepted (docs/hooks-and-sections.md, "Hooks and phases").
_ALIASES = {phase.replace(".", "_", 1): phase for phase in PHASES}

FailurePolicy = Literal["fail_closed", "best_effort"]
ContributionKind = Literal["prompt_context", "thread_context", "prompt_section"]


def canonical_phase(name: str) -> str:
    """The dotted phase name; the underscore-only spelling is accepted too."""
    if name in PHASES:
        return name
    if name in _ALIASES:
        return _ALIASES[name]
    raise HookError(Problem(f'unknown hook phase "{name}" (known: {", ".join(PHASES)})'))


@dataclass(frozen=True, slots=True)
class TurnContext:
    """What hooks know about the turn being compiled."""

    thread_id: str | None = None
    #: The thread's folder, relative to the workspace root (``None``: the root itself).
    thread_folder: str | None = None
    user_text: str = ""
    #: Paths the turn touches; skills match their path globs against these.
    touched_paths: tuple[str, ...] = ()
    #: Anything else an application hands its own hooks.
    data: Mapping[str, Any] = field(default_factory=dict)
    #: The turn runner's thread mode: on ``chat`` the turn offers no tools, so a hook
    #: leaves out what speaks of tools (docs/explain.md, "The turn runner").
    mode: Literal["agent", "chat"] = "agent"

    def __post_init__(self) -> None:
        problems = [wrong_field("TurnContext", name, "a string or None", value)
                    for name, value in (("thread_id", self.thread_id),
                                        ("thread_folder", self.thread_folder))
                    if value is not None and not isinstance(value, str)]
        if not isinstance(self.user_text, str):
            problems.append(wrong_field("TurnContext", "user_text", "a string", self.user_text))
        paths = texts(self.touched_paths)
        if paths is None:
            problems.append(wrong_field("TurnContext", "touched_paths", "a list of paths",
                                        self.touched_paths))
        if not isinstance(self.data, Mapping):
            problems.append(wrong_field("TurnContext", "data", "a mapping", self.data))
        if self.mode not in ("agent", "chat"):
            problems.append(Problem(f"expected agent or chat (got {self.mode!r:.40})",
                                    path="TurnContext → mode"))
        if problems:
            raise InputError(problems)
        object.__setattr__(self, "touched_paths", paths)


@dataclass(frozen=True, slots=True)
class HookContext:
    """The argument every hook function receives."""

    phase: str
    subscription: Subscription
    turn: TurnContext
    compile_input: PromptCompileInput
    #: The compiler's sandboxed template environment, for the section renderers.
    env: jinja2.Environment
    #: Contributions collected in earlier phases of this turn.
    earlier: tuple[CollectedContribution, ...] = ()


HookResult = HookOutput | Iterable[HookOutput] | None


class HookFunction(Protocol):
    """A hook: takes the context, returns contributions and diagnostics (or nothing)."""

    def __call__(self, context: HookContext, /) -> HookResult: ...


@dataclass(frozen=True, slots=True)
class Subscription:
    """One hook function subscribed to one phase, with its policies."""

    hook_id: str
    phase: str
    function: HookFunction
    priority: int = 0
    #: ``None`` blocks until the hook returns; otherwise the hook gets this many ms.
    deadline_ms: int | None = None
    failure: FailurePolicy = "fail_closed"
    subscription_id: str = ""

    def __post_init__(self) -> None:
        where = f'hook "{self.hook_id}"'
        if not self.hook_id.strip():
            raise HookError(Problem("hook id must not be blank"))
        object.__setattr__(self, "phase", canonical_phase(self.phase))
        if self.deadline_ms is not None and self.deadline_ms <= 0:
            raise HookError(Problem(f"deadline_ms must be > 0 (got {self.deadline_ms})",
                                    path=where))
        if self.failure not in ("fail_closed", "best_effort"):
            raise HookError(Problem(
                f'failure must be "fail_closed" or "best_effort" (got {self.failure!r})',
                path=where,
            ))
        if not self.subscription_id:
            object.__setattr__(self, "subscription_id", f"{self.hook_id}.{self.phase}")

    def source(
        self, contribution_id: str | None = None, digest: str | None = None
    ) -> HookSourceRef:
        """The manifest reference to this subscription."""
        return HookSourceRef(
            hook_id=self.hook_id, subscription_id=self.subscription_id, phase=self.phase,
            contribution_id=contribution_id, contribution_hash=digest,
        )


@dataclass(frozen=True, slots=True)
class CollectedContribution:
    """A contribution as the runtime accepted it, after the hook-side cut."""

    subscription: Subscription
    output: PromptSectionContribution | PromptContextContribution
    section_id: str
    kind: ContributionKind
    content: str
    hook_truncated: bool
    content_hash: str

    @property
    def title(self) -> str | None:
        """The contribution's own title (context contributions have none)."""
        return self.output.title if isinstance(self.output, PromptSectionContribution) else None


@dataclass(frozen=True, slots=True)
class Offered:
    """A value of a type the phase's caller asked for (``run_phase(accept=...)``), with
    the subscription that returned it: a tool definition, for the turn runner."""

    subscription: Subscription
    value: object


@dataclass(frozen=True, slots=True)
class PhaseOutcome:
    """What one phase produced, in subscription order."""

    phase: str
    #: Contributions, and ready manifest entries for diagnostics and failures, in order.
    records: tuple[CollectedContribution | HookSourceEntry, ...]
    diagnostics: tuple[Diagnostic, ...]
    #: Values of the types the caller accepted, in order.
    offered: tuple[Offered, ...] = ()

    @property
    def contributions(self) -> tuple[CollectedContribution, ...]:
        """Only the contributions."""
        return tuple(r for r in self.records if isinstance(r, CollectedContribution))
