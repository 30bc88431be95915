"""Fitting the window: the whole request is budgeted against the model's context window,
this turn's oldest tool results are cleared in batches, the history is cut further, and a
request that cannot fit is refused before it is sent; each round records its window and
explain shows it."""

from __future__ import annotations

import io
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pioneer import (
    Agent,
    ContextWindowError,
    PioneerError,
    PioneerSettings,
    SamplingOptions,
    ensure_runtime_home,
)
from pioneer.audit import TurnRecord, WindowRecord
from pioneer.cli import main
from pioneer.history import HistoryBudgeter, HistoryLimits
from pioneer.history.calibration import PRIOR_MARGIN
from pioneer.providers import ContextOverflow, ToolCall
from pioneer.turn import ProviderName

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

THREAD = "thread-w"
MODEL = "claude-sonnet-4-5"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    folder = Path("home")
    ensure_runtime_home(folder)
    return folder


def _agent(home: Path, *, window: int | None = None, provider: ProviderName = "anthropic",
           model: str = MODEL, db: str = "w.db", **options: Any) -> Agent:
    fields: dict[str, Any] = {"home": home}
    if window is not None:
        fields["max_context_tokens"] = window
    fields.update(options.pop("settings", {}))
    return Agent(db, provider=provider, model=model, tools=[agent_loop.READ_FILE],
                 settings=PioneerSettings(**fields), compile_input={"workspace_root": home},
                 recall=False, **options)


def _words(tokens: int, word: str = "word") -> str:
    """About ``tokens`` cl100k tokens of text (one per repeated word)."""
    return f" {word}" * tokens


def _seed(agent: Agent, turns: int, tokens: int) -> None:
    """``turns`` stored turns of about ``tokens`` tokens each."""
    agent.store.ensure_thread(THREAD, model=agent.model)
    for n in range(turns):
        agent.store.add_turn(THREAD, turn_id=f"old-{n}", user_text=f"question {n}" +
                             _words(tokens // 2), assistant_text=f"answer {n}" +
                             _words(tokens // 2, "reply"))


def _reply(agent: Agent, window: WindowRecord | None, calls: list[ToolCall], text: str,
           true_ratio: float) -> dict[str, Any]:
    """The provider's response, reporting the body's true input count."""
    assert window is not None
    reported = math.ceil(window.local_input_tokens * true_ratio)
    usage = agent_loop.usage(agent.provider, _Plan(reported), 5)
    response: dict[str, Any] = agent_loop.response(agent.provider, agent.model, text, calls,
                                                   usage)
    return response


class _Plan:
    """The cache plan fields agent_loop.usage reads: every input token uncached."""

    def __init__(self, total: int) -> None:
        self.total_tokens = self.uncached_tokens = total
        self.cached_tokens = self.written_tokens = 0


def _turn(agent: Agent, results: list[int], *, turn_id: str, true_ratio: float = 1.0,
          bodies: list[dict[str, Any]] | None = None) -> TurnRecord:
    """One turn whose model reads a file per entry of ``results`` (a result of that many
    tokens each), then answers."""
    turn = agent.turn(THREAD, f"Please read the files ({turn_id}).", turn_id=turn_id)
    for number, size in enumerate([*results, None]):
        try:
            body = turn.next_body()
        except ContextWindowError:
            turn.finish(assistant_text="The request does not fit the window.")
            raise
        if bodies is not None:
            bodies.append(body)
        calls = [] if size is None else [
            ToolCall(id=f"{turn_id}-c{number}", name="read_file", arguments={"path": f"f{number}"})]
        step = turn.receive(_reply(agent, turn.rounds[-1].window, calls,
                                   "" if calls else "Done.", true_ratio))
        for call in step.runnable:
            assert size is not None
            turn.add_tool_result(call.id, f"file {number}:" + _words(size))
    return turn.finish().record


def _fits(window: WindowRecord) -> bool:
    """The estimate with its margin and the reserve are within the window."""
    budgeted = math.ceil(window.estimated_input_tokens * window.margin - 1e-9)
    return budgeted + window.reserve_tokens <= window.context_window


# -- the whole request is budgeted -------------------------------------------------------


def test_a_body_carrying_max_tokens_fits_where_the_history_alone_was_budgeted(
    home: Path,
) -> None:
    window, max_tokens = 60_000, 20_000
    with _agent(home, window=window, sampling=SamplingOptions(max_tokens=max_tokens)) as agent:
        _seed(agent, 36, 1_200)  # about 43,700 tokens: within the old budget of 44,000
        # The old budget: the window less response_reserve_tokens, for the history alone.
        old = HistoryBudgeter(agent.store, HistoryLimits.from_tokens(window, 16_000),
                              store_cut=False).build(THREAD)
        record = _turn(agent, [], turn_id="t1")
    fit = record.rounds[0].window
    assert fit is not None and record.history is not None
    rest = fit.local_input_tokens - fit.local_history_tokens
    assert old.turns_sent == 36  # the old budget kept every turn...
    assert old.sent_tokens + rest + max_tokens > window  # ...and the body overflowed
    assert (fit.context_window, fit.reserve_tokens, fit.reserve_from) == (
        window, max_tokens, "max_tokens")
    assert _fits(fit) and fit.estimated_input_tokens + max_tokens <= window
    # the history's budget is what the rest left, and truncation filled it as before
    assert record.history.mode == "truncate"
    assert record.history.budget < window - max_tokens - rest
    assert fit.local_history_tokens == record.history.sent_tokens <= record.history.budget


class _Summaries:
    def summarize(self, request: Any) -> str:
        return f"Summary of {len(request.transcript)} messages."


def test_summarising_starts_at_80_percent_of_the_historys_share(home: Path) -> None:
    """A history between 80% of the history's share and 80% of the window less the reserve
    is summarised: the threshold is the share's, not the old budget's."""
    window = 60_000
    with _agent(home, window=window, summarizer=_Summaries()) as agent:
        _seed(agent, 25, 1_200)  # about 30,000 tokens: under the old threshold of 35,200
        total = sum(e.tokens for e in agent.store.get_history_window(THREAD, 200).entries)
        record = _turn(agent, [], turn_id="t1")
        later = _turn(agent, [], turn_id="t2")
    fit, history = record.rounds[0].window, record.history
    assert fit is not None and history is not None
    assert total < HistoryLimits.from_tokens(window, 16_000).threshold
    assert history.mode == "summarise" and history.summary_sent
    # 80% of the share as estimated, but no more than the budget the prior's margin
    # leaves (the margin is 1.25 before three replies: both are the same then)
    assert history.threshold <= history.budget and history.threshold < total
    # the budget the budgeter had is the share the round's fit found, but for the prompt
    # it could not count before compiling on the thread's first recorded turn...
    assert _share(fit, window) <= history.budget <= _share(fit, window) + 1_500
    # ...and, from the previous turn's record, within a few tokens on the next
    fit, history = later.rounds[0].window, later.history
    assert fit is not None and history is not None
    assert abs(history.budget - _share(fit, window)) <= 20


def test_the_summarise_threshold_is_80_percent_of_the_share_this_turn_leaves(
    home: Path,
) -> None:
    """Once calibrated, summarising starts at 80% of the history's share in the provider's
    tokens as estimated, without the margin, and the share is what this turn's own user
    message leaves (here a paste of 8,000 tokens the previous turn did not have)."""
    window = 60_000
    with _agent(home, window=window) as agent:
        _seed(agent, 5, 1_000)
        for n in range(3):
            _turn(agent, [500], turn_id=f"warm-{n}", true_ratio=1.2)
        turn = agent.turn(THREAD, "Here is the log:" + _words(8_000, "line"), turn_id="paste")
        turn.next_body()
        fit, history = turn.rounds[-1].window, turn.history
        assert fit is not None and history is not None
        turn.receive(_reply(agent, fit, [], "Done.", 1.2))
        turn.finish()
    assert fit.ratio_samples >= 3 and fit.margin < 1.1
    rest = fit.estimated_input_tokens - fit.history_tokens
    history_ratio = fit.history_tokens / fit.local_history_tokens
    share = window - fit.reserve_tokens - rest
    expected = 0.8 * share / history_ratio
    assert history.mode == "keep"
    assert abs(history.limits.threshold - expected) <= 0.005 * expected
    # the budget (what truncation keeps to) is the share with the margin
    assert history.limits.budget == pytest.approx(
        ((window - fit.reserve_tokens) / fit.margin - rest) / history_ratio, rel=0.005)


def test_a_request_that_fits_without_the_margin_is_sent_not_refused(home: Path) -> None:
    """Before any reply the prior's margin is 1.25: a request whose estimate fits the window
    but not with the margin is sent with no history, not refused."""
    window = 40_000
    with _agent(home, window=window, sampling=SamplingOptions(max_tokens=4_000)) as agent:
        _seed(agent, 3, 1_000)
        turn = agent.turn(THREAD, "Summarise this:" + _words(27_000), turn_id="big")
        body = turn.next_body()
        fit, history = turn.rounds[-1].window, turn.history
        assert fit is not None and history is not None
        turn.receive(_reply(agent, fit, [], "Done.", 1.0))
        turn.finish()
    assert fit.margin == PRIOR_MARGIN
    assert fit.estimated_input_tokens + fit.reserve_tokens <= window
    assert math.ceil(fit.estimated_input_tokens * fit.margin) + fit.reserve_tokens > window
    assert history.sent_tokens == fit.local_history_tokens == 0
    assert "Summarise this:" in json.dumps(body)  # sent, with the user's text


def _share(fit: WindowRecord, window: int) -> int:
    """The history's share a round's fit found: the local tokens the window holds less
    the rest of the request."""
    return math.floor((window - fit.reserve_tokens) / (fit.ratio * fit.margin)) - (
        fit.local_input_tokens - fit.local_history_tokens)


@pytest.mark.parametrize(("provider", "model", "override", "expected", "source"), [
    ("anthropic", "claude-sonnet-4-5", None, 200_000, "the model table: claude-sonnet-4-5"),
    ("openai-chat", "gpt-4o", None, 128_000, "the model table: gpt-4o"),
    ("gemini", "gemini-2.5-pro", None, 1_048_576, "the model table: gemini-2.5-pro"),
    ("gemini", "gemini-2.5-pro", 50_000, 50_000, "the max_context_tokens setting"),
])
def test_the_window_is_the_models_from_the_table_unless_overridden(
    home: Path, provider: ProviderName, model: str, override: int | None, expected: int,
    source: str,
) -> None:
    with _agent(home, window=override, provider=provider, model=model) as agent:
        record = _turn(agent, [], turn_id="t1")
    fit = record.rounds[0].window
    assert fit is not None and record.history is not None
    assert fit.context_window == expected and fit.window_from.startswith(source)
    assert (fit.reserve_tokens, fit.reserve_from) == (16_000, "response_reserve_tokens")
    # the history's share: the window less the reserve and the rest, at the prior's margin
    assert record.history.budget < expected - 16_000


# -- a turn that grows past the window ---------------------------------------------------


def _results_sent(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, content) of every tool result in an Anthropic body, in order."""
    return [(block["tool_use_id"], block["content"] if isinstance(block["content"], str)
             else "".join(part["text"] for part in block["content"]))
            for message in body["messages"] if isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "tool_result"]


def test_eight_large_tool_rounds_stay_under_the_window_clearing_oldest_first_in_batches(
    home: Path,
) -> None:
    bodies: list[dict[str, Any]] = []
    batch = 9_000
    with _agent(home, window=40_000,
                settings={"tool_result_clear_batch_tokens": batch}) as agent:
        _seed(agent, 2, 400)
        record = _turn(agent, [6_000] * 8, turn_id="t1", bodies=bodies)
    windows = [r.window for r in record.rounds]
    assert all(w is not None and _fits(w) for w in windows)
    cleared = [w.cleared_tool_results for w in windows if w is not None]
    assert cleared[0] == 0 and cleared[-1] >= 4 and cleared == sorted(cleared)
    for before, after in itertools.pairwise(cleared):
        # a batch frees at least 9,000 tokens: two 6,000-token results at a time
        assert after == before or after - before >= 2
    for number, body in enumerate(bodies):
        sent = _results_sent(body)
        kinds = ["cleared" if text.startswith("[result cleared") else "full"
                 for _, text in sent]
        assert kinds == sorted(kinds, key=lambda kind: kind == "full")  # oldest first
        if sent:
            assert kinds[-1] == "full"  # the newest round is never cleared
            assert sent[-1][0] == f"t1-c{number - 1}"
        for call_id, text in sent:
            if text.startswith("[result cleared"):
                assert "read_file" in text and call_id in text and "tokens" in text
    # clearing came first: the small history was never cut
    assert record.history is not None and record.history.turns_sent == 2
    assert "cut to the low-water mark" not in record.history.reason


def test_when_clearing_is_not_enough_the_history_is_cut_and_the_cut_is_stored(
    home: Path,
) -> None:
    with _agent(home, window=50_000) as agent:
        _seed(agent, 20, 1_000)
        record = _turn(agent, [9_000, 9_000, 9_000], turn_id="t1")
        stored = agent.store.get_history_window(THREAD, 200).cut
    windows = [r.window for r in record.rounds]
    assert all(w is not None and _fits(w) for w in windows)
    history = [w.local_history_tokens for w in windows if w is not None]
    assert history[-1] < history[0]
    assert record.history is not None and "this turn's messages left the history" in \
        record.history.reason
    assert stored is not None and stored.first_turn_id == record.history.turn_ids[0]


def test_a_result_larger_than_the_window_is_refused_before_sending(home: Path) -> None:
    with _agent(home, window=30_000) as agent:
        turn = agent.turn(THREAD, "Read it.", turn_id="t1")
        turn.next_body()
        call = ToolCall(id="c1", name="read_file", arguments={"path": "huge"})
        step = turn.receive(_reply(agent, turn.rounds[-1].window, [call], "", 1.0))
        turn.add_tool_result(step.runnable[0].id, _words(40_000))
        with pytest.raises(ContextWindowError) as raised:
            turn.next_body()
        assert len(turn.rounds) == 1  # nothing more was built or recorded
        record = turn.finish(assistant_text="The file is too large to read here.").record
    error = raised.value
    assert isinstance(error, PioneerError)
    assert error.context_window == 30_000 and error.reserve_tokens == 16_000
    assert error.needed_tokens > 30_000
    message = str(error)
    assert message.startswith("Turn.next_body: round 2: the request needs about ")
    assert "over the context window of 30,000 (the max_context_tokens setting)" in message
    assert "nothing was sent" in message
    assert len(record.rounds) == 1


# -- calibration from replies and errors -------------------------------------------------


def test_replies_calibrate_the_ratio_and_the_estimate_follows_it(home: Path) -> None:
    with _agent(home) as agent:
        records = [_turn(agent, [], turn_id=f"t{n}", true_ratio=1.3) for n in range(5)]
    windows = [r.rounds[0].window for r in records]
    assert all(w is not None for w in windows)
    assert [w.ratio_samples for w in windows if w] == [0, 1, 2, 3, 4]
    last = windows[-1]
    assert last is not None and last.reported_input_tokens is not None
    assert abs(last.estimated_input_tokens - last.reported_input_tokens) \
        <= 0.03 * last.reported_input_tokens


def _too_long(reported: int, maximum: int) -> anthropic.BadRequestError:
    """The exception the Anthropic SDK raises for a prompt that is too long."""
    body = {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": f"prompt is too long: {reported} tokens > {maximum} maximum"}}
    transport = httpx2.MockTransport(lambda request: httpx2.Response(400, json=body))
    try:
        anthropic.Anthropic(api_key="test", http_client=httpx2.Client(transport=transport),
                            max_retries=0).messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    except anthropic.BadRequestError as error:
        return error
    raise AssertionError("the SDK did not raise")


def test_a_context_length_error_calibrates_and_the_next_body_fits(home: Path) -> None:
    with _agent(home, window=60_000) as agent:
        _seed(agent, 30, 1_500)
        turn = agent.turn(THREAD, "Summarise our talk.", turn_id="t1")
        turn.next_body()
        sent = turn.rounds[-1].window
        assert sent is not None
        # the provider counts twice what we do
        reported = 2 * sent.local_input_tokens
        assert turn.receive_error(ValueError("connection reset")) is None
        overflow = turn.receive_error(_too_long(reported, 60_000))
        assert overflow == ContextOverflow(reported, 60_000, overflow.message if overflow
                                           else "")
        turn.next_body()
        again = turn.rounds[-1].window
        assert again is not None and len(turn.rounds) == 1
        assert again.ratio >= 2.0
        assert again.local_input_tokens * 2 + again.reserve_tokens <= 60_000
        assert agent.calibration.ratio("anthropic", MODEL, object()).samples == 1
        record = _finish(agent, turn)
    assert record.rounds[0].reply is not None
    assert record.rounds[0].reply.unanswered == ["anthropic"]


def _finish(agent: Agent, turn: Any) -> TurnRecord:
    turn.receive(_reply(agent, turn.rounds[-1].window, [], "Done.", 2.0))
    record: TurnRecord = turn.finish().record
    return record


# -- visible -----------------------------------------------------------------------------


def test_explain_shows_the_window_of_each_round(home: Path) -> None:
    with _agent(home, window=40_000) as agent:
        _turn(agent, [6_000, 6_000, 6_000, 6_000, 6_000], turn_id="t1", true_ratio=1.1)
    out = io.StringIO()
    assert main(["explain", "t1", "--db", "w.db"], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    step = text[text.index("provider"):]
    assert "  window: 40,000 tokens (the max_context_tokens setting)" in step
    assert "    estimated input " in step and "reserve 16,000 (response_reserve_tokens)" in step
    assert "the model table's prior, budgeted with a margin of 1.25x" in step
    assert "tool results cleared" in step and "    reported input " in step
    out = io.StringIO()
    assert main(["explain", "t1", "--db", "w.db", "--json"], stdout=out,
                stderr=io.StringIO()) == 0
    steps = {step["step"]: step for step in json.loads(out.getvalue())["steps"]}
    rounds = steps["provider"]["rounds"]
    assert len(rounds) == 6
    for number, round_ in enumerate(rounds, start=1):
        window = round_["window"]
        assert set(window) >= {"context_window", "estimated_input_tokens", "reserve_tokens",
                               "ratio", "ratio_samples", "cleared_tool_results",
                               "reported_input_tokens"}
        assert window["context_window"] == 40_000
        assert window["ratio_samples"] == number - 1
        assert window["reported_input_tokens"] == math.ceil(
            window["local_input_tokens"] * 1.1)
    assert rounds[-1]["window"]["cleared_tool_results"] > 0


def test_the_context_map_shows_each_rounds_window(home: Path) -> None:
    with _agent(home, window=40_000) as agent:
        record = _turn(agent, [6_000] * 5, turn_id="t1")
    out = io.StringIO()
    assert main(["explain", "t1", "--db", "w.db", "--html", "map.html", "--json"],
                stdout=out, stderr=io.StringIO()) == 0
    data = json.loads(out.getvalue())
    assert data["budget"]["context_window"] == 40_000
    assert [r["window"] for r in data["rounds"]] == [
        r.window.model_dump(mode="json") for r in record.rounds if r.window]
    page = Path("map.html").read_text("utf-8")
    assert "fitting the window" in page and "tool results cleared" in page


# -- the property ------------------------------------------------------------------------


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=st.integers(24_000, 120_000), max_tokens=st.none() | st.integers(500, 8_000),
       history=st.lists(st.integers(50, 6_000), max_size=12),
       turns=st.lists(st.lists(st.integers(100, 20_000), max_size=7), min_size=1, max_size=3),
       true_ratio=st.floats(0.6, 1.8))
def test_no_body_is_budgeted_past_the_window(
    tmp_path_factory: pytest.TempPathFactory, window: int, max_tokens: int | None,
    history: list[int], turns: list[list[int]], true_ratio: float,
) -> None:
    folder = tmp_path_factory.mktemp("property")
    home = folder / "home"
    ensure_runtime_home(home)
    with _agent(home, window=window, db=str(folder / "p.db"),
                sampling=SamplingOptions(max_tokens=max_tokens)) as agent:
        agent.store.ensure_thread(THREAD, model=MODEL)
        for n, size in enumerate(history):
            agent.store.add_turn(THREAD, turn_id=f"old-{n}", user_text=_words(size),
                                 assistant_text="ok")
        for number, results in enumerate(turns):
            try:
                record = _turn(agent, results, turn_id=f"t{number}", true_ratio=true_ratio)
            except ContextWindowError as error:
                # refused only when the smallest request cannot fit
                assert error.needed_tokens > window
                event("refused")
                continue
            event("results cleared" if any(r.window and r.window.cleared_tool_results
                                           for r in record.rounds) else "nothing cleared")
            for r in record.rounds:
                fit = r.window
                assert fit is not None
                assert fit.estimated_input_tokens + fit.reserve_tokens <= fit.context_window
                # with the margin too, unless that could not be: a request that fits without
                # it is sent with no history rather than refused
                assert _fits(fit) or fit.local_history_tokens == 0
