"""Token calibration: the provider's count of a request, learned from the counts it reports.

Our local count (:mod:`pioneer.tokens`) is not the provider's: each model family counts
with its own tokenizer, and the ratio between the two depends on the text (code, JSON,
other scripts). :class:`Calibrator` learns it per (provider, model) from every reply: the
runner hands :meth:`Calibrator.observe` its local estimate of exactly the body it sent
and the input count the provider reported for it (uncached + cache read + cache write,
or the count a context-length error names), and :meth:`Calibrator.ratio` gives the
:class:`TokenRatio` the next body is budgeted with.

The fit (docs/history.md, "Token calibration") keeps the last :data:`RECENT` samples in
the store's row, weighs them by age (half the weight every :data:`HALF_LIFE` samples:
a smoothed ratio that follows a change of content within a few replies) and fits
``reported = ratio * local + overhead``; the overhead is kept only when the samples
span different sizes and the line fits them clearly better than the ratio alone, and it
stays within ``0..`` :data:`MAX_OVERHEAD`. The ratio is clamped to
:data:`RATIO_RANGE`. The margin is the highest ratio of a recent sample (its tokens past
the overhead per local token) over the fitted one, at least :data:`MIN_MARGIN` and at
most :data:`MAX_MARGIN`: a body whose content is no costlier than a recent one's fits. A
body's budget (:meth:`TokenRatio.budgeted`) guards against extrapolation: the part of a
kind past the most of it a recent sample held counts at :data:`UNCOVERED_RATIO`, and the
margin rises as far as the body's estimate moves with one sample left out. Until
:data:`MIN_SAMPLES` samples, the model table's prior ratio (raised to the largest ratio
seen so far) is used with :data:`PRIOR_MARGIN`.

One row per (provider, model) in the store, shared by every thread and node; each
observation is one read-modify-write transaction that holds the row
(:meth:`~pioneer.history.store.CrudStore.update_token_calibration`), so writers on
several nodes never lose each other's samples. Reported counts are untrusted: a sample
that is not a positive integer, or is past :data:`MAX_TOKENS`, is ignored; a ratio
outside the sane range is clamped into it before it is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from .models import TokenCalibration
from .store import CrudStore

__all__ = [
    "HALF_LIFE",
    "KINDS",
    "KIND_PULL",
    "MAX_MARGIN",
    "MAX_OVERHEAD",
    "MAX_TOKENS",
    "MIN_MARGIN",
    "MIN_SAMPLES",
    "PRIOR_MARGIN",
    "RATIO_RANGE",
    "RECENT",
    "UNCOVERED_RATIO",
    "Calibrator",
    "TokenRatio",
    "fit_samples",
    "text_kind",
]

#: Provider tokens per local token a calibration may hold. Measured ratios between
#: tokenizers run from about 0.64 (o200k against cl100k on Russian) to about 1.7 (Claude
#: Opus 4.7 against cl100k on code); the range leaves room on both sides and stops one
#: absurd report from making every request look empty or enormous.
RATIO_RANGE = (0.5, 2.5)
#: The largest fixed per-request overhead (tokens) a fit may find: a provider's hidden
#: system text for tools is a few hundred tokens.
MAX_OVERHEAD = 2048
#: Samples before the fit replaces the prior: one reply can be an outlier (a body that is
#: nearly all one kind of content), three agree or show the spread.
MIN_SAMPLES = 3
#: The margin on the prior. The model table's priors are per family; within a family the
#: ratio moves with the content by about ±15% (Claude: 1.16 on English, 1.3 on code; the
#: 4.7 note gives 1.0 to 1.35), so 25% covers that with room for text nobody measured.
PRIOR_MARGIN = 1.25
#: The smallest margin once calibrated: reported counts vary by a few tokens from body to
#: body even for the same mix of content.
MIN_MARGIN = 1.02
#: The largest margin once calibrated: past it the content varies too much for one ratio
#: to mean anything, and a larger margin would only leave the window unused.
MAX_MARGIN = 1.5
#: Samples kept in the row for the next fit.
RECENT = 16
#: Samples after which a sample's weight in the fit has halved.
HALF_LIFE = 4.0
#: A count past this (tokens) is not a real request's and is ignored.
MAX_TOKENS = 50_000_000
#: The kinds of text a body is counted by (:func:`text_kind`), in the order a sample keeps
#: its local counts: tokenizers differ from each other by the kind of text (Claude against
#: cl100k: about 1.16 on English, 1.3 on code; o200k against cl100k: far fewer on Russian
#: and CJK), so one ratio per kind follows a body's mix where one ratio per model cannot.
KINDS = ("prose", "code", "data", "script")
PROSE, CODE, DATA, SCRIPT = range(len(KINDS))
#: How hard the per-kind fit is pulled toward the one-ratio fit: the pull weighs like a
#: sample holding this share of the mean body in every kind. Small enough that a kind the
#: recent samples show in different amounts gets its own ratio; large enough that a kind
#: they barely show (or always show in the same proportion as another) keeps the one ratio.
KIND_PULL = 0.02
#: Provider tokens per local token a budget counts for the part of a kind past the most
#: of it any recent sample held: the top of :data:`RATIO_RANGE`. The samples say nothing
#: of what that part costs (a fit on bodies with little JSON keeps JSON near the one
#: ratio, whatever JSON really costs), so it is budgeted at the most a ratio may be.
UNCOVERED_RATIO = RATIO_RANGE[1]
# The overhead is kept only when the line's weighted squared error is at most this share
# of the ratio-only fit's, and the samples' sizes span at least this share of the largest:
# with one size, or noise, an intercept is a guess.
_OVERHEAD_GAIN = 0.25
_SIZE_SPAN = 0.25


# -- the kind of a text ------------------------------------------------------------------

# Characters that mark code and structured data: brackets, operators, separators.
_CODE_MARKS = "=(){};<>"
_DATA_MARKS = '{}[]",:'


@lru_cache(maxsize=2048)
def text_kind(text: str) -> int:
    """The kind of ``text`` (an index into :data:`KINDS`), guessed from its characters
    alone, whatever it came from (docs/history.md, "Token calibration"):

    * ``script``: more than 30% of the characters are outside ASCII (Cyrillic, CJK,
      Arabic, emoji...);
    * ``data``: structured data, JSON-like: a quoted key (``":``) at least every 60
      characters, or brackets, quotes, commas and colons over a quarter of the text;
    * ``code``: more than 30% of the lines indented or ending in ``:`` ``{`` ``;`` ``)``,
      or code's operators and brackets over 6% of the characters;
    * ``prose``: anything else, and the empty text.

    A few passes of the string's own C methods over the text (no Python loop per
    character), cached per text: a history message is classified once per process."""
    size = len(text)
    if not size:
        return PROSE
    outside = 0 if text.isascii() else size - len(text.encode("ascii", "ignore"))
    if outside > 0.3 * size:
        return SCRIPT
    if (text.count('":') + text.count("':")) * 60 > size \
            or sum(text.count(ch) for ch in _DATA_MARKS) > 0.25 * size:
        return DATA
    lines = text.count("\n") + 1
    marked = (text.count("\n    ") + text.count("\n\t") + text.count(":\n")
              + text.count("{\n") + text.count(";\n") + text.count(")\n"))
    if marked > 0.3 * lines or sum(text.count(ch) for ch in _CODE_MARKS) > 0.06 * size:
        return CODE
    return PROSE


def no_kinds() -> list[int]:
    """Local counts by kind, all zero (one slot per :data:`KINDS`)."""
    return [0] * len(KINDS)


# -- the ratio ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenRatio:
    """How a local count becomes the provider's: ``ratio * local + overhead``, and the
    ``margin`` a budget multiplies that by; ``samples`` is how many replies taught it.

    ``kinds`` holds one ratio per kind of text (:data:`KINDS`) once the samples tell the
    kinds apart (empty before): a count split by kind is then ``sum(kinds[k] * local[k])
    + overhead``; ``ratio`` stays the one-ratio fit, for a count not split by kind."""

    ratio: float
    overhead: int
    samples: int
    margin: float
    kinds: tuple[float, ...] = ()
    #: Per kind, the most local tokens of it one recent sample held: the amount the fit
    #: has seen (empty when the samples keep no kinds).
    covered: tuple[int, ...] = ()
    #: The kinds fitted with each recent sample left out: how far the fit moves on the
    #: evidence of one sample, for :meth:`budgeted`'s margin on a body's own mix.
    left_out: tuple[tuple[float, ...], ...] = ()

    def convert(self, by_kind: Sequence[int] | None = None, local_tokens: int = 0) -> float:
        """The provider's tokens of a part of a body (no overhead, no margin, not rounded):
        ``by_kind`` its local counts by kind, else ``local_tokens`` at the one ratio."""
        if by_kind is None:
            return self.ratio * max(0, local_tokens)
        if len(self.kinds) == len(by_kind):
            return sum(r * max(0, x) for r, x in zip(self.kinds, by_kind, strict=True))
        return self.ratio * sum(max(0, x) for x in by_kind)

    def estimate(self, local_tokens: int, by_kind: Sequence[int] | None = None) -> int:
        """The provider's count of a body we count as ``local_tokens`` (split by kind as
        ``by_kind`` when given), no margin."""
        return _ceil(self.convert(by_kind, local_tokens) + self.overhead)

    def guarded(self, by_kind: Sequence[int], after: Sequence[int] | None = None) -> float:
        """The provider's tokens a budget counts for a part of a body (``by_kind`` its
        local counts by kind; no overhead, no margin): each kind at its fitted ratio up to
        the amount of it the recent samples covered (:attr:`covered`), and past that amount
        at :data:`UNCOVERED_RATIO`, since the fit cannot say what a kind costs beyond what
        it has seen. ``after`` are the counts of the rest of the body, budgeted first (they
        use up the covered amounts): the parts' sum is the whole body's."""
        if len(self.covered) != len(by_kind):
            return self.convert(by_kind)
        ratios = self.kinds if len(self.kinds) == len(by_kind) else (self.ratio,) * len(by_kind)
        used = after if after is not None and len(after) == len(by_kind) else (0,) * len(by_kind)
        total = 0.0
        for ratio, count, seen, before in zip(ratios, by_kind, self.covered, used,
                                              strict=True):
            count, left = max(0, count), max(0, seen - max(0, before))
            total += ratio * min(count, left) + max(ratio, UNCOVERED_RATIO) * max(0, count - left)
        return total

    def body_margin(self, by_kind: Sequence[int]) -> float:
        """The margin of a body split as ``by_kind``: :attr:`margin`, or more where the fit
        is unsure of this mix, as far as the body's estimate rises when any one recent
        sample is left out of the fit (at most :data:`MAX_MARGIN`)."""
        if not self.left_out or len(self.kinds) != len(by_kind):
            return self.margin
        base = self.convert(by_kind)
        if base <= 0:
            return self.margin
        moved = max(sum(r * max(0, x) for r, x in zip(kinds, by_kind, strict=True))
                    for kinds in self.left_out) / base
        return min(max(self.margin, moved), max(self.margin, MAX_MARGIN))

    def budgeted(self, local_tokens: int, by_kind: Sequence[int] | None = None) -> int:
        """What a budget must leave room for: the estimate times the margin; for a body
        split by kind, its :meth:`guarded` count plus the overhead, times its
        :meth:`body_margin`."""
        if by_kind is None or len(by_kind) != len(self.covered):
            return _ceil(self.estimate(local_tokens, by_kind) * self.margin)
        return _ceil((self.guarded(by_kind) + self.overhead) * self.body_margin(by_kind))

    def scaled(self, factor: float) -> TokenRatio:
        """Every ratio times ``factor`` (a floor a context-length error set)."""
        return replace(self, ratio=self.ratio * factor,
                       kinds=tuple(r * factor for r in self.kinds),
                       left_out=tuple(tuple(r * factor for r in kinds)
                                      for kinds in self.left_out))


def _ceil(value: float) -> int:
    # Up, as a budget must, but not past a whole number that floating point missed by a
    # hair (1550 * 1.1 is 1705.0000000000002).
    return math.ceil(value - 1e-9)


def _prior(facts: object) -> float:
    """The model table's ``token_ratio`` (1.0 when the row has none), within the range."""
    value = getattr(facts, "token_ratio", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 1.0
    return min(max(float(value), RATIO_RANGE[0]), RATIO_RANGE[1])


Sample = tuple[int, ...]
"""One reply: ``(local, reported)``, or ``(local, reported, *local by kind)`` (a row
written before the kinds were kept holds pairs: they serve the one-ratio fit only)."""


def _sample(local_tokens: object, reported_tokens: object,
            by_kind: Sequence[object] | None = None) -> Sample | None:
    """The sample to keep, the report clamped to the sane range; ``None`` to ignore it.
    The counts by kind are kept when they are one count per kind adding up to
    ``local_tokens``."""
    for value in (local_tokens, reported_tokens):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOKENS:
            return None
    assert isinstance(local_tokens, int) and isinstance(reported_tokens, int)
    low = math.floor(RATIO_RANGE[0] * local_tokens)
    high = math.ceil(RATIO_RANGE[1] * local_tokens) + MAX_OVERHEAD
    pair = (local_tokens, min(max(reported_tokens, low), high))
    if by_kind is None or len(by_kind) != len(KINDS) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in by_kind):
        return pair
    counts = tuple(x for x in by_kind if isinstance(x, int))
    return (*pair, *counts) if sum(counts) == local_tokens else pair


def _weights(count: int) -> list[float]:
    return [0.5 ** ((count - 1 - index) / HALF_LIFE) for index in range(count)]


def fit_samples(recent: Sequence[Sample], prior: float, samples: int) -> TokenRatio:
    """The :class:`TokenRatio` of ``recent`` samples (local, reported and, when kept, the
    local count by kind), oldest first, after ``samples`` samples in all; the ``prior``
    ratio with its margin until there are enough."""
    pairs = [(sample[0], sample[1]) for sample in recent]
    if samples < MIN_SAMPLES or not pairs:
        seen = max((reported / local for local, reported in pairs), default=prior)
        ratio = min(max(prior, seen), RATIO_RANGE[1])
        return TokenRatio(ratio, 0, samples, PRIOR_MARGIN)
    weights = _weights(len(pairs))
    total = sum(weights)
    sum_x = sum(w * x for w, (x, _) in zip(weights, pairs, strict=True))
    sum_y = sum(w * y for w, (_, y) in zip(weights, pairs, strict=True))
    ratio, overhead = sum_y / sum_x, 0.0
    line = _line(pairs, weights, total)
    if line is not None and _error(pairs, weights, *line) <= \
            _OVERHEAD_GAIN * _error(pairs, weights, ratio, 0.0):
        ratio, overhead = line
    ratio = min(max(ratio, RATIO_RANGE[0]), RATIO_RANGE[1])
    overhead_tokens = round(overhead)
    fitted = TokenRatio(ratio, overhead_tokens, samples, 1.0,
                        fit_kinds(recent, ratio, overhead_tokens))
    # The margin covers every recent sample's tokens past the overhead at its own ratio:
    # then a body whose content is no costlier per token than a recent one fits, at any
    # size (the overhead is fixed; the rest scales with the body). With the kinds, each
    # sample is judged by the kinds fitted without it (leave one out): the fit is as
    # close to its own samples as its unknowns allow, and a new body's error is larger.
    above = max((sample[1] - overhead_tokens) / _converted(fitted, sample)
                for sample in recent)
    if fitted.kinds:
        above = max(above, *(ratio for ratio, _ in _left_out(recent, fitted)))
    return _with_guard(replace(fitted, margin=min(max(above, MIN_MARGIN), MAX_MARGIN)), recent)


def _with_guard(fitted: TokenRatio, recent: Sequence[Sample]) -> TokenRatio:
    """``fitted`` with what :meth:`TokenRatio.budgeted` guards a body with: the amount of
    each kind the samples covered, and the kinds fitted with each sample left out."""
    kept = [sample[2:] for sample in recent if len(sample) == 2 + len(KINDS)]
    if not kept:
        return fitted
    covered = tuple(max(counts[k] for counts in kept) for k in range(len(KINDS)))
    left_out = tuple(kinds for _, kinds in _left_out(recent, fitted)) if fitted.kinds else ()
    return replace(fitted, covered=covered, left_out=left_out)


def _converted(ratio: TokenRatio, sample: Sample) -> float:
    """The provider's tokens ``ratio`` gives ``sample``'s body, less the overhead."""
    by_kind = sample[2:] if len(sample) == 2 + len(KINDS) else None
    return max(ratio.convert(by_kind, sample[0]), 1e-9)


def fit_kinds(recent: Sequence[Sample], ratio: float, overhead: int) -> tuple[float, ...]:
    """One ratio per kind fitted to the samples that keep their counts by kind:
    ``reported - overhead = sum(r[k] * local[k])`` by weighted least squares (the same
    weights by age as the one ratio), pulled toward ``ratio`` by :data:`KIND_PULL` (ridge
    regression: stable with few samples, and a kind the samples cannot tell apart keeps
    the one ratio), each clamped to :data:`RATIO_RANGE`. Empty (the one ratio) until
    :data:`MIN_SAMPLES` samples keep their kinds, or when the kinds fit the samples no
    better than the one ratio."""
    system = _kind_system(recent, ratio, overhead)
    if system is None:
        return ()
    rows, matrix, vector = system
    kinds = _clamped(_solve(matrix, vector))

    def error(ratios: Sequence[float]) -> float:
        return sum(weight * (sum(r * x for r, x in zip(ratios, counts, strict=True))
                             / max(1, target) - 1) ** 2
                   for weight, counts, target in rows)

    return kinds if error(kinds) <= error([ratio] * len(KINDS)) else ()


_Rows = list[tuple[float, tuple[int, ...], int]]


def _kind_system(recent: Sequence[Sample], ratio: float, overhead: int,
                 ) -> tuple[_Rows, list[list[float]], list[float]] | None:
    """The samples that keep their kinds as (weight, counts, reported less overhead), and
    the normal equations of the pulled fit; None with fewer than :data:`MIN_SAMPLES`."""
    size = len(KINDS)
    rows = [(weight, sample[2:], sample[1] - overhead)
            for weight, sample in zip(_weights(len(recent)), recent, strict=True)
            if len(sample) == 2 + size]
    if len(rows) < MIN_SAMPLES:
        return None
    pull = (KIND_PULL * sum(sum(counts) for _, counts, _ in rows) / len(rows)) ** 2
    matrix = [[pull if i == j else 0.0 for j in range(size)] for i in range(size)]
    vector = [pull * ratio] * size
    for weight, counts, target in rows:
        _add_row(matrix, vector, weight, counts, target)
    return rows, matrix, vector


def _add_row(matrix: list[list[float]], vector: list[float], weight: float,
             counts: Sequence[int], target: float) -> None:
    for i, x_i in enumerate(counts):
        if x_i:
            vector[i] += weight * x_i * target
            row = matrix[i]
            for j, x_j in enumerate(counts):
                row[j] += weight * x_i * x_j


def _clamped(values: Sequence[float]) -> tuple[float, ...]:
    return tuple(min(max(value, RATIO_RANGE[0]), RATIO_RANGE[1]) for value in values)


def _left_out(recent: Sequence[Sample], fitted: TokenRatio,
              ) -> list[tuple[float, tuple[float, ...]]]:
    """For each sample that keeps its kinds, its tokens past the overhead over what the
    kinds fitted without it give it (the fit's normal equations less that sample's row),
    and those kinds."""
    system = _kind_system(recent, fitted.ratio, fitted.overhead)
    if system is None:
        return []
    rows, matrix, vector = system
    out = []
    for weight, counts, target in rows:
        less = [list(row) for row in matrix]
        less_vector = list(vector)
        _add_row(less, less_vector, -weight, counts, target)
        kinds = _clamped(_solve(less, less_vector))
        out.append((target / max(1e-9, sum(r * x for r, x in zip(kinds, counts, strict=True))),
                    kinds))
    return out


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """``matrix x = vector`` by Gaussian elimination with partial pivoting (``matrix`` is
    symmetric positive definite here: the pull is on its diagonal)."""
    size = len(vector)
    rows = [[*row, value] for row, value in zip(matrix, vector, strict=True)]
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(rows[r][column]))
        rows[column], rows[pivot] = rows[pivot], rows[column]
        for r in range(column + 1, size):
            factor = rows[r][column] / rows[column][column]
            for c in range(column, size + 1):
                rows[r][c] -= factor * rows[column][c]
    solution = [0.0] * size
    for r in range(size - 1, -1, -1):
        rest = sum(rows[r][c] * solution[c] for c in range(r + 1, size))
        solution[r] = (rows[r][size] - rest) / rows[r][r]
    return solution


def _line(recent: Sequence[tuple[int, int]], weights: Sequence[float],
          total: float) -> tuple[float, float] | None:
    """The weighted least-squares line with its intercept in ``0..MAX_OVERHEAD`` (clamped:
    the error is convex in it), or ``None`` when the sizes do not span enough to say."""
    sizes = [x for x, _ in recent]
    if max(sizes) - min(sizes) < _SIZE_SPAN * max(sizes):
        return None
    mean_x = sum(w * x for w, (x, _) in zip(weights, recent, strict=True)) / total
    mean_y = sum(w * y for w, (_, y) in zip(weights, recent, strict=True)) / total
    sxx = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, recent, strict=True))
    sxy = sum(w * (x - mean_x) * (y - mean_y)
              for w, (x, y) in zip(weights, recent, strict=True))
    slope = sxy / sxx
    intercept = min(max(mean_y - slope * mean_x, 0.0), float(MAX_OVERHEAD))
    # With the intercept fixed (clamped), the best slope through it.
    slope = sum(w * x * (y - intercept) for w, (x, y) in zip(weights, recent, strict=True)) \
        / sum(w * x * x for w, (x, _) in zip(weights, recent, strict=True))
    if intercept <= 0:
        return None
    return slope, intercept


def _error(recent: Sequence[tuple[int, int]], weights: Sequence[float], ratio: float,
           overhead: float) -> float:
    """The weighted squared relative error of ``ratio * local + overhead``."""
    return sum(w * ((ratio * x + overhead) / y - 1) ** 2
               for w, (x, y) in zip(weights, recent, strict=True))


class Calibrator:
    """The token ratio of each (provider, model), kept in ``store`` and shared by every
    thread and node that uses it."""

    def __init__(self, store: CrudStore) -> None:
        self.store = store

    def ratio(self, provider: str, model: str, facts: object) -> TokenRatio:
        """The ratio to budget the next body of ``model`` on ``provider`` with; ``facts``
        is the model table's row (its ``token_ratio`` is the prior)."""
        stored = self.store.get_token_calibration(provider, model)
        return self._ratio(stored, facts)

    def observe(self, provider: str, model: str, local_tokens: int, reported_tokens: int,
                facts: object, by_kind: Sequence[int] | None = None) -> TokenRatio:
        """Learn from one reply: the body we counted as ``local_tokens`` (``by_kind``: the
        same count split by :data:`KINDS`) was ``reported_tokens`` to the provider.
        Returns the ratio after it (unchanged when the sample is not a plausible count,
        which is then ignored)."""
        sample = _sample(local_tokens, reported_tokens, by_kind)
        if sample is None:
            return self.ratio(provider, model, facts)
        prior = _prior(facts)

        def update(stored: TokenCalibration | None) -> TokenCalibration:
            recent = ((stored.recent if stored else ()) + (sample,))[-RECENT:]
            samples = (stored.samples if stored else 0) + 1
            fitted = fit_samples(recent, prior, samples)
            return TokenCalibration(provider, model, fitted.ratio, fitted.overhead, samples,
                                    fitted.margin, recent)

        return self._ratio(self.store.update_token_calibration(provider, model, update), facts)

    def _ratio(self, stored: TokenCalibration | None, facts: object) -> TokenRatio:
        if stored is None:
            return TokenRatio(_prior(facts), 0, 0, PRIOR_MARGIN)
        if stored.samples < MIN_SAMPLES:
            # Fitted again: the prior is today's model table, not the one at the sample.
            return fit_samples(stored.recent, _prior(facts), stored.samples)
        # A row is read back within the same bounds a fit keeps (another writer's, or a
        # damaged one, may not be).
        ratio = min(max(stored.ratio, RATIO_RANGE[0]), RATIO_RANGE[1]) \
            if math.isfinite(stored.ratio) else _prior(facts)
        overhead = min(max(stored.overhead, 0), MAX_OVERHEAD)
        margin = min(max(stored.margin, MIN_MARGIN), MAX_MARGIN) \
            if math.isfinite(stored.margin) else MAX_MARGIN
        # The kinds are fitted again from the kept samples (the row keeps the one ratio):
        # the same samples, ratio and overhead give the same kinds the update found.
        return _with_guard(TokenRatio(ratio, overhead, stored.samples, margin,
                                      fit_kinds(stored.recent, ratio, overhead)),
                           stored.recent)
