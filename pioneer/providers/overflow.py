"""Context-length errors read back: the counts a provider names when a request is too long.

Each API's :class:`ContextErrorRule` (:data:`ANTHROPIC_ERRORS`, :data:`OPENAI_ERRORS`,
:data:`GEMINI_ERRORS`, held by its object in :mod:`~pioneer.providers.api`, which
:func:`~pioneer.providers.read_context_error` asks) reads what a failed call gave: an
official SDK's exception (``anthropic.BadRequestError``, ``openai.BadRequestError``,
``google.genai.errors.ClientError``), or the error body as JSON (a dict, a list, text or
bytes). When it is that provider's context-length error it returns a
:class:`ContextOverflow` with the input count the provider reported and its maximum, each
``None`` when the message does not say; otherwise ``None``. Each provider's shapes:
(docs/providers.md, "Context length errors").

Error bodies are untrusted: only the first :data:`MAX_MESSAGE` characters of a message
are read, only a few levels and items of the JSON are walked, and counts are bounded
digit runs, so a hostile message costs little and never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANTHROPIC_ERRORS",
    "GEMINI_ERRORS",
    "MAX_MESSAGE",
    "OPENAI_ERRORS",
    "ContextErrorRule",
    "ContextOverflow",
]

#: Characters of an error message that are read (and kept in ``ContextOverflow.message``).
MAX_MESSAGE = 2000
_DEPTH = 4  # levels of nested error JSON walked
_ITEMS = 4  # items of a list walked (Gemini's streaming errors come as a list)
_COUNT = "[0-9][0-9,]{0,14}"  # a count: bounded digits, thousands separators allowed


@dataclass(frozen=True, slots=True)
class ContextOverflow:
    """A provider refused a request as longer than the model's context window."""

    #: The input tokens the provider counted (``None`` when the message does not say).
    reported_tokens: int | None
    #: The model's window as the provider named it (``None`` when it does not say).
    maximum_tokens: int | None
    #: The provider's message (at most :data:`MAX_MESSAGE` characters).
    message: str


def _named(template: str) -> re.Pattern[str]:
    """``template`` with ``{input}``, ``{maximum}``, ``{total}``, ``{reserve}`` as counts and
    any run of white space where it has a space."""
    spelled = re.escape(template).replace(r"\ ", " ")
    for name in ("input", "maximum", "total", "reserve"):
        spelled = spelled.replace(re.escape("{" + name + "}"), f"(?P<{name}>{_COUNT})")
    return re.compile(spelled.replace(" ", r"\s+"), re.IGNORECASE)


# Each pattern names its counts: "input" (what the provider counted of the request's
# input), "maximum" (the window), "total" and "reserve" (input plus the reply's reserve,
# and that reserve, where a message gives only their sum).
_ANTHROPIC = (
    _named("prompt is too long: {input} tokens > {maximum} maximum"),
    _named("input length and `max_tokens` exceed context limit: {input} + {reserve} > "
           "{maximum}"),
    _named("input length and max_tokens exceed context limit: {input} + {reserve} > "
           "{maximum}"),
)
_OPENAI = (
    _named("maximum context length is {maximum} tokens. However, your messages resulted "
           "in {input} tokens"),
    _named("maximum context length is {maximum} tokens. However, you requested {total} "
           "tokens ({input} in the messages, {reserve} in the completion)"),
    _named("maximum context length is {maximum} tokens, however you requested {total} "
           "tokens ({input} in your prompt; {reserve} for the completion)"),
    _named("maximum context length is {maximum} tokens"),
    _named("Input tokens exceed the configured limit of {maximum} tokens. Your messages "
           "resulted in {input} tokens"),
    _named("Your input exceeds the context window of this model"),
)
_GEMINI = (
    _named("The input token count ({input}) exceeds the maximum number of tokens allowed "
           "({maximum})"),
    _named("The input token count exceeds the maximum number of tokens allowed"),
)


@dataclass(frozen=True, slots=True)
class ContextErrorRule:
    """How one API says a request was too long: the patterns of its messages, and the
    error codes that say "context length" by themselves (a message that matches no
    pattern still counts)."""

    patterns: tuple[re.Pattern[str], ...]
    codes: frozenset[str] = frozenset()

    def read(self, error: object) -> ContextOverflow | None:
        """The context-length error in ``error`` (an SDK exception or the error body), or
        ``None`` when it is another error."""
        for code, message in _candidates(error):
            text = message[:MAX_MESSAGE]
            for pattern in self.patterns:
                found = pattern.search(text)
                if found is not None:
                    return _overflow(found, text)
            if code in self.codes:
                return ContextOverflow(None, None, text)
        return None


ANTHROPIC_ERRORS = ContextErrorRule(_ANTHROPIC)
OPENAI_ERRORS = ContextErrorRule(_OPENAI, frozenset({"context_length_exceeded"}))
GEMINI_ERRORS = ContextErrorRule(_GEMINI)


def _overflow(found: re.Match[str], message: str) -> ContextOverflow:
    counts = {name: _int(value) for name, value in found.groupdict().items()}
    reported = counts.get("input")
    if reported is None and counts.get("total") is not None and counts.get("reserve") is not None:
        reported = max(0, counts["total"] - counts["reserve"])  # type: ignore[operator]
    return ContextOverflow(reported, counts.get("maximum"), message)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    digits = text.replace(",", "")
    return int(digits) if digits.isdigit() else None


# -- where an error keeps its code and message -------------------------------------------


def _candidates(error: object) -> Iterator[tuple[str | None, str]]:
    """Every (code, message) pair ``error`` carries, the most specific first."""
    if isinstance(error, BaseException):
        # The SDKs keep the parsed body: anthropic and openai as ``body``, google-genai as
        # ``details``; their ``message`` and ``code`` come next, the text of the error last.
        for name in ("body", "details"):
            yield from _walk(_attribute(error, name), 0)
        code = _attribute(error, "code")
        message = _attribute(error, "message")
        if isinstance(message, str):
            yield (code if isinstance(code, str) else None), message
        try:
            text = str(error)
        except Exception:  # a hostile __str__: nothing more to read
            return
        yield None, text
        return
    yield from _walk(error, 0)


def _attribute(error: BaseException, name: str) -> Any:
    try:
        return getattr(error, name, None)
    except Exception:  # a property that raises: nothing there
        return None


def _walk(value: Any, depth: int) -> Iterator[tuple[str | None, str]]:
    if depth > _DEPTH or value is None:
        return
    if isinstance(value, bytes | bytearray):
        value = bytes(value[:MAX_MESSAGE * 4]).decode("utf-8", "replace")
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                parsed = json.loads(text[:MAX_MESSAGE * 4])
            except (ValueError, RecursionError):
                parsed = None
            if parsed is not None:
                yield from _walk(parsed, depth + 1)
                return
        yield None, text
        return
    if isinstance(value, list | tuple):
        for item in value[:_ITEMS]:
            yield from _walk(item, depth + 1)
        return
    if not isinstance(value, Mapping):
        return
    inner = value.get("error")
    if isinstance(inner, Mapping | list | str):
        yield from _walk(inner, depth + 1)
    response = value.get("response")  # an OpenAI Responses object that failed
    if isinstance(response, Mapping):
        yield from _walk(response, depth + 1)
    message = value.get("message")
    if isinstance(message, str):
        code = value.get("code")
        yield (code if isinstance(code, str) else None), message
