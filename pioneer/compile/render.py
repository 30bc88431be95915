"""The section renderer: one turn's declared sections, each rendered.

For each declared section, in order: its ``when`` condition → its source (text, an
identity file, an input field, the contributions it claims or the slot's) → the render
→ the profile's per-section limit. A section that emits nothing records why (an
:class:`~pioneer.compile.manifest.Omission`); each contribution gets its
:class:`~pioneer.compile.manifest.Placement`. :class:`TrialRenderer` renders every
section once against a representative input, for ``pioneer check``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, contains
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, get_origin

from ..errors import TemplateError
from ..text import utf8_text
from ..tokens import TokenCounter
from ._plan import ProfilePlan
from ._pools import Contribution, omitted_diagnostic
from .allowance import render_scope, text_size
from .bootstrap import BootstrapResult
from .boundary import render_section, render_section_parts
from .inputs import (
    DynamicSectionInput,
    PromptCompileInput,
    PromptLimits,
    RuntimeSectionInput,
)
from .manifest import (
    CompiledSection,
    Diagnostic,
    ManifestSection,
    Omission,
    OmissionReason,
    Placement,
    built,
)
from .profile import SectionSpec
from .readonly import FrozenDict, FrozenList
from .refs import REF_LINE_START, count_ref_lines
from .sandbox import evaluate, render_parts
from .templates import TemplateSet, describe, render_problem

if TYPE_CHECKING:
    from ._loaded import LoadedProfile

__all__ = [
    "NO_INPUTS",
    "Rendered",
    "SectionRenderer",
    "TrialRenderer",
    "representative_input",
]

#: The compile-input fields that hold a list (templates see them as read-only views).
_LIST_FIELDS = tuple(name for name, field in PromptCompileInput.model_fields.items()
                     if get_origin(field.annotation) is list)
#: Sections whose rendered refs count towards the Artifact References policy (by source).
_REF_SOURCES = ("runtime:", "hook:", "input:")
#: Input texts searched for artifact reference lines (besides the contributions).
_REF_TEXT_FIELDS = ("skills_prompt", "retry_instruction", "dynamic_context", "extra_system")
_REFS = attrgetter("refs")
_CR = repeat("\r")  # for ``map(contains, parts, _CR)``: a part holds a carriage return
#: A contribution a section met and left out (its placement says nowhere).
_MET = object()
#: What templates see as ``inputs`` for a profile that declares none.
NO_INPUTS = FrozenDict({}, "inputs")


class Rendered(NamedTuple):
    """One emitted section: its text (and its UTF-8, hashed once) and audit record, or
    only a diagnostic, or why a declared section emitted nothing.

    A named tuple, as it is made for every section rendered and every one left out.
    """

    section: CompiledSection | None
    record: ManifestSection | None
    diagnostic: Diagnostic | None
    data: bytes = b""
    omission: Omission | None = None
    #: Artifact ref lines in the text of a contribution or input section (0 for any
    #: other): counted once, when the section is rendered.
    refs: int = 0


class SectionRenderer:
    """Renders one turn's declared sections; each template is handed the names it reads."""

    __slots__ = (
        "at", "base", "boot", "contributions", "counter", "deployment_text",
        "history_refs", "input", "locator", "met",
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
        inputs: FrozenDict | None = None,
        counter: TokenCounter | None,
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
        self.base["artifact_ref_count"] = self.base["artifact_refs"] = carried
        self.base["inputs"] = inputs if inputs is not None else NO_INPUTS
        self.input = compile_input
        self.profile_name = profile.spec.name
        self.locator = profile.source.locator
        self.sections = profile.spec.sections
        self.deployment_text = profile.deployment_text
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
        self.counter = counter

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
            self.base["artifact_ref_count"] = self.base["artifact_refs"] = (
                self.history_refs + stable_refs + sum(map(_REFS, out)))
            for at, section in reversed(waiting):  # the last first: earlier places hold
                emitted: list[Rendered] = []
                self.visit(section, emitted)
                out[at:at] = emitted
        return out

    def visit(self, section: SectionSpec, out: list[Rendered]) -> None:
        """Condition → source → render for one declared section; a section
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
                kind = "text" if section.id in self.deployment_text else "builtin"
                rendered = self._render(section, section.id, section.title, {}, kind, False)
                out.append(rendered)  # _keep, inline
                if rendered.section is None:
                    out.append(_left_out(section.id, "rendered_empty", "rendered empty"))
            case "bootstrap":
                found = self.boot.files.get(section.file or "")
                if found is None:
                    out.append(_left_out(section.id, *self._why_no_file(section)))
                    return
                extra = {"file": found, "reminder": section.reminder}
                self._keep(section, out, self._render(
                    section, section.id, section.title, extra, f"file:{found.name}",
                    found.truncated))
            case "input":
                value = self.base.get(section.field or "")
                if value is None or (isinstance(value, str) and not value.strip()):
                    out.append(_left_out(section.id, "input_empty",
                                         f"input {section.field} is empty"))
                    return
                content = value.strip() if isinstance(value, str) else value
                rendered = self._render(section, section.id, section.title,
                                      {"content": content}, f"input:{section.field}", False)
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
        for item in items:
            if refused and item.id in refused:
                self._met(item)
                detail = f"refused by section `{section.id}` of profile `{self.profile_name}`"
                out.append(_item_left_out(item, "refused", detail, diagnostic=True))
                continue
            rendered = self._render(section, item.id, item.title, {"content": item.content},
                                  f"{item.pool}:{item.id}", item.truncated)
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
            at[item.pool][item.position] = _placement(item.id, item.pool, item.position,
                                                      section.id, chars, cut)
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
                    found = _placement(item.id, pool, index, None, 0,
                                       bool(item.content.strip()))
                out.append(found)  # type: ignore[arg-type]
        return out

    def _condition(self, section: SectionSpec) -> bool:
        expression = self.templates.condition(section.when or "")
        try:
            with render_scope(lambda: text_size(self.base.values()),
                              self.templates.env.step_limit):  # type: ignore[attr-defined]
                base = self.base
                result = bool(evaluate(expression, {
                    name: base[name] for name in self.plan.condition_reads[section.id]
                    if name in base}))
        except Exception as error:  # the sandbox's refusals and any runtime error alike
            raise TemplateError(self.locator.problem(
                ["sections", self._index(section), "when"],
                f"condition failed: {describe(error)}",
            )) from None
        return result

    def _index(self, section: SectionSpec) -> int:
        return next(i for i, s in enumerate(self.sections) if s is section)

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
        # The template is handed the names it reads; every name, when those cannot be
        # known. Its allowance grows with that text,
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


def _placement(item_id: str, pool: str, index: int, section: str | None, chars: int,
               cut: bool) -> Placement:
    return built(Placement, id=item_id, pool=pool, index=index, section=section, chars=chars,
                 cut=cut)


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


class TrialRenderer(SectionRenderer):
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
