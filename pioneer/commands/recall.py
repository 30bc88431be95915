"""``pioneer recall``: query a thread's episodic index and show each hit's provenance and score."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any, TextIO

from ..episodic.index import MAX_CANDIDATES, SMALL_INDEX, EpisodicIndex, Retained
from ..episodic.recall import MIN_SCORE, MIN_SHARE_OF_BEST, Recall, recall
from ..errors import InputError, StoreError, counted
from ..history.artifacts import ref_line
from ..review.terminal import progress
from ._common import add_store_options, make_settings, open_command_store

NAME = "recall"
HELP = "search a thread's earlier turns the way the recall hook does; show provenance and scores"


def configure(parser: argparse.ArgumentParser) -> None:
    """Options of ``recall``."""
    parser.add_argument("thread", metavar="THREAD", help="thread id")
    parser.add_argument("query", metavar="QUERY", help="text to recall against (a user message)")
    add_store_options(parser)
    parser.add_argument("--limit", type=int, default=MAX_CANDIDATES, metavar="N",
                        help=f"candidates to fetch (default {MAX_CANDIDATES})")
    parser.add_argument("--min-score", type=float, default=MIN_SCORE, metavar="X",
                        help=f"lowest score kept (default {MIN_SCORE:.2f})")
    parser.add_argument("--min-share", type=float, default=MIN_SHARE_OF_BEST, metavar="X",
                        help="lowest score kept as a share of the best candidate's "
                        f"(default {MIN_SHARE_OF_BEST})")
    parser.add_argument("--all", action="store_true",
                        help="also show the candidates below the threshold")
    parser.add_argument("--exclude-history", action="store_true",
                        help="leave out the summary and turns a keep history pass would send")
    parser.add_argument("--reindex", action="store_true",
                        help="rebuild the thread's snippets from the stored turns first")
    parser.add_argument("--json", action="store_true", help="print the hits as JSON")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Open the store (never creating it; read-only unless it re-indexes), search the
    thread, print the hits."""
    if args.limit < 1:
        raise InputError(f"--limit must be at least 1 (got {args.limit})")
    settings = make_settings(args)
    with open_command_store(args, settings, write=args.reindex) as store, \
            EpisodicIndex(store) as index:
        if args.reindex:
            with progress(err, f"reindexing thread {args.thread}") as update:
                count = index.reindex_thread(args.thread, update)
            print(f"reindexed thread {args.thread}: {count} snippets", file=err)
        elif not index.thread_exists(args.thread):
            raise StoreError(f"{index.path}: thread {args.thread!r} does not exist")
        retained = index.default_retained(args.thread) if args.exclude_history else Retained()
        found = recall(index, args.thread, args.query, retained=retained,
                       min_score=args.min_score, min_share_of_best=args.min_share,
                       max_candidates=args.limit)
        unindexed = 0 if args.reindex else index.unindexed_turns(args.thread)
    if unindexed:  # written through a store with no index attached: recall cannot see them
        one = unindexed == 1
        print(f"warning: {counted(unindexed, 'turn')} of thread {args.thread!r} "
              f"{'is' if one else 'are'} not indexed, so recall cannot find "
              f"{'it' if one else 'them'}: run `pioneer recall {shlex.quote(args.thread)} "
              "QUERY --reindex` once to index the thread", file=err)
    if found.query is None:
        raise InputError(f"nothing to search for in {args.query!r}: only stopwords, "
                         "one-letter words or punctuation")
    if args.json:
        out.write(json.dumps(_as_json(args.thread, found), indent=2, ensure_ascii=False) + "\n")
        return 0
    out.write(render_recall(args.thread, found, show_all=args.all))
    return 0


def _hit(found: Recall, index: int) -> dict[str, Any]:
    snippet = found.candidates[index]
    return {
        "source_id": snippet.source_id, "thread_id": snippet.thread_id,
        "turn_id": snippet.turn_id, "item_id": snippet.item_id, "chunk_id": snippet.chunk_id,
        "role": snippet.role, "context": snippet.context, "score": round(snippet.score, 4),
        "shared_terms": found.shared[index] if index < len(found.shared) else None,
        "kept": found.keeps(index), "text": snippet.text,
        "artifacts": [ref.to_dict() for ref in snippet.artifacts],
    }


def _as_json(thread_id: str, found: Recall) -> dict[str, Any]:
    return {
        "thread_id": thread_id, "query": found.query, "min_score": found.min_score,
        "min_share_of_best": found.min_share_of_best, "threshold": round(found.threshold, 4),
        "words": found.words, "small_index": found.small_index,
        "candidates": len(found.candidates),
        "hits": [_hit(found, n) for n in range(len(found.candidates))],
    }


def render_recall(thread_id: str, found: Recall, *, show_all: bool = False) -> str:
    """A header line, then per hit its score, provenance, role and context, and text."""
    kept, threshold = found.kept, found.threshold
    shown = found.candidates if show_all else kept
    lines = [
        f"thread {thread_id}: {len(kept)} of {len(found.candidates)} candidates at or above "
        f"score {threshold:.2f} (floor {found.min_score:.2f}, "
        f"{found.min_share_of_best:g} of the best)",
        f"query  {found.query}",
    ]
    if found.one_word and found.candidates:
        lines.append(f"kept none: the index has fewer than {SMALL_INDEX} snippets and no "
                     "candidate holds two of the message's words")
    if not shown:
        lines.append("no hits")
    for snippet in shown:
        below = "" if snippet.score >= threshold else "  (below threshold)"
        lines.append("")
        lines.append(f"{snippet.score:6.2f}  {snippet.source_id}  role={snippet.role}  "
                     f"context={snippet.context}{below}")
        lines.extend("        " + line for line in snippet.text.splitlines())
        lines.extend("        " + ref_line(ref) for ref in snippet.artifacts)
    return "\n".join(lines) + "\n"
