"""A turn's tool rounds as a store keeps them: checked, counted, written and read as JSON.

With ``history_tool_rounds = "keep"`` (docs/history.md, "Tool rounds") a turn is stored
with the assistant messages that made tool calls and the tool results that answered
them, in order. A store writes them as one JSON text column of the turn (``tool_rounds``,
NULL when there are none): a list of messages, each with its role, its text, its calls
or the call it answers, and its token count, computed once when the turn is written
(the text, and each call's name and arguments, plus the per-message overhead). Reading
them back checks every field, so a damaged row is a :class:`StoreError` naming the turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import StoreError
from ..tokens import TokenCounter, message_tokens
from .models import HistoryMessage, StoredCall

__all__ = ["check_tool_rounds", "counted_text", "dump_tool_rounds", "load_tool_rounds"]


def counted_text(message: HistoryMessage) -> str:
    """The text a tool-round message's token count covers: its content, then each call's
    name and arguments."""
    calls = "\n".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
    return "\n".join(part for part in (message.content, calls) if part)


def check_tool_rounds(messages: Sequence[HistoryMessage], *, where: str) -> None:
    """Refuse tool rounds that a provider would refuse: each assistant message makes calls
    and is followed by exactly one result per call, in any order, and nothing else."""
    waiting: set[str] = set()
    seen: set[str] = set()
    for index, message in enumerate(messages):
        at = f"{where}: tool_rounds[{index}]"
        if not isinstance(message, HistoryMessage):
            raise StoreError(f"{at}: expected a HistoryMessage (got {type(message).__name__})")
        if message.role == "assistant" and message.tool_calls and not waiting:
            ids = [call.id for call in message.tool_calls]
            if len(set(ids)) != len(ids) or seen & set(ids):
                raise StoreError(f"{at}: a call id is used twice")
            waiting, seen = set(ids), seen | set(ids)
        elif message.role == "tool" and message.call_id in waiting:
            waiting.discard(message.call_id)
        else:
            raise StoreError(f"{at}: expected an assistant message with tool calls after "
                             "every result of the one before, or a result of one of its calls")
    if waiting:
        raise StoreError(f"{where}: tool_rounds: calls {', '.join(sorted(waiting))} have no "
                         "result")


def dump_tool_rounds(messages: Sequence[HistoryMessage], counter: TokenCounter,
                     ) -> tuple[str | None, tuple[int, ...]]:
    """The column's JSON (None for no rounds) and each message's token count."""
    if not messages:
        return None, ()
    tokens = tuple(message_tokens(counter, counted_text(m)) for m in messages)
    rows = [{**message.to_dict(), "tokens": count}
            for message, count in zip(messages, tokens, strict=True)]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":")), tokens


def load_tool_rounds(text: str | None, *, where: str,
                     ) -> tuple[tuple[HistoryMessage, ...], tuple[int, ...]]:
    """The messages and counts of a stored ``tool_rounds`` column."""
    if text is None:
        return (), ()
    try:
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise ValueError("expected a list")
        loaded = [_message(row) for row in rows]
    except (ValueError, TypeError, KeyError) as error:
        raise StoreError(f"{where}: column tool_rounds is not a list of tool-round "
                         f"messages ({error})") from None
    messages = tuple(message for message, _ in loaded)
    check_tool_rounds(messages, where=where)
    return messages, tuple(count for _, count in loaded)


def _message(row: Any) -> tuple[HistoryMessage, int]:
    if not isinstance(row, dict):
        raise ValueError("a message is not an object")
    tokens = row["tokens"]
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ValueError("tokens is not a count")
    calls = tuple(StoredCall(_text(c["id"]), _text(c["name"]), _text(c["arguments"]),
                             _optional(c.get("thought_signature")))
                  for c in row.get("tool_calls", ()))
    call_id = _optional(row.get("call_id"))
    is_error = row.get("is_error", False)
    if row["role"] not in ("assistant", "tool") or not isinstance(is_error, bool):
        raise ValueError(f"unexpected role {row['role']!r} or is_error")
    return HistoryMessage(row["role"], _text(row["content"]), calls, call_id, is_error), tokens


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text (got {type(value).__name__})")
    return value


def _optional(value: Any) -> str | None:
    return None if value is None else _text(value)
