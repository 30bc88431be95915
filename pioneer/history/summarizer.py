"""Summarizers: the protocol, the summary prompt, and an OpenAI-compatible HTTP client.

The budgeter hands a :class:`SummaryRequest` (model, target size, earlier summary,
transcript) to a :class:`Summarizer` and gets the summary text back, or an exception.
:class:`OpenAIChatSummarizer` posts the request's prompt to any server speaking the
OpenAI chat-completions protocol (``POST {base_url}/chat/completions``) with the
standard library's ``urllib``; every failure becomes a :class:`SummarizerError`. It
follows no redirect (the key goes to the configured endpoint and nowhere else), sends no
key to a plain ``http://`` endpoint unless told to (``allow_http``: the key would cross
the network in the clear, and go to any ``http_proxy`` the environment names), and its
``timeout`` is one deadline for the whole call, however slowly the server answers
(docs/failure-behaviour.md, "Summarizers").
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import PioneerError
from ..hooks.deadline import Running
from ..settings import PioneerSettings
from ._tool_rounds import counted_text
from .models import HistoryMessage

__all__ = [
    "ASSISTANT_TEXT_LIMIT",
    "MAX_REPLY_BYTES",
    "TRUNCATION_MARK",
    "AsyncOpenAIChatSummarizer",
    "AsyncSummarizer",
    "OpenAIChatSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "summarizer_from_settings",
]

#: A reply body larger than this is refused (a summary is about 10% of the history budget).
MAX_REPLY_BYTES = 4 << 20
#: Assistant messages longer than this are cut in the summary prompt.
ASSISTANT_TEXT_LIMIT = 3000
TRUNCATION_MARK = "...[truncated]"

#: What a summary must keep (docs/history.md, "Summarizers"): a later turn can act only on
#: what it holds, so the exact file paths and what the user corrected are named outright.
_INSTRUCTION = (
    "Summarise the conversation below in about {target} tokens, as notes for whoever "
    "carries it on. Keep every decision, technical detail, file path (exactly as written), "
    "stated preference, correction the user made, open task and error; leave out "
    "greetings and repetition."
)


class SummarizerError(PioneerError, RuntimeError):
    """A summarizer could not produce a summary."""


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What to compress: the earlier summary, the transcript and the size to aim for."""

    model: str | None
    target_tokens: int
    previous_summary: str | None
    transcript: tuple[HistoryMessage, ...]

    def prompt(self) -> str:
        """The one user message a chat model is asked to summarise."""
        parts = [_INSTRUCTION.format(target=self.target_tokens)]
        if self.previous_summary and self.previous_summary.strip():
            parts.append("Earlier summary:\n" + self.previous_summary.strip() + "\n\n---")
        parts.append("\n\n".join(_transcript_line(message) for message in self.transcript))
        return "\n\n".join(parts)


def _transcript_line(message: HistoryMessage) -> str:
    if message.role in ("assistant", "tool"):
        text = counted_text(message) if message.tool_calls else message.content
        if len(text) > ASSISTANT_TEXT_LIMIT:
            text = text[:ASSISTANT_TEXT_LIMIT] + TRUNCATION_MARK
        if message.role == "tool":
            return f"Tool result{' (error)' if message.is_error else ''}: {text}"
        return f"Assistant: {text}"
    label = "User" if message.role == "user" else "System"
    return f"{label}: {message.content}"


class Summarizer(Protocol):
    """Compresses conversation history into a shorter text."""

    def summarize(self, request: SummaryRequest) -> str:
        """The summary text; raise (any exception) on failure."""
        ...


class OpenAIChatSummarizer:
    """Summarizes through an OpenAI-compatible chat-completions endpoint.

    ``model`` overrides the request's model (the configured summary model, else the
    thread's). The key is read from the ``api_key_env`` environment variable on each
    call and sent as a bearer token when set. ``timeout`` (seconds) bounds the whole
    call, from resolving the host to the last byte of the reply: the request runs on a
    worker of the deadline pool, and once the deadline passes its connection is shut, so
    a server that drips its headers or body cannot hold the call (or that worker) any
    longer. A
    redirect is an error, never followed; a body over :data:`MAX_REPLY_BYTES` is an
    error. A key set for an ``http://`` endpoint is an error unless ``allow_http``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 30.0,
        temperature: float = 0.3,
        allow_http: bool = False,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise SummarizerError(
                f"summarizer base URL must start with http:// or https://: {base_url!r}"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.temperature = temperature
        self.allow_http = allow_http

    def body(self, request: SummaryRequest) -> dict[str, Any]:
        """The JSON body that would be posted for ``request``."""
        model = self.model or request.model
        if not model:
            raise SummarizerError("no summary model: set summary_model or the thread's model")
        return {
            "model": model,
            "messages": [{"role": "user", "content": request.prompt()}],
            "temperature": self.temperature,
            "max_tokens": max(1, request.target_tokens),
        }

    def post(self, request: SummaryRequest) -> tuple[bytes, dict[str, str]]:
        """The bytes and headers to POST to :attr:`url` for ``request`` (the key read now,
        refused for a plain ``http://`` endpoint unless ``allow_http``)."""
        data = json.dumps(self.body(request)).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key and self.url.startswith("http://") and not self.allow_http:
            raise SummarizerError(
                f"{self.url}: the key in {self.api_key_env} is not sent over plain http (in "
                "the clear, and to any http_proxy); use https, or set summary_allow_http"
            )
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return data, headers

    def summarize(self, request: SummaryRequest) -> str:
        """POST the prompt and return the reply text (stripped; may be empty)."""
        data, headers = self.post(request)
        http_request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        connections = _Connections()
        running = Running(lambda: self._post(http_request, connections), self.timeout,
                          name="pioneer-summarizer-http")
        outcome = running.wait()
        if outcome.late:
            connections.shut()  # the abandoned request fails at once instead of lingering
            raise SummarizerError(f"{self.url}: timed out after {self.timeout:g}s")
        if outcome.error is not None:
            raise outcome.error
        assert outcome.value is not None
        return outcome.value

    def _post(self, http_request: urllib.request.Request, connections: _Connections) -> str:
        opener = urllib.request.build_opener(
            _RefuseRedirects(), _HTTPHandler(connections), _HTTPSHandler(connections)
        )
        try:
            with opener.open(http_request, timeout=self.timeout) as response:
                raw = _read_reply(response, self.url)
        except urllib.error.HTTPError as error:
            raise _status_error(self.url, error.code, error.read(300)) from None
        except TimeoutError:
            raise SummarizerError(f"{self.url}: timed out after {self.timeout:g}s") from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise SummarizerError(f"{self.url}: timed out after {self.timeout:g}s") from None
            raise SummarizerError(f"{self.url}: {error.reason}") from None
        except (OSError, http.client.HTTPException) as error:
            raise SummarizerError(f"{self.url}: {error}") from None
        return _reply_text(raw, self.url)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx reply is an error: following it would send the key to wherever it points."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        fp.close()
        raise _redirect_error(req.full_url, code)


def _redirect_error(url: str, code: int) -> SummarizerError:
    return SummarizerError(f"{url}: HTTP {code} redirect refused (redirects are not followed)")


def _status_error(url: str, code: int, head: bytes) -> SummarizerError:
    """An error status, with the head of its body."""
    detail = head[:300].decode("utf-8", "replace").strip()
    return SummarizerError(f"{url}: HTTP {code}" + (f": {detail}" if detail else ""))


class _Connections:
    """The connections one call opened, so that a late call can be cut off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[http.client.HTTPConnection] = []
        self._shut = False

    def opening(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if self._shut:
                raise TimeoutError("the call's deadline has passed")
            self._open.append(connection)

    def shut(self) -> None:
        with self._lock:
            self._shut = True
            connections = list(self._open)
        for connection in connections:
            sock = connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class _HTTPConnection(http.client.HTTPConnection):
    """A connection that registers with the call's ``_Connections`` before it connects."""

    def __init__(self, *args: Any, connections: _Connections, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections = connections

    def connect(self) -> None:
        self._connections.opening(self)
        super().connect()


class _HTTPSConnection(_HTTPConnection, http.client.HTTPSConnection):
    """The TLS one: ``_HTTPConnection``'s registration, then ``HTTPSConnection``'s connect.

    The method order is this class, ``_HTTPConnection``, ``HTTPSConnection``,
    ``HTTPConnection``, so ``connect`` registers once and then does the TLS handshake.
    """


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        factory = functools.partial(_HTTPConnection, connections=self._connections)
        return self.do_open(factory, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._connections = connections

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        factory = functools.partial(_HTTPSConnection, connections=self._connections)
        return self.do_open(factory, req, context=self._context)  # type: ignore[attr-defined]


class _Body:
    """A reply body taken chunk by chunk while it stays under MAX_REPLY_BYTES."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.chunks: list[bytes] = []
        self.size = 0

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > MAX_REPLY_BYTES:
            raise SummarizerError(f"{self.url}: reply larger than {MAX_REPLY_BYTES} bytes")
        self.chunks.append(chunk)

    def text(self) -> str:
        """The summary the whole body holds."""
        return _reply_text(b"".join(self.chunks), self.url)


def _read_reply(response: Any, url: str) -> bytes:
    """The body, read while it stays under MAX_REPLY_BYTES."""
    body = _Body(url)
    while chunk := response.read1(1 << 16):
        body.add(chunk)
    return b"".join(body.chunks)


def _reply_text(raw: bytes, url: str) -> str:
    try:
        payload = json.loads(raw)
        content = payload["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise SummarizerError(f"{url}: not a chat-completions reply") from None
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, Sequence):
        texts = [part.get("text", "") for part in content if isinstance(part, dict)]
        return "".join(text for text in texts if isinstance(text, str)).strip()
    raise SummarizerError(f"{url}: reply content is neither text nor a list of parts")


class AsyncSummarizer(Protocol):
    """Compresses conversation history into a shorter text, as a coroutine (for
    :class:`~pioneer.turn.AsyncAgent`)."""

    async def summarize(self, request: SummaryRequest) -> str:
        """The summary text; raise (any exception) on failure."""
        ...


class AsyncOpenAIChatSummarizer:
    """:class:`OpenAIChatSummarizer` over an async HTTP client (``httpx2``, the client the
    official provider SDKs use; the ``async`` extra).

    The request is the sync summarizer's (:meth:`OpenAIChatSummarizer.post`: the body, the
    key, the refusal of a key over plain http) and so is the reading of the reply (the
    size limit, the chat-completions shape); a redirect is an error, never followed, and
    ``timeout`` bounds the whole call. ``transport`` replaces the network (tests)."""

    def __init__(self, base_url: str, *, model: str | None = None,
                 api_key_env: str | None = "OPENAI_API_KEY", timeout: float = 30.0,
                 temperature: float = 0.3, allow_http: bool = False,
                 transport: Any = None) -> None:
        self.http = OpenAIChatSummarizer(base_url, model=model, api_key_env=api_key_env,
                                         timeout=timeout, temperature=temperature,
                                         allow_http=allow_http)
        self.transport = transport

    @classmethod
    def like(cls, summarizer: OpenAIChatSummarizer, *,
             transport: Any = None) -> AsyncOpenAIChatSummarizer:
        """The async summarizer with ``summarizer``'s endpoint, model, key and limits (what
        :class:`~pioneer.turn.AsyncAgent` makes of :func:`summarizer_from_settings`)."""
        made = cls.__new__(cls)
        made.http, made.transport = summarizer, transport
        return made

    @property
    def url(self) -> str:
        """Where the request goes (``{base_url}/chat/completions``)."""
        return self.http.url

    async def summarize(self, request: SummaryRequest) -> str:
        """POST the prompt and return the reply text (stripped; may be empty)."""
        import asyncio  # here: the CLI and the sync runner never load it

        try:
            import httpx2
        except ImportError as error:
            raise SummarizerError(f"{self.url}: the async summarizer needs the 'async' extra "
                                  f"(pip install 'pioneer[async]'): {error}") from None
        data, headers = self.http.post(request)
        url, timeout = self.http.url, self.http.timeout
        body = _Body(url)
        try:
            async with asyncio.timeout(timeout), httpx2.AsyncClient(
                    follow_redirects=False, timeout=timeout, transport=self.transport) as client, \
                    client.stream("POST", url, content=data, headers=headers) as response:
                if response.is_redirect:
                    raise _redirect_error(url, response.status_code)
                if response.status_code >= 400:
                    head = b""
                    async for chunk in response.aiter_raw():
                        head += chunk
                        if len(head) >= 300:
                            break
                    raise _status_error(url, response.status_code, head)
                async for chunk in response.aiter_raw():
                    body.add(chunk)
        except TimeoutError:
            raise SummarizerError(f"{url}: timed out after {timeout:g}s") from None
        except httpx2.TimeoutException:
            raise SummarizerError(f"{url}: timed out after {timeout:g}s") from None
        except (httpx2.HTTPError, OSError) as error:
            raise SummarizerError(f"{url}: {error}") from None
        return body.text()


def summarizer_from_settings(
    settings: PioneerSettings, *, base_url: str | None = None
) -> OpenAIChatSummarizer | None:
    """The HTTP summarizer the settings configure (``base_url`` overrides), or ``None``."""
    url = base_url or settings.summary_base_url
    if not url:
        return None
    return OpenAIChatSummarizer(
        url, api_key_env=settings.summary_api_key_env, timeout=settings.summary_timeout,
        allow_http=settings.summary_allow_http,
    )
