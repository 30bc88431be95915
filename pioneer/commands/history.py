"""``pioneer history``: budget a stored thread and show the decision and the messages."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ..episodic.index import EpisodicIndex
from ..errors import StoreError, counted
from ..history.budget import HistoryBudgeter, HistoryDecision, HistoryLimits
from ..history.store import MAX_TURNS
from ..history.summarizer import summarizer_from_settings
from ..providers.models import load_model_table, model_table, using_model_table
from ..providers.window import ContextWindow, context_window
from ..settings import PioneerSettings
from ._common import add_store_options, make_settings, open_command_store
from ._provider import PROVIDER_NAMES

NAME = "history"
HELP = "budget a stored thread's history: keep, summarise or truncate, and what is sent"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``history``."""
    parser.add_argument("thread", metavar="THREAD", help="thread id")
    add_store_options(parser)
    parser.add_argument("--limit", type=int, default=MAX_TURNS, metavar="N",
                        help="most turns the history carries; past it the window cuts back "
                        f"to the low-water share of it (default {MAX_TURNS})")
    parser.add_argument("--max-context-tokens", type=int, metavar="N",
                        help="the context window (default: the max_context_tokens setting, "
                        "else the model's window from the model table)")
    parser.add_argument("--model", metavar="NAME",
                        help="the model whose window applies (default: the thread's model)")
    parser.add_argument("--provider", choices=PROVIDER_NAMES,
                        help="the provider the model is reached through (narrows the "
                        "model table's rows)")
    parser.add_argument("--reserve-tokens", type=int, metavar="N",
                        help="tokens kept for the reply (default: settings)")
    parser.add_argument("--summarize", action="store_true",
                        help="over the threshold, call the summary endpoint and store the summary")
    parser.add_argument("--summary-url", metavar="URL",
                        help="OpenAI-compatible base URL (default: settings summary_base_url)")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Open the store (never creating it; read-only unless it stores a summary), budget
    the thread, print the decision."""
    settings = make_settings(args)
    summarizer = (
        summarizer_from_settings(settings, base_url=args.summary_url) if args.summarize else None
    )
    with open_command_store(args, settings, write=args.summarize) as store, \
            EpisodicIndex(store):  # a summary stored here is indexed with it
        thread = store.get_thread(args.thread)
        if thread is None:
            raise StoreError(f"{store.where}: thread {args.thread!r} does not exist")
        window = _window(args, settings, thread.model)
        limits = HistoryLimits.from_tokens(
            window.tokens,
            settings.response_reserve_tokens if args.reserve_tokens is None
            else args.reserve_tokens,
            low_water=settings.truncate_low_water,
        )
        budgeter = HistoryBudgeter(
            store, limits, summarizer=summarizer, summary_model=settings.summary_model,
            max_turns=args.limit, summary_deadline=settings.summary_timeout,
            keep_recent_tokens=settings.keep_recent_tokens,
            # A read-only pass shows where truncation would cut but stores nothing.
            store_cut=args.summarize,
        )
        decision = budgeter.build(args.thread)
    if args.json:
        data = {**decision.to_dict(), "context_window": window.tokens,
                "window_from": window.source}
        out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return 0
    model = thread.model or "no model recorded"
    out.write(f"thread {decision.thread_id} ({model})\n")
    out.write(f"window     {window.tokens} tokens ({window.source})\n")
    out.write(render_decision(decision))
    if decision.mode == "truncate" and summarizer is None and decision.turns_loaded:
        hint = (
            "configure a summary endpoint (--summary-url or summary_base_url)"
            if args.summarize else "pass --summarize to call the summary endpoint"
        )
        print(f"note: no summary was attempted; {hint}", file=err)
    return 0


def _window(args: argparse.Namespace, settings: PioneerSettings,
            model: str | None) -> ContextWindow:
    """The window the thread's requests fit: ``--max-context-tokens``, else the
    max_context_tokens setting, else the model's (``--model``, else the thread's)."""
    override = args.max_context_tokens if args.max_context_tokens is not None \
        else settings.max_context_tokens
    name = args.model or model
    if override is not None:
        return ContextWindow(override, "--max-context-tokens" if args.max_context_tokens
                             is not None else "the max_context_tokens setting")
    # The deployment's rows over the built-in table, as a turn of the agent reads it.
    table = load_model_table(settings.model_path) if settings.model_path else model_table()
    with using_model_table(table):
        found = context_window(name or "", args.provider, None)
    if name:
        return found
    return ContextWindow(found.tokens, f"{found.source}; the thread records no model: pass "
                         "--model or --max-context-tokens")


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def render_decision(decision: HistoryDecision) -> str:
    """The decision as a short report followed by every message that would be sent."""
    limits = decision.limits
    summary = (
        f"covers {counted(decision.summary_turn_count, 'turn')}"
        if decision.summary_sent else "none sent"
    )
    lines = [
        f"budget     {limits.budget} tokens; threshold {limits.threshold} (80%); "
        f"summary target {limits.target} (10%)",
        f"loaded     {counted(decision.turns_loaded, 'turn')} newer than any summary, "
        f"{decision.total_tokens} "
        f"tokens ({_share(decision.total_tokens, limits.budget)} of budget)",
        f"decision   {decision.mode}: {decision.reason}",
        f"sending    {counted(len(decision.messages), 'message')}, "
        f"{counted(decision.turns_sent, 'turn')}, "
        f"{decision.sent_tokens} tokens ({_share(decision.sent_tokens, limits.budget)} of budget)",
        f"summary    {summary}" + ("; stored now" if decision.summary_stored else ""),
    ]
    if decision.cut_turn_id is not None:
        state = {"stored": "stored now", "kept": "stored on the thread, unchanged",
                 "not_stored": "a writing pass stores it"}[decision.cut_state]
        lines.append(
            f"cut        turns before {decision.cut_turn_id} are not sent (low-water mark "
            f"{limits.low_water_tokens}); {state}"
        )
    if decision.artifact_ref_count:
        lines.append(
            f"artifacts  {counted(decision.artifact_ref_count, 'ref')} in the sent messages"
        )
    for number, (message, tokens) in enumerate(
        zip(decision.messages, decision.message_tokens, strict=True), start=1
    ):
        lines.extend(("", f"--- {number}. {message.role} ({tokens} tokens)", message.content))
    return "\n".join(lines) + "\n"
