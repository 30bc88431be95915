"""The provider registry: each API is one :class:`ProviderApi`, registered once.

An API's object holds everything that differs between the four: its body builder, its
reply reader and usage mapping, how a reply of another API is told apart, its
context-length errors, its cache rules, where its body puts the system prompt, and its
names. Code above the adapters asks the object (:func:`provider_api`) instead of
comparing provider names; :data:`PROVIDER_APIS` lists them in ``--provider`` order.
:func:`build_request_body`, :func:`read_response` and :func:`read_context_error` are the
name-taking entry points, each one lookup and one call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InputError, Problem, ProviderError
from ._blocks import (
    BodyBlocks,
    anthropic_blocks,
    gemini_blocks,
    openai_chat_blocks,
    openai_responses_blocks,
)
from .anthropic import DEFAULT_MAX_TOKENS, to_anthropic
from .gemini import to_gemini
from .names import (
    ANTHROPIC,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    TABLE_FAMILIES,
    ProviderName,
    TableProvider,
)
from .openai_chat import SystemRole, to_openai_chat
from .openai_responses import to_openai_responses
from .overflow import (
    ANTHROPIC_ERRORS,
    GEMINI_ERRORS,
    OPENAI_ERRORS,
    ContextErrorRule,
    ContextOverflow,
)
from .replies import (
    ModelReply,
    claims_anthropic,
    claims_gemini,
    claims_openai_chat,
    claims_openai_responses,
    read_anthropic,
    read_gemini,
    read_openai_chat,
    read_openai_responses,
    response_json,
)
from .request import ChatRequest
from .rules import ANTHROPIC_CALL_IDS, OPENAI_CHAT_CALL_IDS, OPENAI_RESPONSES_CALL_IDS, CallIdRule
from .usage import (
    ReportedUsage,
    anthropic_usage,
    gemini_usage,
    openai_chat_usage,
    openai_responses_usage,
    register_usage,
)

__all__ = [
    "API_NAMES",
    "PROVIDER_APIS",
    "PROVIDER_NAMES",
    "ProviderApi",
    "ProviderName",
    "build_request_body",
    "provider_api",
    "read_context_error",
    "read_response",
    "response_api",
]


class _Build(Protocol):
    def __call__(self, request: ChatRequest, /) -> dict[str, Any]: ...


class _BuildWithRole(Protocol):
    def __call__(self, request: ChatRequest, *, system_role: SystemRole) -> dict[str, Any]: ...


class _Dumpable(Protocol):
    def model_dump(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ProviderApi:
    """One provider API: what it builds, how it answers, and its rules."""

    #: The API's name, as ``--provider`` and an agent spell it.
    name: ProviderName
    #: The API's own name, for messages ("Anthropic Messages").
    title: str
    #: ``gen_ai.provider.name`` of the OpenTelemetry GenAI conventions (docs/telemetry.md).
    telemetry_name: str
    #: The body builder with its default options.
    build: _Build
    #: The body builder taking the role of system messages, for the APIs that have one.
    build_with_role: _BuildWithRole | None
    #: A response's JSON (or an SDK object's ``model_dump()``) read as one reply.
    read_reply: Callable[[Any], ModelReply]
    #: The response's ``usage`` object in one set of terms.
    read_usage: Callable[[Mapping[str, Any]], ReportedUsage]
    #: Its context-length errors.
    context_errors: ContextErrorRule
    #: Its official SDK's response class: (module prefix, class name).
    sdk_class: tuple[str, str]
    #: Whether a response's JSON names itself a reply of this API.
    claims: Callable[[Mapping[str, Any]], bool]
    #: A built body's blocks in cache order.
    body_blocks: Callable[[Mapping[str, Any]], BodyBlocks]
    #: The body carries explicit cache marks (``cache_control``) that write entries.
    cache_marks: bool
    #: A change of ``tool_choice`` invalidates the cached messages (not tools or system).
    tool_choice_in_prefix: bool
    #: The history's system messages go to the system part, not the conversation.
    system_messages_in_system: bool
    #: The reply reserve counted against the window when the request sets no
    #: ``max_tokens`` (the body's default ``max_tokens``), if the API sends one.
    default_max_tokens: int | None
    #: How tool-call ids are mapped, if the API limits them.
    call_ids: CallIdRule | None
    #: Where the system prompt goes (``system`` placement).
    system_carrier: str
    #: The same for the cache-first layout, where the dynamic text follows the history.
    cache_first_carrier: str

    @property
    def family(self) -> TableProvider:
        """Its rows' ``provider`` in the model table (both OpenAI APIs: ``openai``)."""
        return TABLE_FAMILIES[self.name]

    @property
    def takes_system_role(self) -> bool:
        """Whether the API takes a role for system messages (``system`` or ``developer``)."""
        return self.build_with_role is not None

    def build_body(self, request: ChatRequest, *,
                   system_role: SystemRole | None = None) -> dict[str, Any]:
        """The request body; ``system_role`` only for the APIs that take one."""
        if system_role is None:
            return self.build(request)
        if self.build_with_role is None:
            raise InputError(Problem(
                f"{self.name} has no system role option; leave system_role unset"))
        return self.build_with_role(request, system_role=system_role)


#: The four APIs, in ``--provider`` order.
PROVIDER_APIS: Mapping[str, ProviderApi] = {api.name: api for api in (
    ProviderApi(
        name=ANTHROPIC, title="Anthropic Messages",
        telemetry_name=ANTHROPIC,  # the GenAI conventions spell it as we do
        build=to_anthropic, build_with_role=None,
        read_reply=read_anthropic, read_usage=anthropic_usage,
        context_errors=ANTHROPIC_ERRORS, sdk_class=("anthropic.", "Message"),
        claims=claims_anthropic, body_blocks=anthropic_blocks, cache_marks=True,
        tool_choice_in_prefix=True, system_messages_in_system=True,
        default_max_tokens=DEFAULT_MAX_TOKENS, call_ids=ANTHROPIC_CALL_IDS,
        system_carrier="system blocks: stable, dynamic, then system messages",
        cache_first_carrier="system blocks: stable, then system messages; dynamic: a text "
                            "block before the current user text",
    ),
    ProviderApi(
        name=OPENAI_CHAT, title="OpenAI Chat Completions",
        telemetry_name="openai", build=to_openai_chat, build_with_role=to_openai_chat,
        read_reply=read_openai_chat, read_usage=openai_chat_usage,
        context_errors=OPENAI_ERRORS, sdk_class=("openai.", "ChatCompletion"),
        claims=claims_openai_chat, body_blocks=openai_chat_blocks, cache_marks=False,
        tool_choice_in_prefix=False, system_messages_in_system=False,
        default_max_tokens=None, call_ids=OPENAI_CHAT_CALL_IDS,
        system_carrier="one leading system message: stable + dynamic joined",
        cache_first_carrier="leading system message: stable; dynamic: a system message "
                            "before the current user message",
    ),
    ProviderApi(
        name=OPENAI_RESPONSES, title="OpenAI Responses",
        telemetry_name="openai", build=to_openai_responses, build_with_role=to_openai_responses,
        read_reply=read_openai_responses, read_usage=openai_responses_usage,
        context_errors=OPENAI_ERRORS, sdk_class=("openai.", "Response"),
        claims=claims_openai_responses, body_blocks=openai_responses_blocks,
        cache_marks=False, tool_choice_in_prefix=False, system_messages_in_system=False,
        default_max_tokens=None, call_ids=OPENAI_RESPONSES_CALL_IDS,
        system_carrier="instructions: stable + dynamic joined",
        cache_first_carrier="instructions: stable; dynamic: an input message before the "
                            "current user message",
    ),
    ProviderApi(
        name=GEMINI, title="Gemini generateContent",
        telemetry_name="gcp.gemini", build=to_gemini, build_with_role=None,
        read_reply=read_gemini, read_usage=gemini_usage,
        context_errors=GEMINI_ERRORS, sdk_class=("google.genai.", "GenerateContentResponse"),
        claims=claims_gemini, body_blocks=gemini_blocks, cache_marks=False,
        tool_choice_in_prefix=False, system_messages_in_system=True,
        default_max_tokens=None, call_ids=None,
        system_carrier="systemInstruction parts: stable, dynamic, then system messages",
        cache_first_carrier="systemInstruction parts: stable, then system messages; "
                            "dynamic: a text part before the current user text",
    ),
)}

for _api in PROVIDER_APIS.values():
    register_usage(_api.name, _api.read_usage)

#: The APIs' names, in ``--provider`` order.
PROVIDER_NAMES: tuple[ProviderName, ...] = tuple(api.name for api in PROVIDER_APIS.values())
#: Each API's own name, for messages.
API_NAMES: Mapping[str, str] = {api.name: api.title for api in PROVIDER_APIS.values()}


def provider_api(name: str) -> ProviderApi:
    """The API ``name`` spells (as ``--provider`` does); an unknown name is an
    :class:`~pioneer.errors.InputError` listing the four."""
    api = PROVIDER_APIS.get(name)
    if api is None:
        raise InputError(Problem(
            f"unknown provider {name!r}; expected one of {', '.join(PROVIDER_APIS)}"))
    return api


def build_request_body(
    provider: str, request: ChatRequest, *, system_role: SystemRole | None = None
) -> dict[str, Any]:
    """The request body for a provider named as in :data:`PROVIDER_NAMES`.

    ``system_role`` ("system" or "developer") is the role of system messages for the two
    OpenAI APIs; the other providers have no such role and refuse it.
    """
    return provider_api(provider).build_body(request, system_role=system_role)


def response_api(response: object) -> ProviderApi | None:
    """The API ``response`` is a reply of, by its official SDK class or, for JSON, by the
    ``object`` or ``type`` field (or the top-level key) only that API sends; ``None``
    when it does not say."""
    kind = type(response)
    for api in PROVIDER_APIS.values():
        module, name = api.sdk_class
        if kind.__name__ == name and kind.__module__.startswith(module):
            return api
    if not isinstance(response, Mapping):
        return None
    return next((api for api in PROVIDER_APIS.values() if api.claims(response)), None)


def read_response(provider: str, response: Mapping[str, Any] | _Dumpable) -> ModelReply:
    """The reply in ``response`` (a provider's JSON, or an official SDK response object),
    read by ``provider``'s API; a reply of another API is a
    :class:`~pioneer.errors.ProviderError` naming both."""
    api = provider_api(provider)
    data = response_json(response)
    looks = response_api(response) or response_api(data)
    if looks is not None and looks is not api:
        raise ProviderError(Problem(
            f"the response looks like a reply of {looks.title} ({looks.name}), but the turn "
            f"was built for {api.title} ({api.name}): send the body to the API it "
            f"was built for, or build it for {looks.name}", path="(response)"))
    return api.read_reply(data)


def read_context_error(provider: str, error: object) -> ContextOverflow | None:
    """The context-length error in ``error`` (an SDK exception or the error body) as
    ``provider``'s API words it, or ``None`` when it is another error."""
    return provider_api(provider).context_errors.read(error)
