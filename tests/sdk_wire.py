"""Sending a runner's body through the official SDK of its provider, with no network.

:func:`send` hands the body to the SDK's own call (``client.messages.create(**body)`` and
so on) over an in-process transport (``httpx2.MockTransport``) that answers with the
provider JSON given; it returns the SDK's response object, which the runner reads back,
and the JSON the SDK put on the wire.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import openai
from google import genai
from google.genai import types as genai_types

#: The body keys the Gemini SDK takes as its flat config (it rebuilds the REST shape).
_GEMINI_CONFIG = ("systemInstruction", "tools", "toolConfig")


def send(provider: str, body: dict[str, Any], reply: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The SDK's response object for ``reply`` after sending ``body``, and the body as sent."""
    sent: list[httpx2.Request] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json=reply)

    http = httpx2.Client(transport=httpx2.MockTransport(handle))
    response: Any
    if provider == "anthropic":
        client = anthropic.Anthropic(api_key="test", http_client=http, max_retries=0)
        response = client.messages.create(**body)
    elif provider == "openai-chat":
        oai = openai.OpenAI(api_key="test", http_client=http, max_retries=0)
        response = oai.chat.completions.create(**body)
    elif provider == "openai-responses":
        oai = openai.OpenAI(api_key="test", http_client=http, max_retries=0)
        response = oai.responses.create(**body)
    else:
        google = genai.Client(api_key="test",
                              http_options=genai_types.HttpOptions(httpx_client=http))
        config = {key: body[key] for key in _GEMINI_CONFIG if key in body}
        config.update(body.get("generationConfig", {}))
        response = google.models.generate_content(model="gemini-2.5-flash",
                                                  contents=body["contents"], config=config)
    assert len(sent) == 1, "expected exactly one request on the wire"
    data: dict[str, Any] = json.loads(sent[0].content)
    return response, data
