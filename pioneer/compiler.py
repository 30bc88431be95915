"""The interpreter: walk a profile's sections and assemble the compiled prompt.

``PromptCompiler`` loads each profile (TOML → extends → schema → structural rules →
templates and conditions) once and keeps the compiled templates for every later turn. ``compile``
is a straight chain: bootstrap files → contribution pools → for each declared section
(condition → source → render → budget → keep) → stable/dynamic/full text, fingerprints
and the manifest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from .bootstrap import BootstrapResult, FileReader, load_bootstrap
from .boundary import BOUNDARY_MARKER, join_full_text, render_section, render_sections
from .contributions import Contribution, budget_pool
from .errors import PioneerError, Problem, ProfileError, TemplateError
from .extends import ProfileSource, resolve_profile
from .fingerprint import profile_fingerprint, template_digests
from .inputs import PromptCompileInput
from .manifest import (
    COMPILER_VERSION,
    CompiledPromptPayload,
    CompiledSection,
    Diagnostic,
    ManifestSection,
    PromptManifest,
)
from .profile import (
    Locator,
    ProfileSpec,
    SectionSpec,
    find_profile,
    list_profiles,
    problem_summary,
    structural_problems,
)
from .settings import PioneerSettings
from .templates import TemplateSet, build_environment
from .tokens import TokenCounter, default_counter

__all__ = ["LoadedProfile", "PromptCompiler", "compile_prompt"]

INPUT_FIELDS: frozenset[str] = frozenset(PromptCompileInput.model_fields)
_BASE_NAMES = INPUT_FIELDS | {"profile", "section"}
#: Names each kind of section's template may use beyond the compile input.
PROVIDED_NAMES: dict[str, frozenset[str]] = {
    "text": _BASE_NAMES,
    "bootstrap": _BASE_NAMES | {"file", "reminder"},
    "input": _BASE_NAMES | {"content"},
    "contribution": _BASE_NAMES | {"content"},
    "slot": _BASE_NAMES | {"content"},
}
_CONDITION_NAMES = INPUT_FIELDS | {"profile"}


@dataclass(frozen=True, slots=True)
class LoadedProfile:
    """A validated profile with its templates compiled, ready to interpret."""

    spec: ProfileSpec
    file: str
    fingerprint: str
    bootstrap_files: tuple[tuple[str, bool], ...]
    claimed: frozenset[str]
    #: The resolved profile's files (the extends chain) and where each value was written.
    source: ProfileSource | None = None
    #: sha256 by name of every template the profile uses (includes and imports too).
    templates: Mapping[str, str] = field(default_factory=dict)


class PromptCompiler:
    """Loads profiles and templates once; compiles a prompt per turn."""

    def __init__(
        self,
        settings: PioneerSettings | None = None,
        *,
        profile_path: Sequence[Path] | None = None,
        template_path: Sequence[Path] | None = None,
        token_counter: TokenCounter | None = None,
        count_tokens: bool = True,
    ):
        self.settings = settings or PioneerSettings()
        self.profile_path = list(profile_path or self.settings.profile_path)
        template_search = list(template_path or self.settings.template_path)
        self.templates = TemplateSet(build_environment(template_search))
        self._counter = token_counter
        self._count_tokens = count_tokens
        self._profiles: dict[str, LoadedProfile] = {}
        self._reader = FileReader()

    # -- loading ---------------------------------------------------------------

    def available_profiles(self) -> dict[str, Path]:
        """Profile names on the search path, deployment folders first."""
        return list_profiles(self.profile_path)

    def load_profile(self, name: str) -> LoadedProfile:
        """Load, validate and compile a profile once; raise with every problem found."""
        cached = self._profiles.get(name)
        if cached is not None:
            return cached
        source = resolve_profile(find_profile(name, self.profile_path), self.profile_path)
        spec, file, where = source.spec, source.file, source.locator
        problems = list(structural_problems(spec, where, input_fields=sorted(INPUT_FIELDS)))
        problems += list(self._template_problems(spec, where, file))
        if problems:
            error_type = (
                TemplateError if all(p.context for p in problems) else ProfileError
            )
            raise error_type(problems, summary=problem_summary(problems, file))
        templates = template_digests(self.templates.env, {s.template for s in spec.sections})
        loaded = LoadedProfile(
            spec=spec,
            file=file,
            fingerprint=profile_fingerprint(spec, templates),
            bootstrap_files=tuple(
                (s.file, s.keep_empty) for s in spec.sections if s.source == "bootstrap" and s.file
            ),
            claimed=frozenset(s.id for s in spec.sections if s.source == "contribution"),
            source=source,
            templates=templates,
        )
        self._profiles[name] = loaded
        return loaded

    def _template_problems(
        self, spec: ProfileSpec, where: Locator, file: str
    ) -> Iterator[Problem]:
        for index, section in enumerate(spec.sections):
            context = f'while checking section "{section.id}" of {file}'
            for problem in self.templates.check_template(
                section.template, PROVIDED_NAMES[section.source], context=context
            ):
                if problem.file is None:  # template not found: point at the profile line
                    yield where.problem(
                        ["sections", index, "template"],
                        f"{problem.message} on the template search path",
                    )
                else:
                    yield problem
            if section.when is not None:
                when_file, line, path = where.where(["sections", index, "when"])
                yield from self.templates.check_condition(
                    section.when, _CONDITION_NAMES, file=when_file, line=line, path=path
                )

    def check(self, names: Sequence[str] | None = None) -> list[PioneerError]:
        """Load every named (default: every visible) profile; return the errors found."""
        errors: list[PioneerError] = []
        for name in names or sorted(self.available_profiles()):
            try:
                self.load_profile(name)
            except PioneerError as error:
                errors.append(error)
        return errors

    # -- compiling -------------------------------------------------------------

    def compile(self, compile_input: PromptCompileInput) -> CompiledPromptPayload:
        """Compile one turn's prompt."""
        profile = self.load_profile(compile_input.profile)
        spec = profile.spec
        boot = self._bootstrap(profile, compile_input)
        known = spec.contribution_specs()
        pool_args: dict[str, Any] = {
            "known": known,
            "default_max_chars": spec.budgets.contribution_max_chars,
            "default_sort_key": spec.budgets.contribution_sort_key,
        }
        runtime, runtime_diags = budget_pool(
            compile_input.runtime_sections, pool="runtime", spec=spec.budgets.runtime_pool,
            **pool_args,
        )
        hooks, hook_diags = budget_pool(
            compile_input.dynamic_sections, pool="hook", spec=spec.budgets.hook_pool, **pool_args
        )
        renderer = _SectionRenderer(self.templates, compile_input, spec.name)
        for section in spec.sections:
            renderer.visit(section, boot, [*runtime, *hooks], profile.claimed)
        diagnostics = [*boot.diagnostics, *runtime_diags, *hook_diags, *renderer.diagnostics]
        return self._assemble(profile, renderer.sections, boot, diagnostics)

    def _bootstrap(self, profile: LoadedProfile, compile_input: PromptCompileInput) -> BootstrapResult:
        if not profile.bootstrap_files:
            return BootstrapResult({}, (), ())
        budgets, limits = profile.spec.budgets, compile_input.limits
        return load_bootstrap(
            compile_input.workspace_root or self.settings.home,
            profile.bootstrap_files,
            max_chars_per_file=_lower(budgets.max_chars_per_file, limits.max_chars_per_file),
            max_chars_total=_lower(budgets.max_chars_total, limits.max_chars_total),
            reader=self._reader,
        )

    def _assemble(
        self,
        profile: LoadedProfile,
        sections: list[CompiledSection],
        boot: BootstrapResult,
        diagnostics: list[Diagnostic],
    ) -> CompiledPromptPayload:
        stable = render_sections(s.text for s in sections if s.stability == "stable")
        dynamic = render_sections(s.text for s in sections if s.stability == "dynamic")
        full = join_full_text(stable, dynamic)
        stable_hash = hashlib.sha256(stable.encode("utf-8"))
        if stable and dynamic:
            full_hash = stable_hash.copy()
            full_hash.update((BOUNDARY_MARKER + dynamic).encode("utf-8"))
        else:
            full_hash = hashlib.sha256(full.encode("utf-8"))
        counter = (self._counter or default_counter()) if self._count_tokens else None
        manifest = PromptManifest(
            compiler_version=COMPILER_VERSION,
            profile=profile.spec.name,
            profile_fingerprint=profile.fingerprint,
            section_ids=[s.id for s in sections],
            sections=[
                ManifestSection(
                    id=s.id, stability=s.stability, chars=s.chars,
                    tokens=counter.count(s.text) if counter else None,
                    sha256=s.fingerprint, source=s.source, truncated=s.truncated,
                )
                for s in sections
            ],
            fingerprint_stable=stable_hash.hexdigest(),
            fingerprint_dynamic=hashlib.sha256(dynamic.encode("utf-8")).hexdigest(),
            fingerprint_full=full_hash.hexdigest(),
            source_manifest=list(boot.source_manifest),
            diagnostics=diagnostics,
        )
        return CompiledPromptPayload(
            stable_system_text=stable,
            dynamic_system_text=dynamic,
            full_system_text=full,
            boundary_marker=BOUNDARY_MARKER,
            sections=sections,
            manifest=manifest,
        )


def _lower(profile_value: int, override: int | None) -> int:
    return profile_value if override is None else min(profile_value, override)


class _SectionRenderer:
    """Renders declared sections one by one, collecting kept sections and diagnostics."""

    def __init__(self, templates: TemplateSet, compile_input: PromptCompileInput, profile: str):
        self.templates = templates
        self.base: dict[str, Any] = {name: getattr(compile_input, name) for name in INPUT_FIELDS}
        self.base["profile"] = profile
        self.input = compile_input
        self.sections: list[CompiledSection] = []
        self.diagnostics: list[Diagnostic] = []

    def visit(
        self,
        section: SectionSpec,
        boot: BootstrapResult,
        contributions: list[Contribution],
        claimed: frozenset[str],
    ) -> None:
        if section.when is not None and not self._condition(section):
            return
        match section.source:
            case "text":
                self._emit(section, section.id, section.title, {}, "builtin", False)
            case "bootstrap":
                found = boot.files.get(section.file or "")
                if found is not None:
                    extra = {"file": found, "reminder": section.reminder}
                    self._emit(section, section.id, section.title, extra, f"file:{found.name}",
                               found.truncated)
            case "input":
                value = getattr(self.input, section.field or "")
                if value is None or (isinstance(value, str) and not value.strip()):
                    return
                content = value.strip() if isinstance(value, str) else value
                self._emit(section, section.id, section.title, {"content": content},
                           f"input:{section.field}", False)
            case "contribution" | "slot":
                for item in contributions:
                    wanted = item.id == section.id if section.source == "contribution" else (
                        item.id not in claimed
                    )
                    if wanted:
                        self._emit(section, item.id, item.title, {"content": item.content},
                                   f"{item.pool}:{item.id}", item.truncated)

    def _condition(self, section: SectionSpec) -> bool:
        expression = self.templates.condition(section.when or "")
        try:
            return bool(expression(self.base))
        except jinja2.TemplateError as error:
            raise TemplateError(Problem(
                f"condition failed: {error}", path=f'section "{section.id}" → when'
            )) from None

    def _emit(
        self,
        section: SectionSpec,
        section_id: str,
        title: str,
        extra: dict[str, Any],
        source: str,
        truncated: bool,
    ) -> None:
        template = self.templates.template(section.template)
        context = {**self.base, "section": {"id": section_id, "title": title}, **extra}
        try:
            body = template.render(context)
        except jinja2.TemplateError as error:
            raise _render_error(error, template, section_id) from None
        body = body.replace("\r\n", "\n").replace("\r", "\n").strip()
        if section.max_chars is not None and len(body) > section.max_chars:
            self.diagnostics.append(Diagnostic(
                code="section_truncated",
                message=f"section `{section_id}` truncated by profile limit: "
                f"{len(body)} -> {section.max_chars} chars",
                section_id=section_id,
            ))
            body = body[: section.max_chars].rstrip()
            truncated = True
        text = render_section(title, body)
        if not text:
            return
        self.sections.append(CompiledSection(
            id=section_id, title=title.strip(), stability=section.stability, text=text,
            chars=len(text), fingerprint=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            source=source, truncated=truncated,
        ))


def _render_error(error: jinja2.TemplateError, template: jinja2.Template, section_id: str) -> TemplateError:
    line = None
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == template.filename:
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    display = f"templates/{template.name}" if template.name else "<template>"
    message = error.message if getattr(error, "message", None) else str(error)
    return TemplateError(Problem(
        str(message), file=display, line=line,
        context=f'while rendering section "{section_id}"',
    ))


def compile_prompt(
    compile_input: PromptCompileInput, *, compiler: PromptCompiler | None = None
) -> CompiledPromptPayload:
    """Compile one prompt; pass a long-lived ``compiler`` to reuse loaded profiles."""
    return (compiler or PromptCompiler()).compile(compile_input)
