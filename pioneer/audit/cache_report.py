"""The cache plan of one provider round: what the provider should read from its cache.

From a built request body, :func:`request_blocks` lists the body's blocks in the order
the provider caches them (tools, then system content, then the conversation), each with
its kind (tools, stable, summary, history, dynamic, this turn…), its tokens and a digest
of the prefix it ends. :func:`plan_cache` compares them with the blocks of earlier
requests of the thread under the cache rules of the model's row in the model table
(docs/providers.md: Anthropic marks, OpenAI GPT-5.6+ breakpoints, implicit prefixes) and gives a
:class:`CachePlan`: the tokens expected to be read from cache, written to it and sent
uncached, each block's expected status, and, against the previous request, the first
block that differs and whether that difference broke the cache (a stable section that
changed, tools in another order, dynamic text before the history) or is the normal end
of the shared prefix (a new turn, a new round). The usage the provider reports
(:class:`~pioneer.audit.record.ReportedUsage`: Anthropic ``cache_read_input_tokens`` /
``cache_creation_input_tokens``, OpenAI ``cached_tokens``, Gemini
``cachedContentTokenCount``) sits next to the plan on the round's record, and explain
sets one against the other.

The models here are the stable data of the plan: the turn record stores them, ``pioneer
explain`` prints them and the context map draws them block by block.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from ..compile.manifest import PromptManifest
from ..history.models import SUMMARY_PREFIX
from ..providers._blocks import BodyBlock
from ..providers._breakpoints import BREAKPOINT_KEY
from ..providers._caching import MAX_CACHE_BREAKPOINTS
from ..providers._layout import layout
from ..providers.api import ProviderApi, provider_api
from ..providers.models import model_facts
from ..providers.request import ChatRequest
from ..providers.rules import previewing
from ..text import EDGE_CONFIG, CheckedModel, json_writer
from ..tokens import TokenCounter, default_counter

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "BlockKind",
    "BlockStatus",
    "CacheBlock",
    "CachePlan",
    "FirstDifference",
    "SectionDigest",
    "block_texts",
    "plan_cache",
    "plan_request",
    "request_blocks",
]


#: What a block of a request is, in cache order. ``prompt`` is the one system text of
#: the ``system`` placement on OpenAI, where the stable and dynamic text are joined.
BlockKind = Literal[
    "tools", "stable", "prompt", "summary", "system", "history", "dynamic", "turn",
]
#: A block's expected fate: read from cache, written to it (Anthropic), or sent uncached.
BlockStatus = Literal["cached", "written", "uncached"]
#: How far back (in blocks) an Anthropic mark looks for an entry an earlier request wrote.
ANTHROPIC_LOOKBACK_BLOCKS = 20
# Kinds that belong to the part of a request a later turn sends again unchanged.
_REUSED: frozenset[str] = frozenset({"tools", "stable", "prompt", "summary", "system", "history"})


class SectionDigest(CheckedModel):
    """One stable section inside the stable block: its id and a digest of its text."""

    model_config = EDGE_CONFIG
    id: str = Field(description="Section id.")
    digest: str = Field(description="First 16 hex digits of the section's sha256.")


class CacheBlock(CheckedModel):
    """One block of a request, in the order the provider caches it."""

    model_config = EDGE_CONFIG
    index: int = Field(ge=0, description="Position in cache order, from 0.")
    kind: BlockKind = Field(description="What the block is.")
    label: str = Field(description='Where it is in the body, e.g. "messages[3] (assistant)".')
    tokens: int = Field(ge=0, description="cl100k_base tokens of the block's content.")
    chars: int | None = Field(
        default=None, ge=0, description="Characters of the block's content (its text; a tool "
        "or a message that is not plain text as its JSON); absent in older records.")
    digest: str = Field(
        description="First 16 hex digits of a sha256 over this block and every block before "
        "it (cache marks left out): two requests share a prefix through this block exactly "
        "when their digests here are equal."
    )
    marked: bool = Field(
        default=False,
        description="Carries a cache mark: Anthropic's cache_control, or OpenAI's "
        "prompt_cache_breakpoint (GPT-5.6 and later).")
    status: BlockStatus = Field(default="uncached", description="Expected cache status.")
    sections: list[SectionDigest] = Field(
        default_factory=list, description="For the stable block: its sections, in order."
    )


class FirstDifference(CheckedModel):
    """Where a request first differs from the previous request of the thread."""

    model_config = EDGE_CONFIG
    index: int = Field(ge=0, description="Index of the first block that differs.")
    label: str = Field(description="That block of this request (or 'end of request').")
    broken: bool = Field(
        description="True when a part that later requests send again (tools, stable text, "
        "summary, history) changed or moved: the cache broke. False for the normal end of "
        "the shared prefix: a new turn or a new round."
    )
    reason: str = Field(
        description='Why, e.g. "stable section soul_core changed", "tools changed order", '
        '"dynamic text before the history", "a new turn".'
    )


class CachePlan(CheckedModel):
    """The expected cache behaviour of one provider round."""

    model_config = EDGE_CONFIG
    provider: str = Field(description="Provider name as the CLI spells it.")
    model: str = Field(description="Model the request names.")
    minimum_tokens: int = Field(ge=0, description="Shortest prefix the provider caches.")
    step_tokens: int = Field(
        ge=1, description="Granularity of a cached prefix (OpenAI: 128; others: 1)."
    )
    total_tokens: int = Field(ge=0, description="Tokens of every block.")
    cached_tokens: int = Field(ge=0, description="Expected to be read from cache.")
    written_tokens: int = Field(ge=0, description="Expected to be written to cache.")
    uncached_tokens: int = Field(ge=0, description="Expected to be sent uncached.")
    shared_blocks: int = Field(
        ge=0, description="Leading blocks shared with an earlier request of the thread."
    )
    first_difference: FirstDifference | None = Field(
        default=None, description="Against the previous request; None for the first one."
    )
    blocks: list[CacheBlock] = Field(description="Every block, in cache order.")
    model_note: str | None = Field(
        default=None,
        description="Set when the model table has no row for the model: the family whose "
        "facts (minimum, prices) the plan used instead.",
    )

    @property
    def cached_share(self) -> float:
        """Expected cached tokens as a share of every token (0 for an empty request)."""
        return self.cached_tokens / self.total_tokens if self.total_tokens else 0.0


# -- blocks of a body -------------------------------------------------------------------


#: The keys that mark a block for the cache (Anthropic's, OpenAI's); left out of digests.
_MARKS = frozenset({"cache_control", BREAKPOINT_KEY})


def _strip_marks(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_marks(v) for k, v in value.items() if k not in _MARKS}
    if isinstance(value, list):
        return [_strip_marks(item) for item in value]
    return value


#: A block's JSON as it is counted, and as it is digested (sorted keys; the counted one
#: spaced as ``json.dumps`` spaces by default, the digested one compact).
_COUNTED_JSON = json_writer(separators=(", ", ": "))
_DIGESTED_JSON = json_writer()
#: How a mark's key appears in a block's JSON (neither key has a character JSON escapes).
_MARKED = tuple(f'"{mark}"' for mark in sorted(_MARKS))


def _text_of(content: Any, *, unmarked: bool = False) -> str:
    """The text a block is counted from: its text when it is a text part, else its JSON
    with cache marks left out (``unmarked``: ``content`` is known to carry none)."""
    if isinstance(content, Mapping) and set(content) <= {"type", "text", "cache_control"} \
            and isinstance(content.get("text"), str):
        return str(content["text"])
    if isinstance(content, str):
        return content
    return _COUNTED_JSON(content if unmarked else _strip_marks(content))


def _block_texts(content: Any) -> tuple[str, str]:
    """(the text a block is counted from, its canonical JSON for the digest), both with
    cache marks left out. The marks are looked for in the JSON first: most blocks carry
    none, and those are not copied to leave them out."""
    try:
        canonical = _DIGESTED_JSON(content)
        marked = any(mark in canonical for mark in _MARKED)
    except TypeError:  # a mapping that is not a dict: stripping makes it one
        marked = True
    if marked:
        content = _strip_marks(content)
        canonical = _DIGESTED_JSON(content)
    return _text_of(content, unmarked=True), canonical


def _content_text(content: Any) -> Any:
    """An OpenAI message's content as one text when it is text parts, else as it is."""
    if isinstance(content, list) and content and all(
            isinstance(part, Mapping) and isinstance(part.get("text"), str) for part in content):
        return "".join(part["text"] for part in content)
    return content


def _digest(previous: str, canonical: str) -> str:
    """The digest of a prefix: the one before it (``previous``) and the canonical JSON of
    its last block."""
    return hashlib.sha256(f"{previous}\n{canonical}".encode()).hexdigest()[:16]


@dataclass(slots=True)
class _Block:
    """What a plan reads of a block, before its status is known: the plan of a new
    request (:func:`plan_request`) makes each :class:`CacheBlock` once, with its status."""

    index: int
    kind: BlockKind
    label: str
    tokens: int
    chars: int
    digest: str
    marked: bool
    sections: list[SectionDigest]

    def made(self, status: BlockStatus) -> CacheBlock:
        return CacheBlock(index=self.index, kind=self.kind, label=self.label,
                          tokens=self.tokens, chars=self.chars, digest=self.digest,
                          marked=self.marked, status=status, sections=self.sections)


def request_blocks(
    provider: str,
    request: ChatRequest,
    body: Mapping[str, Any],
    *,
    manifest: PromptManifest | None = None,
    counter: TokenCounter | None = None,
) -> list[CacheBlock]:
    """The blocks of ``body`` (built from ``request`` by the ``provider`` adapter), in order.

    The history ends where a body built from the messages before this turn alone ends:
    the layout keeps that body a prefix of this one. ``manifest`` (default: the one the
    request's compiled prompt carries) names the sections of the stable block.
    """
    return [block.made("uncached")
            for block in _blocks(provider, request, body, manifest=manifest, counter=counter)]


def plan_request(
    provider: str,
    request: ChatRequest,
    body: Mapping[str, Any],
    earlier: Sequence[Sequence[CacheBlock]] = (),
    *,
    manifest: PromptManifest | None = None,
    counter: TokenCounter | None = None,
) -> CachePlan:
    """The cache plan of ``body`` after the ``earlier`` requests: :func:`plan_cache` of
    its :func:`request_blocks`, each block made once."""
    return _plan(provider, request.model,
                 _blocks(provider, request, body, manifest=manifest, counter=counter), earlier)


def _blocks(
    provider: str,
    request: ChatRequest,
    body: Mapping[str, Any],
    *,
    manifest: PromptManifest | None,
    counter: TokenCounter | None,
) -> list[_Block]:
    count = (counter or default_counter()).count
    plan = layout(request)
    api = provider_api(provider)
    head, conversation = api.body_blocks(body)
    history_only = request.model_copy(update={
        "messages": request.messages[:plan.turn_start],
        "compiled_prompt": request.compiled_prompt.model_copy(
            update={"dynamic_system_text": ""}) if request.compiled_prompt else None,
    })
    with previewing():  # laid out, never sent: it may end with the model's last answer
        history_count = len(api.body_blocks(api.build(history_only))[1]) \
            if plan.turn_start and _has_conversation(api, history_only) else 0
    manifest = manifest or (request.compiled_prompt.manifest if request.compiled_prompt else None)
    sections = [SectionDigest(id=s.id, digest=s.sha256[:16]) for s in manifest.sections
                if s.stability == "stable"] if manifest else []

    blocks: list[_Block] = []
    digest = ""
    # Anthropic keeps the tools and system entries when tool_choice changes, not the
    # messages' (docs/providers.md, "Anthropic cache marks"): the choice is part of the
    # prefix from the first message on.
    choice = body.get("tool_choice") if api.tool_choice_in_prefix else None
    for position, raw in enumerate([*head, *conversation]):
        text, canonical = _block_texts(raw.content)
        kind = _kind(raw, position - len(head), text, plan.stable, plan.dynamic, plan.cache_first,
                     history_count)
        if position == len(head) and choice is not None:
            digest = _digest(digest, _block_texts({"tool_choice": choice})[1])
        digest = _digest(digest, canonical)
        blocks.append(_Block(position, kind, raw.label, count(text), len(text), digest,
                             raw.marked, sections if kind in ("stable", "prompt") else []))
    return blocks


def block_texts(provider: str, body: Mapping[str, Any]) -> list[str]:
    """The text each block of ``body`` is counted from, in the order of
    :func:`request_blocks` (a tool or message that is not plain text as its JSON)."""
    head, conversation = provider_api(provider).body_blocks(body)
    return [_text_of(raw.content) for raw in (*head, *conversation)]


def _has_conversation(api: ProviderApi, request: ChatRequest) -> bool:
    """Whether the body of ``request`` has conversation blocks at all.

    Anthropic and Gemini send every system message of the history in the system part, so
    a history of system messages only (the summary) has no conversation block; their
    adapters refuse to build a body with no conversation.
    """
    return not api.system_messages_in_system or any(
        message.role != "system" for message in request.messages)


def _kind(raw: BodyBlock, conversation_index: int, text: str, stable: str, dynamic: str,
          cache_first: bool, history_count: int) -> BlockKind:
    if raw.kind == "tools":
        return "tools"
    if raw.kind == "system":
        if stable and text == stable:
            return "stable"
        if stable and dynamic and not cache_first and text.startswith(stable):
            return "prompt"
        if dynamic and text == dynamic:
            return "dynamic"
        return "summary" if text.startswith(SUMMARY_PREFIX) else "system"
    # A conversation block: OpenAI's leading system message(s) count as system content.
    if isinstance(raw.content, Mapping) and raw.content.get("role") in ("system", "developer"):
        content = _content_text(raw.content.get("content"))
        if isinstance(content, str):
            if stable and content == stable:
                return "stable"
            if stable and dynamic and not cache_first and content.startswith(stable):
                return "prompt"
            if cache_first and dynamic and content == dynamic \
                    and conversation_index >= history_count:
                return "dynamic"
            if content.startswith(SUMMARY_PREFIX) and conversation_index < history_count:
                return "summary"
    if conversation_index < history_count:
        return "history"
    if cache_first and dynamic and text == dynamic:
        return "dynamic"
    return "turn"


# -- the plan ---------------------------------------------------------------------------


def plan_cache(
    provider: str,
    model: str,
    blocks: Sequence[CacheBlock],
    earlier: Sequence[Sequence[CacheBlock]] = (),
) -> CachePlan:
    """The cache plan of a request with ``blocks``, after the ``earlier`` requests.

    ``earlier`` holds the blocks of earlier requests of the thread, oldest first (the
    previous rounds of this turn, the rounds of earlier turns); the last one is "the
    previous request" that :class:`FirstDifference` compares against. Expected numbers
    follow the provider's rules (docs/providers.md): Anthropic reads the longest entry an
    earlier mark wrote, at most :data:`ANTHROPIC_LOOKBACK_BLOCKS` blocks before one of
    this request's marks, and writes an entry at each of this request's marks; OpenAI
    GPT-5.6 and later read the longest entry an earlier breakpoint wrote, with no
    lookback limit, and write at their own breakpoints; older OpenAI models and Gemini
    read the longest prefix shared with any earlier request (older OpenAI models in
    128-token steps).
    """
    return _plan(provider, model, blocks, earlier)


def _plan(provider: str, model: str, blocks: Sequence[CacheBlock | _Block],
          earlier: Sequence[Sequence[CacheBlock]]) -> CachePlan:
    ends = _ends(blocks)
    total = ends[-1] if ends else 0
    facts = model_facts(model, provider)
    minimum, step = facts.min_cacheable_tokens, facts.cache_step_tokens
    if provider_api(provider).cache_marks:
        shared, cached_end, written_end = _anthropic(blocks, ends, earlier, minimum)
    elif facts.breakpoint_style == "prompt_cache_breakpoint":
        shared, cached_end, written_end = _breakpoints(blocks, ends, earlier, minimum)
    else:
        shared = _shared_blocks(blocks, earlier)
        tokens = ends[shared - 1] if shared else 0
        cached_end = tokens // step * step if tokens >= minimum else 0
        written_end = cached_end
    statuses = []
    for block, end in zip(blocks, ends, strict=True):
        status: BlockStatus = "cached" if end <= cached_end else (
            "written" if end <= written_end else "uncached")
        if isinstance(block, _Block):
            statuses.append(block.made(status))
        else:
            statuses.append(block if block.status == status
                            else block.model_copy(update={"status": status}))
    return CachePlan(
        provider=provider, model=model, minimum_tokens=minimum, step_tokens=step,
        total_tokens=total, cached_tokens=cached_end, written_tokens=written_end - cached_end,
        uncached_tokens=total - written_end, shared_blocks=shared,
        first_difference=first_difference(blocks, earlier[-1]) if earlier else None,
        blocks=statuses, model_note=facts.note,
    )


def _ends(blocks: Sequence[CacheBlock | _Block]) -> list[int]:
    ends: list[int] = []
    total = 0
    for block in blocks:
        total += block.tokens
        ends.append(total)
    return ends


def _shared_blocks(blocks: Sequence[CacheBlock | _Block],
                   earlier: Sequence[Sequence[CacheBlock]]) -> int:
    seen = {block.digest for request in earlier for block in request}
    shared = 0
    for block in blocks:
        if block.digest not in seen:
            break
        shared += 1
    return shared


def _anthropic(
    blocks: Sequence[CacheBlock | _Block], ends: Sequence[int],
    earlier: Sequence[Sequence[CacheBlock]], minimum: int,
) -> tuple[int, int, int]:
    """(shared blocks, end of the cached prefix, end of the written part) in tokens."""
    written = {block.digest for request in earlier
               for block, end in zip(request, _ends(request), strict=True)
               if block.marked and end >= minimum}
    marks = [i for i, block in enumerate(blocks) if block.marked and ends[i] >= minimum]
    marks = marks[:MAX_CACHE_BREAKPOINTS]
    cached_end = 0
    for mark in marks:
        for index in range(mark, max(-1, mark - ANTHROPIC_LOOKBACK_BLOCKS - 1), -1):
            if blocks[index].digest in written:
                cached_end = max(cached_end, ends[index])
                break
    written_end = max([ends[m] for m in marks], default=0)
    return _shared_blocks(blocks, earlier), cached_end, max(written_end, cached_end)


def _breakpoints(
    blocks: Sequence[CacheBlock | _Block], ends: Sequence[int],
    earlier: Sequence[Sequence[CacheBlock]], minimum: int,
) -> tuple[int, int, int]:
    """OpenAI GPT-5.6+: (shared blocks, end of the cached prefix, end of the written part).

    An entry is written at each breakpoint (the latest four; with none, the implicit one
    at the request's end); the request reads the longest entry an earlier request wrote
    that is a prefix of it and ends at or before its last breakpoint, however far back.
    """
    written = set()
    for request in earlier:
        request_ends = _ends(request)
        marks = [i for i, block in enumerate(request) if block.marked][-MAX_CACHE_BREAKPOINTS:]
        for mark in marks or ([len(request) - 1] if request else []):
            if request_ends[mark] >= minimum:
                written.add(request[mark].digest)
    marks = [i for i, block in enumerate(blocks) if block.marked][-MAX_CACHE_BREAKPOINTS:]
    marks = marks or ([len(blocks) - 1] if blocks else [])
    last = marks[-1] if marks else -1
    cached_end = max((ends[i] for i in range(last + 1) if blocks[i].digest in written),
                     default=0)
    written_end = max([ends[m] for m in marks if ends[m] >= minimum], default=0)
    return _shared_blocks(blocks, earlier), cached_end, max(written_end, cached_end)


def first_difference(
    blocks: Sequence[CacheBlock | _Block], previous: Sequence[CacheBlock]
) -> FirstDifference | None:
    """Where ``blocks`` first differ from ``previous``, and whether that broke the cache.

    None when ``previous`` is a prefix of ``blocks`` (the request only appended).
    """
    index = 0
    while index < len(blocks) and index < len(previous) \
            and blocks[index].digest == previous[index].digest:
        index += 1
    if index == len(previous):
        return None
    here = blocks[index] if index < len(blocks) else None
    before = previous[index]
    label = here.label if here else "end of request"
    # The previous request put text that changes every turn before its history.
    if before.kind in ("dynamic", "prompt") and any(
            b.kind in ("history", "summary") for b in previous[index + 1:]):
        if before.kind == "prompt" and here is not None:
            changed = _changed_section(here, before)
            if changed:
                return FirstDifference(index=index, label=label, broken=True,
                                       reason=f"stable section {changed} changed")
        return FirstDifference(index=index, label=label, broken=True,
                               reason="dynamic text before the history")
    if before.kind not in _REUSED:
        reason = "a new turn" if here is not None and here.kind == "history" else "a new round"
        if before.kind == "dynamic" and here is not None and here.kind == "dynamic":
            reason = "this turn's dynamic text changed"
        return FirstDifference(index=index, label=label, broken=False, reason=reason)
    return FirstDifference(index=index, label=label, broken=True,
                           reason=_reason(blocks, previous, index))


def _changed_section(here: CacheBlock | _Block, before: CacheBlock) -> str | None:
    old = {s.id: s.digest for s in before.sections}
    for section in here.sections:
        if old.get(section.id) != section.digest:
            return section.id
    new = {s.id for s in here.sections}
    return next((s.id for s in before.sections if s.id not in new), None)


def _reason(blocks: Sequence[CacheBlock | _Block], previous: Sequence[CacheBlock],
            index: int) -> str:
    before = previous[index]
    here = blocks[index] if index < len(blocks) else None
    if before.kind == "tools" or (here is not None and here.kind == "tools"):
        old = [b.label for b in previous if b.kind == "tools"]
        new = [b.label for b in blocks if b.kind == "tools"]
        if sorted(old) == sorted(new) and old != new:
            return "tools changed order"
        added = [name.removeprefix("tool ") for name in new if name not in old]
        removed = [name.removeprefix("tool ") for name in old if name not in new]
        if added or removed:
            parts = ([f"added {', '.join(added)}"] if added else []) + (
                [f"removed {', '.join(removed)}"] if removed else [])
            return f"tools changed ({'; '.join(parts)})"
        return f"{before.label} changed"
    if here is None:
        return f"{before.label} is no longer sent"
    if before.kind in ("stable", "prompt") and here.kind in ("stable", "prompt"):
        changed = _changed_section(here, before)
        return f"stable section {changed} changed" if changed else "stable text changed"
    if before.kind == "summary" or here.kind == "summary":
        return "history summary changed"
    if before.kind == "history" and here.kind == "history":
        return f"history changed at {here.label} (the window's start moved)"
    if here.kind == "dynamic" and any(b.kind == "history" for b in blocks[index + 1:]):
        return "dynamic text before the history"
    return f"{before.kind} block {before.label} changed"
