"""``compile --provider``: the compiled prompt (plus a conversation) as a provider request body."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Problem, UsageError

if TYPE_CHECKING:
    from ..compile.manifest import CompiledPromptPayload
    from ..providers import ChatRequest
    from ..settings import PioneerSettings

__all__ = ["PROVIDER_NAMES", "add_provider_options", "provider_output", "provider_request"]

#: The keys of :data:`pioneer.providers.PROVIDERS`, in its order, written out so that
#: ``compile`` can offer them without importing every adapter (a test keeps them in step).
PROVIDER_NAMES = ("anthropic", "openai-chat", "openai-responses", "gemini")


def add_provider_options(parser: argparse.ArgumentParser, output: Any) -> None:
    """--provider (one of the output choices in ``output``), --model, --messages and options."""
    output.add_argument("--provider", choices=list(PROVIDER_NAMES),
                        help="print the request body for this provider API as JSON")
    parser.add_argument("--model", help="model name for --provider (overrides the messages file)")
    parser.add_argument("--messages", type=Path, metavar="FILE",
                        help="conversation for --provider as JSON: a list of messages, or an "
                        "object of request fields (see schemas/chat_request.schema.json); - reads "
                        "standard input")
    parser.add_argument("--dynamic-placement", choices=["cache-first", "system"],
                        help="for --provider: put the dynamic text after the history "
                        "(cache-first) or in the system prompt (system); default: the "
                        "settings' dynamic_placement, else cache-first")
    parser.add_argument("--system-role", choices=["system", "developer"],
                        help="for --provider openai-chat or openai-responses: the role of "
                        "the system messages (default: system)")


def provider_request(args: argparse.Namespace) -> ChatRequest | None:
    """The conversation ``--provider`` sends (``--messages``, ``--model``), without the
    compiled prompt, read before the compile so the refs of its messages count towards
    the Artifact References policy; None when no provider was asked for."""
    if args.provider is None:
        if args.model or args.messages is not None:
            raise UsageError("--model and --messages need --provider")
        if args.dynamic_placement is not None:
            raise UsageError("--dynamic-placement needs --provider")
        if args.system_role is not None:
            raise UsageError("--system-role needs --provider")
        return None
    from ..providers import PROVIDER_APIS, ChatRequest, load_chat_request, provider_api

    if args.system_role is not None and not provider_api(args.provider).takes_system_role:
        takers = [api.name for api in PROVIDER_APIS.values() if api.takes_system_role]
        raise UsageError(f"--system-role applies to {' and '.join(takers)}, not {args.provider}")

    fields: dict[str, Any] = {"compiled_prompt": None}
    if args.model:
        fields["model"] = args.model
    if args.messages is not None:
        return load_chat_request(args.messages, **fields)
    if args.model:
        return ChatRequest(**fields)
    raise UsageError(Problem(
        '--provider needs --model (or a --messages file that sets "model")'
    ))


def provider_output(
    args: argparse.Namespace, request: ChatRequest | None, payload: CompiledPromptPayload,
    settings: PioneerSettings,
) -> str | None:
    """The request body JSON for ``args.provider``: ``request`` (from
    :func:`provider_request`) with the compiled prompt; None when no provider was asked for.

    The dynamic text's placement is ``--dynamic-placement`` when given, else what the
    messages file's ``cache`` says, else the settings' ``dynamic_placement``. The model's
    rules come from the model table with the settings' ``model_path`` files over it.
    """
    if request is None:
        return None
    from ..providers import build_request_body
    from ..providers.models import load_model_table, model_table, using_model_table

    request = request.model_copy(update={"compiled_prompt": payload})
    placement = args.dynamic_placement
    if placement is None and "dynamic_placement" not in request.cache.model_fields_set:
        placement = settings.dynamic_placement
    if placement is not None:
        request = request.model_copy(update={
            "cache": request.cache.model_copy(update={"dynamic_placement": placement})
        })
    table = load_model_table(settings.model_path) if settings.model_path else model_table()
    with using_model_table(table):
        body = build_request_body(args.provider, request, system_role=args.system_role)
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
