"""Inspect: one row per section of a compiled prompt, saying why it is (or is not) there.

Takes a compiler and one turn's compile input; compiles once and walks the profile's
declared sections beside the manifest. Every kept section becomes a row with its
stability, characters, cl100k tokens and source; a slot expands into one row per
contribution it took; a declared section that rendered nothing, and a contribution left
out, become ``omitted`` rows with the reason the interpreter recorded in the manifest
(nothing is re-evaluated here); a cut section is ``truncated`` with the diagnostic that
cut it. Input fields the profile ignores are listed after the rows. Totals count the
stable and dynamic texts as sent. Nothing here changes the compile: it only explains a
payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from ..compile.compiler import LoadedProfile, PromptCompiler, ignored_reason, pool_usage
from ..compile.inputs import PromptCompileInput
from ..compile.manifest import CompiledPromptPayload, ManifestSection, Omission
from ..compile.profile import SectionSpec
from ..errors import counted
from ..tokens import TokenCounter, default_counter
from .terminal import Painter, plain

__all__ = [
    "Inspection", "PoolUse", "Row", "Totals", "inspect_prompt", "render_json", "render_table",
]

Status = Literal["kept", "truncated", "omitted"]


@dataclass(frozen=True, slots=True)
class Row:
    """One section, kept or not."""

    id: str
    stability: str
    chars: int | None
    tokens: int | None
    source: str | None
    status: Status
    reason: str | None
    #: The template file that rendered the section (``templates/…`` when built in).
    template: str | None = None
    #: Whether that template came from a deployment folder.
    deployment: bool = False
    #: The declared inputs the section's template or condition reads (``("*",)``: every
    #: one); ``None`` when the profile declares none.
    inputs: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Totals:
    """One side of the cache boundary as the model receives it."""

    sections: int
    chars: int
    tokens: int


@dataclass(frozen=True, slots=True)
class PoolUse:
    """A contribution pool's use against its budget."""

    pool: str
    sections: int
    max_sections: int
    chars: int
    max_chars: int


@dataclass(frozen=True, slots=True)
class Inspection:
    """A compiled prompt explained section by section."""

    profile: str
    profile_fingerprint: str
    rows: tuple[Row, ...]
    stable: Totals
    dynamic: Totals
    #: Compile-input fields given a value that no section of the profile reads.
    ignored_inputs: tuple[str, ...] = ()
    pools: tuple[PoolUse, ...] = ()


def inspect_prompt(
    compiler: PromptCompiler, compile_input: PromptCompileInput,
    counter: TokenCounter | None = None, *, payload: CompiledPromptPayload | None = None,
) -> Inspection:
    """Compile ``compile_input`` (unless ``payload`` is its compile already) and explain
    every declared section."""
    counter = counter or default_counter()
    payload = payload if payload is not None else compiler.compile(compile_input)
    profile = compiler.load_profile(compile_input.profile)
    explain = _Explainer(profile, payload, counter, compiler.templates.env,
                         compiler.input_reads(profile) if profile.spec.inputs else None)
    manifest = payload.manifest
    return Inspection(
        profile=manifest.profile,
        profile_fingerprint=manifest.profile_fingerprint,
        rows=tuple(explain.rows()),
        stable=_totals(payload, "stable", counter),
        dynamic=_totals(payload, "dynamic", counter),
        ignored_inputs=tuple(manifest.ignored_inputs),
        pools=_pools(profile, compile_input),
    )


def _pools(profile: LoadedProfile, compile_input: PromptCompileInput) -> tuple[PoolUse, ...]:
    used = pool_usage(profile, compile_input)
    budgets = profile.spec.budgets
    return tuple(
        PoolUse(pool, used[pool][0], spec.max_sections, used[pool][1], spec.max_chars)
        for pool, spec in (("runtime", budgets.runtime_pool), ("hook", budgets.hook_pool))
    )


def _totals(payload: CompiledPromptPayload, side: str, counter: TokenCounter) -> Totals:
    text = payload.stable_system_text if side == "stable" else payload.dynamic_system_text
    count = sum(1 for s in payload.manifest.sections if s.stability == side)
    return Totals(sections=count, chars=len(text), tokens=counter.count(text))


class _Explainer:
    """Walks declared sections beside the kept ones, in the order the interpreter emits."""

    def __init__(
        self, profile: LoadedProfile, payload: CompiledPromptPayload, counter: TokenCounter,
        env: Any = None, input_reads: Mapping[str, frozenset[str] | None] | None = None,
    ):
        self.counter, self.env = counter, env
        self.input_reads = input_reads
        self.profile, self.spec = profile, profile.spec
        manifest = payload.manifest
        self.kept = list(zip(manifest.sections, payload.sections, strict=True))
        self.diagnostics = manifest.diagnostics
        self.files = {entry.file: entry for entry in manifest.source_manifest}
        self.omitted = {o.id: o for o in manifest.omitted if o.pool is None}
        self.left_out = [o for o in manifest.omitted if o.pool is not None]

    def rows(self) -> list[Row]:
        rows: list[Row] = []
        position = 0
        slot = False
        for section in self.spec.sections:
            taken = 0
            while position < len(self.kept) and self._belongs(self.kept[position][0], section):
                rows.append(self._with_template(self._kept_row(*self.kept[position]), section))
                position, taken = position + 1, taken + 1
                if section.source not in ("contribution", "slot"):
                    break
            if not taken:
                rows.append(self._with_template(self._omitted_row(section), section))
            if section.source == "slot":
                slot = True
                rows += [self._dropped_row(o) for o in self.left_out
                         if o.id not in self.profile.claimed]
        if not slot:
            rows += [self._dropped_row(o) for o in self.left_out if o.reason == "unplaced"]
        return rows

    def _with_template(self, row: Row, section: SectionSpec) -> Row:
        template, deployment = self.profile.template_origin(section.template, self.env)
        inputs = None
        if self.input_reads is not None:
            reads = self.input_reads.get(section.id, frozenset())
            inputs = ("*",) if reads is None else tuple(sorted(reads))
        return replace(row, template=template, deployment=deployment, inputs=inputs)

    def _belongs(self, kept: ManifestSection, section: SectionSpec) -> bool:
        if section.source == "slot":
            return self.profile.placed_by_slot(kept)
        return kept.id == section.id

    def _kept_row(self, kept: ManifestSection, text: Any) -> Row:
        tokens = kept.tokens if kept.tokens is not None else self.counter.count(text.text)
        reason = ("; ".join(self._cuts(kept)) or None) if kept.truncated else None
        return Row(kept.id, kept.stability, kept.chars, tokens, kept.source,
                   "truncated" if kept.truncated else "kept", reason)

    def _cuts(self, kept: ManifestSection) -> list[str]:
        paths: set[str | None] = set()
        if kept.source.startswith("file:"):
            entry = self.files.get(kept.source.removeprefix("file:"))
            paths = {entry.path} if entry else set()
        return [
            d.message for d in self.diagnostics
            if (d.section_id == kept.id and d.code.endswith("_truncated"))
            or (d.file in paths and d.code in ("file_truncated", "total_budget_truncated"))
        ]

    def _omitted_row(self, section: SectionSpec) -> Row:
        found = self.omitted.get(section.id)
        return Row(section.id, section.stability, None, None, None, "omitted",
                   found.detail if found else "rendered empty")

    def _dropped_row(self, omission: Omission) -> Row:
        return Row(omission.id, "dynamic", None, None, None, "omitted", omission.detail)


def render_json(inspection: Inspection) -> str:
    """The inspection as JSON (sorted keys) for machines."""
    data = {
        "profile": inspection.profile,
        "profile_fingerprint": inspection.profile_fingerprint,
        "sections": [{key: value for key, value in asdict(row).items()
                      if key != "inputs" or value is not None} for row in inspection.rows],
        "totals": {"stable": asdict(inspection.stable), "dynamic": asdict(inspection.dynamic)},
        "pools": [asdict(pool) for pool in inspection.pools],
    }
    if inspection.ignored_inputs:
        data["ignored_inputs"] = list(inspection.ignored_inputs)
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)


_HEAD = ("SECTION", "STABILITY", "CHARS", "TOKENS", "SOURCE", "TEMPLATE", "STATUS")


def render_table(inspection: Inspection, paint: Painter = plain) -> str:
    """The inspection as an aligned table with totals, for people.

    ``paint`` colours the stability and status cells (see :mod:`pioneer.review.terminal`); the
    default leaves the text plain.
    """
    declared = any(row.inputs is not None for row in inspection.rows)
    cells = [_HEAD[:-1] + (("INPUTS",) if declared else ()) + _HEAD[-1:]] + [
        (row.id, row.stability, _number(row.chars), _number(row.tokens), row.source or "-",
         _template(row), *((_inputs(row),) if declared else ()),
         row.status + (f": {row.reason}" if row.reason else ""))
        for row in inspection.rows
    ]
    widths = [max(len(line[column]) for line in cells) for column in range(len(cells[0]) - 1)]
    styles = [("heading", "heading")] + [(row.stability, row.status) for row in inspection.rows]
    lines = [f"profile {inspection.profile}  fingerprint {inspection.profile_fingerprint[:12]}"]
    lines += [_line(line, widths, style, paint) for line, style in zip(cells, styles,
                                                                        strict=True)]
    for side, totals in (("stable", inspection.stable), ("dynamic", inspection.dynamic)):
        lines.append(f"{side:<8} {counted(totals.sections, 'section')}, "
                     f"{counted(totals.chars, 'char')}, {counted(totals.tokens, 'token')}")
    for pool in inspection.pools:
        lines.append(f"{pool.pool + ' pool':<13} {pool.sections} of {pool.max_sections} "
                     f"sections, {pool.chars} of {counted(pool.max_chars, 'char')}")
    lines += [f"ignored  input {name}: "
              f"{ignored_reason(name, inspection.profile).replace('`', '')}"
              for name in inspection.ignored_inputs]
    return "\n".join(lines)


def _inputs(row: Row) -> str:
    if not row.inputs:
        return "-"
    return "every input" if row.inputs == ("*",) else ", ".join(row.inputs)


def _template(row: Row) -> str:
    if row.template is None:
        return "-"
    return f"{row.template} (deployment)" if row.deployment else row.template


def _line(cells: Sequence[str], widths: Sequence[int], styles: tuple[str, str],
          paint: Painter) -> str:
    parts = []
    for column, width in enumerate(widths):
        numeric = column in (2, 3)  # CHARS, TOKENS
        parts.append(cells[column].rjust(width) if numeric else cells[column].ljust(width))
    last = cells[-1]
    if paint is plain or styles[0] == "heading":
        line = "  ".join([*parts, last]).rstrip()
        return line if styles[0] != "heading" else paint(line, "heading")
    # The stability cell keeps its padding outside the colour; the status word is painted.
    stability = paint(cells[1], styles[0]) + parts[1][len(cells[1]):]
    word, colon, reason = last.partition(":")
    return "  ".join([*parts[:1], stability, *parts[2:], paint(word, styles[1]) + colon + reason])


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)
