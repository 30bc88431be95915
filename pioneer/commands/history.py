"""``pioneer history``: budget a stored thread and show the decision and the messages."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ..episodic.index import EpisodicIndex
from ..errors import counted
from ..history.budget import HistoryBudgeter, HistoryDecision, HistoryLimits
from ..history.store import MAX_TURNS
from ..history.summarizer import summarizer_from_settings
from ._common import add_store_options, make_settings, open_command_store

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
                        help="model context window (default: settings)")
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
    limits = HistoryLimits.from_tokens(
        settings.max_context_tokens if args.max_context_tokens is None else args.max_context_tokens,
        settings.response_reserve_tokens if args.reserve_tokens is None else args.reserve_tokens,
        low_water=settings.truncate_low_water,
    )
    summarizer = (
        summarizer_from_settings(settings, base_url=args.summary_url) if args.summarize else None
    )
    with open_command_store(args, settings, write=args.summarize) as store, \
            EpisodicIndex(store):  # a summary stored here is indexed with it
        budgeter = HistoryBudgeter(
            store, limits, summarizer=summarizer, summary_model=settings.summary_model,
            max_turns=args.limit, summary_deadline=settings.summary_timeout,
            keep_recent_tokens=settings.keep_recent_tokens,
            # A read-only pass shows where truncation would cut but stores nothing.
            store_cut=args.summarize,
        )
        decision = budgeter.build(args.thread)
        thread = store.get_thread(args.thread)
    if args.json:
        out.write(json.dumps(decision.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return 0
    model = thread.model if thread and thread.model else "no model recorded"
    out.write(f"thread {decision.thread_id} ({model})\n")
    out.write(render_decision(decision))
    if decision.mode == "truncate" and summarizer is None and decision.turns_loaded:
        hint = (
            "configure a summary endpoint (--summary-url or summary_base_url)"
            if args.summarize else "pass --summarize to call the summary endpoint"
        )
        print(f"note: no summary was attempted; {hint}", file=err)
    return 0


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
