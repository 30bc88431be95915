"""Token calibration: the fit (convergence, clamping, the overhead, the prior's margin,
hostile reports), a property over random content mixes, and the stored row on SQLite and
PostgreSQL: its round trip, reopening, several stores writing one row at once, and two
agents whose replies calibrate each other's bodies.
"""

from __future__ import annotations

import math
import random
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import StoreTarget
from hypothesis import given, settings
from hypothesis import strategies as st
from stores import make_store

from pioneer import Agent, PioneerSettings, StoreError, ensure_runtime_home
from pioneer.history import Calibrator, SqliteStore, TokenCalibration, TokenRatio
from pioneer.history.calibration import KINDS as TEXT_KINDS
from pioneer.history.calibration import (
    MAX_MARGIN,
    MAX_OVERHEAD,
    MIN_MARGIN,
    MIN_SAMPLES,
    PRIOR_MARGIN,
    RATIO_RANGE,
    RECENT,
    UNCOVERED_RATIO,
    fit_kinds,
    fit_samples,
    text_kind,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop


@dataclass(frozen=True)
class Facts:
    """The part of a model-table row the calibrator reads."""

    token_ratio: float = 1.0


class NoRatio:
    """A model-table row from before the table had ratios."""


@pytest.fixture
def calibrator(tmp_path: Path) -> Calibrator:
    return Calibrator(SqliteStore(tmp_path / "pioneer.db"))


def test_a_ratio_and_its_margin() -> None:
    ratio = TokenRatio(ratio=1.25, overhead=300, samples=5, margin=1.1)
    assert ratio.estimate(1000) == 1550
    assert ratio.budgeted(1000) == 1705
    assert ratio.estimate(0) == 300
    assert ratio.estimate(-5) == 300


def test_without_samples_the_prior_is_used_with_its_margin(calibrator: Calibrator) -> None:
    assert calibrator.ratio("anthropic", "claude-x", Facts(1.3)) == \
        TokenRatio(1.3, 0, 0, PRIOR_MARGIN)
    assert calibrator.ratio("anthropic", "claude-x", NoRatio()) == \
        TokenRatio(1.0, 0, 0, PRIOR_MARGIN)


def test_before_three_samples_the_prior_is_raised_to_what_was_seen(
    calibrator: Calibrator,
) -> None:
    first = calibrator.observe("gemini", "g", 10_000, 11_000, Facts(1.05))
    assert (first.ratio, first.samples, first.margin) == (1.1, 1, PRIOR_MARGIN)
    second = calibrator.observe("gemini", "g", 10_000, 9_000, Facts(1.05))
    assert (second.ratio, second.samples, second.margin) == (1.1, 2, PRIOR_MARGIN)
    # A sample below the prior never lowers it before the fit takes over.
    assert calibrator.ratio("gemini", "g", Facts(1.2)).ratio == 1.2
    third = calibrator.observe("gemini", "g", 10_000, 10_000, Facts(1.05))
    assert third.samples == MIN_SAMPLES and third.margin < PRIOR_MARGIN


def test_it_converges_on_a_scripted_ratio(calibrator: Calibrator) -> None:
    rng = random.Random(7)
    for _ in range(12):
        local = rng.randint(2_000, 60_000)
        ratio = calibrator.observe("openai-chat", "m", local, round(local * 1.37), Facts())
    assert ratio.ratio == pytest.approx(1.37, abs=1e-3)
    assert ratio.overhead == 0
    assert ratio.margin == MIN_MARGIN
    assert ratio.samples == 12


def test_it_follows_a_change_of_ratio_within_a_few_samples(calibrator: Calibrator) -> None:
    for local in range(10_000, 30_000, 1_000):
        calibrator.observe("openai-chat", "m", local, local, Facts())
    for local in range(10_000, 18_000, 1_000):
        ratio = calibrator.observe("openai-chat", "m", local, round(local * 1.5), Facts())
    assert 1.3 < ratio.ratio < 1.5
    # The old samples are still in the window: the margin covers the new content.
    assert ratio.budgeted(20_000) >= 30_000


def test_a_fixed_overhead_is_found() -> None:
    rng = random.Random(3)
    recent = [(local, round(1.2 * local + 500)) for local in
              (rng.randint(1_000, 40_000) for _ in range(10))]
    fitted = fit_samples(recent, 1.0, len(recent))
    assert fitted.ratio == pytest.approx(1.2, abs=1e-3)
    assert fitted.overhead == 500
    assert fitted.margin == MIN_MARGIN


@pytest.mark.parametrize("recent", [
    # One size only: an intercept cannot be told from the ratio.
    [(20_000, 24_500)] * 5,
    # A negative intercept is not an overhead.
    [(local, round(1.2 * local) - 800) for local in (5_000, 10_000, 20_000, 40_000)],
])
def test_no_overhead_without_data_that_shows_one(recent: list[tuple[int, int]]) -> None:
    assert fit_samples(recent, 1.0, len(recent)).overhead == 0


def test_the_overhead_is_clamped() -> None:
    recent = [(local, local + 3_000) for local in (5_000, 10_000, 20_000, 40_000)]
    assert fit_samples(recent, 1.0, len(recent)).overhead == MAX_OVERHEAD


@pytest.mark.parametrize(("reported", "expected"), [
    (10 * 10_000, RATIO_RANGE[1]),
    (1_000, RATIO_RANGE[0]),
])
def test_the_ratio_is_clamped_to_the_sane_range(calibrator: Calibrator, reported: int,
                                                expected: float) -> None:
    for _ in range(4):
        ratio = calibrator.observe("anthropic", "m", 10_000, reported, Facts())
    assert ratio.ratio == pytest.approx(expected, abs=0.21)
    assert RATIO_RANGE[0] <= ratio.ratio <= RATIO_RANGE[1]
    assert MIN_MARGIN <= ratio.margin <= MAX_MARGIN


@pytest.mark.parametrize(("local", "reported"), [
    (10_000, 0), (10_000, -5), (0, 10_000), (-1, 10_000), (10_000, 10**12),
    (10**12, 10_000), (10_000, True), (10_000, 1.5e4), (10_000, "12000"), (10_000, None),
])
def test_hostile_reports_are_ignored(calibrator: Calibrator, local: object,
                                     reported: object) -> None:
    for _ in range(3):
        calibrator.observe("anthropic", "m", 10_000, 12_000, Facts())
    before = calibrator.ratio("anthropic", "m", Facts())
    after = calibrator.observe("anthropic", "m", local, reported, Facts())  # type: ignore[arg-type]
    assert after == before
    assert calibrator.store.get_token_calibration("anthropic", "m").samples == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("prior", [float("nan"), float("inf"), -1.0, 99.0, "1.2", True, None])
def test_a_bad_prior_in_the_model_table_falls_back_or_is_clamped(
    calibrator: Calibrator, prior: object,
) -> None:
    ratio = calibrator.ratio("anthropic", "m", Facts(prior))  # type: ignore[arg-type]
    assert RATIO_RANGE[0] <= ratio.ratio <= RATIO_RANGE[1]
    assert math.isfinite(ratio.ratio)


def test_the_row_keeps_a_bounded_window_of_recent_samples(calibrator: Calibrator) -> None:
    for local in range(1_000, 1_000 + 100 * (RECENT + 10), 100):
        calibrator.observe("gemini", "m", local, local, Facts())
    stored = calibrator.store.get_token_calibration("gemini", "m")
    assert stored is not None
    assert stored.samples == RECENT + 10
    assert len(stored.recent) == RECENT
    assert stored.recent[-1] == (1_000 + 100 * (RECENT + 9),) * 2


# -- the property: the budget covers any body within the spread the samples showed --------

KINDS = ("english", "code", "json", "other-script")


@st.composite
def mixes(draw: st.DrawFn) -> dict[str, int]:
    """Local tokens of each kind of content in one body."""
    return {kind: draw(st.integers(0, 40_000)) for kind in KINDS}


@settings(max_examples=200, deadline=None)
@given(
    ratios=st.fixed_dictionaries({kind: st.floats(0.6, 1.8) for kind in KINDS}),
    seen=st.lists(mixes(), min_size=3, max_size=12),
    body=mixes(),
)
def test_after_three_samples_the_budget_covers_a_body_within_the_spread(
    ratios: dict[str, float], seen: list[dict[str, int]], body: dict[str, int],
) -> None:
    def true_count(mix: dict[str, int]) -> int:
        return round(sum(local * ratios[kind] for kind, local in mix.items()))

    # A request is hundreds of tokens at least (the system prompt alone).
    recent = [(sum(mix.values()), true_count(mix)) for mix in seen
              if sum(mix.values()) >= 500]
    local = sum(body.values())
    if len(recent) < MIN_SAMPLES or local < 500:
        return
    fitted = fit_samples(recent, 1.0, len(recent))
    overhead = fitted.overhead

    def costlier(count: int, size: int) -> float:  # tokens past the overhead per token
        return (count - overhead) / size

    # Within the model's spread: the body's content is no costlier than a recent sample's,
    # and the margin is not at its cap (past it the content varies more than any margin).
    spread = max(costlier(reported, seen_local) for seen_local, reported in recent)
    if costlier(true_count(body), local) <= spread and fitted.margin < MAX_MARGIN:
        assert fitted.budgeted(local) >= true_count(body)
    assert fitted.estimate(local) <= fitted.budgeted(local)
    assert RATIO_RANGE[0] <= fitted.ratio <= RATIO_RANGE[1]


# -- the stored row ----------------------------------------------------------------------


def test_the_row_round_trips_on_both_stores(store_target: StoreTarget) -> None:
    store = make_store(store_target.target)
    try:
        assert store.get_token_calibration("anthropic", "claude") is None
        stored = store.update_token_calibration(
            "anthropic", "claude",
            lambda old: TokenCalibration("anthropic", "claude", 1.25, 300, 4, 1.07,
                                         ((1000, 1500), (2000, 2800))))
        again = store.get_token_calibration("anthropic", "claude")
        assert again == stored
        assert (again.ratio, again.overhead, again.samples, again.margin, again.recent) == \
            (1.25, 300, 4, 1.07, ((1000, 1500), (2000, 2800)))
        seen: list[TokenCalibration | None] = []

        def update(old: TokenCalibration | None) -> TokenCalibration:
            seen.append(old)
            assert old is not None
            return TokenCalibration("anthropic", "claude", 1.3, 0, old.samples + 1, 1.02,
                                    (*old.recent, (3000, 3900)))

        assert store.update_token_calibration("anthropic", "claude", update).samples == 5
        assert seen == [again]
        assert store.get_token_calibration("anthropic", "other") is None
    finally:
        store.close()


def test_calibration_survives_reopening_the_store(store_target: StoreTarget) -> None:
    store = make_store(store_target.target)
    for local in (10_000, 20_000, 30_000, 40_000):
        Calibrator(store).observe("openai-responses", "gpt-x", local, round(local * 0.8),
                                  Facts())
    store.close()
    reopened = make_store(store_target.target)
    try:
        ratio = Calibrator(reopened).ratio("openai-responses", "gpt-x", Facts())
        assert ratio.samples == 4
        assert ratio.ratio == pytest.approx(0.8, abs=1e-3)
    finally:
        reopened.close()


@pytest.mark.parametrize(("column", "value", "expected"), [
    ("recent", "'not json'", "column recent holds 'not json', expected a JSON list"),
    ("recent", "'[[1, 2, 3]]'", "column recent holds '[[1, 2, 3]]'"),
    ("ratio", "'abc'", "column ratio holds text, expected a number"),
])
def test_a_damaged_row_is_a_store_error(store_target: StoreTarget, column: str, value: str,
                                        expected: str) -> None:
    store = make_store(store_target.target)
    try:
        Calibrator(store).observe("gemini", "m", 1_000, 1_100, Facts())
        if store_target.dialect == "postgresql" and column == "ratio":
            store_target.sql("ALTER TABLE token_calibration ALTER COLUMN ratio TYPE TEXT")
        store_target.sql(f"UPDATE token_calibration SET {column} = {value}")
        with pytest.raises(StoreError, match="token calibration of 'gemini' 'm'") as raised:
            Calibrator(store).ratio("gemini", "m", Facts())
        assert expected in str(raised.value)
    finally:
        store.close()


def test_two_stores_on_one_database_lose_no_sample(store_target: StoreTarget) -> None:
    """Two stores (two pools on PostgreSQL, two on one SQLite file), three writer threads
    on each, one row: every sample is counted and both read the same ratio."""
    stores = [make_store(store_target.target) for _ in range(2)]
    per_writer = 15
    errors: list[BaseException] = []

    def write(store_index: int, writer: int) -> None:
        calibrator = Calibrator(stores[store_index])
        try:
            for step in range(per_writer):
                local = 1_000 + 37 * writer + step
                calibrator.observe("anthropic", "shared", local, round(local * 1.2), Facts())
        except BaseException as error:  # reported below, with the thread's failure
            errors.append(error)

    threads = [threading.Thread(target=write, args=(index % 2, index)) for index in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors
        # Each store sees every writer's samples, and the other's ratio.
        for store in stores:
            ratio = Calibrator(store).ratio("anthropic", "shared", Facts())
            assert ratio.samples == 6 * per_writer
            assert ratio.ratio == pytest.approx(1.2, abs=1e-3)
    finally:
        for store in stores:
            store.close()


# -- through the runner: two agents on one database ----------------------------------------


def test_two_agents_on_one_database_share_the_calibration(
    store_target: StoreTarget, tmp_path: Path,
) -> None:
    """Replies to one agent's turns calibrate the other's bodies: on PostgreSQL two nodes'
    agents on one database, on SQLite two agents on one file."""
    home = tmp_path / "home"
    ensure_runtime_home(home)
    model = agent_loop.MODELS["anthropic"]

    def agent() -> Agent:
        return Agent(str(store_target.target), provider="anthropic", model=model,
                     settings=PioneerSettings(home=home), recall=False,
                     compile_input={"workspace_root": home})

    first, second = agent(), agent()
    try:
        for number, (runner, thread) in enumerate(
                [(first, "a"), (second, "b"), (first, "a"), (second, "b")]):
            turn = runner.turn(thread, f"Question {number}.", turn_id=f"turn-{number}")
            turn.next_body()
            window = turn.rounds[-1].window
            assert window is not None
            assert window.ratio_samples == number  # every earlier reply, whichever agent
            reported = round(window.local_input_tokens * 1.45)
            turn.receive(agent_loop.response("anthropic", model, "Answer.", [], {
                "input_tokens": reported, "output_tokens": 3}))
            turn.finish()
        ratios = [runner.calibration.ratio("anthropic", model, object())
                  for runner in (first, second)]
        assert ratios[0] == ratios[1]
        assert ratios[0].samples == 4
        assert ratios[0].ratio == pytest.approx(1.45, abs=0.01)
    finally:
        first.close()
        second.close()


# -- one ratio per kind of text ----------------------------------------------------------

PROSE_TEXT = ("The team reviewed the deployment plan and agreed that the migration should "
              "run during the quiet hours, while the old nodes keep serving reads.\n") * 5
CODE_TEXT = "def load(path: str) -> int:\n    value = read(path)[0] * 2\n    return value\n" * 5
DATA_TEXT = '[{"id": 1, "name": "load", "score": 12.5, "tags": ["a", "b"]}, ' \
    '{"id": 2, "name": "store", "score": 3.0, "tags": []}]'
SCRIPT_TEXT = "команда проверила план развёртывания 数据库迁移在夜间进行 " * 10


@pytest.mark.parametrize(("text", "kind"), [
    (PROSE_TEXT, "prose"), (CODE_TEXT, "code"), (DATA_TEXT, "data"), (SCRIPT_TEXT, "script"),
    ("", "prose"), ("ok", "prose"), ("if (a) { b = c; }", "code"),
    ("emoji 🎉🎉🎉🎉🎉🎉 🚀🚀🚀🚀", "script"), ("key: value\nother: 2\n", "prose"),  # YAML: prose
])
def test_the_kind_of_a_text_comes_from_its_characters(text: str, kind: str) -> None:
    assert TEXT_KINDS[text_kind(text)] == kind


TRUE_KINDS = (1.15, 1.35, 1.8, 0.6)


def _kinds_body(rng: random.Random) -> list[int]:
    """A body's local counts by kind: mostly one kind (a large tool result or paste) over
    a common base of prose."""
    counts = [rng.randint(500, 3_000), rng.randint(0, 800), rng.randint(0, 800),
              rng.randint(0, 800)]
    counts[rng.randrange(4)] += rng.randint(1_000, 20_000)
    return counts


def _true(counts: list[int], ratios: tuple[float, ...] = TRUE_KINDS) -> int:
    return round(sum(r * x for r, x in zip(ratios, counts, strict=True)))


def test_one_ratio_per_kind_converges_where_one_ratio_cannot(calibrator: Calibrator) -> None:
    rng = random.Random(3)
    for _ in range(RECENT):
        body = _kinds_body(rng)
        calibrator.observe("anthropic", "claude", sum(body), _true(body), Facts(), body)
    ratio = calibrator.ratio("anthropic", "claude", Facts())
    assert ratio.kinds == pytest.approx(TRUE_KINDS, rel=0.03)
    assert ratio.margin <= 1.05
    errors, single = [], []
    for _ in range(50):
        body = _kinds_body(rng)
        errors.append(abs(ratio.estimate(sum(body), body) / _true(body) - 1))
        single.append(abs(ratio.estimate(sum(body)) / _true(body) - 1))
    assert max(errors) < 0.02
    assert sorted(single)[25] > 0.05  # the one ratio misses by the mix


def test_the_kinds_wait_for_three_samples_and_stay_at_the_one_ratio_when_collinear() -> None:
    body = [2_000, 6_000, 0, 0]
    two = [(sum(body), _true(body), *body)] * 2
    assert fit_samples(two, 1.0, 2).kinds == ()
    # Every sample the same mix: the data cannot tell code from prose; the pull keeps
    # both near the one ratio, and the body's estimate is still right.
    same = [(k * 8_000, _true([k * 2_000, k * 6_000, 0, 0]), k * 2_000, k * 6_000, 0, 0)
            for k in (1, 2, 3, 4)]
    fitted = fit_samples(same, 1.0, 4)
    assert fitted.kinds, "fitted"
    assert fitted.kinds[2] == pytest.approx(fitted.ratio, rel=1e-3)  # data: not seen
    assert fitted.estimate(8_000, body) == pytest.approx(_true(body), rel=0.01)
    # A pair-only sample (no kinds) is fitted by the one ratio alone.
    assert fit_kinds([(1_000, 1_200)] * 5, 1.2, 0) == ()


def test_a_body_richer_in_a_kind_than_the_samples_is_budgeted_past_the_fit() -> None:
    """Samples with little JSON (and it always in the same share of prose) leave the JSON
    ratio near the one ratio; a body with far more JSON than any sample is budgeted for
    that part at the upper ratio, so its true count at a far higher JSON ratio fits, while
    a body within what the samples covered keeps the fit's own budget."""
    rng = random.Random(11)
    recent = []
    for _ in range(RECENT):
        prose = rng.randint(60_000, 80_000)
        counts = [prose, rng.randint(2_000, 4_000), prose // 100, 0]
        recent.append((sum(counts), _true(counts), *counts))
    fitted = fit_samples(recent, 1.0, RECENT)
    assert fitted.kinds, "fitted"
    assert fitted.kinds[2] < 1.5  # the samples could not show JSON's ratio of 1.8
    assert fitted.covered[2] == max(sample[4] for sample in recent)
    body = [60_000, 2_000, 40_000, 0]
    assert fitted.estimate(sum(body), body) < _true(body)  # the fit alone falls short
    assert fitted.budgeted(sum(body), body) >= _true(body)
    uncovered = body[2] - fitted.covered[2]
    assert fitted.guarded(body) == pytest.approx(
        fitted.convert(body) + (UNCOVERED_RATIO - fitted.kinds[2]) * uncovered)
    # Split into parts, the rest first, the guarded count adds up to the whole body's.
    rest, history = [5_000, 500, 30_000, 0], [55_000, 1_500, 10_000, 0]
    assert fitted.guarded(rest) + fitted.guarded(history, after=rest) == pytest.approx(
        fitted.guarded(body))
    # A body within the samples' amounts is budgeted as before: the fit times the margin.
    inside = list(recent[-1][2:])
    assert fitted.guarded(inside) == fitted.convert(inside)
    assert fitted.budgeted(sum(inside), inside) == math.ceil(
        (fitted.convert(inside) + fitted.overhead) * fitted.body_margin(inside) - 1e-9)
    assert fitted.body_margin(inside) >= fitted.margin


@settings(max_examples=150, deadline=None)
@given(
    ratios=st.tuples(*[st.floats(0.6, 1.8)] * 4),
    seen=st.lists(st.tuples(*[st.integers(0, 30_000)] * 4), min_size=3, max_size=16),
    prior=st.floats(0.5, 2.5),
)
def test_fitted_kinds_stay_sane_and_the_margin_covers_every_recent_sample(
    ratios: tuple[float, ...], seen: list[tuple[int, ...]], prior: float,
) -> None:
    recent = [(sum(c), _true(list(c), ratios), *c) for c in seen if sum(c) >= 500]
    if len(recent) < MIN_SAMPLES:
        return
    fitted = fit_samples(recent, prior, len(recent))
    assert all(RATIO_RANGE[0] <= r <= RATIO_RANGE[1] for r in (fitted.ratio, *fitted.kinds))
    assert fitted.kinds == () or len(fitted.kinds) == len(TEXT_KINDS)
    assert MIN_MARGIN <= fitted.margin <= MAX_MARGIN
    for sample in recent:
        assert fitted.estimate(sample[0], sample[2:]) <= fitted.budgeted(sample[0], sample[2:])
        if fitted.margin < MAX_MARGIN:
            assert fitted.budgeted(sample[0], sample[2:]) >= sample[1]


def test_a_row_of_the_first_shape_still_reads_and_takes_kinds_after(
    store_target: StoreTarget,
) -> None:
    """A row written before the samples kept their kinds ([local, reported] pairs) reads
    as the one ratio; new samples keep their kinds beside the old pairs, and once three do
    the kinds are fitted."""
    store = make_store(store_target.target)
    try:
        store_target.sql(
            "INSERT INTO token_calibration (provider, model, ratio, overhead, samples, margin, "
            "recent, updated_at) VALUES ('anthropic', 'old', 1.3, 0, 4, 1.1, "
            "'[[1000,1300],[2000,2600],[3000,3900],[4000,5200]]', '2026-01-01')")
        calibrator = Calibrator(store)
        ratio = calibrator.ratio("anthropic", "old", Facts())
        assert (ratio.ratio, ratio.samples, ratio.margin, ratio.kinds) == (1.3, 4, 1.1, ())
        rng = random.Random(5)
        for count in range(3):
            body = _kinds_body(rng)
            ratio = calibrator.observe("anthropic", "old", sum(body), _true(body), Facts(),
                                       body)
            assert bool(ratio.kinds) == (count == 2)
        row = store.get_token_calibration("anthropic", "old")
        assert row is not None
        assert [len(sample) for sample in row.recent] == [2] * 4 + [6] * 3
        assert calibrator.ratio("anthropic", "old", Facts()) == ratio
        # counts by kind that do not add up to the local count are not kept
        calibrator.observe("anthropic", "old", 1_000, 1_200, Facts(), [1, 2, 3, 4])
        row = store.get_token_calibration("anthropic", "old")
        assert row is not None and row.recent[-1] == (1_000, 1_200)
    finally:
        store.close()
