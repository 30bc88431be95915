"""The recall hook: past snippets of the thread that bear on the new message, as context.

:func:`recall` asks the :class:`~.index.EpisodicIndex` for at most 40 candidates for the
user's message, leaving out what the request's history already carries, and keeps those
that pass the threshold below. :func:`episodic_recall_subscription` is the built-in
hook ``thread_episodic.context_recall`` (docs/recall.md, "The recall hook"): phase
``turn.pre_prompt_context``, priority -10, a 1500 ms deadline, best-effort. It hands the
kept snippets, with their scoped artifact refs, to the Thread Context renderer; no kept
snippet means no contribution and so no section.

The threshold. A score is BM25 over the thread's own snippets (k1 1.2, b 0.75, as SQLite
FTS5's ``bm25()``, with lengths in characters): the sum over matched query terms of the
term's inverse document frequency ``ln((N - n + 0.5) / (n + 0.5))`` (``N`` snippets in the
thread, ``n`` of them holding the term), weighted by how often the term occurs in the
snippet against the snippet's length. A term found in one snippet in ten scores about 2,
in a quarter of them about 1, in half of them or more 0. A candidate is kept when both
hold:

* its score is at least :data:`MIN_SCORE` = 1.0: it shares with the message a word found
  in fewer than about a quarter of the snippets (or several commoner ones), so snippets
  that only share everyday words are dropped;
* its score is at least :data:`MIN_SHARE_OF_BEST` = 0.5 of the best candidate's: it
  matches about as well as the best one, so a few strong hits are not padded out with
  snippets that share one incidental word.

An absolute floor alone cannot do both jobs, because BM25 grows with the size of the
thread (``ln N``): a floor high enough to stop incidental matches in a long thread would
stop real ones in a short one. Counts are over the thread alone, never the other threads
in the store, so a thread of a handful of snippets recalls little: with so few, no word
is uncommon.

Both rules weigh a word by how rare it is in the thread, which a small thread cannot
tell: among a dozen snippets an everyday word ("weekend") is found once and scores like a
rare name, and when it is the best candidate the share of the best keeps it. So in a
thread of fewer than :data:`~.index.SMALL_INDEX` = 18 snippets (the fewest among which a
word found in one snippet of four turns up at most once less than one time in twenty),
recall needs a candidate that holds two of the message's words; when none does, nothing
is recalled. A message of one word is judged by the two scores alone, and so is any
message in a larger thread.

On PostgreSQL the score is built from ``ts_rank`` (which knows no term rarity) weighed by
the same inverse document frequency, so that the same two rules and numbers apply;
docs/stores.md has the rule and its measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..history.budget import HistoryDecision
from ..hooks.models import HookContext, HookResult, Subscription
from ..sections._thread_context import ThreadSnippet, thread_context_contribution
from .index import MAX_CANDIDATES, EpisodicIndex, Retained

__all__ = [
    "DEADLINE_MS",
    "HISTORY_KEY",
    "HOOK_ID",
    "MIN_SCORE",
    "MIN_SHARE_OF_BEST",
    "PHASE",
    "PRIORITY",
    "SUBSCRIPTION_ID",
    "Recall",
    "episodic_recall_subscription",
    "recall",
    "retained_for",
]

HOOK_ID = "thread_episodic.context_recall"
SUBSCRIPTION_ID = "thread_episodic.context_recall.default"
PHASE = "turn.pre_prompt_context"
PRIORITY = -10
DEADLINE_MS = 1500
#: Lowest score a recalled snippet may have (see the module docstring).
MIN_SCORE = 1.0
#: Lowest score a recalled snippet may have, as a share of the best candidate's score.
MIN_SHARE_OF_BEST = 0.5
#: Key of ``TurnContext.data`` under which an application passes the turn's
#: :class:`~pioneer.history.HistoryDecision`, so recall skips exactly what it sends.
HISTORY_KEY = "history"


@dataclass(frozen=True, slots=True)
class Recall:
    """One recall: the FTS5 query, every candidate (best first), and the threshold.

    ``shared``, ``words`` and ``small_index`` are the search's
    (:class:`~.index.SearchResult`): how many of the message's terms each candidate holds,
    how many words the message has, and whether the thread is too small to weigh words.
    """

    query: str | None
    candidates: tuple[ThreadSnippet, ...]
    min_score: float = MIN_SCORE
    min_share_of_best: float = MIN_SHARE_OF_BEST
    shared: tuple[int, ...] = ()
    words: int = 0
    small_index: bool = False

    @property
    def threshold(self) -> float:
        """The score a candidate needs: the floor, or the share of the best if higher."""
        best = self.candidates[0].score if self.candidates else 0.0
        return max(self.min_score, self.min_share_of_best * best)

    @property
    def one_word(self) -> bool:
        """Whether nothing is recalled because the thread is small and no candidate holds
        more than one word of a message of several."""
        return self.small_index and self.words > 1 and max(self.shared, default=0) <= 1

    def keeps(self, index: int) -> bool:
        """Whether candidate ``index`` is recalled: at or above the threshold, unless
        :attr:`one_word` holds."""
        return self.candidates[index].score >= self.threshold and not self.one_word

    @property
    def kept(self) -> tuple[ThreadSnippet, ...]:
        """The candidates recalled (:meth:`keeps`), best first."""
        return tuple(c for n, c in enumerate(self.candidates) if self.keeps(n))


def recall(
    index: EpisodicIndex,
    thread_id: str,
    user_text: str,
    *,
    retained: Retained | None = None,
    min_score: float = MIN_SCORE,
    min_share_of_best: float = MIN_SHARE_OF_BEST,
    max_candidates: int = MAX_CANDIDATES,
    timeout_ms: int | None = None,
) -> Recall:
    """Search the thread for ``user_text``; the threshold is applied by :attr:`Recall.kept`."""
    result = index.search(thread_id, user_text, retained=retained, limit=max_candidates,
                          timeout_ms=timeout_ms)
    return Recall(result.query, result.candidates, min_score, min_share_of_best,
                  result.shared, result.words, result.small_index)


def retained_for(context: HookContext, index: EpisodicIndex, thread_id: str) -> Retained:
    """What the turn's history carries: its decision, else what ``keep`` would send."""
    decision = context.turn.data.get(HISTORY_KEY)
    if isinstance(decision, HistoryDecision):
        return Retained.from_decision(decision)
    return index.default_retained(thread_id)


def episodic_recall_subscription(
    index: EpisodicIndex,
    *,
    min_score: float = MIN_SCORE,
    min_share_of_best: float = MIN_SHARE_OF_BEST,
    deadline_ms: int = DEADLINE_MS,
) -> Subscription:
    """The built-in thread episodic recall hook over ``index``."""

    def thread_episodic_recall(context: HookContext) -> HookResult:
        thread_id = context.turn.thread_id
        if not thread_id or not context.turn.user_text.strip():
            return None
        found = recall(
            index, thread_id, context.turn.user_text,
            retained=retained_for(context, index, thread_id), min_score=min_score,
            min_share_of_best=min_share_of_best,
            # SQLite stops the query itself once the hook's deadline has passed.
            timeout_ms=deadline_ms,
        )
        return thread_context_contribution(found.kept, context.env)

    return Subscription(
        hook_id=HOOK_ID,
        phase=PHASE,
        function=thread_episodic_recall,
        priority=PRIORITY,
        deadline_ms=deadline_ms,
        failure="best_effort",
        subscription_id=SUBSCRIPTION_ID,
    )
