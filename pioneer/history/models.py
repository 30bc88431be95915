"""History values: what the store returns and what the budgeter hands to providers.

Frozen dataclasses, passed between the store, the budgeter and the provider adapters.
:class:`HistoryMessage` is the hand-off shape for providers: a role
(``system`` | ``user`` | ``assistant`` | ``tool``) and its final text, artifact blocks
included; a turn stored with its tool rounds (``history_tool_rounds = "keep"``,
docs/history.md, "Tool rounds") adds assistant messages with their :class:`StoredCall`
values and one ``tool`` message per result, between the user message and the reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .artifacts import ArtifactRef, render_message, unique_refs

__all__ = [
    "SUMMARY_PREFIX",
    "HistoryCut",
    "HistoryEntry",
    "HistoryMessage",
    "HistoryWindow",
    "Role",
    "StoredCall",
    "ThreadRecord",
    "ThreadSummary",
    "TokenCalibration",
    "summary_message_text",
]

Role = Literal["system", "user", "assistant", "tool"]

#: The first line of the system message that carries a thread summary.
SUMMARY_PREFIX = "Summary of earlier conversation:\n"


def summary_message_text(summary: str) -> str:
    """The content of the summary system message."""
    return SUMMARY_PREFIX + summary.strip()


@dataclass(frozen=True, slots=True)
class StoredCall:
    """A tool call an earlier turn's model made, as stored with the turn."""

    id: str
    name: str
    #: The arguments object as JSON text (keys sorted).
    arguments: str
    #: Gemini's opaque signature of the call, sent back with it.
    thought_signature: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryMessage:
    """One message of conversation history, ready for a provider adapter.

    An assistant message may carry ``tool_calls``; a ``tool`` message is the result of
    the call ``call_id`` (its text in ``content``, ``is_error`` when the tool failed).
    """

    role: Role
    content: str
    tool_calls: tuple[StoredCall, ...] = ()
    call_id: str | None = None
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"role": ..., "content": ...}``, with ``tool_calls`` or ``call_id`` and
        ``is_error`` when the message has them."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments,
                 **({"thought_signature": c.thought_signature} if c.thought_signature else {})}
                for c in self.tool_calls]
        if self.call_id is not None:
            data["call_id"] = self.call_id
            data["is_error"] = self.is_error
        return data


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    """A conversation thread and the model it talks to."""

    thread_id: str
    model: str | None
    created_at: str


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """A stored thread summary and the turns it covers.

    ``through_seq`` is the store position of the last covered turn; every turn at or
    before it is covered, so later loads start after it. ``tokens`` is the count of
    the summary *message* (prefix and per-message overhead included), computed once
    when the summary was stored.
    """

    text: str
    tokens: int
    turn_count: int
    through_seq: int
    through_turn_id: str

    @property
    def message(self) -> HistoryMessage:
        """The system message that carries this summary."""
        return HistoryMessage("system", summary_message_text(self.text))


@dataclass(frozen=True, slots=True)
class HistoryCut:
    """Where the history of a thread was cut: the first turn it still sends.

    Truncation cuts when the kept turns fill the token budget, the turn-count window when
    they pass its count. Every turn before ``first_seq`` is left out of later requests
    and no longer read, so the turns from the cut on are the same prefix on every turn
    until the budget or the count is reached again and a new cut is made.
    """

    first_seq: int
    first_turn_id: str


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One stored turn: the user message, the assistant reply, their refs and counts.

    ``user_tokens`` and ``assistant_tokens`` are the counts of the rendered messages
    (artifact blocks included) plus the per-message overhead, or 0 when that side
    renders to nothing. They are computed once, when the turn is written. A turn stored
    with its tool rounds keeps them in ``tool_rounds`` (each with its count in
    ``tool_round_tokens``), sent between the user message and the reply: the turn is
    kept or dropped whole, so a call is never sent without its result.
    """

    seq: int
    turn_id: str
    thread_id: str
    user_item_id: str | None
    assistant_item_id: str | None
    user_text: str | None
    assistant_text: str | None
    user_tokens: int
    assistant_tokens: int
    user_artifacts: tuple[ArtifactRef, ...] = field(default=())
    assistant_artifacts: tuple[ArtifactRef, ...] = field(default=())
    tool_rounds: tuple[HistoryMessage, ...] = field(default=())
    tool_round_tokens: tuple[int, ...] = field(default=())
    _messages: tuple[HistoryMessage, ...] = field(init=False, repr=False, compare=False)
    _message_tokens: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _artifact_count: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Rendered once: a stored turn never changes, and a store may cache its entries.
        out: list[HistoryMessage] = []
        counts: list[int] = []
        user = render_message(self.user_text, self.user_artifacts, "user")
        if user is not None:
            out.append(HistoryMessage("user", user))
            counts.append(self.user_tokens)
        out += self.tool_rounds
        counts += self.tool_round_tokens
        reply = render_message(self.assistant_text, self.assistant_artifacts, "assistant")
        if reply is not None:
            out.append(HistoryMessage("assistant", reply))
            counts.append(self.assistant_tokens)
        object.__setattr__(self, "_messages", tuple(out))
        object.__setattr__(self, "_message_tokens", tuple(counts))
        count = len(unique_refs(self.user_artifacts)) + len(unique_refs(self.assistant_artifacts))
        object.__setattr__(self, "_artifact_count", count)

    @property
    def tokens(self) -> int:
        """Tokens of the whole turn as sent (both messages and any tool rounds)."""
        return self.user_tokens + self.assistant_tokens + sum(self.tool_round_tokens)

    def messages(self) -> tuple[HistoryMessage, ...]:
        """The user message, the stored tool rounds, then the reply (the user message and
        the reply only when they render to something)."""
        return self._messages

    def message_tokens(self) -> tuple[int, ...]:
        """The stored count of each message in :meth:`messages`."""
        return self._message_tokens

    @property
    def artifact_count(self) -> int:
        """Distinct artifact refs on both messages."""
        return self._artifact_count


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """What one budgeting pass reads: the summary, the cut, the turns after the summary's
    coverage from the cut on.

    ``entries`` starts at the cut (the turns before it are no longer sent, nor read).
    """

    thread: ThreadRecord
    summary: ThreadSummary | None
    entries: tuple[HistoryEntry, ...]
    cut: HistoryCut | None = None


@dataclass(frozen=True, slots=True)
class TokenCalibration:
    """The stored token calibration of one (provider, model), shared by every thread.

    What :mod:`pioneer.history.calibration` fitted to the samples so far: the provider's
    tokens per local token (``ratio``), a fixed per-request ``overhead``, the safety
    ``margin`` and how many samples were ever taken (``samples``), with the ``recent``
    samples, oldest first, that the next fit starts from: each (local estimate, reported
    count) followed by the local estimate of each kind of text
    (:data:`pioneer.history.calibration.KINDS`), or the pair alone (a sample kept before
    the kinds were, or whose kinds were not given).
    """

    provider: str
    model: str
    ratio: float
    overhead: int
    samples: int
    margin: float
    recent: tuple[tuple[int, ...], ...]
    updated_at: str = ""
