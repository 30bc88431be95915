"""The context map: where every token of a request goes, and what the provider caches.

:func:`map_request` takes a compiled prompt inside a :class:`~pioneer.providers.ChatRequest`
and gives a :class:`ContextMap`: the request block by block in the order the provider
receives it (tools, stable sections, history summary, history turns, then this turn: the
dynamic sections, the current user message and its tool rounds; with the ``system``
placement the dynamic sections follow the stable ones), each with its tokens, stability,
source, text and expected cache status. :func:`map_turn` does the same for a stored turn
from its record, one row per provider round. :func:`render_json` is the data and
:func:`render_text` its rows and category summary for a terminal;
:mod:`pioneer.review.map_page` draws one self-contained page from exactly that data.

Every figure is a sum of rows: a block the provider caches as one piece (the stable
system text) is opened into its sections, and what the block holds beyond them (the
separators, a message's JSON wrapper) is a ``framing`` row of its own, so the sections
and that row add up to the block as the cache plan counts it. Each row carries its
tokens read from cache, written to it and sent uncached (a row the provider reads in
part has some of each), so the per-status totals are the plan's own. The expected cache
status is ``read``, ``written`` (Anthropic writes it into the cache at its marks, billed
above the input price) or ``uncached``; docs/context-map.md says how it is worked out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..audit.cache_report import CacheBlock, CachePlan, block_texts, plan_request, request_blocks
from ..audit.record import ReportedUsage, RoundRecord, TurnRecord
from ..compile.compiler import LoadedProfile, PromptCompiler
from ..compile.manifest import CompiledPromptPayload, Diagnostic, ManifestSection
from ..errors import InputError, Problem, counted
from ..files import builtin_dir
from ..providers import build_request_body
from ..providers._caching import DEFAULT_MINIMUM_TOKENS
from ..providers._layout import turn_start
from ..providers.api import PROVIDER_APIS
from ..providers.models import model_facts
from ..providers.request import ChatMessage, ChatRequest
from ..providers.rules import previewing
from ..providers.window import context_window
from ..tokens import TokenCounter, default_counter

__all__ = [
    "CATEGORIES",
    "NO_MODEL",
    "Block",
    "BlockKind",
    "Budget",
    "CacheStatus",
    "ContextMap",
    "RoundRow",
    "as_data",
    "map_request",
    "map_turn",
    "render_json",
    "render_text",
]

#: The model a map is drawn for when none is given (``inspect --html`` without
#: ``--model``): the provider's default facts are used, and the map says so.
NO_MODEL = "unspecified"

BlockKind = Literal["tools", "stable", "framing", "summary", "history", "dynamic", "current",
                    "round"]
CacheStatus = Literal["read", "written", "uncached"]
#: The summary's categories, as Claude Code's ``/context`` groups a request: name → label.
CATEGORIES: dict[str, str] = {"system": "system prompt", "tools": "tools",
                              "history": "history", "turn": "this turn"}
_CATEGORY: dict[str, str] = {"tools": "tools", "stable": "system", "framing": "system",
                             "dynamic": "system", "summary": "history", "history": "history",
                             "current": "turn", "round": "turn"}
_STATUSES: tuple[CacheStatus, ...] = ("read", "written", "uncached")



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
    #: Its tokens read from cache, written to it and sent uncached (they sum to ``tokens``).
    split: tuple[int, int, int] = (0, 0, 0)
    #: The text the block was counted from, when the map was drawn from one.
    text: str | None = None

    @property
    def category(self) -> str:
        """``system``, ``tools``, ``history`` or ``turn`` (see :data:`CATEGORIES`)."""
        return _CATEGORY[self.kind]


@dataclass(frozen=True, slots=True)
class Budget:
    """The context window, the reply's reserve, and the history budget with its rows."""

    context_window: int
    #: Where the window comes from: the model table, or the max_context_tokens setting.
    window_from: str
    response_reserve: int
    history_budget: int
    history_threshold: int
    #: The history as the budget counts it: (message, tokens), oldest first.
    history: tuple[tuple[str, int], ...]
    #: ``budgeter`` (the turn's history decision, per-message overhead included) or
    #: ``request`` (the history blocks of the request, as the cache plan counts them).
    history_counted: Literal["budgeter", "request"]
    history_mode: str | None = None

    @property
    def history_tokens(self) -> int:
        """The sum of the history rows."""
        return sum(tokens for _, tokens in self.history)


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One provider round: the planned cache split beside what the provider reported."""

    round: int
    planned: dict[str, int]
    reported: dict[str, int] | None
    #: How the round's request fits the window (the record's ``window``), when kept.
    window: dict[str, Any] | None = None


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
    #: The shortest prefix the provider caches for this model, when a cache plan said.
    minimum_tokens: int | None = None
    #: Why the blocks carry no text (a turn record keeps none), when they do not.
    no_text: str = ""
    #: The cache plan's read / written / uncached tokens for the request shown, when the
    #: map was drawn from one: the sums of the blocks' splits, as ``totals`` has them.
    plan: dict[str, int] | None = None

    def totals(self) -> dict[str, Any]:
        """Tokens per kind, per category and per cache status, and in all: each a sum of
        the blocks' own figures."""
        by_kind: dict[str, int] = {}
        by_category = dict.fromkeys(CATEGORIES, 0)
        by_cache = dict.fromkeys(_STATUSES, 0)
        for block in self.blocks:
            tokens = block.tokens or 0
            by_kind[block.kind] = by_kind.get(block.kind, 0) + tokens
            by_category[block.category] += tokens
            for status, part in zip(_STATUSES, block.split, strict=True):
                by_cache[status] += part
        total = sum(b.tokens or 0 for b in self.blocks)
        window = self.budget.context_window
        return {"tokens": total, "by_kind": by_kind, "by_category": by_category,
                "by_cache": by_cache,
                "unknown_blocks": sum(1 for b in self.blocks if b.tokens is None),
                "share_of_window": _share(total, window)}

    def categories(self) -> list[dict[str, Any]]:
        """The window row by row, like Claude Code's ``/context``: each category of the
        request, the reply's reserve and what is left free; their tokens sum to the window
        (an ``over`` row takes the place of ``free`` when the request does not fit)."""
        window = self.budget.context_window
        rows: list[dict[str, Any]] = []
        for name, label in CATEGORIES.items():
            mine = [b for b in self.blocks if b.category == name]
            tokens = sum(b.tokens or 0 for b in mine)
            rows.append({"category": name, "label": label, "tokens": tokens,
                         "detail": _detail(name, mine)})
        used = sum(row["tokens"] for row in rows)
        reserve = self.budget.response_reserve
        rows.append({"category": "reserve", "label": "reserved for the reply",
                     "tokens": reserve, "detail": ""})
        left = window - used - reserve
        rows.append({"category": "free" if left >= 0 else "over",
                     "label": "free" if left >= 0 else "over the window",
                     "tokens": left, "detail": ""})
        for row, share in zip(rows, _shares([row["tokens"] for row in rows], window),
                              strict=True):
            row["share"] = share
        return rows


def _share(tokens: int, window: int) -> float:
    return round(tokens / window, 4) if window else 0.0


def _shares(tokens: Sequence[int], window: int) -> list[float]:
    """Each figure's share of ``window`` to four places, rounded so that shares of figures
    summing to the window sum to exactly 1 (the largest remainders round up), as the
    window table shows them: 0.26% + ... + 91.69% is 100.00%, never 100.01%."""
    if not window:
        return [0.0] * len(tokens)
    scaled = [n * 10_000 for n in tokens]
    units = [value // window for value in scaled]  # floors, negative figures too
    short = (sum(scaled) // window) - sum(units)
    by_remainder = sorted(range(len(tokens)), key=lambda i: (-(scaled[i] % window), i))
    for i in by_remainder[:short]:
        units[i] += 1
    return [unit / 10_000 for unit in units]


def _detail(category: str, blocks: Sequence[Block]) -> str:
    kinds = [b.kind for b in blocks]
    if category == "system":
        sides = [f"{kinds.count(side)} {side}" for side in ("stable", "dynamic")
                 if side in kinds]
        return counted(kinds.count("stable") + kinds.count("dynamic"), "section") + (
            f" ({', '.join(sides)})" if sides else "") + (
            f", framing {sum(b.tokens or 0 for b in blocks if b.kind == 'framing')}"
            if "framing" in kinds else "")
    if category == "tools":
        return counted(len(blocks), "definition")
    if category == "history":
        summary = "a summary and " if "summary" in kinds else ""
        return summary + counted(kinds.count("history"), "message block")
    return counted(len(blocks), "message block")


# -- building the blocks -------------------------------------------------------------


def map_request(
    compiler: PromptCompiler,
    request: ChatRequest,
    provider: str,
    *,
    budget: tuple[int | None, int],
    counter: TokenCounter | None = None,
    previous: Sequence[ChatRequest] | None = None,
    title: str = "pioneer inspect",
    profile: str | None = None,
) -> ContextMap:
    """The map of one request; ``budget`` is (the max_context_tokens override or None,
    the response reserve): the window is the override, else the model's from the model
    table (:func:`~pioneer.providers.window.context_window`), and the history's budget is
    what the window leaves after the reserve and the rest of the request.

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
    budget: tuple[int | None, int], profile_name: str | None,
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
    earlier = [_blocks_of(provider, before, counter)
               for before in (previous if previous is not None else [_previous_turn(request)])]
    plan = plan_request(provider, request, body, earlier, manifest=payload.manifest,
                        counter=counter)
    pieces = _from_plan(plan, _Opened(
        payload.manifest.sections, [s.title for s in payload.sections],
        [s.text for s in payload.sections], sources.of, sources.diagnostics),
        block_texts(provider, body))
    override, reserve = budget
    history = tuple((b.title, b.tokens or 0) for b in pieces if b.category == "history")
    window = _window(request.model, provider, override)
    rest = sum(b.tokens or 0 for b in pieces if b.category != "history")
    share = max(0, window[0] - reserve - rest)
    return ContextMap(
        title=title, profile=payload.manifest.profile,
        profile_fingerprint=payload.manifest.profile_fingerprint,
        profile_file=str(profile.file or ""), provider=provider,
        model=request.model, placement=request.cache.dynamic_placement, blocks=tuple(pieces),
        budget=Budget(*window, reserve, share, _threshold(share, 0), history, "request"),
        diagnostics=tuple(_diagnostic(d) for d in payload.manifest.diagnostics),
        notes=(_plan_note(plan, previous is None),), minimum_tokens=plan.minimum_tokens,
        plan=_planned_of(plan),
    )


def _window(model: str, provider: str, override: int | None) -> tuple[int, str]:
    """The context window a request of ``model`` must fit, and where it comes from: the
    max_context_tokens override, else the model table's (its family's when the table has
    no row for it, and then said so); what the turn runner uses."""
    if override is None and model == NO_MODEL:
        facts = model_facts(model, provider)
        return facts.context_window, ("no model given: window and minimum of the default "
                                      f"model ({facts.row}, {facts.origin}, "
                                      f"{facts.source_date})")
    found = context_window(model, provider, override)
    if not model and override is None:
        return found.tokens, f"{found.source}; the record names no model"
    return found.tokens, found.source


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


@dataclass(frozen=True, slots=True)
class _Opened:
    """What the stable and dynamic blocks open into: the manifest's sections, with their
    titles and texts (None where not known), sources and diagnostics."""

    sections: Sequence[ManifestSection]
    titles: Sequence[str | None]
    texts: Sequence[str | None]
    source_of: Callable[[ManifestSection], dict[str, str]]
    diagnostics_of: Callable[[ManifestSection], tuple[str, ...]]


def _from_plan(plan: CachePlan, opened: _Opened, texts: Sequence[str] | None) -> list[Block]:
    """The plan's blocks in its order, the stable and dynamic blocks opened into their
    sections (and the block's framing beyond them); each row's cache split from the
    plan's cached and written prefix."""
    out: list[Block] = []
    seen_turn = False
    for position, block in enumerate(plan.blocks):
        if block.kind in ("stable", "prompt", "dynamic"):
            out += _sections_of(block, opened, len(out),
                                len(texts[position]) if texts is not None else block.chars)
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
        text = texts[position] if texts is not None else None
        out.append(Block(len(out), kind, name, title,
                         "stable" if kind == "tools" else "conversation", block.tokens,
                         len(text) if text is not None else block.chars, "uncached",
                         {"from": f"request body: {block.label}"}
                         | ({"cache mark": "yes"} if block.marked else {}),
                         fingerprint=block.digest, text=text))
    return _split(out, plan.cached_tokens, plan.cached_tokens + plan.written_tokens)


def _sections_of(block: CacheBlock, opened: _Opened, first: int,
                 chars: int | None) -> list[Block]:
    sides = {"stable": ("stable",), "prompt": ("stable", "dynamic"),
             "dynamic": ("dynamic",)}[block.kind]
    out: list[Block] = []
    for record, title, text in zip(opened.sections, opened.titles, opened.texts, strict=True):
        if record.stability in sides:
            out.append(Block(
                first + len(out), record.stability, record.id, title or record.id,
                record.stability, record.tokens, record.chars, "uncached",
                opened.source_of(record), truncated=record.truncated,
                diagnostics=opened.diagnostics_of(record), fingerprint=block.label, text=text))
    if any(b.tokens is None for b in out):
        return out
    rest = block.tokens - sum(b.tokens or 0 for b in out)
    if rest:
        stability: Literal["stable", "dynamic"] = (
            "stable" if block.kind == "stable" else "dynamic")
        out.append(Block(
            first + len(out), "framing", f"{block.label} framing",
            f"framing of {block.label}", stability, rest,
            None if chars is None else max(0, chars - sum(b.chars or 0 for b in out)),
            "uncached",
            {"from": f"request body: {block.label}",
             "what": f"{block.tokens} tokens counted as one block, less its sections "
                     "counted one by one (separators, the message's wrapper, tokens that "
                     "merge across a join)"},
            fingerprint=block.digest))
    return out


def _split(blocks: Sequence[Block], cached_end: int, written_end: int) -> list[Block]:
    """Each row's tokens read, written and uncached, from where the request's cached and
    written prefixes end; its status is that of its last token (as the plan has it)."""

    def at(position: int) -> tuple[int, int, int]:
        return (min(position, cached_end),
                min(max(position, cached_end), written_end) - cached_end,
                max(position, written_end) - written_end)

    out: list[Block] = []
    start = 0
    for block in blocks:
        end = start + (block.tokens or 0)
        before, after = at(start), at(end)
        split = (after[0] - before[0], after[1] - before[1], after[2] - before[2])
        status: CacheStatus = "read" if end <= cached_end else (
            "written" if end <= written_end else "uncached")
        out.append(replace(block, cache=status, split=split))
        start = end
    return out


def _role(label: str) -> str:
    """The role a body label names, e.g. "assistant" in "messages[3] (assistant) block 0"."""
    return label.partition("(")[2].partition(")")[0] or "message"


def _planned_of(plan: CachePlan) -> dict[str, int]:
    return {"read": plan.cached_tokens, "written": plan.written_tokens,
            "uncached": plan.uncached_tokens}


def _row(number: int, plan: CachePlan, usage: ReportedUsage | None,
         fit: dict[str, Any] | None = None) -> RoundRow:
    return RoundRow(number, _planned_of(plan), _reported(usage), fit)


def _fit(r: RoundRecord) -> dict[str, Any] | None:
    """How a round's request fits the window, as its record keeps it."""
    return r.window.model_dump(mode="json") if r.window is not None else None


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
            f"cache too (the provider caches in steps of {plan.step_tokens} tokens; each row "
            "says how many of its tokens are read)") if plan.cached_tokens > whole and partly \
        else ""
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
    api = PROVIDER_APIS.get(provider)  # an API that writes only at marks bills a write
    written: CacheStatus = "written" if api is not None and api.cache_marks else "uncached"
    total = sum(b.tokens or 0 for b in blocks)
    rest: CacheStatus = written if total >= minimum else "uncached"
    out = []
    for b in blocks:
        status: CacheStatus = "read" if b.index < read_upto else rest
        tokens = b.tokens or 0
        out.append(replace(b, cache=status, split=(
            tokens if status == "read" else 0, tokens if status == "written" else 0,
            tokens if status == "uncached" else 0)))
    return out


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


_FROM = {"builtin": "built-in text", "text": "deployment text", "file": "bootstrap file",
         "input": "compile input",
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

_NO_TEXT = ("a turn record keeps counts and digests, not text: `pioneer inspect --html` "
            "with the turn's input shows each section's text")


def map_turn(record: TurnRecord, *, budget: tuple[int | None, int]) -> ContextMap:
    """The map of a stored turn: the blocks of its last provider round (the whole turn so
    far), and one row per round with the planned cache split beside the reported usage.

    A record keeps the token counts of the sections and the history messages, not of the
    tool definitions or of this turn's messages: those blocks show no count, and the
    planned figures leave them out. The window and the reserve are the turn's own when
    its rounds recorded them, else ``budget`` (the max_context_tokens override or None,
    the response reserve) as :func:`map_request` takes it; the history budget is the
    record's own when it has a history decision.
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
    notes = ["the record keeps no token counts for tool definitions or this turn's messages; "
             "planned figures leave them out"] if any(b.tokens is None for b in blocks) else []
    if len(record.rounds) > 1:
        notes.append(f"the blocks are those of round {last.round}, the last; each round "
                     "after the first is compared with the round before it")
    return ContextMap(
        title=f"pioneer explain {record.turn_id}", profile=manifest.profile,
        profile_fingerprint=manifest.profile_fingerprint, profile_file="",
        provider=last.provider.provider, model="", placement=last.provider.dynamic_placement,
        blocks=tuple(blocks), budget=_turn_budget(record, blocks, "", "", budget),
        rounds=tuple(RoundRow(r.round, _planned(p), _reported(r.usage), _fit(r))
                     for r, p in zip(record.rounds, planned, strict=True)),
        diagnostics=tuple(_diagnostic(d) for d in manifest.diagnostics),
        notes=(*notes, _cache_note(None)), no_text=_NO_TEXT,
    )


def _turn_budget(record: TurnRecord, blocks: Sequence[Block], model: str, provider: str,
                 budget: tuple[int | None, int]) -> Budget:
    """The budget of a stored turn: the window and reserve its last round recorded (else
    the model's or the override), its history decision's budget and messages when it
    has one (as the budgeter counted them, which is what the text of explain says)."""
    history = record.history
    override, reserve = budget
    fit = record.rounds[-1].window
    if fit is not None:
        window, reserve = (fit.context_window, fit.window_from), fit.reserve_tokens
    else:
        window = _window(model, provider, override)
    if history is None:
        rows = tuple((b.title, b.tokens or 0) for b in blocks if b.category == "history")
        rest = sum(b.tokens or 0 for b in blocks if b.category != "history")
        share = max(0, window[0] - reserve - rest)
        return Budget(*window, reserve, share, _threshold(share, 0), rows, "request")
    rows = tuple((f"{m.role} (history)", m.tokens) for m in history.messages)
    return Budget(*window, reserve, history.budget, history.threshold, rows, "budgeter",
                  history.mode)


def _turn_from_plans(record: TurnRecord, budget: tuple[int | None, int]) -> ContextMap:
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

    sections = manifest.sections
    blocks = _from_plan(plan, _Opened(
        sections, [last.section_titles.get(s.id) for s in sections], [None] * len(sections),
        source, diagnostics), None)
    notes = [_plan_note(plan, False)]
    if len(record.rounds) > 1:
        notes.insert(0, f"the blocks are those of round {last.round}, the last")
    return ContextMap(
        title=f"pioneer explain {record.turn_id}", profile=manifest.profile,
        profile_fingerprint=manifest.profile_fingerprint, profile_file="",
        provider=last.provider.provider, model=plan.model,
        placement=last.provider.dynamic_placement, blocks=tuple(blocks),
        budget=_turn_budget(record, blocks, plan.model, plan.provider, budget),
        rounds=tuple(_row(r.round, r.cache, r.usage, _fit(r)) for r in record.rounds
                     if r.cache is not None),
        diagnostics=tuple(_diagnostic(d) for d in manifest.diagnostics),
        notes=tuple(notes), minimum_tokens=plan.minimum_tokens, no_text=_NO_TEXT,
        plan=_planned_of(plan),
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
                add(side, s.id, r.section_titles.get(s.id, s.id), side, s.tokens, s.chars,
                    {"from": s.source}, s.sha256, truncated=s.truncated, diagnostics=tuple(
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
    planned: dict[str, int] = dict.fromkeys(_STATUSES, 0)
    for block in blocks:
        for status, part in zip(_STATUSES, block.split, strict=True):
            planned[status] += part
    return planned


# -- output ----------------------------------------------------------------------------


def as_data(cmap: ContextMap) -> dict[str, Any]:
    """The map as plain JSON data (what the page embeds and ``--json`` prints)."""
    budget = asdict(cmap.budget)
    budget["history"] = [{"message": m, "tokens": t} for m, t in cmap.budget.history]
    budget["history_tokens"] = cmap.budget.history_tokens
    blocks = []
    for b in cmap.blocks:
        row = {k: v for k, v in asdict(b).items() if k not in ("fingerprint", "split")}
        row["category"] = b.category
        row["split"] = dict(zip(_STATUSES, b.split, strict=True))
        blocks.append(row)
    return {
        "title": cmap.title,
        "profile": cmap.profile,
        "profile_fingerprint": cmap.profile_fingerprint,
        "profile_file": cmap.profile_file,
        "provider": cmap.provider,
        "model": cmap.model,
        "placement": cmap.placement,
        "minimum_tokens": cmap.minimum_tokens,
        "budget": budget,
        "totals": cmap.totals(),
        "context": cmap.categories(),
        "blocks": blocks,
        "rounds": [asdict(r) for r in cmap.rounds],
        "diagnostics": list(cmap.diagnostics),
        "notes": list(cmap.notes),
        "no_text": cmap.no_text,
        "plan": cmap.plan,
    }


def render_json(cmap: ContextMap) -> str:
    """The map's data as JSON (sorted keys)."""
    return json.dumps(as_data(cmap), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_text(cmap: ContextMap, *, sections: bool = True) -> str:
    """The map for a terminal: one line per block (``sections=False`` leaves out the
    section rows, for a view that lists them already), then the category summary."""
    shown = [b for b in cmap.blocks if sections or b.kind not in ("stable", "dynamic")]
    model = (", no model given" if cmap.model == NO_MODEL
             else f", model {cmap.model}" if cmap.model else "")
    head = ("BLOCK", "KIND", "TOKENS", "CACHE")
    cells = [head] + [(b.title, b.kind, _n(b.tokens), _cache_cell(b)) for b in shown]
    widths = [max(len(row[c]) for row in cells) for c in range(len(head))]
    lines = [f"request for {cmap.provider}{model}: {counted(len(cmap.blocks), 'block')}"]
    lines += ["  ".join(cell.rjust(widths[c]) if c == 2 else cell.ljust(widths[c])
                        for c, cell in enumerate(row)).rstrip() for row in cells]
    totals = cmap.totals()
    cache = ", ".join(f"{status} {totals['by_cache'][status]}" for status in _STATUSES)
    minimum = (f" (caches prefixes of {cmap.minimum_tokens}+ tokens)"
               if cmap.minimum_tokens is not None else "")
    lines.append(f"cache: {cache}{minimum}")
    budget = cmap.budget
    lines.append(f"context window {budget.context_window} tokens (from {budget.window_from})")
    rows = cmap.categories()
    width = max(len(row["label"]) for row in rows)
    digits = max(len(str(row["tokens"])) for row in rows)
    for row in rows:
        detail = f"  {row['detail']}" if row["detail"] else ""
        lines.append(f"  {row['label']:<{width}}  {row['tokens']:>{digits}}  "
                     f"{100 * row['share']:6.2f}%{detail}")
    return "\n".join(lines) + "\n"


def _cache_cell(b: Block) -> str:
    read = b.split[0]
    if 0 < read < (b.tokens or 0):
        return f"{b.cache} ({read} read)"
    return b.cache


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
