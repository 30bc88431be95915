"""Summarizers: the prompt, and the OpenAI-compatible HTTP client against a loopback server."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pioneer.cli import main
from pioneer.history import (
    HistoryBudgeter,
    HistoryLimits,
    HistoryMessage,
    OpenAIChatSummarizer,
    SqliteStore,
    SummarizerError,
    SummaryRequest,
)
from pioneer.history.budget import window_tokens

GOLDENS = Path(__file__).parent / "goldens" / "history"


def completion(content: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}]}


class ChatServer:
    """A chat-completions endpoint on 127.0.0.1 that records requests and replies as told.

    With ``tls`` it speaks HTTPS with that server context. ``drip`` sends a status line and
    then a header line every 0.05 s for 10 s (each one well inside any socket timeout).
    """

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.status = 200
        self.reply: bytes = json.dumps(completion("A short summary.")).encode()
        self.stall = False
        self.drip = False
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                server.requests.append((self.path, dict(self.headers), json.loads(body)))
                if server.stall:
                    server.release.wait(10)
                    return
                if server.drip:  # a header line every 0.05 s, never the end of them
                    with contextlib.suppress(OSError):  # the client hangs up at its deadline
                        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                        for n in range(200):
                            if server.release.wait(0.05):
                                return
                            self.wfile.write(f"X-Drip-{n}: x\r\n".encode())
                            self.wfile.flush()
                    return
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.reply)))
                self.end_headers()
                self.wfile.write(server.reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "http" if tls is None else "https"
        self.base_url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = ChatServer()
    yield chat
    chat.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (made by the openssl tool)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[ChatServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    chat = ChatServer(tls=context)
    yield chat
    chat.close()


@pytest.fixture
def trusted(certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's default trust store is the test certificate alone."""
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))


REQUEST = SummaryRequest(
    model="thread-model",
    target_tokens=120,
    previous_summary="The user is building a prompt compiler.",
    transcript=(
        HistoryMessage("user", "Which store?"),
        HistoryMessage("assistant", "SQLite: embedded and transactional."),
        HistoryMessage("user", "Why?"),
        HistoryMessage("assistant", "Embedded, transactional, no server."),
    ),
)


def test_prompt(golden: Callable[[Path, str], None]) -> None:
    golden(GOLDENS / "summary-prompt.txt", REQUEST.prompt())


@pytest.mark.parametrize("kept", ["decision", "technical detail", "file path",
                                  "stated preference", "correction the user made", "open task",
                                  "error"])
def test_the_prompt_names_what_a_summary_must_keep(kept: str) -> None:
    instruction = REQUEST.prompt().split("\n\n", 1)[0]
    assert kept in instruction


@pytest.mark.parametrize(("length", "cut"), [(3000, False), (3001, True)])
def test_long_assistant_text_is_cut_at_3000_chars(length: int, cut: bool) -> None:
    text = "y" * length
    request = SummaryRequest("m", 10, None, (HistoryMessage("user", text),
                                             HistoryMessage("assistant", text)))
    expected = "y" * 3000 + ("...[truncated]" if cut else "")
    assert request.prompt().endswith(f"User: {text}\n\nAssistant: {expected}")


def test_prompt_without_previous_summary() -> None:
    request = SummaryRequest(None, 50, None, (HistoryMessage("user", "hi"),
                                              HistoryMessage("assistant", "hello")))
    assert request.prompt().endswith("repetition.\n\nUser: hi\n\nAssistant: hello")
    assert "Earlier summary" not in request.prompt()


def test_posts_the_prompt_and_returns_the_reply(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIONEER_TEST_SUMMARY_KEY", "sekret")
    summarizer = OpenAIChatSummarizer(server.base_url + "/", api_key_env="PIONEER_TEST_SUMMARY_KEY",
                                      allow_http=True)
    assert summarizer.summarize(REQUEST) == "A short summary."
    ((path, headers, body),) = server.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sekret"
    assert headers["Content-Type"] == "application/json"
    assert body == {"model": "thread-model", "temperature": 0.3, "max_tokens": 120,
                    "messages": [{"role": "user", "content": REQUEST.prompt()}]}


def test_no_key_means_no_authorization_header(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PIONEER_TEST_SUMMARY_KEY", raising=False)
    OpenAIChatSummarizer(server.base_url, api_key_env="PIONEER_TEST_SUMMARY_KEY",
                         model="configured").summarize(REQUEST)
    ((_, headers, body),) = server.requests
    assert "Authorization" not in headers
    assert body["model"] == "configured"


@pytest.mark.parametrize(
    ("content", "text"),
    [("  padded  ", "padded"), (None, ""),
     ([{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}],
      "part one, part two")],
    ids=["string", "null", "parts"],
)
def test_reply_content_shapes(server: ChatServer, content: Any, text: str) -> None:
    server.reply = json.dumps(completion(content)).encode()
    assert OpenAIChatSummarizer(server.base_url).summarize(REQUEST) == text


@pytest.mark.parametrize(
    ("status", "reply", "message"),
    [(503, b"overloaded", "HTTP 503: overloaded"),
     (200, b"<html>not json</html>", "not a chat-completions reply"),
     (200, b'{"choices": []}', "not a chat-completions reply"),
     (200, json.dumps(completion(42)).encode(),
      "reply content is neither text nor a list of parts")],
    ids=["http-error", "not-json", "no-choices", "odd-content"],
)
def test_bad_replies_are_summarizer_errors(
    server: ChatServer, status: int, reply: bytes, message: str
) -> None:
    server.status, server.reply = status, reply
    with pytest.raises(SummarizerError) as raised:
        OpenAIChatSummarizer(server.base_url).summarize(REQUEST)
    assert str(raised.value) == f"{server.base_url}/chat/completions: {message}"


def test_a_stalled_server_times_out(server: ChatServer) -> None:
    server.stall = True
    with pytest.raises(SummarizerError) as raised:
        OpenAIChatSummarizer(server.base_url, timeout=0.2).summarize(REQUEST)
    assert str(raised.value) == f"{server.base_url}/chat/completions: timed out after 0.2s"


@pytest.mark.usefixtures("trusted")
def test_https_posts_the_prompt_and_returns_the_reply(
    tls_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIONEER_TEST_SUMMARY_KEY", "sekret")
    summarizer = OpenAIChatSummarizer(tls_server.base_url,
                                      api_key_env="PIONEER_TEST_SUMMARY_KEY")
    assert tls_server.base_url.startswith("https://")
    assert summarizer.summarize(REQUEST) == "A short summary."
    ((path, headers, body),) = tls_server.requests
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sekret"
    assert body["messages"] == [{"role": "user", "content": REQUEST.prompt()}]


def test_https_checks_the_certificate(tls_server: ChatServer,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/no-certificates.pem")
    monkeypatch.setenv("SSL_CERT_DIR", "/nonexistent")
    with pytest.raises(SummarizerError) as raised:
        OpenAIChatSummarizer(tls_server.base_url, timeout=5).summarize(REQUEST)
    assert str(raised.value).startswith(
        f"{tls_server.base_url}/chat/completions: [SSL: CERTIFICATE_VERIFY_FAILED]")
    assert tls_server.requests == []


def _summarizer_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate()
            if thread.name.startswith("pioneer-summarizer-http")}


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.usefixtures("trusted")
def test_a_late_call_is_cut_off_at_its_deadline(
    server: ChatServer, tls_server: ChatServer, scheme: str
) -> None:
    # The headers would take 10 s, and no single read waits long enough for the socket
    # timeout; only shutting the call's connection at the deadline ends the abandoned
    # request's thread soon after the error.
    chat = server if scheme == "http" else tls_server
    chat.drip = True
    before = _summarizer_threads()
    with pytest.raises(SummarizerError) as raised:
        OpenAIChatSummarizer(chat.base_url, timeout=0.3).summarize(REQUEST)
    assert str(raised.value) == f"{chat.base_url}/chat/completions: timed out after 0.3s"
    give_up = time.monotonic() + 2  # the pool worker takes its own name back after the call
    while _summarizer_threads() - before and time.monotonic() < give_up:
        time.sleep(0.01)
    assert _summarizer_threads() - before == set()


def test_a_closed_port_is_a_summarizer_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SummarizerError, match="Connection refused"):
        OpenAIChatSummarizer(f"http://127.0.0.1:{port}").summarize(REQUEST)


def test_no_model_anywhere_is_a_summarizer_error(server: ChatServer) -> None:
    request = SummaryRequest(None, 10, None, (HistoryMessage("user", "x"),))
    with pytest.raises(SummarizerError, match="no summary model"):
        OpenAIChatSummarizer(server.base_url).summarize(request)
    assert server.requests == []


def test_base_url_must_be_http() -> None:
    with pytest.raises(SummarizerError, match="must start with http:// or https://"):
        OpenAIChatSummarizer("file:///etc")


# -- through the budgeter and the CLI --------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    with SqliteStore(path) as store:
        store.ensure_thread("demo", model="demo-model")
        for n in range(4):
            store.add_turn("demo", user_text=f"Question {n} about the store?",
                           assistant_text=f"Answer {n}: it is SQLite in WAL mode.",
                           turn_id=f"turn-{n}")
    return path


def test_budgeter_stores_the_http_summary(server: ChatServer, db: Path) -> None:
    with SqliteStore(db) as store:
        limits = HistoryLimits.from_tokens(window_tokens(store.get_history_window("demo")), 0)
        decision = HistoryBudgeter(store, limits,
                                   summarizer=OpenAIChatSummarizer(server.base_url)).build("demo")
        summary = store.get_thread_summary("demo")
    assert decision.mode == "summarise"
    assert decision.messages == (
        HistoryMessage("system", "Summary of earlier conversation:\nA short summary."),)
    assert summary is not None and summary.through_turn_id == "turn-3"
    assert server.requests[0][2]["max_tokens"] == limits.target


def test_budgeter_falls_back_when_the_server_stalls(server: ChatServer, db: Path) -> None:
    server.stall = True
    with SqliteStore(db) as store:
        limits = HistoryLimits.from_tokens(60, 0)
        summarizer = OpenAIChatSummarizer(server.base_url, timeout=0.2)
        decision = HistoryBudgeter(store, limits, summarizer=summarizer).build("demo")
        assert store.get_thread_summary("demo") is None
    assert decision.mode == "truncate"
    assert "summarizer failed: " in decision.reason and "timed out after 0.2s" in decision.reason
    assert decision.messages[-1] == HistoryMessage(
        "assistant", "Answer 3: it is SQLite in WAL mode.")
    assert 0 < decision.sent_tokens <= 60


def test_cli_summarize_calls_the_endpoint_and_stores(
    server: ChatServer, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    golden: Callable[[Path, str], None],
) -> None:
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = main(["history", "demo", "--db", str(db), "--home", str(tmp_path),
                 "--max-context-tokens", "100", "--reserve-tokens", "0",
                 "--summarize", "--summary-url", server.base_url], stdout=out, stderr=err)
    assert (code, err.getvalue()) == (0, "")
    assert server.requests[0][2]["model"] == "demo-model"
    golden(GOLDENS / "cli-summarise.txt", out.getvalue())
    out = io.StringIO()
    main(["history", "demo", "--db", str(db), "--home", str(tmp_path)], stdout=out)
    assert "decision   keep: " in out.getvalue()
    assert len(server.requests) == 1
