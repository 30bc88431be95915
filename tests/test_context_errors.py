"""Context-length errors read back: each provider's error raised by its official SDK over an
in-process transport, the same bodies as JSON, other errors left alone, hostile messages.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import InputError
from pioneer.providers import ContextOverflow, read_context_error
from pioneer.providers.overflow import MAX_MESSAGE

ANTHROPIC_TOO_LONG = "prompt is too long: 208310 tokens > 200000 maximum"
ANTHROPIC_WITH_RESERVE = ("input length and `max_tokens` exceed context limit: 188240 + 21333 "
                          "> 200000, decrease input length or `max_tokens` and try again")
OPENAI_RESULTED = ("This model's maximum context length is 128000 tokens. However, your "
                   "messages resulted in 130412 tokens. Please reduce the length of the "
                   "messages.")
OPENAI_REQUESTED = ("This model's maximum context length is 8192 tokens. However, you "
                    "requested 8700 tokens (8200 in the messages, 500 in the completion). "
                    "Please reduce the length of the messages or completion.")
OPENAI_CONFIGURED = ("Input tokens exceed the configured limit of 272000 tokens. Your "
                     "messages resulted in 289650 tokens. Please reduce the length of the "
                     "messages.")
OPENAI_RESPONSES = ("Your input exceeds the context window of this model. Please adjust your "
                    "input and try again.")
GEMINI_TOO_LONG = ("The input token count (1200293) exceeds the maximum number of tokens "
                   "allowed (1048576).")


def anthropic_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_1"}


def openai_body(message: str, code: str | None = "context_length_exceeded",
                param: str = "messages") -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}


def gemini_body(message: str, status: str = "INVALID_ARGUMENT", code: int = 400
                ) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def client(status: int, body: dict[str, Any]) -> httpx2.Client:
    """An HTTP client whose every request gets ``status`` with ``body``."""
    return httpx2.Client(transport=httpx2.MockTransport(
        lambda request: httpx2.Response(status, json=body)))


def raised(provider: str, status: int, body: dict[str, Any]) -> Exception:
    """The exception the official SDK raises for ``body`` (sent with ``status``)."""
    try:
        if provider == "anthropic":
            anthropic.Anthropic(api_key="test", http_client=client(status, body),
                                max_retries=0).messages.create(
                model="claude-sonnet-4-5", max_tokens=64,
                messages=[{"role": "user", "content": "hi"}])
        elif provider == "openai-chat":
            openai.OpenAI(api_key="test", http_client=client(status, body),
                          max_retries=0).chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        elif provider == "openai-responses":
            openai.OpenAI(api_key="test", http_client=client(status, body),
                          max_retries=0).responses.create(model="gpt-5", input="hi")
        else:
            genai.Client(api_key="test", http_options=genai_types.HttpOptions(
                httpx_client=client(status, body), retry_options=genai_types.HttpRetryOptions(
                    attempts=1))).models.generate_content(model="gemini-2.5-pro",
                                                          contents="hi")
    except Exception as error:
        return error
    raise AssertionError("the SDK did not raise")


CASES = [
    ("anthropic", anthropic_body(ANTHROPIC_TOO_LONG), anthropic.BadRequestError,
     ContextOverflow(208310, 200000, ANTHROPIC_TOO_LONG)),
    ("anthropic", anthropic_body(ANTHROPIC_WITH_RESERVE), anthropic.BadRequestError,
     ContextOverflow(188240, 200000, ANTHROPIC_WITH_RESERVE)),
    ("openai-chat", openai_body(OPENAI_RESULTED), openai.BadRequestError,
     ContextOverflow(130412, 128000, OPENAI_RESULTED)),
    ("openai-chat", openai_body(OPENAI_REQUESTED), openai.BadRequestError,
     ContextOverflow(8200, 8192, OPENAI_REQUESTED)),
    ("openai-chat", openai_body(OPENAI_CONFIGURED), openai.BadRequestError,
     ContextOverflow(289650, 272000, OPENAI_CONFIGURED)),
    ("openai-responses", openai_body(OPENAI_RESPONSES, param="input"), openai.BadRequestError,
     ContextOverflow(None, None, OPENAI_RESPONSES)),
    ("openai-responses", openai_body(OPENAI_RESULTED, param="input"), openai.BadRequestError,
     ContextOverflow(130412, 128000, OPENAI_RESULTED)),
    # The code says it even when the wording is one we have not seen.
    ("openai-responses", openai_body("Too many tokens for this model."),
     openai.BadRequestError, ContextOverflow(None, None, "Too many tokens for this model.")),
    ("gemini", gemini_body(GEMINI_TOO_LONG), genai_errors.ClientError,
     ContextOverflow(1200293, 1048576, GEMINI_TOO_LONG)),
]


@pytest.mark.parametrize(("provider", "body", "kind", "expected"), CASES)
def test_the_sdk_exception_of_a_context_length_error_is_read(
    provider: str, body: dict[str, Any], kind: type[Exception], expected: ContextOverflow,
) -> None:
    error = raised(provider, 400, body)
    assert type(error) is kind
    assert read_context_error(provider, error) == expected


@pytest.mark.parametrize(("provider", "body", "kind", "expected"), CASES)
def test_the_error_body_is_read_as_json_text_and_bytes(
    provider: str, body: dict[str, Any], kind: type[Exception], expected: ContextOverflow,
) -> None:
    text = json.dumps(body)
    for form in (body, text, text.encode()):
        assert read_context_error(provider, form) == expected


def test_exceptions_built_directly_are_read() -> None:
    """The SDKs' classes made by hand, as a caller's own retry layer might."""
    response = httpx2.Response(400, request=httpx2.Request("POST", "https://api.test/v1"))
    body = anthropic_body(ANTHROPIC_TOO_LONG)
    error: Exception = anthropic.BadRequestError("bad request", response=response, body=body)
    assert read_context_error("anthropic", error) == \
        ContextOverflow(208310, 200000, ANTHROPIC_TOO_LONG)
    error = openai.BadRequestError("bad request", response=response,
                                   body=openai_body(OPENAI_RESULTED)["error"])
    assert read_context_error("openai-chat", error) == \
        ContextOverflow(130412, 128000, OPENAI_RESULTED)
    error = genai_errors.ClientError(400, gemini_body(GEMINI_TOO_LONG))
    assert read_context_error("gemini", error) == \
        ContextOverflow(1200293, 1048576, GEMINI_TOO_LONG)


def test_streamed_and_failed_response_shapes_are_read() -> None:
    """Gemini's streaming error is a list; a Responses stream ends in an error event or a
    failed response."""
    assert read_context_error("gemini", [gemini_body(GEMINI_TOO_LONG)]) == \
        ContextOverflow(1200293, 1048576, GEMINI_TOO_LONG)
    event = {"type": "error", "sequence_number": 2, "error": {
        "type": "invalid_request_error", "code": "context_length_exceeded",
        "message": OPENAI_RESPONSES, "param": "input"}}
    assert read_context_error("openai-responses", event) == \
        ContextOverflow(None, None, OPENAI_RESPONSES)
    failed = {"type": "response.failed", "response": {"status": "failed", "error": {
        "code": "context_length_exceeded", "message": OPENAI_RESPONSES}}}
    assert read_context_error("openai-responses", failed) == \
        ContextOverflow(None, None, OPENAI_RESPONSES)


@pytest.mark.parametrize(("provider", "status", "body"), [
    ("anthropic", 429, anthropic_body("Number of request tokens has exceeded your rate limit",
                                      "rate_limit_error")),
    ("anthropic", 400, anthropic_body("max_tokens: 200000 > 64000, which is the maximum "
                                      "allowed number of output tokens")),
    ("openai-chat", 400, openai_body("Invalid value for 'temperature'.", code=None)),
    ("openai-responses", 429, openai_body("Rate limit reached", code="rate_limit_exceeded")),
    ("gemini", 400, gemini_body("API key not valid. Please pass a valid API key.")),
    ("gemini", 429, gemini_body("Resource has been exhausted", status="RESOURCE_EXHAUSTED",
                                code=429)),
])
def test_other_errors_are_not_context_length_errors(provider: str, status: int,
                                                    body: dict[str, Any]) -> None:
    assert read_context_error(provider, raised(provider, status, body)) is None
    assert read_context_error(provider, body) is None


def test_one_providers_error_is_not_read_as_anothers() -> None:
    assert read_context_error("gemini", anthropic_body(ANTHROPIC_TOO_LONG)) is None
    assert read_context_error("anthropic", openai_body(OPENAI_RESULTED)) is None


def test_an_unknown_provider_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown provider 'cohere'"):
        read_context_error("cohere", {})


class Hostile(Exception):
    """An exception whose attributes and text raise."""

    @property
    def body(self) -> Any:
        raise RuntimeError("no body")

    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize("error", [
    None, 42, 3.5, object(), Hostile(), ValueError(), b"\xff\xfe", "", "{", "[" * 10_000,
    {"error": {"message": None}}, {"error": [[[[[[{"message": ANTHROPIC_TOO_LONG}]]]]]]},
    {"error": {"message": "prompt is too long: " + "9" * 5000 + " tokens > 1 maximum"}},
    {"error": {"message": "prompt is too long: 1,234 tokens > 1,000 maximum"}},
])
def test_hostile_errors_never_crash(error: object) -> None:
    result = read_context_error("anthropic", error)
    assert result is None or len(result.message) <= MAX_MESSAGE
    if isinstance(error, dict) and "1,234" in json.dumps(error):
        assert result == ContextOverflow(1234, 1000, "prompt is too long: 1,234 tokens > "
                                         "1,000 maximum")


def test_a_long_message_is_kept_to_its_first_characters() -> None:
    # The hostile cases above read as None or as a short message: this one reaches the bound.
    message = f"{ANTHROPIC_TOO_LONG}. " + "What follows is long. " * 1_000
    assert read_context_error("anthropic", anthropic_body(message)) == \
        ContextOverflow(208310, 200000, message[:MAX_MESSAGE])


@settings(max_examples=200, deadline=None)
@given(
    provider=st.sampled_from(["anthropic", "openai-chat", "openai-responses", "gemini"]),
    error=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=300)
        | st.sampled_from([ANTHROPIC_TOO_LONG, OPENAI_RESULTED, GEMINI_TOO_LONG, "{", "[["]),
        lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["error", "message", "code", "response", "x"]),
                          inner, max_size=4),
        max_leaves=20,
    ),
)
def test_any_json_is_read_without_a_crash(provider: str, error: Any) -> None:
    result = read_context_error(provider, error)
    assert result is None or isinstance(result, ContextOverflow)
    if result is not None and result.reported_tokens is not None:
        assert result.reported_tokens >= 0
