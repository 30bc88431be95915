"""The context map: where every token of a request goes, and what the provider caches.

:func:`map_request` takes a compiled prompt inside a :class:`~pioneer.providers.ChatRequest`
and gives a :class:`ContextMap`: the request block by block in the order the provider
receives it (tools, stable sections, history summary, history turns, then this turn: the
dynamic sections, the current user message and its tool rounds; with the ``system``
placement the dynamic sections follow the stable ones), each with its tokens, stability,
source and expected cache status. :func:`map_turn` does the same for a stored turn from
its record, one map per provider round. :func:`render_json` is the data,
:func:`render_html` one self-contained page drawn from exactly that data.

The expected cache status of a block is ``read`` (the provider serves it from its cache),
``written`` (Anthropic writes it into the cache at its marks, billed above the input
price) or ``uncached``; how it is worked out is in docs/context-map.md.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..audit.cache_report import CacheBlock, CachePlan, plan_cache, request_blocks
from ..audit.record import ReportedUsage, RoundRecord, TurnRecord
from ..compile.compiler import LoadedProfile, PromptCompiler
from ..compile.manifest import CompiledPromptPayload, Diagnostic, ManifestSection
from ..errors import InputError, Problem
from ..providers import build_request_body
from ..providers.caching import DEFAULT_MINIMUM_TOKENS
from ..providers.layout import turn_start
from ..providers.request import ChatMessage, ChatRequest
from ..providers.rules import previewing
from ..resources import builtin_dir
from ..tokens import TokenCounter, default_counter

__all__ = [
    "Block",
    "BlockKind",
    "Budget",
    "CacheStatus",
    "ContextMap",
    "RoundRow",
    "map_request",
    "map_turn",
    "render_html",
    "render_json",
    "write_page",
]

BlockKind = Literal["tools", "stable", "summary", "history", "dynamic", "current", "round"]
CacheStatus = Literal["read", "written", "uncached"]

#: Providers whose cache is written only at marks in the request (billed as a write).
_MARKED = frozenset({"anthropic"})
_SUMMARY_PREFIX = "Summary of earlier conversation:\n"


@dataclass(frozen=True, slots=True)
class Block:
    """One piece of the request, in provider order."""

    index: int
    kind: BlockKind
    id: str
    title: str
    stability: Literal["stable", "dynamic", "conversation"]
    tokens: int | None
    chars: int | None
    cache: CacheStatus
    source: dict[str, str]
    truncated: bool = False
    diagnostics: tuple[str, ...] = ()
    fingerprint: str = ""


@dataclass(frozen=True, slots=True)
class Budget:
    """The context window and the history budget with its summarising threshold."""

    context_window: int
    response_reserve: int
    history_budget: int
    history_threshold: int
    history_tokens: int
    history_mode: str | None = None


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One provider round: the planned cache split beside what the provider reported."""

    round: int
    planned: dict[str, int]
    reported: dict[str, int] | None


@dataclass(frozen=True, slots=True)
class ContextMap:
    """A request explained block by block."""

    title: str
    profile: str
    profile_fingerprint: str
    profile_file: str
    provider: str
    model: str
    placement: Literal["cache-first", "system"]
    blocks: tuple[Block, ...]
    budget: Budget
    rounds: tuple[RoundRow, ...] = ()
    diagnostics: tuple[dict[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: The cache plan's read / written / uncached tokens for the request shown, when the
    #: map was drawn from one (the plan counts the body's blocks as sent).
    plan: dict[str, int] | None = None

    def totals(self) -> dict[str, Any]:
        """Tokens per kind and per cache status, and in all."""
        by_kind: dict[str, int] = {}
        by_cache: dict[str, int] = {"read": 0, "written": 0, "uncached": 0}
        for block in self.blocks:
            tokens = block.tokens or 0
            by_kind[block.kind] = by_kind.get(block.kind, 0) + tokens
            by_cache[block.cache] += tokens
        total = sum(by_cache.values())
        return {"tokens": total, "by_kind": by_kind, "by_cache": by_cache,
                "unknown_blocks": sum(1 for b in self.blocks if b.tokens is None),
                "share_of_window": round(total / self.budget.context_window, 4)
                if self.budget.context_window else 0.0}


# -- building the blocks -------------------------------------------------------------


def map_request(
    compiler: PromptCompiler,
    request: ChatRequest,
    provider: str,
    *,
    budget: tuple[int, int],
    counter: TokenCounter | None = None,
    previous: Sequence[ChatRequest] | None = None,
    title: str = "pioneer inspect",
    profile: str | None = None,
) -> ContextMap:
    """The map of one request; ``budget`` is (context window, response reserve).

    ``profile`` is the profile name or path the prompt was compiled with (default: the
    name its manifest records, which for a profile given by path is the file's ``name``).

    The cache status of each block is the cache plan's
    (:func:`~pioneer.audit.cache_report.plan_cache`) against ``previous``, the thread's
    earlier requests, oldest first; when it is None, against the request the thread's
    previous turn is taken to have sent (:func:`_previous_turn`).
    """
    with previewing():  # a map may show a prompt before any message is written
        return _map_request(compiler, request, provider, previous=previous, counter=counter,
                            title=title, budget=budget, profile_name=profile)


def _map_request(
    compiler: PromptCompiler, request: ChatRequest, provider: str, *,
    previous: Sequence[ChatRequest] | None, counter: TokenCounter | None, title: str,
    budget: tuple[int, int], profile_name: str | None,
) -> ContextMap:
    counter = counter or default_counter()
    payload = request.compiled_prompt
    if payload is None:
        raise ValueError("a context map needs a request with a compiled prompt")
    payload = payload.with_token_counts(counter)
    request = request.model_copy(update={"compiled_prompt": payload})
    manifest = payload.manifest
    name = profile_name or manifest.profile
    profile = compiler.load_profile(name)
    if profile.fingerprint != manifest.profile_fingerprint:  # another file of that name
        raise InputError(Problem(
            f'the prompt was compiled from another profile than "{name}"'
            f" (fingerprint {manifest.profile_fingerprint[:12]}, that one's "
            f"{profile.fingerprint[:12]}); map it with the profile it was compiled with",
            file=profile.file or None))
    sources = _Sources(compiler, profile, payload)
    body = build_request_body(provider, request)
    blocks = request_blocks(provider, request, body, manifest=payload.manifest, counter=counter)
    earlier = [_blocks_of(provider, before, counter)
               for before in (previous if previous is not None else [_previous_turn(request)])]
    plan = plan_cache(provider, request.model, blocks, earlier)
    titles = {section.id: section.title for section in payload.sections}
    pieces = _from_plan(plan, payload.manifest.sections, titles, sources.of,
                        sources.diagnostics)
    window, reserve = budget
    history = sum(b.tokens or 0 for b in pieces if b.kind in ("summary", "history"))
    return ContextMap(
        title=title, profile=payload.manifest.profile,
        profile_fingerprint=payload.manifest.profile_fingerprint,
        profile_file=str(profile.file or ""), provider=provider,
        model=request.model, placement=request.cache.dynamic_placement, blocks=tuple(pieces),
        budget=Budget(window, reserve, max(0, window - reserve), _threshold(window, reserve),
                      history),
        diagnostics=tuple(_diagnostic(d) for d in payload.manifest.diagnostics),
        notes=(_plan_note(plan, previous is None),), plan=_planned_of(plan),
    )


def _blocks_of(provider: str, request: ChatRequest, counter: TokenCounter) -> list[CacheBlock]:
    return request_blocks(provider, request, build_request_body(provider, request),
                          counter=counter)


def _previous_turn(request: ChatRequest) -> ChatRequest:
    """The request the thread's previous turn is taken to have sent: the same tools and
    stable text, the history before this turn's newest exchange, that turn's own user
    message, and other dynamic text (it changes from turn to turn)."""
    history = request.messages[:turn_start(request.messages)]
    start = turn_start(history)
    messages = history[:start + 1] if start < len(history) else [
        ChatMessage.user("(the previous turn's message)")]
    payload = request.compiled_prompt
    changed = payload.model_copy(update={"dynamic_system_text": "(the previous turn's "
                                         "dynamic text)"}) if payload is not None else None
    return request.model_copy(update={"messages": messages, "compiled_prompt": changed})


_STATUS: dict[str, CacheStatus] = {"cached": "read", "written": "written",
                                   "uncached": "uncached"}


def _from_plan(
    plan: CachePlan, sections: Sequence[ManifestSection], titles: Mapping[str, str],
    source_of: Callable[[ManifestSection], dict[str, str]],
    diagnostics_of: Callable[[ManifestSection], tuple[str, ...]],
) -> list[Block]:
    """The plan's blocks in its order, the stable and dynamic blocks opened into their
    sections (each with the status of the block it is in)."""
    out: list[Block] = []
    seen_turn = False
    for block in plan.blocks:
        status = _STATUS[block.status]
        if block.kind in ("stable", "prompt", "dynamic"):
            sides = {"stable": ("stable",), "prompt": ("stable", "dynamic"),
                     "dynamic": ("dynamic",)}[block.kind]
            for record in sections:
                if record.stability in sides:
                    out.append(Block(
                        len(out), record.stability, record.id, titles.get(record.id, record.id),
                        record.stability,
                        record.tokens, record.chars, status, source_of(record),
                        truncated=record.truncated, diagnostics=diagnostics_of(record),
                        fingerprint=block.label))
            continue
        kind: BlockKind
        if block.kind == "tools":
            kind, name, title = "tools", block.label.removeprefix("tool "), block.label
        elif block.kind in ("summary", "history", "system"):
            kind = "summary" if block.kind == "summary" else "history"
            name, title = block.label, ("history summary" if kind == "summary"
                                        else f"{_role(block.label)} (history)")
        else:
            kind = "round" if seen_turn else "current"
            seen_turn = True
            name, title = block.label, ("user message (this turn)" if kind == "current"
                                        else f"{_role(block.label)} (tool round)")
        out.append(Block(len(out), kind, name, title,
                         "stable" if kind == "tools" else "conversation", block.tokens, None,
                         status, {"from": f"request body: {block.label}"}
                         | ({"cache mark": "yes"} if block.marked else {}),
                         fingerprint=block.digest))
    return out


def _role(label: str) -> str:
    """The role a body label names, e.g. "assistant" in "messages[3] (assistant) block 0"."""
    return label.partition("(")[2].partition(")")[0] or "message"


def _planned_of(plan: CachePlan) -> dict[str, int]:
    return {"read": plan.cached_tokens, "written": plan.written_tokens,
            "uncached": plan.uncached_tokens}


def _row(number: int, plan: CachePlan, usage: ReportedUsage | None) -> RoundRow:
    return RoundRow(number, _planned_of(plan), _reported(usage))


def _plan_note(plan: CachePlan, assumed: bool) -> str:
    where = ("against the thread's previous turn as it is assumed to have been sent (the "
             "same tools and stable text, the history before the newest exchange, other "
             "dynamic text)") if assumed else "against the request sent before it"
    difference = plan.first_difference
    first = (f"; first difference: {difference.label} ({difference.reason})"
             if difference is not None else "")
    whole = sum(b.tokens for b in plan.blocks if b.status == "cached")
    partly = next((b for b in plan.blocks if b.status != "cached"), None)
    part = (f"; the first {plan.cached_tokens - whole} tokens of {partly.label} are read from "
            f"cache too (the provider caches in steps of {plan.step_tokens} tokens; the map draws "
            "the whole block by its end)") if plan.cached_tokens > whole and partly else ""
    return (f"cache status from the cache plan ({plan.provider}, minimum "
            f"{plan.minimum_tokens} tokens), {where}{first}{part}")


def _threshold(window: int, reserve: int) -> int:
    budget = max(0, window - reserve)
    return budget * 8 // 10








def _with_cache(blocks: list[Block], provider: str, previous: Sequence[str] | None,
                minimum: int) -> list[Block]:
    """Each block's expected cache status (docs/context-map.md, "Cache status")."""
    if previous is None:
        previous = _assumed_previous(blocks)
    shared = 0
    for block, before in zip(blocks, previous, strict=False):
        if block.fingerprint != before:
            break
        shared += 1
    prefix = sum(b.tokens or 0 for b in blocks[:shared])
    read_upto = shared if prefix >= minimum else 0
    written: CacheStatus = "written" if provider in _MARKED else "uncached"
    total = sum(b.tokens or 0 for b in blocks)
    rest: CacheStatus = written if total >= minimum else "uncached"
    return [replace(b, cache="read" if b.index < read_upto else rest) for b in blocks]


def _assumed_previous(blocks: Sequence[Block]) -> list[str]:
    """The blocks the thread's previous turn sent first: everything before the history's
    newest user message (which that turn sent as its own current message)."""
    history = [b.index for b in blocks if b.kind == "history" and b.title.startswith("user")]
    newest = history[-1] if history else None
    kept: list[str] = []
    for block in blocks:
        if block.kind in ("dynamic", "current", "round") or block.index == newest:
            break
        kept.append(block.fingerprint)
    return kept


def _cache_note(previous: Sequence[str] | None) -> str:
    if previous is None:
        return ("cache status assumes the thread's previous request sent the same tools, "
                "stable text and history up to the newest exchange")
    return "cache status compares this request with the one sent before it"


_FROM = {"builtin": "built-in text", "file": "bootstrap file", "input": "compile input",
         "runtime": "runtime contribution", "hook": "hook contribution"}


class _Sources:
    """Where each section came from: its template (built-in or a deployment folder) or
    its bootstrap file, and the diagnostics about it."""

    def __init__(self, compiler: PromptCompiler, profile: LoadedProfile,
                 payload: CompiledPromptPayload):
        self.profile = profile
        self.by_id = {s.id: s for s in profile.spec.sections}
        self.slot = next((s for s in profile.spec.sections if s.source == "slot"), None)
        self.folders = [Path(f) for f in getattr(compiler.templates.env.loader, "searchpath",
                                                 ())]
        self.builtin = builtin_dir("templates").resolve()
        manifest = payload.manifest
        self.files = {e.file: e for e in manifest.source_manifest}
        self.all_diagnostics = manifest.diagnostics

    def _template(self, name: str) -> dict[str, str]:
        for folder in self.folders:
            if (folder / name).is_file():
                if folder.resolve() == self.builtin:
                    return {"template": name, "origin": "built-in"}
                return {"template": name, "origin": f"deployment folder {folder}"}
        return {"template": name, "origin": "not found"}

    def of(self, record: ManifestSection) -> dict[str, str]:
        """``from`` (what gave the content), the template and its origin, and for a
        bootstrap section the file and how it was read."""
        spec = self.by_id.get(record.id)
        if spec is None:
            spec = self.slot
        kind, _, name = record.source.partition(":")
        out = {"from": _FROM.get(kind, kind) + (f" {name}" if name else "")}
        if spec is not None:
            out.update(self._template(spec.template))
        if kind == "file":
            entry = self.files.get(name)
            if entry is not None:
                out["file"] = entry.path
                out["file_status"] = entry.status
        return out

    def diagnostics(self, record: ManifestSection) -> tuple[str, ...]:
        path = self.files.get(record.source.removeprefix("file:"))
        return tuple(
            f"{d.code}: {d.message}" for d in self.all_diagnostics
            if d.section_id == record.id or (path is not None and d.file == path.path)
        )


def _diagnostic(d: Diagnostic) -> dict[str, str]:
    return d.model_dump(mode="json", exclude_none=True)


# -- a stored turn ---------------------------------------------------------------------


def map_turn(record: TurnRecord, *, budget: tuple[int, int]) -> ContextMap:
    """The map of a stored turn: the blocks of its last provider round (the whole turn so
    far), and one row per round with the planned cache split beside the reported usage.

    A record keeps the token counts of the sections and the history messages, not of the
    tool definitions or of this turn's messages: those blocks show no count, and the
    planned figures leave them out.
    """
    if all(r.cache is not None for r in record.rounds):
        return _turn_from_plans(record, budget)
    per_round = [_round_blocks(record, r) for r in record.rounds]
    planned: list[list[Block]] = []
    previous: Sequence[str] | None = None
    for pieces in per_round:
        planned.append(_with_cache(pieces, record.rounds[0].provider.provider, previous,
                                   DEFAULT_MINIMUM_TOKENS))
        previous = [b.fingerprint for b in pieces]
    blocks = planned[-1]
    last = record.rounds[-1]
    manifest = last.manifest
    history = record.history
    window, reserve = budget
    limits = (history.budget, history.threshold) if history is not None else (
        max(0, window - reserve), _threshold(window, reserve))
    sent = sum(b.tokens or 0 for b in blocks if b.kind in ("summary", "history"))
    notes = ["the record keeps no token counts for tool definitions or this turn's messages; "
             "planned figures leave them out"] if any(b.tokens is None for b in blocks) else []
    if len(record.rounds) > 1:
        notes.append(f"the blocks are those of round {last.round}, the last; each round "
                     "after the first is compared with the round before it")
    return ContextMap(
        title=f"pioneer explain {record.turn_id}", profile=manifest.profile,
        profile_fingerprint=manifest.profile_fingerprint, profile_file="",
        provider=last.provider.provider, model="", placement=last.provider.dynamic_placement,
        blocks=tuple(blocks),
        budget=Budget(window, reserve, limits[0], limits[1], sent,
                      history.mode if history is not None else None),
        rounds=tuple(RoundRow(r.round, _planned(p), _reported(r.usage))
                     for r, p in zip(record.rounds, planned, strict=True)),
        diagnostics=tuple(_diagnostic(d) for d in manifest.diagnostics),
        notes=(*notes, _cache_note(None)),
    )


def _turn_from_plans(record: TurnRecord, budget: tuple[int, int]) -> ContextMap:
    """The map of a turn whose rounds carry their cache plans: the last round's blocks
    as its plan has them, one row per round."""
    last = record.rounds[-1]
    plan = last.cache
    assert plan is not None
    manifest = last.manifest

    def source(section: ManifestSection) -> dict[str, str]:
        return {"from": section.source}

    def diagnostics(section: ManifestSection) -> tuple[str, ...]:
        return tuple(f"{d.code}: {d.message}" for d in manifest.diagnostics
                     if d.section_id == section.id)

    blocks = _from_plan(plan, manifest.sections, {}, source, diagnostics)
    history = record.history
    window, reserve = budget
    limits = (history.budget, history.threshold) if history is not None else (
        max(0, window - reserve), _threshold(window, reserve))
    sent = sum(b.tokens or 0 for b in blocks if b.kind in ("summary", "history"))
    notes = [_plan_note(plan, False)]
    if len(record.rounds) > 1:
        notes.insert(0, f"the blocks are those of round {last.round}, the last")
    return ContextMap(
        title=f"pioneer explain {record.turn_id}", profile=manifest.profile,
        profile_fingerprint=manifest.profile_fingerprint, profile_file="",
        provider=last.provider.provider, model=plan.model,
        placement=last.provider.dynamic_placement, blocks=tuple(blocks),
        budget=Budget(window, reserve, limits[0], limits[1], sent,
                      history.mode if history is not None else None),
        rounds=tuple(_row(r.round, r.cache, r.usage) for r in record.rounds
                     if r.cache is not None),
        diagnostics=tuple(_diagnostic(d) for d in manifest.diagnostics),
        notes=tuple(notes), plan=_planned_of(plan),
    )


def _round_blocks(record: TurnRecord, r: RoundRecord) -> list[Block]:
    manifest = r.manifest
    placement = r.provider.dynamic_placement
    out: list[Block] = []

    def add(kind: BlockKind, id_: str, title: str, stability: Any, tokens: int | None,
            chars: int | None, source: dict[str, str], key: str, **extra: Any) -> None:
        out.append(Block(len(out), kind, id_, title, stability, tokens, chars, "uncached",
                         source, fingerprint=f"{kind}:{id_}:{key}", **extra))

    for name in r.visible_tools:
        add("tools", name, f"tool {name}", "stable", None, None,
            {"from": "ChatRequest.tools"}, name)

    def sections(side: Literal["stable", "dynamic"]) -> None:
        for s in manifest.sections:
            if s.stability == side:
                add(side, s.id, s.id, side, s.tokens, s.chars, {"from": s.source}, s.sha256,
                    truncated=s.truncated, diagnostics=tuple(
                        f"{d.code}: {d.message}" for d in manifest.diagnostics
                        if d.section_id == s.id))

    sections("stable")
    if placement == "system":
        sections("dynamic")
    history = record.history
    if history is not None:
        for n, message in enumerate(history.messages):
            summary = message.role == "system" and n == 0 and history.summary_sent
            add("summary" if summary else "history", f"history[{n}]",
                "history summary" if summary else f"{message.role} (history)",
                "conversation", message.tokens, None, {"from": "history snapshot"},
                f"{n}:{message.tokens}")
    if placement == "cache-first":
        sections("dynamic")
    add("current", "user", "user message (this turn)", "conversation", None, None,
        {"from": "the turn's messages (not kept in the record)"}, "current")
    for earlier in record.rounds[:r.round - 1]:
        calls = ", ".join(c.name for c in earlier.calls) or "no calls recorded"
        add("round", f"round[{earlier.round}]", f"round {earlier.round}: {calls}",
            "conversation", None, None, {"from": "the turn's messages (not kept in the record)"},
            str(earlier.round))
    return out


def _reported(usage: ReportedUsage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {k: v for k, v in usage.model_dump().items() if v is not None}


def _planned(blocks: Sequence[Block]) -> dict[str, int]:
    planned = {"read": 0, "written": 0, "uncached": 0}
    for block in blocks:
        planned[block.cache] += block.tokens or 0
    return planned


# -- output ----------------------------------------------------------------------------


def as_data(cmap: ContextMap) -> dict[str, Any]:
    """The map as plain JSON data (what the page embeds and ``--json`` prints)."""
    return {
        "title": cmap.title,
        "profile": cmap.profile,
        "profile_fingerprint": cmap.profile_fingerprint,
        "profile_file": cmap.profile_file,
        "provider": cmap.provider,
        "model": cmap.model,
        "placement": cmap.placement,
        "budget": asdict(cmap.budget),
        "totals": cmap.totals(),
        "blocks": [{k: v for k, v in asdict(b).items() if k != "fingerprint"}
                   for b in cmap.blocks],
        "rounds": [asdict(r) for r in cmap.rounds],
        "diagnostics": list(cmap.diagnostics),
        "notes": list(cmap.notes),
        "plan": cmap.plan,
    }


def write_page(path: Path, cmap: ContextMap) -> None:
    """Write :func:`render_html` to ``path`` (UTF-8); a failure names the file."""
    try:
        path.write_text(render_html(cmap), encoding="utf-8")
    except OSError as error:
        raise InputError(Problem(f"cannot write the context map: {error.strerror or error}",
                                 file=str(path))) from None


def render_json(cmap: ContextMap) -> str:
    """The map's data as JSON (sorted keys)."""
    return json.dumps(as_data(cmap), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_html(cmap: ContextMap) -> str:
    """One self-contained page: inline CSS and script, no network, readable without JS."""
    data = as_data(cmap)
    totals = data["totals"]
    e = html.escape
    strip = "\n".join(_strip_block(b) for b in cmap.blocks)
    rows = "\n".join(_table_row(b) for b in cmap.blocks)
    figures = cmap.plan or totals["by_cache"]
    legend = "".join(
        f'<li><span class="swatch cache-{status}"></span>{status}: '
        f'<span id="plan-{status}">{figures[status]}</span> tokens</li>'
        for status in ("read", "written", "uncached"))
    rounds = _rounds_table(cmap.rounds)
    notes = "".join(f"<li>{e(n)}</li>" for n in cmap.notes)
    # Every "<" as \u003c: no "</script>" can close the data block and no "<!--" can
    # start the parser's double-escaped state, which would swallow the page's script.
    embedded = json.dumps(data, sort_keys=True, ensure_ascii=False).replace("<", "\\u003c")
    model = f", model {e(cmap.model)}" if cmap.model else ""
    return _PAGE.format(
        title=e(cmap.title), profile=e(cmap.profile),
        profile_file=f" from <code>{e(cmap.profile_file)}</code>" if cmap.profile_file else "",
        fingerprint=e(cmap.profile_fingerprint[:12]),
        provider=e(cmap.provider), model=model, placement=e(cmap.placement),
        total=totals["tokens"], blocks=len(cmap.blocks), strip=strip, rows=rows,
        legend=legend, budget=_budget_figure(cmap.budget, totals["tokens"]), rounds=rounds,
        notes=notes, data=embedded, style=_STYLE, script=_SCRIPT,
    )


def _describe(b: Block) -> str:
    source = ", ".join(f"{k} {v}" for k, v in b.source.items() if v)
    parts = [f"#{b.index} {b.kind} {b.id}", b.title, f"{b.stability}", f"cache {b.cache}",
             f"{_n(b.tokens)} tokens", f"{_n(b.chars)} chars", source]
    if b.truncated:
        parts.append("truncated")
    parts += list(b.diagnostics)
    return " | ".join(parts)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _strip_block(b: Block) -> str:
    e = html.escape
    grow = max(b.tokens or 0, 1)
    attrs = {
        "index": b.index, "kind": b.kind, "id": b.id, "title": b.title,
        "stability": b.stability, "cache": b.cache, "tokens": _n(b.tokens),
        "chars": _n(b.chars), "truncated": "yes" if b.truncated else "no",
        "source": json.dumps(b.source, sort_keys=True), "diagnostics": "\n".join(b.diagnostics),
    }
    data = " ".join(f'data-{k}="{e(str(v))}"' for k, v in attrs.items())
    classes = f"block kind-{b.kind} stability-{b.stability} cache-{b.cache}" + (
        " truncated" if b.truncated else "")
    return (f'<a class="{classes}" href="#row-{b.index}" style="flex-grow:{grow}" {data} '
            f'title="{e(_describe(b))}" aria-label="{e(_describe(b))}"></a>')


def _table_row(b: Block) -> str:
    e = html.escape
    source = "<br>".join(f"{e(k.replace('_', ' '))}: {e(v)}" for k, v in b.source.items() if v)
    notes = "<br>".join(e(d) for d in b.diagnostics)
    return (
        f'<tr id="row-{b.index}" class="cache-{b.cache}-row" data-index="{b.index}">'
        f"<td>{b.index}</td><td>{e(b.kind)}</td><td><code>{e(b.id)}</code></td>"
        f"<td>{e(b.title)}</td><td>{e(b.stability)}</td>"
        f'<td><span class="swatch cache-{b.cache}"></span>{e(b.cache)}</td>'
        f'<td class="num">{_n(b.tokens)}</td><td class="num">{_n(b.chars)}</td>'
        f"<td>{source}</td><td>{'yes' if b.truncated else ''}</td><td>{notes}</td></tr>"
    )


def _budget_figure(budget: Budget, total: int) -> str:
    window = max(budget.context_window, 1)

    def pct(value: int) -> str:
        return f"{min(100.0, 100 * value / window):.2f}%"

    history_pct = budget.history_tokens / budget.history_budget if budget.history_budget else 0
    mode = f", history mode {html.escape(budget.history_mode)}" if budget.history_mode else ""
    history_budget = max(budget.history_budget, 1)
    history_width = f"{min(100.0, 100 * budget.history_tokens / history_budget):.2f}%"
    return (
        f'<p class="axis">context window: the request, and the reply\'s reserve at the '
        f'right</p><div class="window" id="window" role="img" aria-label="request {total} of '
        f'{budget.context_window} tokens, {budget.response_reserve} reserved for the reply">'
        f'<div class="used" style="width:{pct(total)}"></div>'
        f'<div class="reserve" style="width:{pct(budget.response_reserve)}"></div></div>'
        f'<p class="axis">history budget (dashed: 80%, where summarising starts)</p>'
        f'<div class="window" id="history-window" role="img" aria-label="history '
        f'{budget.history_tokens} of a {budget.history_budget}-token budget, summarising at '
        f'{budget.history_threshold}"><div class="used history" style="width:{history_width}">'
        f'</div><div class="line" style="left:80%" title="80%: summarising starts at '
        f'{budget.history_threshold} tokens"></div></div>'
        f'<p id="budget-text">Request <strong id="total-tokens">{total}</strong> of '
        f"{budget.context_window} tokens ({pct(total)} of the context window); response reserve "
        f"{budget.response_reserve}. History <strong id=\"history-tokens\">"
        f"{budget.history_tokens}</strong> tokens of a {budget.history_budget}-token budget "
        f"({100 * history_pct:.1f}%); summarising starts at 80%, {budget.history_threshold} "
        f"tokens{mode}.</p>"
    )


def _rounds_table(rounds: Sequence[RoundRow]) -> str:
    if not rounds:
        return ""
    rows = []
    for r in rounds:
        planned = r.planned
        reported = r.reported or {}

        def cell(values: Mapping[str, int], key: str) -> str:
            return f'<td class="num">{values[key]}</td>' if key in values else "<td>-</td>"

        rows.append(
            f'<tr id="round-{r.round}"><td>{r.round}</td>'
            + "".join(cell(planned, k) for k in ("read", "written", "uncached"))
            + "".join(cell(reported, k) for k in ("input_tokens", "cache_read_input_tokens",
                                                   "cache_creation_input_tokens",
                                                   "output_tokens"))
            + "</tr>")
    return (
        '<section aria-labelledby="rounds-h"><h2 id="rounds-h">Provider rounds</h2>'
        '<table id="rounds"><thead><tr><th rowspan="2">round</th>'
        '<th colspan="3">planned tokens</th><th colspan="4">reported by the provider</th></tr>'
        "<tr><th>read</th><th>written</th><th>uncached</th><th>input</th><th>cache read</th>"
        "<th>cache written</th><th>output</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table></section>"
    )


# Okabe-Ito colours (distinct for the common colour-vision deficiencies); the stability
# of a block is also drawn as a pattern and every state is written out in the table.
_STYLE = """
:root { --read: #0072B2; --written: #E69F00; --uncached: #999999; --ink: #1b1b1b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--ink); margin: 1.5rem; }
h1 { font-size: 1.3rem; margin: 0 0 .3rem; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
.strip { display: flex; height: 64px; border: 1px solid #444; gap: 1px; background: #444; }
.block { flex-basis: 0; min-width: 4px; display: block; background: var(--uncached); }
.block.cache-read { background-color: var(--read); }
.block.cache-written { background-color: var(--written); }
.block.stability-dynamic { background-image: repeating-linear-gradient(45deg,
  rgba(255,255,255,.55) 0 3px, transparent 3px 8px); }
.block.stability-conversation { background-image: repeating-linear-gradient(90deg,
  rgba(0,0,0,.28) 0 2px, transparent 2px 6px); }
.block.truncated { box-shadow: inset 0 -6px 0 #000; }
.block:focus, .block:hover { outline: 3px solid #000; outline-offset: -3px; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .3em;
  vertical-align: -.1em; border: 1px solid #444; background: var(--uncached); }
.swatch.cache-read { background: var(--read); }
.swatch.cache-written { background: var(--written); }
.legend { list-style: none; padding: 0; display: flex; gap: 1.2rem; flex-wrap: wrap; }
#details { min-height: 3.2em; border-left: 4px solid #444; padding: .3rem .6rem;
  background: #f4f4f4; white-space: pre-wrap; }
table { border-collapse: collapse; width: 100%; margin-top: .5rem; }
th, td { border: 1px solid #ccc; padding: .2rem .4rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:target, tr.current { background: #fff3c4; }
.window { position: relative; height: 22px; border: 1px solid #444; background: #fff; }
.window .used { position: absolute; left: 0; top: 0; bottom: 0; background: var(--read); }
.window .reserve { position: absolute; right: 0; top: 0; bottom: 0; background:
  repeating-linear-gradient(45deg, #bbb 0 3px, #eee 3px 6px); }
.window .used.history { background: var(--written); }
.axis { margin: .4rem 0 .1rem; font-size: .85em; color: #444; }
.window .line { position: absolute; top: -4px; bottom: -4px; width: 0;
  border-left: 2px dashed #000; }
"""

_SCRIPT = """
(function () {
  var blocks = Array.prototype.slice.call(document.querySelectorAll('.strip .block'));
  var details = document.getElementById('details');
  function show(block) {
    var d = block.dataset, source = JSON.parse(d.source), lines = [];
    lines.push('#' + d.index + ' ' + d.kind + '  ' + d.id + '  ' + d.title);
    lines.push(d.stability + ', cache ' + d.cache + ', ' + d.tokens + ' tokens, ' +
               d.chars + ' chars' + (d.truncated === 'yes' ? ', truncated' : ''));
    Object.keys(source).forEach(function (k) { lines.push(k + ': ' + source[k]); });
    if (d.diagnostics) { lines.push(d.diagnostics); }
    details.textContent = lines.join('\\n');
    document.querySelectorAll('tr.current').forEach(function (r) {
      r.classList.remove('current'); });
    var row = document.getElementById('row-' + d.index);
    if (row) { row.classList.add('current'); }
  }
  blocks.forEach(function (block, i) {
    block.addEventListener('mouseenter', function () { show(block); });
    block.addEventListener('focus', function () { show(block); });
    block.addEventListener('keydown', function (event) {
      var step = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1}[event.key];
      if (event.key === 'Home') { step = -i; } else if (event.key === 'End') {
        step = blocks.length - 1 - i; }
      if (step === undefined) { return; }
      var next = blocks[Math.max(0, Math.min(blocks.length - 1, i + step))];
      next.focus();
      event.preventDefault();
    });
  });
  document.documentElement.classList.add('js');
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}: context map</title>
<style>{style}</style>
</head>
<body>
<header>
<h1>{title}: context map</h1>
<p id="summary">Profile <code>{profile}</code>{profile_file} (fingerprint {fingerprint}), provider
{provider}{model}, dynamic text placement {placement}: <strong>{total}</strong> tokens in
{blocks} blocks, in the order the provider receives them.</p>
</header>
<main>
<section aria-labelledby="map-h">
<h2 id="map-h">The request, block by block</h2>
<p>Each block's width is its share of the tokens. Colour: expected cache status; stripes:
dynamic text (diagonal) or conversation (vertical); a dark bottom edge: cut to its budget.
Tab or the arrow keys move between blocks.</p>
<nav class="strip" id="strip" aria-label="blocks in provider order">
{strip}
</nav>
<ul class="legend">{legend}</ul>
<div id="details" aria-live="polite">Hover over or focus a block for its details.</div>
</section>
<section aria-labelledby="budget-h">
<h2 id="budget-h">Context window and history budget</h2>
{budget}
</section>
{rounds}
<section aria-labelledby="blocks-h">
<h2 id="blocks-h">Every block</h2>
<table id="blocks">
<thead><tr><th>#</th><th>kind</th><th>id</th><th>title</th><th>stability</th><th>cache</th>
<th>tokens</th><th>chars</th><th>source</th><th>truncated</th><th>diagnostics</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
</section>
<section aria-labelledby="notes-h"><h2 id="notes-h">Notes</h2><ul>{notes}</ul></section>
</main>
<script type="application/json" id="context-map-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""
