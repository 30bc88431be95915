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
most :data:`MAX_MARGIN`: a body whose content is no costlier than a recent one's fits. Until
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
from dataclasses import dataclass

from .models import TokenCalibration
from .store import CrudStore

__all__ = [
    "HALF_LIFE",
    "MAX_MARGIN",
    "MAX_OVERHEAD",
    "MAX_TOKENS",
    "MIN_MARGIN",
    "MIN_SAMPLES",
    "PRIOR_MARGIN",
    "RATIO_RANGE",
    "RECENT",
    "Calibrator",
    "TokenRatio",
    "fit_samples",
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
# The overhead is kept only when the line's weighted squared error is at most this share
# of the ratio-only fit's, and the samples' sizes span at least this share of the largest:
# with one size, or noise, an intercept is a guess.
_OVERHEAD_GAIN = 0.25
_SIZE_SPAN = 0.25


@dataclass(frozen=True, slots=True)
class TokenRatio:
    """How a local count becomes the provider's: ``ratio * local + overhead``, and the
    ``margin`` a budget multiplies that by; ``samples`` is how many replies taught it."""

    ratio: float
    overhead: int
    samples: int
    margin: float

    def estimate(self, local_tokens: int) -> int:
        """The provider's count of a body we count as ``local_tokens`` (no margin)."""
        return _ceil(self.ratio * max(0, local_tokens) + self.overhead)

    def budgeted(self, local_tokens: int) -> int:
        """The estimate times the margin: what a budget must leave room for."""
        return _ceil(self.estimate(local_tokens) * self.margin)


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


def _sample(local_tokens: object, reported_tokens: object) -> tuple[int, int] | None:
    """The pair to keep, the report clamped to the sane range; ``None`` to ignore it."""
    for value in (local_tokens, reported_tokens):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TOKENS:
            return None
    assert isinstance(local_tokens, int) and isinstance(reported_tokens, int)
    low = math.floor(RATIO_RANGE[0] * local_tokens)
    high = math.ceil(RATIO_RANGE[1] * local_tokens) + MAX_OVERHEAD
    return local_tokens, min(max(reported_tokens, low), high)


def _weights(count: int) -> list[float]:
    return [0.5 ** ((count - 1 - index) / HALF_LIFE) for index in range(count)]


def fit_samples(recent: Sequence[tuple[int, int]], prior: float, samples: int) -> TokenRatio:
    """The :class:`TokenRatio` of ``recent`` (local, reported) pairs, oldest first, after
    ``samples`` samples in all; the ``prior`` ratio with its margin until there are
    enough."""
    if samples < MIN_SAMPLES or not recent:
        seen = max((reported / local for local, reported in recent), default=prior)
        ratio = min(max(prior, seen), RATIO_RANGE[1])
        return TokenRatio(ratio, 0, samples, PRIOR_MARGIN)
    weights = _weights(len(recent))
    total = sum(weights)
    sum_x = sum(w * x for w, (x, _) in zip(weights, recent, strict=True))
    sum_y = sum(w * y for w, (_, y) in zip(weights, recent, strict=True))
    ratio, overhead = sum_y / sum_x, 0.0
    line = _line(recent, weights, total)
    if line is not None and _error(recent, weights, *line) <= \
            _OVERHEAD_GAIN * _error(recent, weights, ratio, 0.0):
        ratio, overhead = line
    ratio = min(max(ratio, RATIO_RANGE[0]), RATIO_RANGE[1])
    overhead_tokens = round(overhead)
    # The margin covers every recent sample's tokens past the overhead at its own ratio:
    # then a body whose content is no costlier per token than a recent one fits, at any
    # size (the overhead is fixed; the rest scales with the body).
    above = max((reported - overhead_tokens) / (ratio * local) for local, reported in recent)
    margin = min(max(above, MIN_MARGIN), MAX_MARGIN)
    return TokenRatio(ratio, overhead_tokens, samples, margin)


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
                facts: object) -> TokenRatio:
        """Learn from one reply: the body we counted as ``local_tokens`` was
        ``reported_tokens`` to the provider. Returns the ratio after it (unchanged when
        the sample is not a plausible count, which is then ignored)."""
        sample = _sample(local_tokens, reported_tokens)
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
        return TokenRatio(ratio, overhead, stored.samples, margin)
