"""The compiler: a turn's stages, in order, each in a module of its own.

``PromptCompiler`` loads each profile (TOML → extends → schema → structural rules →
templates and conditions; :mod:`~pioneer.compile._extends`, :mod:`~pioneer.compile.profile`,
:mod:`~pioneer.compile.templates`) once into a :class:`~pioneer.compile._loaded.LoadedProfile`
and keeps it for every later turn. ``compile`` takes a round's whole input
(:class:`~pioneer.compile.round.RoundInput`) and is a straight chain:

0. round: the hook contributions (higher priority first) and the structured sections
   the profile places become runtime sections (:mod:`~pioneer.compile.round`);
1. load: the profile, loaded once;
2. plan: what each section reads, split at the cache boundary (:mod:`~pioneer.compile._plan`);
3. bootstrap: the identity files, budgeted (:mod:`~pioneer.compile.bootstrap`);
4. pools: the contributions each pool keeps (:mod:`~pioneer.compile._pools`);
5. stable part: the stable sections (:mod:`~pioneer.compile._assemble`);
6. dynamic part: the dynamic sections (:mod:`~pioneer.compile.render`, which renders
   every section, condition → source → render → budget → keep);
7. manifest: the payload, its fingerprints and the whole manifest, ``hook_sources``
   included (:mod:`~pioneer.compile._assemble`).

Nothing of one compile is kept for the next but the loaded profiles and their plans:
every compile reads the identity files and renders every section again.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import telemetry
from ..caches import CacheStats, LruCache
from ..errors import (
    InputError,
    PioneerError,
    Problem,
    ProfileError,
    TemplateError,
    did_you_mean,
    problem_summary,
)
from ..settings import PioneerSettings
from ..tokens import TokenCounter, default_counter
from ._assemble import assemble, stable_part
from ._extends import ProfileSource, resolve_profile
from ._loaded import LoadedProfile
from ._plan import ProfilePlan, plan_profile
from ._pools import Contribution, budget_pool
from ._spans import SPAN, cache_attributes, compile_attributes
from .bootstrap import BootstrapFile, BootstrapResult, load_bootstrap
from .declared import (
    InputSpec,
    InputValue,
    Locate,
    inputs_error,
    resolve_inputs,
    shown_value,
    value_sha256,
)
from .fingerprint import profile_fingerprint, template_digests
from .inputs import PromptCompileInput, parse_compile_input
from .manifest import CompiledPromptPayload, Diagnostic, InputRecord, Omission, built
from .profile import (
    Locator,
    ProfileSpec,
    find_profile,
    list_profiles,
    structural_problems,
)
from .readonly import FrozenDict
from .refs import count_ref_lines
from .render import (
    NO_INPUTS,
    SectionRenderer,
    TrialRenderer,
    representative_input,
)
from .round import RoundInput, hook_sources, round_sections
from .templates import TemplateSet, build_environment

__all__ = [
    "LoadedProfile", "PromptCompiler", "as_compile_input", "compile_prompt", "ignored_reason",
    "pool_usage", "representative_input",
]

INPUT_FIELDS: frozenset[str] = frozenset(PromptCompileInput.model_fields)
#: Names the compiler adds to the compile input's for every template and condition.
_COMPILER_NAMES = frozenset({"profile", "artifact_refs"})
_BASE_NAMES = INPUT_FIELDS | _COMPILER_NAMES | {"section"}
#: Names each kind of section's template may use beyond the compile input.
PROVIDED_NAMES: dict[str, frozenset[str]] = {
    "text": _BASE_NAMES,
    "bootstrap": _BASE_NAMES | {"file", "reminder"},
    "input": _BASE_NAMES | {"content"},
    "contribution": _BASE_NAMES | {"content"},
    "slot": _BASE_NAMES | {"content"},
}
#: Every name some section's template may use (for a section whose source is not known).
ALL_NAMES: frozenset[str] = frozenset().union(*PROVIDED_NAMES.values())
#: Names a ``when`` condition may use.
CONDITION_NAMES = _CONDITION_NAMES = INPUT_FIELDS | _COMPILER_NAMES
#: Input fields the interpreter itself consumes, whatever the profile's sections read.
_CONSUMED = frozenset({"workspace_root", "profile", "runtime_sections", "dynamic_sections",
                       "limits", "inputs"})
#: Input fields the compiler never takes as given: it derives their value from what the
#: prompt carries (the artifact refs), so a value passed in is reported as ignored.
_DERIVED = frozenset({"artifact_ref_count"})


class PromptCompiler:
    """Loads profiles and templates once; compiles a prompt per turn.

    ``settings`` default to the ``PIONEER_*`` environment variables and the defaults: no
    ``pioneer.toml`` is read unless asked for, with
    ``PromptCompiler(PioneerSettings.load())`` (the first one in the working folder or a
    parent, as the command line finds it) or ``PioneerSettings.load("path/pioneer.toml")``.
    ``profile_path`` and ``template_path`` (lists of ``str`` or path-like folders) replace
    the settings' search paths.

    ``count_tokens=True`` fills each manifest record's cl100k ``tokens`` during the
    compile (with ``token_counter``, default the process-wide counter). By default they
    are left out and counted on demand with
    :meth:`~pioneer.compile.manifest.CompiledPromptPayload.with_token_counts`, which gives the
    same numbers.
    """

    def __init__(
        self,
        settings: PioneerSettings | None = None,
        *,
        profile_path: Sequence[str | os.PathLike[str]] | None = None,
        template_path: Sequence[str | os.PathLike[str]] | None = None,
        token_counter: TokenCounter | None = None,
        count_tokens: bool = False,
    ):
        if settings is None:  # the environment only: a deployment file is read when asked
            settings = PioneerSettings.load(discover=False)
        self.settings = settings
        self.profile_path = _paths(profile_path, self.settings.profile_path)
        self.template_path = _paths(template_path, self.settings.template_path)
        self.templates = TemplateSet(build_environment(self.template_path,
                                                       settings.render_step_limit))
        self._counter = token_counter
        self._count_tokens = count_tokens
        self._profiles: dict[str, LoadedProfile] = {}
        self._plans: dict[str, ProfilePlan] = {}
        if count_tokens and token_counter is None:
            self._counter = default_counter(settings.token_cache_bytes)

    def cache_stats(self) -> list[CacheStats]:
        """The token counter's cache (name, entries, bytes, budget, hits, misses,
        evictions and hit rate) when the compiler counts tokens with one; the compiler
        itself keeps no cache of compiles (docs/speed.md)."""
        counter_cache = getattr(self._counter, "cache", None)
        if isinstance(counter_cache, LruCache):
            return [counter_cache.stats()]
        return []

    # -- loading ---------------------------------------------------------------

    def available_profiles(self) -> dict[str, Path]:
        """Profile names on the search path, deployment folders first."""
        return list_profiles(self.profile_path)

    def load_profile(self, name: str) -> LoadedProfile:
        """Load, validate and compile a profile once; raise with every problem found."""
        cached = self._profiles.get(name)
        if cached is not None:
            return cached
        source, problems, _ = self._checked(name)
        if problems:
            raise _load_error(problems, source.file)
        loaded = self._loaded(source)
        self._profiles[name] = loaded
        return loaded

    def _checked(self, name: str) -> tuple[ProfileSource, list[Problem], frozenset[int]]:
        """The profile resolved as far as it goes, every problem found in it (its files,
        its structure, its templates and conditions) and the indices of the sections
        whose template or condition has one."""
        path = find_profile(name, self.profile_path)
        source = resolve_profile(path, self.profile_path, keep_going=True)
        spec, file, where = source.spec, source.file, source.locator
        problems = [*source.problems,
                    *structural_problems(spec, where, input_fields=sorted(INPUT_FIELDS))]
        failed: set[int] = set()
        problems += self._template_problems(spec, where, file, failed)
        for dropped in source.dropped:  # a wrong key's section: its template still counts
            one = ProfileSpec.model_construct(name=spec.name, sections=[dropped.section],
                                              inputs=spec.inputs)
            problems += self._template_problems(one, _Shifted(dropped.locator, dropped.index),
                                                file)
        if source.problems or source.dropped:  # the profile file's first, by line
            problems.sort(key=lambda p: (p.file != file, (p.line or 0) if p.file == file else 0))
        return source, problems, frozenset(failed)

    def _loaded(self, source: ProfileSource) -> LoadedProfile:
        spec = source.spec
        templates = template_digests(self.templates.env, {s.template for s in spec.sections})
        return LoadedProfile(
            spec=spec,
            file=source.file,
            fingerprint=profile_fingerprint(spec, templates),
            bootstrap_files=tuple(
                (s.file, s.keep_empty) for s in spec.sections if s.source == "bootstrap" and s.file
            ),
            claimed=frozenset(s.id for s in spec.sections if s.source == "contribution"),
            source=source,
            templates=templates,
            contributions=spec.contribution_specs(),
            deployment_text=frozenset(
                s.id for s in spec.sections
                if s.source == "text" and not self.templates.is_builtin(s.template)),
        )

    def _template_problems(
        self, spec: ProfileSpec, where: Locator, file: str, failed: set[int] | None = None
    ) -> Iterator[Problem]:
        """The problems of each section's template and condition (``failed`` collects the
        indices of the sections that have one)."""
        for index, section in enumerate(spec.sections):
            context = f'while checking section "{section.id}" of {file}'
            found = False
            for problem in self.templates.check_template(
                section.template, PROVIDED_NAMES.get(section.source, ALL_NAMES), context=context
            ):
                found = True
                if problem.file is None:  # template not found: point at the profile line
                    yield where.problem(["sections", index, "template"], problem.message)
                else:
                    yield problem
            if not found:  # a template that loads: each input it reads must be declared
                for name, template_file, line in self.templates.input_uses(section.template):
                    if name is not None and name not in spec.inputs:
                        found = True
                        yield Problem(undeclared_input(name, spec), file=template_file,
                                      line=line, context=context)
            if section.when is not None:
                for problem in self.templates.check_condition(
                    section.when, _CONDITION_NAMES,
                    locate=functools.partial(where.where, ["sections", index, "when"]),
                ):
                    found = True
                    yield problem
                for name, _, _ in self.templates.condition_input_uses(section.when):
                    if name is not None and name not in spec.inputs:
                        found = True
                        yield where.problem(["sections", index, "when"],
                                            undeclared_input(name, spec))
            if found and failed is not None:
                failed.add(index)

    def check(self, names: Sequence[str] | None = None) -> list[PioneerError]:
        """Load every named (default: every visible) profile and render each of its
        sections against a representative input (:meth:`trial`); return the errors found,
        every problem of every profile. A profile with problems is still rendered: each
        of its sections that is well formed and whose template and condition are sound."""
        errors: list[PioneerError] = []
        for name in names or sorted(self.available_profiles()):
            try:
                if name in self._profiles:
                    problems, file = self.trial(name), self._profiles[name].file
                else:
                    problems, file = self._check_one(name)
            except PioneerError as error:
                errors.append(error)
                continue
            if problems:
                errors.append(_load_error(problems, file))
        return errors

    def _check_one(self, name: str) -> tuple[list[Problem], str]:
        source, problems, failed = self._checked(name)
        if not problems:
            self._profiles[name] = self._loaded(source)
            return self._trial(self._profiles[name]), source.file
        sound = [i for i in range(len(source.spec.sections)) if i not in failed]
        return [*problems, *self._trial(self._loaded(source.select(sound)))], source.file

    def trial(self, name: str) -> list[Problem]:
        """Render every section of a profile against a representative input and return
        the problems, so that what a compile would find is found by ``check``.

        The input has every field set to a value of its type (text, true, one
        contribution, a count of one) and every bootstrap file present; each ``when`` is
        evaluated, and each section is rendered whatever its condition says, so a template
        reading an attribute that does not exist (``limits.max_chars``) fails here.
        """
        return self._trial(self.load_profile(name))

    def _trial(self, profile: LoadedProfile) -> list[Problem]:
        files = {
            file: BootstrapFile(name=file, path=file, content="text", original_chars=4,
                                truncated=False)
            for file, _ in profile.bootstrap_files
        }
        plan = self._plan(profile)
        problems: list[Problem] = []
        seen: set[tuple[str | None, int | None, str]] = set()
        for changed, values in _trial_inputs(profile.spec.inputs):
            renderer = TrialRenderer(
                self.templates, representative_input(profile.spec.name), profile,
                plan, BootstrapResult(files, (), ()), [], [],
                inputs=FrozenDict(values, "inputs"), counter=None,
            )
            for section in profile.spec.sections:
                reads = plan.input_reads.get(section.id)
                if changed is not None and reads is not None and changed not in reads:
                    continue  # this value cannot change what the section renders
                try:
                    renderer.visit(section, [])
                except TemplateError as error:
                    for problem in error.problems:
                        if (problem.file, problem.line, problem.message) in seen:
                            continue
                        seen.add((problem.file, problem.line, problem.message))
                        if changed is not None:
                            said = f"with inputs.{changed} = {shown_value(values[changed])}"
                            problem = dataclasses.replace(problem, context=(
                                f"{problem.context} {said}" if problem.context else said))
                        problems.append(problem)
        return problems

    # -- compiling -------------------------------------------------------------

    def compile(
        self, round_input: RoundInput | PromptCompileInput | Mapping[str, Any], *,
        history: Iterable[str] | None = None,
    ) -> CompiledPromptPayload:
        """Compile one round's prompt; sections whose inputs did not change are reused.

        ``round_input`` is everything the round contributes (:class:`RoundInput`: the
        compile input, the hook contributions, the structured sections and the history
        texts), or a bare compile input: a :class:`PromptCompileInput` or a mapping of
        its fields, validated as :func:`~pioneer.compile.inputs.parse_compile_input` does
        (an :class:`~pioneer.errors.InputError` listing every problem). ``history`` is
        the text of the messages sent with a bare compile input (a round input carries
        its own): their artifact refs count, with those of the sections, towards the
        Artifact References policy. The manifest is written whole here, the hooks'
        ``hook_sources`` and diagnostics included.
        """
        if not isinstance(round_input, RoundInput):
            return self._compile(RoundInput(as_compile_input(round_input), history=(
                None if history is None else _history_texts(history))))
        if history is not None:
            raise InputError(Problem(
                "a RoundInput carries its own history texts; pass them as "
                "RoundInput(history=...), not as history=", path="history"))
        with telemetry.span(SPAN) as current:
            payload = self._compile(round_input)
            if current is not None and current.is_recording():
                telemetry.set_attributes(current, compile_attributes(payload))
                telemetry.set_attributes(current, cache_attributes(self.cache_stats()))
            return payload

    def _compile(self, whole: RoundInput) -> CompiledPromptPayload:
        profile = self.load_profile(whole.compile_input.profile)
        compile_input, positions = round_sections(whole, profile.claimed, self.templates.env)
        inputs = self.input_values(profile, compile_input)
        plan = self._plan(profile)
        boot = self._bootstrap(profile, compile_input)
        contributions, pool_diagnostics, pool_omissions = _pools(profile, compile_input)
        renderer = SectionRenderer(
            self.templates, compile_input, profile, plan, boot, contributions, pool_omissions,
            history_refs=0 if whole.history is None else _history_refs(whole.history),
            inputs=inputs,
            counter=(self._counter or default_counter()) if self._count_tokens else None,
        )
        # Only a contribution no section claims can carry an unknown id.
        pool_diagnostics += self._unknown_contributions(profile, renderer.unclaimed)
        stable = stable_part(renderer, plan.stable)
        dynamic = renderer.render_dynamic(plan.dynamic, stable.refs)
        if renderer.met != len(contributions):  # some contribution no section met
            dynamic += renderer.unplaced()
        ignored = _ignored_inputs(plan, compile_input)
        # The dynamic sections' diagnostics and omissions join these in assemble's pass.
        diagnostics = [*_clamped_limits(profile, compile_input), *boot.diagnostics,
                       *pool_diagnostics, *stable.diagnostics]
        omissions = [*pool_omissions, *stable.omissions]
        placements = renderer.placements()
        return assemble(profile, stable, dynamic, boot, diagnostics, omissions,
                        placements, ignored,
                        [*(_ignored_diagnostic(name, profile.spec.name) for name in ignored),
                         *whole.hook_diagnostics],
                        given_inputs(compile_input),
                        hook_sources(whole, positions, placements))

    def input_values(self, profile: LoadedProfile | str, compile_input: PromptCompileInput,
                     *, locate: Locate | None = None) -> FrozenDict:
        """The value of each input ``profile`` declares for this compile (given, else its
        default), as templates see them; an :class:`~pioneer.errors.InputError` naming
        every input that is undeclared, refused by its declaration or missing (each
        located by ``locate``, default at its path under ``inputs``)."""
        if isinstance(profile, str):
            profile = self.load_profile(profile)
        declared, given = profile.spec.inputs, compile_input.inputs
        if not declared and not given:
            return NO_INPUTS
        values, problems = resolve_inputs(declared, given, profile=profile.spec.name,
                                          **({"locate": locate} if locate else {}))
        if problems:
            raise inputs_error(problems, profile.spec.name)
        return FrozenDict(values, "inputs")

    def input_reads(self, profile: LoadedProfile) -> Mapping[str, frozenset[str] | None]:
        """The declared inputs each section's template or condition reads, by section id
        (``None``: possibly every one)."""
        return self._plan(profile).input_reads

    def warnings(self, name: str) -> list[Problem]:
        """What ``check`` warns about in a loaded profile: its files' warnings, and each
        stable section that reads an input declared ``changes = "turn"`` (its value would
        change the cached prefix on every turn)."""
        profile = self.load_profile(name)
        found = list(profile.warnings)
        declared = profile.spec.inputs
        if not declared:
            return found
        turn = {input_name for input_name, spec in declared.items() if spec.changes == "turn"}
        plan = self._plan(profile)
        where = profile.source.locator
        for index, section in enumerate(profile.spec.sections):
            if section.stability != "stable":
                continue
            reads = plan.input_reads.get(section.id)
            for input_name in sorted(turn if reads is None else reads & turn):
                key = "when" if section.when and any(
                    use[0] in (input_name, None)
                    for use in self.templates.condition_input_uses(section.when)) else "template"
                found.append(where.problem(["sections", index, key], (
                    f'stable section "{section.id}" reads input "{input_name}", declared '
                    'changes = "turn": a new value on each turn would change the cached '
                    "prefix every turn; declare how often it really changes "
                    '(changes = "thread" or "deployment") or make the section dynamic')))
        return found

    def _unknown_contributions(
        self, profile: LoadedProfile, contributions: list[Contribution]
    ) -> list[Diagnostic]:
        """An ``unknown_contribution`` diagnostic for each of ``contributions`` (those no
        section claims) that the profile does not declare either and whose id is close to
        an id it knows (a likely typo)."""
        found = []
        known = profile.contributions
        known_ids: frozenset[str] | None = None
        for item in contributions:
            if item.id in known:
                continue
            if known_ids is None:
                known_ids = profile.known_ids
            hint = did_you_mean(item.id, known_ids, cutoff=0.85)
            if hint:
                found.append(Diagnostic(
                    code="unknown_contribution",
                    message=f"contribution `{item.id}` matches no section or declared "
                    f"contribution and was placed by the slot{hint}",
                    section_id=item.id,
                ))
        return found

    def _plan(self, profile: LoadedProfile) -> ProfilePlan:
        plan = self._plans.get(profile.fingerprint)
        if plan is None:
            plan = plan_profile(profile.spec.sections, self.templates, _CONDITION_NAMES,
                                consumed=_CONSUMED)
            self._plans[profile.fingerprint] = plan
        return plan

    def _bootstrap(
        self, profile: LoadedProfile, compile_input: PromptCompileInput
    ) -> BootstrapResult:
        if not profile.bootstrap_files:
            return BootstrapResult({}, (), ())
        budgets, limits = profile.spec.budgets, compile_input.limits
        return load_bootstrap(
            Path(compile_input.workspace_root or self.settings.home),
            profile.bootstrap_files,
            max_chars_per_file=_lower(budgets.max_chars_per_file, limits.max_chars_per_file),
            max_chars_total=_lower(budgets.max_chars_total, limits.max_chars_total),
        )

#: How many sets of input values ``check`` renders a profile with, at most.
_MAX_TRIALS = 64


def _trial_inputs(
    declared: Mapping[str, InputSpec],
) -> list[tuple[str | None, dict[str, InputValue]]]:
    """The input values ``check`` renders with: each input's first example (else its
    default, else its first enum value, else a value of its type), then each other
    example, default and enum value of one input at a time (that input named), at most
    :data:`_MAX_TRIALS` sets in all."""
    first = {name: spec.trial_values()[0] for name, spec in declared.items()}
    trials: list[tuple[str | None, dict[str, InputValue]]] = [(None, first)]
    for name, spec in declared.items():
        trials += [(name, {**first, name: value}) for value in spec.trial_values()[1:]]
    return trials[:_MAX_TRIALS]


def undeclared_input(name: str, spec: ProfileSpec) -> str:
    """What is said of ``inputs.NAME`` read by a template or condition when the profile
    declares no such input."""
    hint = did_you_mean(name, spec.inputs)
    declared = ", ".join(spec.inputs) or "none"
    return (f'"inputs.{name}" is not a declared input{hint}; profile "{spec.name}" '
            f"declares {declared} (add [inputs.{name}] to declare it)")


def given_inputs(compile_input: PromptCompileInput) -> list[InputRecord] | None:
    """The manifest's record of the inputs given: each name and its value's sha256."""
    given = compile_input.inputs
    if not given:
        return None
    return [built(InputRecord, name=name, sha256=value_sha256(value))
            for name, value in sorted(given.items())]


def _load_error(problems: list[Problem], file: str) -> PioneerError:
    """The error for a profile's problems: a ``TemplateError`` when each is a template's."""
    error_type = TemplateError if all(p.context for p in problems) else ProfileError
    return error_type(problems, summary=problem_summary(problems, file))


def _lower(profile_value: int, override: int | None) -> int:
    return profile_value if override is None else min(profile_value, override)


def _clamped_limits(profile: LoadedProfile, compile_input: PromptCompileInput) -> list[Diagnostic]:
    """A ``limit_clamped`` diagnostic for each ``limits`` value above the profile's budget:
    a limit can only lower a budget (:func:`_lower`), so the budget applies instead."""
    limits, budgets = compile_input.limits, profile.spec.budgets
    return [
        Diagnostic(code="limit_clamped", message=f"limits.{name} = {asked} is above the "
                   f"{budget} of profile `{profile.spec.name}`, so it is clamped to {budget} "
                   "(a limit can only lower a budget)")
        for name, asked, budget in (
            ("max_chars_per_file", limits.max_chars_per_file, budgets.max_chars_per_file),
            ("max_chars_total", limits.max_chars_total, budgets.max_chars_total),
        )
        if asked is not None and asked > budget
    ]


def _ignored_inputs(plan: ProfilePlan, compile_input: PromptCompileInput) -> list[str]:
    """Input fields given a value (not the default, not blank) that no section reads, or
    whose value the compiler derives itself."""
    ignored: list[str] = []
    given = compile_input.__pydantic_fields_set__  # model_fields_set, without the property
    if given <= plan.unreported and given.isdisjoint(_DERIVED):  # most turns
        return ignored
    unread = (given - plan.unreported) | (given & _DERIVED)
    for name in sorted(unread):
        value = getattr(compile_input, name)
        default = PromptCompileInput.model_fields[name].get_default(call_default_factory=True)
        if value != default and not (isinstance(value, str) and not value.strip()):
            ignored.append(name)
    return ignored


def _history_texts(history: Iterable[str]) -> tuple[str, ...]:
    """The history texts as given; one string instead of a list is refused."""
    if isinstance(history, str):
        raise InputError(Problem(
            "expected the texts of the messages sent (a list of strings), got one string: "
            "wrap it in a list", path="history"))
    return tuple(history)


def _history_refs(history: Sequence[str]) -> int:
    """The artifact ref lines of the history texts; anything but texts is refused."""
    if isinstance(history, str):
        return _history_refs(_history_texts(history))
    for index, text in enumerate(history):
        if not isinstance(text, str):
            raise InputError(Problem(
                f"expected a message text, got {type(text).__name__} (pass its content)",
                path=f"history[{index}]"))
    return count_ref_lines(history)


def ignored_reason(name: str, profile: str) -> str:
    """Why the compile input ``name`` is ignored (an entry of ``ignored_inputs``)."""
    if name in _DERIVED:
        return ("the Artifact References policy follows the refs the prompt carries; pass "
                "the history messages sent with it as history=")
    return f"no section of profile `{profile}` reads it"


def _ignored_diagnostic(name: str, profile: str) -> Diagnostic:
    return Diagnostic(code="input_ignored",
                      message=f"input `{name}` is ignored: {ignored_reason(name, profile)}")


def as_compile_input(value: object) -> PromptCompileInput:
    """``value`` as a compile input: itself, or a mapping validated; else an InputError."""
    if isinstance(value, PromptCompileInput):
        return value
    if isinstance(value, Mapping):
        return parse_compile_input(value)
    raise InputError(Problem(
        f"expected a PromptCompileInput or a mapping of its fields, got {type(value).__name__}"
    ))


def pool_usage(
    profile: LoadedProfile, compile_input: PromptCompileInput
) -> dict[str, tuple[int, int]]:
    """What each contribution pool holds for this input: (sections, characters) kept,
    to set against the profile's ``runtime_pool`` and ``hook_pool`` budgets."""
    kept = _pools(profile, compile_input)[0]
    return {pool: (sum(1 for item in kept if item.pool == pool),
                   sum(len(item.content) for item in kept if item.pool == pool))
            for pool in ("runtime", "hook")}


def _paths(given: Sequence[str | os.PathLike[str]] | None, default: list[Path]) -> list[Path]:
    """A search path as folders: ``given`` (str or path-like items) else ``default``."""
    if isinstance(given, (str, os.PathLike)):
        raise InputError(Problem(
            f"expected a list of folders, got one path ({os.fspath(given)!r}): wrap it in a list"
        ))
    return [Path(folder) for folder in given] if given else list(default)


def _pools(
    profile: LoadedProfile, compile_input: PromptCompileInput
) -> tuple[list[Contribution], list[Diagnostic], list[Omission]]:
    """Budget the runtime pool then the hook pool; kept contributions in that order."""
    budgets = profile.spec.budgets
    known, max_chars, sort_key = (profile.contributions, budgets.contribution_max_chars,
                                  budgets.contribution_sort_key)
    runtime, runtime_diags, runtime_left = budget_pool(
        compile_input.runtime_sections, pool="runtime", spec=budgets.runtime_pool, known=known,
        default_max_chars=max_chars, default_sort_key=sort_key,
    )
    hooks, hook_diags, hook_left = budget_pool(
        compile_input.dynamic_sections, pool="hook", spec=budgets.hook_pool, known=known,
        default_max_chars=max_chars, default_sort_key=sort_key,
    )
    return [*runtime, *hooks], [*runtime_diags, *hook_diags], [*runtime_left, *hook_left]


class _Shifted:
    """A locator for a one-section profile whose section is ``index`` of the file."""

    def __init__(self, locator: Locator, index: int):
        self.locator, self.index = locator, index

    def _parts(self, parts: Sequence[str | int]) -> list[str | int]:
        return ["sections", self.index, *parts[2:]] if parts[:1] == ["sections"] else [*parts]

    def where(self, parts: Sequence[str | int]) -> tuple[str, int | None, str]:
        """(file, line, rendered path) for ``parts``."""
        return self.locator.where(self._parts(parts))

    def problem(self, parts: Sequence[str | int], message: str) -> Problem:
        """A problem located at ``parts``."""
        return self.locator.problem(self._parts(parts), message)


def compile_prompt(
    compile_input: PromptCompileInput | Mapping[str, Any], *,
    compiler: PromptCompiler | None = None, history: Iterable[str] | None = None,
) -> CompiledPromptPayload:
    """Deprecated (goes in the next release): ``PromptCompiler().compile(...)``, or a
    long-lived compiler's :meth:`PromptCompiler.compile`, which takes the same input and
    ``history``."""
    warnings.warn("pioneer.compile_prompt is deprecated and goes in the next release: call "
                  "PromptCompiler().compile(compile_input, history=...)",
                  DeprecationWarning, stacklevel=2)
    return (compiler or PromptCompiler()).compile(compile_input, history=history)
