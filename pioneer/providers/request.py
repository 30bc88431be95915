"""The provider-neutral chat request: one model call before an adapter maps it.

:class:`ChatRequest` carries the model, the compiled prompt payload, the conversation
(system, user, assistant and tool messages, with tool calls and their results), the
tools as JSON Schema and the sampling options. It is validated at the edge (pydantic,
frozen, ``extra="forbid"``), so an adapter never sees a conversation that no provider
would accept: every tool call is answered exactly once, right after the assistant
message that made it. :func:`parse_chat_request` and :func:`load_chat_request` turn
validation failures into an :class:`~pioneer.errors.InputError` naming file and path.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, ParamSpec

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from ..compile.boundary import BOUNDARY_MARKER, strip_prompt_cache_boundary
from ..compile.manifest import CompiledPromptPayload
from ..documents import read_document
from ..errors import InputError, Problem, counted, format_path
from ..text import EDGE_CONFIG, EdgeModel, unknown_field

__all__ = [
    "TOOL_NAME_PATTERN",
    "CacheOptions",
    "CacheRetention",
    "CacheTtl",
    "ChatMessage",
    "ChatRequest",
    "DynamicPlacement",
    "Role",
    "SamplingOptions",
    "ToolCall",
    "ToolChoice",
    "ToolOrder",
    "ToolResult",
    "ToolSpec",
    "clean",
    "load_chat_request",
    "model_facing",
    "not_finite_error",
    "parse_chat_request",
]

Role = Literal["system", "user", "assistant", "tool"]
#: Where this turn's dynamic text goes: after the history, next to the current user
#: message (``cache-first``), or in the system prompt as earlier versions sent it.
DynamicPlacement = Literal["cache-first", "system"]
#: Tools sorted by name (a byte-stable prefix whatever order the caller built them in),
#: or kept in the order the caller gave.
ToolOrder = Literal["by_name", "as_given"]
#: OpenAI's ``prompt_cache_retention`` values (models before GPT-5.6).
CacheRetention = Literal["in_memory", "24h"]
#: OpenAI's ``prompt_cache_options.ttl`` values (GPT-5.6 and later).
CacheTtl = Literal["30m", "12h"]
#: Whether the model may call the request's tools (``auto``) or must answer in text
#: (``none``: the tools stay in the body, where they are part of the cached prefix).
ToolChoice = Literal["auto", "none"]
#: Tool names every supported provider accepts: the strictest of their rules together
#: (Gemini: a letter or _ first; OpenAI and Gemini: at most 64 characters; all three:
#: letters, digits, _ and -). Each provider's own rule is listed in docs/providers.md,
#: "What each provider refuses and what is mapped".
TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"



def _tool_name(value: str) -> str:
    if not re.fullmatch(TOOL_NAME_PATTERN, value):
        raise ValueError(
            f"must match {TOOL_NAME_PATTERN}: a letter or _ first, then letters, digits, _ "
            f"or -, at most 64 characters in all (got {value!r})"
        )
    return value


#: A tool name, checked with a message that shows the offending value.
ToolName = Annotated[
    str,
    AfterValidator(_tool_name),
    WithJsonSchema({"type": "string", "pattern": TOOL_NAME_PATTERN}),
]


_COMMENT = BOUNDARY_MARKER.strip()


def clean(text: str) -> str:
    """Text as a model may see it: no boundary marker, not even one that removing another formed.

    A full marker becomes one newline (as :func:`strip_prompt_cache_boundary` does) and a
    bare marker comment disappears; repeated until none is left, because removing one can
    join the pieces of another.
    """
    while _COMMENT in text:
        text = strip_prompt_cache_boundary(text).replace(_COMMENT, "")
    return text


def _scrub(value: Any) -> Any:
    """``value`` with :func:`clean` applied to every string in it, dict keys included;
    containers are rebuilt only where something changed."""
    if isinstance(value, str):
        return clean(value) if _COMMENT in value else value
    if isinstance(value, dict):
        items = [(_scrub(key), _scrub(item)) for key, item in value.items()]
        if all(k is key and v is item for (k, v), (key, item) in zip(
                items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        scrubbed = [_scrub(item) for item in value]
        if all(new is old for new, old in zip(scrubbed, value, strict=True)):
            return value
        return type(value)(scrubbed)
    if type(value) is float and not math.isfinite(value):
        raise _NotFinite
    return value


class _NotFinite(Exception):
    pass


def _not_finite(value: Any, path: list[str | int]) -> tuple[list[str | int], float] | None:
    """Where the first NaN or infinity in ``value`` is, and what it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items: Any = (value.items() if isinstance(value, dict)
                  else enumerate(value) if isinstance(value, list | tuple) else ())
    for key, item in items:
        found = _not_finite(item, [*path, key])
        if found is not None:
            return found
    return None


def not_finite_error(value: Any, where: str) -> InputError:
    """The error for a NaN or infinity in ``value`` (``where`` names what holds it)."""
    found = _not_finite(value, [])
    path, number = found if found is not None else ([], math.nan)
    return InputError(Problem(
        f"{number} is not a JSON number; a request body cannot carry NaN or an infinity (in "
        "a tool call's arguments or a tool's schema, write a number, a string or null)",
        path=" → ".join(part for part in (where, format_path(path)) if part)))


P = ParamSpec("P")


def model_facing(adapter: Callable[P, dict[str, Any]]) -> Callable[P, dict[str, Any]]:
    """An adapter whose body never carries the boundary marker, in any field, nor a
    number JSON cannot hold.

    The one place that holds for every field of every body: whatever the adapter put
    there (message text, a tool call's arguments, a tool's description or schema, a
    tool result, a stop sequence, a key), the finished body gets a last pass over all
    its strings. The adapters still clean what they test for emptiness first. The same
    pass refuses NaN and infinities (Python's JSON writes them as ``NaN`` and
    ``Infinity``, which no provider parses) as an :class:`~pioneer.errors.InputError`
    naming their path in the body.
    """

    @functools.wraps(adapter)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        made = adapter(*args, **kwargs)
        try:
            body: dict[str, Any] = _scrub(made)
        except _NotFinite:
            raise not_finite_error(made, "request body") from None
        return body

    return wrapped


def _visible(text: str) -> bool:
    """Whether text still says something once the boundary marker is removed."""
    return bool(clean(text).strip())


class ToolSpec(EdgeModel):
    """A tool the model may call: a name, what it does, its arguments as JSON Schema."""

    model_config = EDGE_CONFIG
    name: ToolName = Field(
        description="Tool name: a letter or _ first, then letters, digits, _ and -; at most 64."
    )
    description: str = Field(default="", description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description='JSON Schema of the arguments; must describe an object ("type": "object").',
    )

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        import jsonschema  # here, not at the top: `pioneer compile` start-up never needs it

        try:
            jsonschema.Draft202012Validator.check_schema(value)
        except jsonschema.SchemaError as error:
            where = format_path(error.path) or "(root)"
            raise ValueError(f"not a valid JSON Schema at {where}: {error.message}") from None
        if value.get("type") != "object":
            got = value.get("type")
            raise ValueError(f'must describe an object ("type": "object"), got type {got!r}')
        return value


class ToolCall(EdgeModel):
    """One call the assistant made to a tool."""

    model_config = EDGE_CONFIG
    id: str = Field(min_length=1, description="Call id; the tool result names it.")
    name: ToolName = Field(description="Name of the called tool.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments object.")
    thought_signature: str | None = Field(
        default=None,
        description="Gemini: the opaque thoughtSignature the model returned with this call, "
        "sent back with it unchanged; other providers ignore it.",
    )


class ToolResult(EdgeModel):
    """What a tool returned for one call."""

    model_config = EDGE_CONFIG
    call_id: str = Field(min_length=1, description="Id of the call this answers.")
    content: str = Field(description="The tool's output as text.")
    is_error: bool = Field(
        default=False, description="The tool failed; content describes the failure."
    )


class ChatMessage(EdgeModel):
    """One conversation message: system, user, assistant (maybe with tool calls) or tool."""

    model_config = EDGE_CONFIG
    role: Role = Field(description="Who speaks: system, user, assistant or tool.")
    content: str = Field(default="", description="Message text; empty for tool messages.")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="Tool calls (assistant messages only)."
    )
    tool_result: ToolResult | None = Field(
        default=None, description="The result a tool message carries (tool messages only)."
    )
    cache_breakpoint: bool = Field(
        default=False,
        description="Ask providers with explicit caching (Anthropic; OpenAI GPT-5.6 and "
        "later, on a message that is not the assistant's) to cache the conversation up to "
        "this message; others ignore it.",
    )

    @model_validator(mode="after")
    def _shape(self) -> ChatMessage:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(
                f"tool_calls: only assistant messages make tool calls, not {self.role}"
            )
        if self.role == "tool":
            if self.tool_result is None:
                raise ValueError("tool_result: a tool message needs a tool_result")
            if self.content:
                raise ValueError("content: a tool message carries its text in tool_result.content")
            return self
        if self.tool_result is not None:
            raise ValueError(f"tool_result: only tool messages carry a result, not {self.role}")
        if not _visible(self.content) and not self.tool_calls:
            if self.role == "assistant":
                raise ValueError("content: an assistant message needs text or tool calls")
            raise ValueError(f"content: a {self.role} message needs text")
        return self

    @classmethod
    def system(cls, content: str, *, cache_breakpoint: bool = False) -> ChatMessage:
        """A system message, such as the history summary."""
        return cls(role="system", content=content, cache_breakpoint=cache_breakpoint)

    @classmethod
    def user(cls, content: str, *, cache_breakpoint: bool = False) -> ChatMessage:
        """A user message."""
        return cls(role="user", content=content, cache_breakpoint=cache_breakpoint)

    @classmethod
    def assistant(
        cls, content: str = "", *, tool_calls: Sequence[ToolCall] = (),
        cache_breakpoint: bool = False,
    ) -> ChatMessage:
        """An assistant reply, optionally with tool calls."""
        return cls(role="assistant", content=content, tool_calls=list(tool_calls),
                   cache_breakpoint=cache_breakpoint)

    @classmethod
    def tool(
        cls, call_id: str, content: str, *, is_error: bool = False, cache_breakpoint: bool = False
    ) -> ChatMessage:
        """The result of one tool call."""
        return cls(role="tool", tool_result=ToolResult(call_id=call_id, content=content,
                                                       is_error=is_error),
                   cache_breakpoint=cache_breakpoint)


class SamplingOptions(EdgeModel):
    """How the model samples its reply; unset options are left to the provider."""

    model_config = EDGE_CONFIG
    max_tokens: int | None = Field(default=None, ge=1, description="Most tokens the reply may use.")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    stop: list[str] = Field(
        default_factory=list,
        description="Stop sequences (none empty; openai-chat takes at most 4, openai-responses "
        "none).",
    )

    @field_validator("stop")
    @classmethod
    def _no_empty_stop(cls, value: list[str]) -> list[str]:
        # Every provider refuses an empty stop sequence (it would stop before any output).
        empty = [index for index, stop in enumerate(value) if not stop]
        if empty:
            raise ValueError(
                f"item {empty[0]} is empty; every provider refuses an empty stop sequence"
            )
        return value


class CacheOptions(EdgeModel):
    """How a request is laid out and marked for the providers' prompt caches.

    See docs/providers.md: the cache-first layout puts what changes least first (tools,
    stable text, history summary, history) and this turn's dynamic text after the
    history, so every request of a thread starts with the bytes of the one before.
    """

    model_config = EDGE_CONFIG
    dynamic_placement: DynamicPlacement = Field(
        default="cache-first",
        description="cache-first: this turn's dynamic text goes next to the current user "
        "message, after the history; system: in the system prompt, before the history "
        "(the bodies of earlier versions, byte for byte).",
    )
    tool_order: ToolOrder = Field(
        default="by_name",
        description="by_name: tools sorted by name; as_given: the caller's order.",
    )
    long_ttl: bool = Field(
        default=False,
        description="Anthropic: cache the tools, stable text and summary for 1 hour "
        "instead of 5 minutes (a write costs 2x input instead of 1.25x); OpenAI GPT-5.6 "
        "and later: the breakpoints on the stable text and summary live 12 hours.",
    )
    prompt_cache_retention: CacheRetention | None = Field(
        default=None,
        description="OpenAI before GPT-5.6: how long cached prefixes are kept (in_memory or "
        "24h); deprecated for GPT-5.6 and later, which take prompt_cache_ttl.",
    )
    prompt_cache_ttl: CacheTtl | None = Field(
        default=None,
        description="OpenAI GPT-5.6 and later: the least lifetime of the cache entries the "
        "request writes, sent as prompt_cache_options.ttl (30m, or 12h on Responses).",
    )
    store: bool | None = Field(
        default=None,
        description="OpenAI Responses: keep the response on the server. Unset: false in the "
        "cache-first layout (the whole conversation is sent anyway), not sent with system.",
    )


class ChatRequest(EdgeModel):
    """One provider-neutral model call: prompt, conversation, tools and sampling."""

    model_config = EDGE_CONFIG
    model: str = Field(min_length=1, description="Provider model name.")
    compiled_prompt: CompiledPromptPayload | None = Field(
        default=None, description="The compiled system prompt (stable and dynamic text)."
    )
    messages: list[ChatMessage] = Field(
        default_factory=list, description="The conversation, oldest first."
    )
    tools: list[ToolSpec] = Field(default_factory=list, description="Tools the model may call.")
    tool_choice: ToolChoice = Field(
        default="auto",
        description="auto: the model may call the tools; none: it must answer in text (the "
        "tools are still sent: a conversation with tool calls needs them on Anthropic, and "
        "they keep the cached prefix).",
    )
    sampling: SamplingOptions = Field(
        default_factory=SamplingOptions, description="Sampling options."
    )
    cache: CacheOptions = Field(
        default_factory=CacheOptions, description="Prompt-cache layout and marks."
    )

    @model_validator(mode="after")
    def _consistent(self) -> ChatRequest:
        problems = _pairing_problems(self.messages)
        seen: set[str] = set()
        for index, tool in enumerate(self.tools):
            if tool.name in seen:
                problems.append(f"tools[{index}]: tool name {tool.name!r} is used twice")
            seen.add(tool.name)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def tool_call_names(self) -> dict[str, str]:
        """Call id → tool name, for providers whose results repeat the tool name."""
        return {call.id: call.name for m in self.messages for call in m.tool_calls}


def _pairing_problems(messages: Sequence[ChatMessage]) -> list[str]:
    """Every tool call answered exactly once, by tool messages right after its assistant."""
    problems: list[str] = []
    waiting: dict[str, int] = {}  # call id -> index of the assistant message that made it
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "tool" and message.tool_result is not None:
            call_id = message.tool_result.call_id
            if call_id in waiting:
                del waiting[call_id]
                answered.add(call_id)
            elif call_id in answered:
                problems.append(f"messages[{index}]: call {call_id!r} is already answered")
            else:
                problems.append(
                    f"messages[{index}]: tool result for call {call_id!r}, but the assistant "
                    "message before it made no such call"
                )
            continue
        problems += _unanswered(waiting, before=index)
        waiting.clear()
        for call in message.tool_calls:
            if call.id in waiting or call.id in answered:
                problems.append(f"messages[{index}]: call id {call.id!r} is used twice")
            waiting[call.id] = index
    problems += _unanswered(waiting, before=None)
    return problems


def _unanswered(waiting: Mapping[str, int], *, before: int | None) -> list[str]:
    where = f"before messages[{before}]" if before is not None else "at the end of the conversation"
    return [f"messages[{index}]: call {call_id!r} has no tool result {where}"
            for call_id, index in waiting.items()]


def parse_chat_request(data: Mapping[str, Any], *, file: str | None = None) -> ChatRequest:
    """Validate a mapping as a chat request, reporting every problem at once."""
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            message = str(item["msg"]).removeprefix("Value error, ")
            if item["type"] == "extra_forbidden":
                message = unknown_field(ChatRequest, item["loc"])
            path = format_path(item["loc"]) or None
            # Conversation-wide checks report one problem per line, each with its own path.
            problems += [Problem(line, file=file, path=path) for line in message.splitlines()]
        count = len(problems)
        where = f" in {file}" if file else ""
        raise InputError(
            problems, summary=f"error: {counted(count, 'problem')}{where}"
        ) from None


def load_chat_request(path: str | os.PathLike[str], **fields: Any) -> ChatRequest:
    """Read a chat request from JSON: an object of request fields or a list of messages
    (``-``: standard input).

    ``fields`` (such as ``model`` or ``compiled_prompt``) override what the file says.
    """
    data, name = read_document(path, "messages", "json")
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, dict):
        raise InputError(Problem("expected a JSON object or a list of messages", file=name))
    return parse_chat_request({**data, **fields}, file=name)
