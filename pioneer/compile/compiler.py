"""The interpreter: walk a profile's sections and assemble the compiled prompt.

``PromptCompiler`` loads each profile (TOML → extends → schema → structural rules →
templates and conditions) once and keeps the compiled templates for every later turn. ``compile``
is a straight chain: bootstrap files → contribution pools → for each declared section
(condition → source → render → budget → keep) → stable/dynamic/full text, fingerprints
and the manifest.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, contains
from pathlib import Path
from typing import Any, get_origin

from ..caches import ENTRY_OVERHEAD, CacheStats, LruCache, text_bytes
from ..errors import (
    InputError,
    PioneerError,
    Problem,
    ProfileError,
    TemplateError,
    did_you_mean,
)
from ..resources import builtin_dir
from ..settings import PioneerSettings
from ..text import utf8_text
from ..tokens import TokenCounter, default_counter
from .allowance import render_scope, text_size
from .bootstrap import BootstrapFile, BootstrapLoader, BootstrapResult
from .boundary import (
    BOUNDARY_MARKER,
    render_section,
    render_section_parts,
)
from .extends import ProfileSource, resolve_profile
from .fingerprint import profile_fingerprint, template_digests
from .ids import BUILT_IN_SECTION_IDS, RUNTIME_BUILT_IN_IDS
from .inputs import (
    DynamicSectionInput,
    PromptCompileInput,
    PromptLimits,
    RuntimeSectionInput,
    parse_compile_input,
)
from .manifest import (
    COMPILER_VERSION,
    CompiledPromptPayload,
    CompiledSection,
    Diagnostic,
    ManifestSection,
    Omission,
    OmissionReason,
    Placement,
    PromptManifest,
    built,
)
from .memo import ProfilePlan, Rendered, StablePart, freeze, plan_profile
from .pools import Contribution, budget_pool, omitted_diagnostic
from .profile import (
    ContributionSpec,
    Locator,
    ProfileSpec,
    SectionSpec,
    find_profile,
    list_profiles,
    problem_summary,
    structural_problems,
)
from .readonly import FrozenList
from .refs import REF_LINE_START, count_ref_lines
from .sandbox import evaluate, render_parts
from .templates import TemplateSet, build_environment, describe, display_name, render_problem

__all__ = [
    "LoadedProfile", "PromptCompiler", "as_compile_input", "compile_prompt", "ignored_reason",
    "pool_usage",
]

INPUT_FIELDS: frozenset[str] = frozenset(PromptCompileInput.model_fields)
#: The compile-input fields that hold a list (templates see them as read-only views).
_LIST_FIELDS = tuple(name for name, field in PromptCompileInput.model_fields.items()
                     if get_origin(field.annotation) is list)
_BASE_NAMES = INPUT_FIELDS | {"profile", "section"}
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
CONDITION_NAMES = _CONDITION_NAMES = INPUT_FIELDS | {"profile"}
#: Input fields the interpreter itself consumes, whatever the profile's sections read.
_CONSUMED = frozenset({"workspace_root", "profile", "runtime_sections", "dynamic_sections",
                       "limits"})
#: Sections whose rendered refs count towards the Artifact References policy (by source).
_REF_SOURCES = ("runtime:", "hook:", "input:")
#: Input texts searched for artifact reference lines (besides the contributions).
_REF_TEXT_FIELDS = ("skills_prompt", "retry_instruction", "dynamic_context", "extra_system")
#: Input fields the compiler never takes as given: it derives their value from what the
#: prompt carries (the artifact refs), so a value passed in is reported as ignored.
_DERIVED = frozenset({"artifact_ref_count"})
_MARKER_BYTES = BOUNDARY_MARKER.encode("utf-8")
#: Fields of a Rendered, for the maps over a turn's sections.
_REFS, _ID = attrgetter("refs"), attrgetter("id")
_SECTION, _RECORD, _DATA = attrgetter("section"), attrgetter("record"), attrgetter("data")
_TEXT, _DIAGNOSTIC, _OMISSION = (attrgetter("section.text"), attrgetter("diagnostic"),
                                 attrgetter("omission"))
_SEPARATOR = "\n\n"
_CR = repeat("\r")  # for ``map(contains, parts, _CR)``: a part holds a carriage return
_SEPARATOR_BYTES = b"\n\n"  # between rendered sections (boundary.render_sections)
#: Bytes counted for one section's two records (its payload entry and manifest record,
#: with their sha256 texts) on top of its text (docs/speed.md, "Caches").
SECTION_OVERHEAD = 1024
#: A placement's fields (id, pool, index, the section that placed it, chars, cut).
PlacementKey = tuple[str, str, int, "str | None", int, bool]
#: A contribution a section met and left out (its placement says nowhere).
_MET = object()


@dataclass(frozen=True, slots=True)
class LoadedProfile:
    """A validated profile with its templates compiled, ready to interpret."""

    spec: ProfileSpec
    file: str
    fingerprint: str
    bootstrap_files: tuple[tuple[str, bool], ...]
    claimed: frozenset[str]
    #: The resolved profile's files (the extends chain) and where each value was written.
    source: ProfileSource
    #: sha256 by name of every template the profile uses (includes and imports too).
    templates: Mapping[str, str]
    #: The profile's contribution specs by id (what ``[[contributions]]`` declares).
    contributions: Mapping[str, ContributionSpec]

    @property
    def known_ids(self) -> frozenset[str]:
        """Contribution ids the profile knows: claimed, declared or built in."""
        return self.claimed | frozenset(self.contributions) | BUILT_IN_SECTION_IDS | (
            RUNTIME_BUILT_IN_IDS)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """What ``check`` warns about in the profile's files (they never fail a compile)."""
        return self.source.locator.warnings

    def template_origin(self, name: str, env: Any) -> tuple[str, bool]:
        """Where template ``name`` is read from, as messages name it, and whether that is
        a deployment folder (not the built-in templates)."""
        try:
            filename = env.loader.get_source(env, name)[1]
        except Exception:  # not found or unreadable: the load already said so
            return name, False
        if Path(filename).resolve().is_relative_to(builtin_dir("templates")):
            return display_name(filename), False
        relative = os.path.relpath(filename)  # as the user would write it, when it can be
        return (filename if relative.startswith("..") else relative), True

    def placed_by_slot(self, record: ManifestSection) -> bool:
        """Whether a kept section is a contribution the slot placed (no section of its own)."""
        return record.source.startswith(("runtime:", "hook:")) and record.id not in self.claimed


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
        self.templates = TemplateSet(build_environment(self.template_path))
        self._counter = token_counter
        self._count_tokens = count_tokens
        self._profiles: dict[str, LoadedProfile] = {}
        # Every cache is byte-bounded and least recently used, its budget a setting
        # (docs/speed.md, "Caches").
        self._id_hints: LruCache[tuple[str, str], str] = LruCache(
            "contribution_hints", settings.hint_cache_bytes)
        self._bootstrap_loader = BootstrapLoader(settings.bootstrap_cache_bytes,
                                                 settings.file_cache_bytes)
        self._plans: dict[str, ProfilePlan] = {}
        self._stable_memo: LruCache[tuple[object, ...], StablePart] = LruCache(
            "stable_parts", settings.stable_cache_bytes)
        self._section_memo: LruCache[tuple[object, ...], Rendered] = LruCache(
            "sections", settings.section_cache_bytes)
        self._conditions: LruCache[tuple[object, ...], bool] = LruCache(
            "conditions", settings.condition_cache_bytes)
        # A turn's placements are mostly last turn's: a frozen record is reused by value
        # rather than validated again (ten of them were a tenth of a warm turn).
        self._placements: LruCache[PlacementKey, Placement] = LruCache(
            "placements", settings.placement_cache_bytes)
        if count_tokens and token_counter is None:
            self._counter = default_counter(settings.token_cache_bytes)

    def cache_stats(self) -> list[CacheStats]:
        """Each of the compiler's caches: name, entries, bytes, budget, hits, misses,
        evictions and hit rate (docs/speed.md, "Caches"); the token counter's too when
        the compiler counts tokens."""
        loader = self._bootstrap_loader
        caches: list[LruCache[Any, Any]] = [
            self._stable_memo, self._section_memo, loader.cache, loader.reader.cache,
            self._conditions, self._placements, self._id_hints]
        counter_cache = getattr(self._counter, "cache", None)
        if isinstance(counter_cache, LruCache):
            caches.append(counter_cache)
        return [cache.stats() for cache in caches]

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
            one = ProfileSpec.model_construct(name="", sections=[dropped.section])
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
            if section.when is not None:
                for problem in self.templates.check_condition(
                    section.when, _CONDITION_NAMES,
                    locate=functools.partial(where.where, ["sections", index, "when"]),
                ):
                    found = True
                    yield problem
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
        renderer = _TrialRenderer(
            self.templates, representative_input(profile.spec.name), profile,
            self._plan(profile), BootstrapResult(files, (), ()), [], [],
            memo=LruCache("trial", 0), conditions=LruCache("trial", 0), counter=None,
            placements=LruCache("trial", 0),
        )
        problems: list[Problem] = []
        for section in profile.spec.sections:
            try:
                renderer.visit(section, [])
            except TemplateError as error:
                problems += error.problems
        return problems

    # -- compiling -------------------------------------------------------------

    def compile(
        self, compile_input: PromptCompileInput | Mapping[str, Any], *,
        history: Iterable[str] | None = None,
    ) -> CompiledPromptPayload:
        """Compile one turn's prompt; sections whose inputs did not change are reused.

        ``compile_input`` may also be a mapping of its fields, validated as
        :func:`~pioneer.compile.inputs.parse_compile_input` does (an
        :class:`~pioneer.errors.InputError` listing every problem). ``history`` is the
        text of the messages sent with the prompt: their artifact refs count, with those
        of the sections, towards the Artifact References policy.
        """
        if not isinstance(compile_input, PromptCompileInput):
            compile_input = as_compile_input(compile_input)
        profile = self.load_profile(compile_input.profile)
        plan = self._plan(profile)
        boot = self._bootstrap(profile, compile_input)
        contributions, pool_diagnostics, pool_omissions = _pools(profile, compile_input)
        renderer = _SectionRenderer(
            self.templates, compile_input, profile, plan, boot, contributions, pool_omissions,
            history_refs=_history_refs(history) if history is not None else 0,
            memo=self._section_memo,
            conditions=self._conditions,
            counter=(self._counter or default_counter()) if self._count_tokens else None,
            placements=self._placements,
        )
        # Only a contribution no section claims can carry an unknown id.
        pool_diagnostics += self._unknown_contributions(profile, renderer.unclaimed)
        stable = self._stable_part(profile, plan, renderer)
        dynamic = renderer.render_dynamic(plan.dynamic, stable.refs)
        if renderer.met != len(contributions):  # some contribution no section met
            dynamic += renderer.unplaced()
        ignored = _ignored_inputs(plan, compile_input)
        # The dynamic sections' diagnostics and omissions join these in _assemble's pass.
        diagnostics = [*_clamped_limits(profile, compile_input), *boot.diagnostics,
                       *pool_diagnostics, *stable.diagnostics]
        omissions = [*pool_omissions, *stable.omissions]
        return self._assemble(profile, stable, dynamic, boot, diagnostics, omissions,
                              renderer.placements(), ignored)

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
            # Searched once per profile and id (never cleared wholesale: the cache is
            # least recently used).
            key = (profile.fingerprint, item.id)
            hint = self._id_hints.get(key)
            if hint is None:
                if known_ids is None:
                    known_ids = profile.known_ids
                hint = did_you_mean(item.id, known_ids, cutoff=0.85)
                self._id_hints.put(key, hint, ENTRY_OVERHEAD + text_bytes((item.id, hint)))
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
        return self._bootstrap_loader.load(
            compile_input.workspace_root or self.settings.home,
            profile.bootstrap_files,
            max_chars_per_file=_lower(budgets.max_chars_per_file, limits.max_chars_per_file),
            max_chars_total=_lower(budgets.max_chars_total, limits.max_chars_total),
        )

    def _stable_part(
        self, profile: LoadedProfile, plan: ProfilePlan, renderer: _SectionRenderer
    ) -> StablePart:
        """The stable sections, their text and its sha256: from the memo when nothing
        any stable section reads has changed since a compile that rendered them."""
        key = renderer.stable_key()
        if key is not None:
            found = self._stable_memo.get(key)
            if found is not None:
                return found
        rendered = renderer.render(plan.stable)
        kept = [r for r in rendered if r.section is not None]
        digest = self._stable_digest(kept)
        part = StablePart(
            # render_sections, without its test for empty texts: a kept section has text.
            _SEPARATOR.join(map(_TEXT, kept)), digest, digest.hexdigest(),
            tuple(r.diagnostic for r in rendered if r.diagnostic),
            tuple(map(_SECTION, kept)),
            tuple(map(_RECORD, kept)),
            tuple(r.omission for r in rendered if r.omission),
            sum(map(_REFS, rendered)),
        )
        if key is not None:
            self._stable_memo.put(key, part, _stable_bytes(part))
        return part

    @staticmethod
    def _stable_digest(kept: list[Rendered]) -> hashlib._Hash:
        """sha256 of the stable text, kept open so the full fingerprint can continue it."""
        digest = hashlib.sha256()
        for index, rendered in enumerate(kept):
            if index:
                digest.update(_SEPARATOR_BYTES)
            digest.update(rendered.data)
        return digest

    def _assemble(
        self,
        profile: LoadedProfile,
        stable: StablePart,
        dynamic: list[Rendered],
        boot: BootstrapResult,
        diagnostics: list[Diagnostic],
        omissions: list[Omission],
        placements: list[Placement],
        ignored: list[str],
    ) -> CompiledPromptPayload:
        """The payload; ``diagnostics`` and ``omissions`` (those met before the dynamic
        sections) get the dynamic sections' own appended, in the same pass."""
        # A rendered section has its record, text and UTF-8; their lists are made by
        # C-level maps over the kept ones (these run on every turn).
        kept = [r for r in dynamic if r.section is not None]
        sections = [*stable.sections, *map(_SECTION, kept)]
        records = [*stable.records, *map(_RECORD, kept)]
        if any(map(_DIAGNOSTIC, dynamic)):
            diagnostics += [r.diagnostic for r in dynamic if r.diagnostic is not None]
        if any(map(_OMISSION, dynamic)):
            omissions += [r.omission for r in dynamic if r.omission is not None]
        if ignored:
            diagnostics += [_ignored_diagnostic(name, profile.spec.name) for name in ignored]
        # render_sections, without its test for empty texts: a kept section has text.
        dynamic_text = _SEPARATOR.join(map(_TEXT, kept))
        dynamic_bytes = _SEPARATOR_BYTES.join(map(_DATA, kept))
        # The full text is the stable text, then the marker and the dynamic text when
        # there is any (join_full_text), so its hash continues the stable one; the payload
        # joins the text itself only when it is read.
        full_hash = stable.digest.copy()
        if dynamic_text:
            full_hash.update(_MARKER_BYTES)
            full_hash.update(dynamic_bytes)
        manifest = built(
            PromptManifest,
            compiler_version=COMPILER_VERSION,
            profile=profile.spec.name,
            profile_fingerprint=profile.fingerprint,
            section_ids=list(map(_ID, records)),
            sections=records,
            fingerprint_stable=stable.fingerprint,
            fingerprint_dynamic=hashlib.sha256(dynamic_bytes).hexdigest(),
            fingerprint_full=full_hash.hexdigest(),
            source_manifest=list(boot.source_manifest),
            diagnostics=diagnostics,
            omitted=omissions,
            placements=placements,
            ignored_inputs=ignored,
        )
        return built(
            CompiledPromptPayload,
            stable_system_text=stable.text,
            dynamic_system_text=dynamic_text,
            boundary_marker=BOUNDARY_MARKER,
            sections=sections,
            manifest=manifest,
        )


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


def _history_refs(history: Iterable[str]) -> int:
    """The artifact ref lines of the history texts; anything but texts is refused."""
    if isinstance(history, str):
        raise InputError(Problem(
            "expected the texts of the messages sent (a list of strings), got one string: "
            "wrap it in a list", path="history"))
    texts = list(history)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(Problem(
                f"expected a message text, got {type(text).__name__} (pass its content)",
                path=f"history[{index}]"))
    return count_ref_lines(texts)


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


class _SectionRenderer:
    """Renders one turn's declared sections, reusing those whose reads are unchanged.

    A section's key is the profile fingerprint, the section and the frozen values of
    every context name its template reads; the memo shared by all turns is checked, and
    only a miss renders. A ``when`` condition's result is kept the same way, keyed on
    the condition and the values it reads (``conditions``).
    """

    __slots__ = (
        "at", "base", "boot", "conditions", "content_only", "contributions", "counter",
        "fingerprint", "history_refs", "input", "known_placements", "locator", "memo", "met",
        "placed", "placed_count", "plan", "pool_left", "profile_name", "refs_first",
        "sections", "templates", "unclaimed",
    )

    def __init__(
        self,
        templates: TemplateSet,
        compile_input: PromptCompileInput,
        profile: LoadedProfile,
        plan: ProfilePlan,
        boot: BootstrapResult,
        contributions: list[Contribution],
        pool_omissions: list[Omission],
        *,
        history_refs: int = 0,
        memo: LruCache[tuple[object, ...], Rendered],
        conditions: LruCache[tuple[object, ...], bool],
        counter: TokenCounter | None,
        placements: LruCache[PlacementKey, Placement],
    ):
        self.templates = templates
        # A pydantic model keeps its field values in ``__dict__``: one C-level copy. The
        # templates and conditions that read a list see a read-only view of it, never the
        # caller's own; its items are frozen models of plain values (a test holds the
        # input schema to that), so a shallow view is read-only all the way down.
        self.base: dict[str, Any] = dict(compile_input.__dict__)
        read = plan.read_names
        for name in _LIST_FIELDS:
            if name in read and type(value := self.base[name]) is list:
                self.base[name] = FrozenList(value)
        self.base["profile"] = profile.spec.name
        # Where each contribution goes: its own declared section, else the slot.
        self.placed: dict[str, list[Contribution]] = {}
        self.unclaimed: list[Contribution] = []
        claimed = profile.claimed
        for item in contributions:
            if item.id in claimed:
                self.placed.setdefault(item.id, []).append(item)
            else:
                self.unclaimed.append(item)
        # The Artifact References policy follows the refs the request carries: those of
        # the history sent with it and those in the kept contribution and input sections.
        # A count the caller passed is not taken (it is reported as ignored). Each section
        # counts its refs when it is rendered, so a section that reads the count waits
        # until the others are placed (``render``); only when a stable one reads it are
        # the texts searched first, as they come in.
        self.history_refs = history_refs
        self.refs_first = plan.stable_reads_refs
        carried = history_refs
        if self.refs_first:
            carried += count_ref_lines(item.content for item in contributions)
            carried += count_ref_lines(
                value for name in _REF_TEXT_FIELDS if isinstance(value := self.base[name], str)
            )
        self.base["artifact_ref_count"] = carried
        self.input = compile_input
        self.profile_name = profile.spec.name
        self.fingerprint = profile.fingerprint
        self.locator = profile.source.locator
        self.sections = profile.spec.sections
        self.plan = plan
        self.boot = boot
        self.contributions = contributions
        #: The pool's reason for each contribution id it left out (the first one met).
        self.pool_left: dict[str, Omission] = {}
        for omission in pool_omissions:
            self.pool_left.setdefault(omission.id, omission)
        #: Per pool, by input position: the placement of each contribution a section
        #: placed, ``_MET`` for one a section met and left out, ``None`` for the rest.
        self.at: dict[str, list[Placement | object | None]] = {
            "runtime": [None] * len(compile_input.runtime_sections),
            "hook": [None] * len(compile_input.dynamic_sections),
        }
        self.met = 0  # contributions a section met, placed or left out
        self.placed_count = 0  # contributions a section placed
        self.known_placements = placements
        self.memo = memo
        self.content_only = plan.content_only
        self.conditions = conditions
        self.counter = counter

    def stable_key(self) -> tuple[object, ...] | None:
        """Everything the stable sections read this turn; ``None`` when not hashable."""
        plan = self.plan
        try:
            return (
                self.fingerprint,
                tuple(map(freeze, map(self.base.__getitem__, plan.stable_names))),
                tuple(map(self.boot.files.get, plan.stable_files)),
                # Why a file's section is left out (missing, empty, cut by the budget)
                # is part of the stable part's record.
                self.boot.diagnostics,
            )
        except TypeError:
            return None

    def render(self, sections: Sequence[SectionSpec]) -> list[Rendered]:
        """Every section's emissions, in declared order."""
        out: list[Rendered] = []
        for section in sections:
            self.visit(section, out)
        return out

    def render_dynamic(self, sections: Sequence[SectionSpec], stable_refs: int) -> list[Rendered]:
        """:meth:`render` for the dynamic sections: those that read ``artifact_ref_count``
        are rendered last, once the refs of the others (and of the stable part, and of
        the history) are counted, and their emissions take their declared places."""
        if self.refs_first:
            return self.render(sections)
        readers = self.plan.ref_readers
        out: list[Rendered] = []
        waiting: list[tuple[int, SectionSpec]] = []
        for section in sections:
            if section.id in readers:
                waiting.append((len(out), section))
            else:
                self.visit(section, out)
        if waiting:
            self.base["artifact_ref_count"] = (
                self.history_refs + stable_refs + sum(map(_REFS, out)))
            for at, section in reversed(waiting):  # the last first: earlier places hold
                emitted: list[Rendered] = []
                self.visit(section, emitted)
                out[at:at] = emitted
        return out

    def visit(self, section: SectionSpec, out: list[Rendered]) -> None:
        """Condition → source → render (or reuse) for one declared section; a section
        that emits nothing records why."""
        if section.when is not None and not self._condition(section):
            detail = f'condition "{section.when}" is false'
            out.append(_left_out(section.id, "condition_false", detail))
            if section.source in ("contribution", "slot"):
                for item in self._items(section):
                    self._met(item)
                    out.append(_item_left_out(
                        item, "condition_false", f"section `{section.id}` is left out: {detail}"
                    ))
            return
        match section.source:  # in the order of how many sections of each kind a turn meets
            case "contribution" | "slot":
                self._contributions(section, out)
            case "text":
                rendered = self._emit(section, section.id, section.title, {}, "builtin", False)
                out.append(rendered)  # _keep, inline
                if rendered.section is None:
                    out.append(_left_out(section.id, "rendered_empty", "rendered empty"))
            case "bootstrap":
                found = self.boot.files.get(section.file or "")
                if found is None:
                    out.append(_left_out(section.id, *self._why_no_file(section)))
                    return
                extra = {"file": found, "reminder": section.reminder}
                self._keep(section, out, self._emit(
                    section, section.id, section.title, extra, f"file:{found.name}",
                    found.truncated))
            case "input":
                value = self.base.get(section.field or "")
                if value is None or (isinstance(value, str) and not value.strip()):
                    out.append(_left_out(section.id, "input_empty",
                                         f"input {section.field} is empty"))
                    return
                content = value.strip() if isinstance(value, str) else value
                rendered = self._emit_content(section, section.id, section.title, content,
                                              f"input:{section.field}", False)
                out.append(rendered)  # _keep, inline: four or more of these each turn
                if rendered.section is None:
                    out.append(_left_out(section.id, "rendered_empty", "rendered empty"))

    def _items(self, section: SectionSpec) -> Sequence[Contribution]:
        if section.source == "contribution":
            return self.placed.get(section.id, ())
        return self.unclaimed

    def _contributions(self, section: SectionSpec, out: list[Rendered]) -> None:
        items = (self.placed.get(section.id, ()) if section.source == "contribution"
                 else self.unclaimed)  # _items, inline
        refused = section.refuse
        taken = 0
        at = self.at
        fast = section.id in self.content_only
        fingerprint, section_id = self.fingerprint, section.id
        for item in items:
            if refused and item.id in refused:
                self._met(item)
                detail = f"refused by section `{section.id}` of profile `{self.profile_name}`"
                out.append(_item_left_out(item, "refused", detail, diagnostic=True))
                continue
            # Everything the render depends on (its source is pool and id), for a
            # template that reads only ``content``: the key _key would build.
            memo_key: tuple[object, ...] | None = (
                (fingerprint, section_id, item.id, item.title, item.pool, item.truncated,
                 (item.content,)) if fast else None)
            rendered = self._emit(section, item.id, item.title, {"content": item.content},
                                  f"{item.pool}:{item.id}", item.truncated, memo_key)
            out.append(rendered)
            if rendered.section is None:
                self._met(item)
                out.append(_item_left_out(item, "rendered_empty", "rendered empty"))
                continue
            taken += 1
            chars = len(item.content)
            cut = item.original_chars > chars or (
                rendered.diagnostic is not None and rendered.diagnostic.code == "section_truncated"
            )
            key = (item.id, item.pool, item.position, section.id, chars, cut)
            at[item.pool][item.position] = self._placement(key)
        if taken:
            self.met += taken
            self.placed_count += taken
            return
        if section.source == "slot":
            out.append(_left_out(section.id, "no_contribution", "no other contributions"))
            return
        dropped = self.pool_left.get(section.id)
        if dropped is not None:
            out.append(_left_out(section.id, dropped.reason, dropped.detail))
        elif items:
            out.append(_left_out(section.id, "rendered_empty", "rendered empty"))
        else:
            out.append(_left_out(section.id, "no_contribution", "no contribution with this id"))

    def _met(self, item: Contribution) -> None:
        """``item`` was met by a section and left out: its placement says nowhere."""
        self.met += 1
        self.at[item.pool][item.position] = _MET

    def _placement(self, key: PlacementKey) -> Placement:
        """The placement record with these fields, reused when an earlier turn made it."""
        known = self.known_placements
        found = known.get(key)
        if found is None:
            found = built(Placement, id=key[0], pool=key[1], index=key[2], section=key[3],
                          chars=key[4], cut=key[5])
            known.put(key, found, ENTRY_OVERHEAD + SECTION_OVERHEAD + text_bytes(
                (key[0], key[3] or "")))
        return found

    def _keep(self, section: SectionSpec, out: list[Rendered], rendered: Rendered) -> None:
        out.append(rendered)
        if rendered.section is None:
            out.append(_left_out(section.id, "rendered_empty", "rendered empty"))

    def _why_no_file(self, section: SectionSpec) -> tuple[OmissionReason, str]:
        name = section.file or ""
        entry = next((e for e in self.boot.source_manifest if e.file == name), None)
        if entry is None:
            return "file_missing", f"{name} was not loaded"
        notes = [d for d in self.boot.diagnostics if d.file == entry.path]
        if any(d.code == "missing_file" for d in notes):
            return "file_missing", f"{name} is missing"
        if notes:
            last = notes[-1]
            return ("file_missing" if last.code == "file_read_error" else "budget"), last.message
        if section.keep_empty:  # an empty file it keeps is only dropped by a spent budget
            return "budget", f"{name} is empty and the total budget was already used up"
        return "file_empty", f"{name} is empty"

    def unplaced(self) -> list[Rendered]:
        """Kept contributions no section met (the profile has no slot for them)."""
        if self.met == len(self.contributions):  # each met once: none is left
            return []
        return [
            _item_left_out(item, "unplaced",
                           f"no section of profile `{self.profile_name}` places this id",
                           diagnostic=True)
            for item in self.contributions if self.at[item.pool][item.position] is None
        ]

    def placements(self) -> list[Placement]:
        """Every input contribution, runtime pool then hook pool, and where it went."""
        runtime, hook = self.at["runtime"], self.at["hook"]
        if self.placed_count == len(runtime) + len(hook):  # each input placed: as recorded
            return [*runtime, *hook]  # type: ignore[list-item]
        out: list[Placement] = []
        for pool, inputs in (("runtime", self.input.runtime_sections),
                             ("hook", self.input.dynamic_sections)):
            for index, found in enumerate(self.at[pool]):
                if found is None or found is _MET:
                    item = inputs[index]
                    found = self._placement(
                        (item.id, pool, index, None, 0, bool(item.content.strip())))
                out.append(found)  # type: ignore[arg-type]
        return out

    def _condition(self, section: SectionSpec) -> bool:
        when = section.when or ""
        try:
            names = self.plan.condition_reads[section.id]
            key: tuple[object, ...] | None = (
                when, tuple(freeze(self.base[name]) for name in names if name in self.base)
            )
        except TypeError:
            key = None
        found = self.conditions.get(key) if key is not None else None
        if found is not None:
            return found
        expression = self.templates.condition(when)
        try:
            with render_scope(lambda: text_size(self.base.values())):
                result = bool(evaluate(expression, self.base))
        except Exception as error:  # the sandbox's refusals and any runtime error alike
            raise TemplateError(self.locator.problem(
                ["sections", self._index(section), "when"],
                f"condition failed: {describe(error)}",
            )) from None
        if key is not None:
            self.conditions.put(key, result, _condition_bytes(key))
        return result

    def _index(self, section: SectionSpec) -> int:
        return next(i for i, s in enumerate(self.sections) if s is section)

    def _emit_content(
        self,
        section: SectionSpec,
        section_id: str,
        title: str,
        content: Any,
        source: str,
        truncated: bool,
    ) -> Rendered:
        """:meth:`_emit` with ``{"content": content}``; for a template that reads only
        ``content`` (most do) with the key :meth:`_key` would build, made here in one
        step: ten or more sections take this path on every turn."""
        key = None
        if type(content) is str and section.id in self.content_only:
            key = (self.fingerprint, section.id, section_id, title, source, truncated,
                   (content,))
        return self._emit(section, section_id, title, {"content": content}, source, truncated,
                          key)

    def _emit(
        self,
        section: SectionSpec,
        section_id: str,
        title: str,
        extra: dict[str, Any],
        source: str,
        truncated: bool,
        key: tuple[object, ...] | None = None,
    ) -> Rendered:
        """The section rendered, or reused from the memo (``key``: the one :meth:`_key`
        gives, when the caller has made it)."""
        if key is None:
            key = self._key(section, section_id, title, extra, source, truncated)
        if key is None:
            return self._render(section, section_id, title, extra, source, truncated)
        found = self.memo.get(key)
        if found is None:
            found = self._render(section, section_id, title, extra, source, truncated)
            self.memo.put(key, found, _rendered_bytes(found))
        return found

    def _key(
        self,
        section: SectionSpec,
        section_id: str,
        title: str,
        extra: dict[str, Any],
        source: str,
        truncated: bool,
    ) -> tuple[object, ...] | None:
        names = self.plan.reads[section.id]
        if names is None:
            names = tuple(sorted({*self.base, *extra}))
        # ``section`` is (section_id, title), already in the key; any other name is an
        # environment global, the same on every turn.
        base = self.base
        values: list[Hashable] = []
        try:
            for name in names:
                if name in extra:
                    value = extra[name]
                elif name in base:
                    value = base[name]
                else:
                    continue
                values.append(value if type(value) is str else freeze(value))
        except TypeError:
            return None
        return (self.fingerprint, section.id, section_id, title, source, truncated,
                tuple(values))

    def _render(
        self,
        section: SectionSpec,
        section_id: str,
        title: str,
        extra: dict[str, Any],
        source: str,
        truncated: bool,
    ) -> Rendered:
        template = self.templates.template(section.template)
        names = {"id": section_id, "title": title}
        # The template is handed the names it reads (the memo keys on the same names);
        # every name, when those cannot be known. Its allowance grows with that text,
        # measured only if the render gets that far.
        reads = self.plan.reads[section.id]
        if reads is None:
            context = {**self.base, "section": names, **extra}
        else:
            base = self.base
            context = {"section": names}
            for name in reads:
                if name in extra:
                    context[name] = extra[name]
                elif name in base:
                    context[name] = base[name]
        # A template that only prints one name (``{{ content }}``, most sections) gives
        # a plain string between its fixed text: it is not run (templates.pass_through).
        pieces = self.templates.pass_through.get(section.template)
        if pieces is not None and type(value := context.get(pieces[1])) is str:
            parts = [pieces[0], value, pieces[2]]
        else:
            try:
                parts = render_parts(template, context,
                                     given=lambda: text_size(context.values()))
            except Exception as error:  # template code is untrusted: any failure is its error
                raise TemplateError(render_problem(
                    error, context=f'while rendering section "{section_id}"',
                    template=template)) from None
        diagnostic = None
        if section.max_chars is None and not any(map(contains, parts, _CR)):
            text = render_section_parts(title, parts)  # the common case: one copy
        else:
            body = "".join(parts)
            if "\r" in body:
                body = body.replace("\r\n", "\n").replace("\r", "\n")
            body = body.strip()
            if section.max_chars is not None and len(body) > section.max_chars:
                diagnostic = Diagnostic(
                    code="section_truncated",
                    message=f"section `{section_id}` truncated by profile limit: "
                    f"{len(body)} -> {section.max_chars} chars",
                    section_id=section_id,
                )
                body = body[: section.max_chars].rstrip()
                truncated = True
            text = render_section(title, body)
        if not text:
            return Rendered(None, None, diagnostic)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a path with undecodable bytes, shown by a template
            text = utf8_text(text)
            data = text.encode("utf-8")
        fingerprint = hashlib.sha256(data).hexdigest()
        compiled = built(
            CompiledSection, id=section_id, title=' '.join(title.split()),
            stability=section.stability, text=text, chars=len(text), fingerprint=fingerprint,
            source=source, truncated=truncated,
        )
        record = built(
            ManifestSection, id=section_id, stability=section.stability, chars=len(text),
            tokens=self.counter.count(text) if self.counter else None,
            sha256=fingerprint, source=source, truncated=truncated,
        )
        # The refs this section carries into the prompt: counted for what came in (a
        # contribution or an input), never for the profile's own text or a file.
        refs = (count_ref_lines((text,))
                if source.startswith(_REF_SOURCES) and REF_LINE_START in text else 0)
        return Rendered(compiled, record, diagnostic, data, None, refs)


def _rendered_bytes(rendered: Rendered) -> int:
    """The size estimate of a kept section: its text twice (the text and the input it was
    rendered from, in the key), its UTF-8, its records and the overhead."""
    section = rendered.section
    return ENTRY_OVERHEAD + SECTION_OVERHEAD + (
        2 * text_bytes((section.text,)) + text_bytes((rendered.data,)) if section else 0)


def _condition_bytes(key: tuple[object, ...]) -> int:
    """The size estimate of a condition's result: the condition and the texts it read."""
    when, values = key
    return ENTRY_OVERHEAD + text_bytes((str(when),)) + text_bytes(
        value for value in values if isinstance(value, str))  # type: ignore[attr-defined]


def _stable_bytes(part: StablePart) -> int:
    """The size estimate of a stable part: its text, each section's text and records,
    and the overhead."""
    return (ENTRY_OVERHEAD + text_bytes((part.text,))
            + len(part.sections) * SECTION_OVERHEAD + text_bytes(s.text for s in part.sections))


def _left_out(section_id: str, reason: OmissionReason, detail: str) -> Rendered:
    return Rendered(None, None, None, omission=built(Omission, id=section_id,
                                                        reason=reason, detail=detail))


def _item_left_out(
    item: Contribution, reason: OmissionReason, detail: str, *, diagnostic: bool = False
) -> Rendered:
    """A contribution left out after its pool kept it (with a diagnostic when asked)."""
    return Rendered(
        None, None, omitted_diagnostic(item.id, detail) if diagnostic else None,
        omission=built(Omission, id=item.id, reason=reason, detail=detail, pool=item.pool,
                       index=item.position),
    )


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


class _TrialRenderer(_SectionRenderer):
    """Renders every section once, whatever its condition says (the condition is still
    evaluated, so its errors surface), with a value of the right kind for each source."""

    def visit(self, section: SectionSpec, out: list[Rendered]) -> None:
        if section.when is not None:
            self._condition(section)
        extra: dict[str, Any] = {}
        match section.source:
            case "bootstrap":
                extra = {"file": self.boot.files.get(section.file or ""),
                         "reminder": section.reminder}
            case "input":
                extra = {"content": getattr(self.input, section.field or "", "text")}
            case "contribution" | "slot":
                extra = {"content": "text"}
        self._render(section, section.id, section.title, extra, "trial", False)


def representative_input(profile: str) -> PromptCompileInput:
    """A compile input with every field present, each a value of its type."""
    return PromptCompileInput(
        workspace_root=Path("workspace"), profile=profile, skills_prompt="text",
        retry_instruction="text", include_tool_recovery_policy=True,
        include_task_orchestration_policy=True, continue_generation_hint=True,
        runtime_sections=[RuntimeSectionInput(id="runtime_trial", title="Runtime",
                                              content="text")],
        dynamic_sections=[DynamicSectionInput(id="hook_trial", title="Hook", content="text")],
        artifact_ref_count=1, dynamic_context="text", extra_system="text",
        limits=PromptLimits(max_chars_per_file=20_000, max_chars_total=150_000),
    )


def compile_prompt(
    compile_input: PromptCompileInput | Mapping[str, Any], *,
    compiler: PromptCompiler | None = None, history: Iterable[str] | None = None,
) -> CompiledPromptPayload:
    """Compile one prompt; pass a long-lived ``compiler`` to reuse loaded profiles, and
    the ``history`` texts sent with it as :meth:`PromptCompiler.compile` takes them."""
    return (compiler or PromptCompiler()).compile(compile_input, history=history)
