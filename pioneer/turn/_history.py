"""The conversation a turn starts from, and the tool rounds it leaves for later turns.

:func:`conversation` turns the history the budgeter chose (:class:`HistoryMessage`
values) into the :class:`~pioneer.providers.ChatMessage` list a request carries: text
messages as they are, and the tool rounds an earlier turn kept (``history_tool_rounds =
"keep"``) as assistant messages with their calls and tool messages with their results,
which each adapter sends in its API's own shape. A call id two kept turns share (Gemini
numbers each turn's calls from ``call_1``) gets a suffix the first time it repeats, the
same way on every turn, so each result names exactly one call and the bytes of the
history stay the same from turn to turn.

:func:`kept_rounds` is the other direction: the complete tool rounds of this turn's
messages (each assistant message that made calls, with every result), as the store
keeps them; a reply whose calls got no result (the turn's last round refused them) and
the text of a reply that was continued are not tool rounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..history.models import HistoryMessage, StoredCall
from ..providers.request import ChatMessage, ToolCall, ToolResult

__all__ = ["call_ids", "conversation", "kept_rounds"]


def conversation(messages: Sequence[HistoryMessage]) -> tuple[list[ChatMessage], set[str]]:
    """The history as chat messages, and every call id it uses (a new call must not)."""
    out: list[ChatMessage] = []
    used: set[str] = set()
    current: dict[str, str] = {}  # stored id → id sent, for the results that follow
    for message in messages:
        if message.role == "tool":
            assert message.call_id is not None
            out.append(ChatMessage(role="tool", tool_result=ToolResult(
                call_id=current.get(message.call_id, message.call_id),
                content=message.content, is_error=message.is_error)))
        elif message.tool_calls:
            current = {call.id: _fresh(call.id, used) for call in message.tool_calls}
            out.append(ChatMessage.assistant(message.content, tool_calls=[
                ToolCall(id=current[call.id], name=call.name,
                         arguments=json.loads(call.arguments),
                         thought_signature=call.thought_signature)
                for call in message.tool_calls]))
        else:
            out.append(ChatMessage(role=message.role, content=message.content))
    return out, used


def call_ids(messages: Sequence[HistoryMessage]) -> set[str]:
    """Every call id :func:`conversation` gives ``messages``, without making the messages."""
    used: set[str] = set()
    for message in messages:
        if message.role != "tool":
            for call in message.tool_calls:
                _fresh(call.id, used)
    return used


def _fresh(call_id: str, used: set[str]) -> str:
    fresh, number = call_id, 2
    while fresh in used:
        fresh, number = f"{call_id}_h{number}", number + 1
    used.add(fresh)
    return fresh


def kept_rounds(messages: Sequence[ChatMessage]) -> tuple[HistoryMessage, ...]:
    """The complete tool rounds among this turn's ``messages`` (after its user message)."""
    kept: list[HistoryMessage] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        count = len(message.tool_calls)
        results = messages[index + 1:index + 1 + count]
        if message.role == "assistant" and count and len(results) == count and all(
                result.tool_result is not None for result in results):
            kept.append(HistoryMessage("assistant", message.content, tuple(
                StoredCall(call.id, call.name,
                           json.dumps(call.arguments, ensure_ascii=False, sort_keys=True),
                           call.thought_signature)
                for call in message.tool_calls)))
            for result in results:
                assert result.tool_result is not None
                kept.append(HistoryMessage("tool", result.tool_result.content,
                                           call_id=result.tool_result.call_id,
                                           is_error=result.tool_result.is_error))
            index += 1 + count
        else:
            index += 1
    return tuple(kept)
