"""Fitting the window: long agent threads through the runner against a provider that counts
differently, per window size, beside the ideal.

    python benchmarks/window_bench.py [--quick] [--turns N] [--windows 32000,200000,1000000]
                                      [--seed N]

Each window gets one generated thread of ``--turns`` turns (200; 30 with ``--quick``,
which also leaves out the 1M window). A turn is a user message (a paste of 1k-20k
tokens two times in five), 0 to 8 tool rounds whose results are 1k-20k tokens (at most a
quarter of the window, so that one result alone fits), and a final answer of 300-4k
tokens; every text is English, code, JSON or non-English (Russian, Chinese, Japanese),
drawn per text. The thread runs through the real runner (``Agent``/``Turn`` on an SQLite
store, the anthropic adapter, ``max_tokens`` as the reply's reserve) against a scripted
provider that answers each body with the API's own JSON, and reports as its input count
the sum over the body's texts of our local count times the ratio of the text's kind:
English 1.15, code 1.35, JSON 1.8, non-English 0.6 (what the runner never sees), plus 4
tokens a message; a body whose true count and reserve are over the window is answered
with Anthropic's context-length error, which the bench hands to ``Turn.receive_error``
before building the round again. Each window runs twice with a summarizer (a stub
answering with the target size) and twice without (truncation): once with those ratios
and once with every ratio 1.0, the ideal (a provider that counts as we do). About 6
minutes on a 2-core machine; ``--quick`` about 30 seconds.

Rows, per window (targets from the issue):

* ``overflows``: bodies whose true count plus the reserve is over the window, after the
  thread's first three replies (before them, in brackets); target 0.
* ``estimate error``: the median (and 90th percentile) of |estimate - true| / true over
  the rounds after the fifth turn, the estimate being the round record's
  ``window.estimated_input_tokens``; target median at most 3%. Beside it, for reference,
  estimators on the same bodies: one ratio calibrated from every reply (``Calibrator``)
  times our count of the whole body; the previous round's reported count plus that ratio
  times what the body added (a turn's first round as the former); the one constant ratio
  that does best on these bodies in hindsight (what no constant ratio beats); and one
  ratio per kind of text, the kind guessed from the text's characters by the bench's own
  rules (:func:`text_class`) and the ratios fitted to the same whole-body reports: the
  design the runner's calibration follows, with its own rules
  (``pioneer.history.calibration.text_kind``), written here apart as a check on it.
* ``summarise at``: where the summarise trigger sits in true tokens, as a share of what
  the history can really have (the window less the reserve and the rest of the true
  request): the true count of the history it summarised, scaled by how far past its own
  threshold the runner's count was (so a turn that jumps past the threshold does not
  count as a late trigger); median over the summaries; target 80% +/- 2 points.
* ``window use when cut``: the mean true share of the window (with the reserve) of the
  rounds whose history starts at a cut (truncation); target no more than 10 points below
  the ideal's.

Prints one table per window, each row beside its ideal and its target. Not a test (a
test runs ``--quick`` for what it prints); run it on demand.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pioneer import (
    Agent,
    PioneerError,
    PioneerSettings,
    ProviderName,
    ToolSpec,
    ensure_runtime_home,
)
from pioneer.history import Calibrator, SqliteStore, Summarizer, SummaryRequest
from pioneer.history.calibration import _solve  # the runner's least-squares solve
from pioneer.providers import SamplingOptions
from pioneer.tokens import TiktokenCounter

PROVIDER: ProviderName = "anthropic"
MODEL = "claude-sonnet-4-5"
KINDS = ("english", "code", "json", "other-script")
#: Provider tokens per local token, by kind of text: what the scripted provider counts.
RATIOS = {"english": 1.15, "code": 1.35, "json": 1.8, "other-script": 0.6}
IDEAL = dict.fromkeys(KINDS, 1.0)
#: Tokens the provider adds per message (in every body it counts).
PER_MESSAGE = 4
WINDOWS = (32_000, 200_000, 1_000_000)
#: Replies before the calibration is past its prior (overflows before them are apart).
WARM_REPLIES = 3
#: Times a refused round is built again before the bench gives up on it.
RETRIES = 3
#: Turns after which the estimate's error is measured.
SETTLED_TURNS = 5
#: Each tool's results are of one kind.
TOOLS = {"fetch_page": "english", "read_file": "code", "query_db": "json",
         "read_mail": "other-script"}
TOOL_SPECS = [ToolSpec(name=name, description=f"Returns {kind} text.",
                       parameters={"type": "object", "properties": {"q": {"type": "string"}}})
              for name, kind in TOOLS.items()]


# -- the texts ---------------------------------------------------------------------------

_ENGLISH = """the team reviewed the deployment plan and agreed that the migration should
run during the quiet hours while the old nodes keep serving reads until every replica has
caught up with the primary and the dashboards show no errors for a full hour after that
which gives support enough time to answer questions from customers""".split()
_RUSSIAN = """команда проверила план развёртывания и решила что миграция пройдёт ночью
пока старые узлы обслуживают чтение до тех пор пока все реплики не догонят основной
сервер""".split()
_CJK = ["東京で会議があります", "数据库迁移在夜间进行", "明日の予定を確認してください",
        "服务器已经恢复正常", "レポートを送信しました", "请检查日志文件"]
_IDENTIFIERS = ["load", "store", "thread", "window", "ratio", "count", "turn", "record",
                "budget", "cache", "result", "value", "index", "entry", "limit"]


def _paragraph(kind: str, rng: random.Random) -> str:
    """One paragraph of ``kind`` (a few hundred characters)."""
    if kind == "english":
        words = [rng.choice(_ENGLISH) for _ in range(rng.randint(40, 90))]
        return " ".join(words).capitalize() + "."
    if kind == "other-script":
        parts = [rng.choice(_RUSSIAN) if rng.random() < 0.6 else rng.choice(_CJK)
                 for _ in range(rng.randint(25, 60))]
        return " ".join(parts) + "。"
    if kind == "code":
        name = "_".join(rng.sample(_IDENTIFIERS, 2))
        args = ", ".join(f"{a}: int" for a in rng.sample(_IDENTIFIERS, 3))
        body = "\n".join(f"    {rng.choice(_IDENTIFIERS)} = {rng.choice(_IDENTIFIERS)}"
                         f"[{rng.randint(0, 99)}] * {rng.randint(2, 9)}"
                         for _ in range(rng.randint(4, 10)))
        return f"def {name}({args}) -> int:\n{body}\n    return {rng.choice(_IDENTIFIERS)}\n"
    rows = [{"id": rng.randint(1, 10**6), "name": rng.choice(_IDENTIFIERS),
             "score": round(rng.random() * 100, 2), "tags": rng.sample(_IDENTIFIERS, 2),
             "active": rng.random() < 0.5} for _ in range(rng.randint(3, 8))]
    return json.dumps(rows)


class Texts:
    """Generated texts, the kind of each, and each text's local count (counted once)."""

    def __init__(self, seed: int, counter: TiktokenCounter) -> None:
        self.rng = random.Random(seed)
        self.counter = counter
        self.kinds: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._pool = {kind: [(p, counter.count(p)) for p in
                             (_paragraph(kind, self.rng) for _ in range(120))]
                      for kind in KINDS}

    def make(self, kind: str, tokens: int) -> str:
        """A new text of ``kind`` of about ``tokens`` local tokens."""
        parts: list[str] = [f"[{len(self.kinds)}]"]  # keeps every text unique
        total = 0
        while total < tokens:
            paragraph, count = self.rng.choice(self._pool[kind])
            parts.append(paragraph)
            total += count + 1
        text = "\n\n".join(parts)
        self.kinds[text] = kind
        return text

    def local(self, text: str) -> int:
        """Our count of ``text``."""
        found = self._counts.get(text)
        if found is None:
            found = self._counts[text] = self.counter.count(text)
        return found


# -- the thread ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool round: the tool called and the result it returns."""

    tool: str
    result: str


@dataclass(frozen=True)
class TurnPlan:
    """One turn: the user's message, its tool rounds, the final answer."""

    user: str
    calls: tuple[Call, ...]
    answer: str


def plan_thread(texts: Texts, turns: int, window: int) -> list[TurnPlan]:
    """The thread's turns, drawn from ``texts``'s generator (the same seed, the same
    thread)."""
    rng = texts.rng
    largest = min(20_000, window // 4)
    plans = []
    for number in range(turns):
        if rng.random() < 0.4:
            user = texts.make(rng.choice(KINDS), rng.randint(1_000, largest))
        else:
            user = texts.make("english", rng.randint(20, 120))
        calls = []
        for _ in range(rng.randint(0, 8)):
            tool = rng.choice(list(TOOLS))
            calls.append(Call(tool, texts.make(TOOLS[tool], rng.randint(1_000, largest))))
        answer = texts.make(rng.choice(KINDS), rng.randint(300, min(4_000, largest)))
        plans.append(TurnPlan(f"Turn {number}: {user}", tuple(calls), answer))
        texts.kinds[plans[-1].user] = texts.kinds.pop(user)
    return plans


# -- the scripted provider -------------------------------------------------------------


class Provider:
    """Counts a body as the provider would (our count times the ratio of each text's kind)
    and answers it with the API's JSON."""

    def __init__(self, texts: Texts, ratios: dict[str, float]) -> None:
        self.texts = texts
        self.ratios = ratios

    def text_count(self, text: str) -> float:
        """The provider's count of one text."""
        return self.texts.local(text) * self.ratios[self.texts.kinds.get(text, "english")]

    def message_count(self, text: str) -> float:
        """The provider's count of one message holding ``text``."""
        return self.text_count(text) + PER_MESSAGE

    def count(self, body: dict[str, Any]) -> int:
        """The input tokens of ``body``."""
        total = sum(self.text_count(text) for text in _texts(body.get("system")))
        total += sum(self.text_count(json.dumps(tool, sort_keys=True))
                     for tool in body.get("tools", ()))
        for message in body.get("messages", ()):
            total += PER_MESSAGE + sum(self.text_count(text) for text in _texts(message))
        return round(total)

    def too_long(self, tokens: int, maximum: int) -> dict[str, Any]:
        """The Messages API's error for a body of ``tokens`` over ``maximum``."""
        return {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {tokens} tokens > {maximum} maximum"}}

    def reply(self, calls: Sequence[Call], call_ids: Sequence[str], text: str,
              input_tokens: int) -> dict[str, Any]:
        """The Messages API's response: ``text``, or the tool calls."""
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": call_id, "name": call.tool,
                     "input": {"q": "next"}} for call, call_id in zip(calls, call_ids,
                                                                       strict=True)]
        return {"id": "msg_bench", "type": "message", "role": "assistant", "model": MODEL,
                "content": content, "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 50}}


def _texts(value: Any) -> Iterator[str]:
    """Every text of a body's part: strings, and the text of its blocks (tool inputs as
    their JSON)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("text", "content"):
                yield from _texts(item)
            elif key == "input":
                yield json.dumps(item, sort_keys=True)


def text_class(text: str) -> str:
    """A cheap guess at the kind of a text from its characters (what a runner could do
    without knowing where a text came from): mostly non-ASCII, JSON-like, code-like,
    else prose."""
    sample = text[:4000]
    if not sample:
        return "english"
    if sum(1 for ch in sample if ord(ch) > 127) > 0.3 * len(sample):
        return "other-script"
    if sample.count('":') + sample.count('", ') > len(sample) / 60:
        return "json"
    lines = sample.splitlines()
    coded = sum(1 for line in lines if line.startswith(("    ", "\t"))
                or line.rstrip().endswith((":", "{", ";", ")")))
    return "code" if coded > 0.3 * len(lines) else "english"


class KindFit:
    """A reference estimator: one ratio per guessed kind of text (:func:`text_class`),
    fitted by weighted least squares to the recent whole-body reports, pulled gently
    towards the one-ratio fit where a kind has little data."""

    def __init__(self, texts: Texts) -> None:
        self.texts = texts
        self.classes: dict[str, str] = {}
        self.samples: list[tuple[list[float], float]] = []

    def features(self, body: dict[str, Any]) -> list[float]:
        """Our count of ``body`` by guessed kind (message overheads as prose)."""
        counts = dict.fromkeys(KINDS, 0.0)
        leaves = [*_texts(body.get("system"))]
        leaves += [json.dumps(tool, sort_keys=True) for tool in body.get("tools", ())]
        for message in body.get("messages", ()):
            counts["english"] += PER_MESSAGE
            leaves += _texts(message)
        for text in leaves:
            kind = self.classes.get(text)
            if kind is None:
                kind = self.classes[text] = text_class(text)
            counts[kind] += self.texts.local(text)
        return [counts[kind] for kind in KINDS]

    def estimate(self, features: Sequence[float], prior: float) -> float:
        """The fitted count of a body with ``features``."""
        recent = self.samples[-16:]
        if len(recent) < WARM_REPLIES:
            return prior * sum(features)
        size = len(KINDS)
        matrix = [[0.0] * size for _ in range(size)]
        vector = [0.0] * size
        pull = 0.02 * statistics.fmean(sum(f) for f, _ in recent)
        rows = [(f, y, 0.5 ** ((len(recent) - 1 - i) / 4)) for i, (f, y) in enumerate(recent)]
        rows += [([pull if k == j else 0.0 for k in range(size)], prior * pull, 1.0)
                 for j in range(size)]
        for f, y, w in rows:
            for i in range(size):
                vector[i] += w * f[i] * y
                for j in range(size):
                    matrix[i][j] += w * f[i] * f[j]
        ratios = _solve(matrix, vector)
        return sum(max(0.3, r) * f for r, f in zip(ratios, features, strict=True))

    def observe(self, features: list[float], true: int) -> None:
        """One reply's report."""
        self.samples.append((features, float(true)))


class StubSummarizer(Summarizer):
    """Answers with English text of the target size and keeps what it was asked."""

    def __init__(self, texts: Texts) -> None:
        self.texts = texts
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self.texts.make("english", max(50, request.target_tokens // 2))


# -- one run -----------------------------------------------------------------------------


@dataclass
class Run:
    """What one thread through the runner measured."""

    overflows: int = 0
    early_overflows: int = 0
    refused: int = 0
    errors: list[float] = field(default_factory=list)
    #: The same rounds estimated on the side, for reference: one calibrated ratio times our
    #: count of the whole body, and (after a turn's first round) the previous round's true
    #: count plus that ratio times what the body added since.
    whole_errors: list[float] = field(default_factory=list)
    anchored_errors: list[float] = field(default_factory=list)
    kind_errors: list[float] = field(default_factory=list)
    #: True / our count of each of those bodies: the best one ratio in hindsight.
    body_ratios: list[float] = field(default_factory=list)
    triggers: list[float] = field(default_factory=list)
    cut_use: list[float] = field(default_factory=list)
    cleared: int = 0
    rounds: int = 0
    estimated_rounds: int = 0
    seconds: float = 0.0


def run_thread(plans: Sequence[TurnPlan], texts: Texts, window: int, ratios: dict[str, float],
               *, summarise: bool, home: Path, folder: Path) -> Run:
    """Drive ``plans`` through an agent with a ``window``-token context and measure."""
    provider = Provider(texts, ratios)
    ours = Provider(texts, IDEAL)  # our count of the same texts
    side = Calibrator(SqliteStore(folder / f"side-{window}-{summarise}-{id(ratios)}.db"))
    kinds = KindFit(texts)
    reserve = 4_096 if window < 100_000 else 16_384
    summarizer = StubSummarizer(texts) if summarise else None
    settings = PioneerSettings(max_context_tokens=window, response_reserve_tokens=reserve,
                               home=home)
    store = folder / f"w{window}-{'s' if summarise else 't'}-{id(ratios)}.db"
    run = Run()
    replies = 0
    started = time.perf_counter()
    with Agent(str(store), provider=PROVIDER, model=MODEL, tools=TOOL_SPECS,
               settings=settings, summarizer=summarizer, recall=False,
               sampling=SamplingOptions(max_tokens=reserve),
               compile_input={"workspace_root": home}) as agent:
        for number, plan in enumerate(plans):
            turn = agent.turn("bench", plan.user, turn_id=f"turn-{number}")
            asked = len(summarizer.requests) if summarizer else 0
            refused = False
            previous: tuple[int, int] | None = None  # (our count, true count) of the turn
            for round_number in range(len(plan.calls) + 1):
                try:
                    body = turn.next_body()
                    true = provider.count(body)
                    for _ in range(RETRIES):
                        if true + reserve <= window:
                            break
                        # Sent and refused: the provider's context-length error, read by
                        # the runner, and the round built again.
                        if replies < WARM_REPLIES:
                            run.early_overflows += 1
                        else:
                            run.overflows += 1
                        turn.receive_error(provider.too_long(true, window - reserve))
                        body = turn.next_body()
                        true = provider.count(body)
                except PioneerError as error:
                    if type(error).__name__ != "ContextWindowError":
                        raise
                    run.refused += 1
                    refused = True
                    break
                run.rounds += 1
                record = turn.rounds[-1]
                estimate = getattr(getattr(record, "window", None), "estimated_input_tokens",
                                   None)
                if estimate is not None:
                    run.estimated_rounds += 1
                    run.cleared = max(run.cleared, getattr(record.window,
                                                           "cleared_tool_results", 0))
                    if number >= SETTLED_TURNS:
                        run.errors.append(abs(estimate - true) / true)
                local = ours.count(body)
                learnt = side.ratio(PROVIDER, MODEL, None)
                features = kinds.features(body)
                if number >= SETTLED_TURNS:
                    run.body_ratios.append(true / local)
                    by_kind = kinds.estimate(features, learnt.ratio)
                    run.kind_errors.append(abs(by_kind - true) / true)
                    whole = learnt.estimate(local)
                    run.whole_errors.append(abs(whole - true) / true)
                    anchored = whole if previous is None else \
                        previous[1] + learnt.ratio * (local - previous[0])
                    run.anchored_errors.append(abs(anchored - true) / true)
                side.observe(PROVIDER, MODEL, local, true, None)
                kinds.observe(features, true)
                previous = (local, true)
                decision = turn.history
                if round_number == 0 and decision is not None:
                    history_true = round(sum(provider.message_count(m.content)
                                             for m in decision.messages))
                    capacity = window - reserve - (true - history_true)
                    if summarizer and len(summarizer.requests) > asked and \
                            decision.mode == "summarise":
                        request = summarizer.requests[-1]
                        before = sum(provider.message_count(m.content)
                                     for m in request.transcript)
                        if request.previous_summary:
                            before += provider.message_count(request.previous_summary)
                        scale = decision.limits.threshold / max(1, decision.total_tokens)
                        run.triggers.append(before * scale / max(1, capacity))
                if decision is not None and decision.cut_turn_id is not None:
                    run.cut_use.append((true + reserve) / window)
                if round_number < len(plan.calls):
                    call = plan.calls[round_number]
                    call_id = f"t{number}-r{round_number}"
                    step = turn.receive(provider.reply([call], [call_id], "", true))
                    replies += 1
                    for runnable in step.runnable:
                        turn.add_tool_result(runnable.id, call.result)
                else:
                    turn.receive(provider.reply([], [], plan.answer, true))
                    replies += 1
            turn.finish(assistant_text="(the request could not fit)" if refused else None)
    run.seconds = time.perf_counter() - started
    return run


# -- the table ---------------------------------------------------------------------------


def _percent(values: Sequence[float], quantile: float = 0.5) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{100 * ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]:.1f}%"


def _floor(ratios: Sequence[float]) -> list[float]:
    """The errors of the one ratio that makes the median error of ``ratios`` (true / our
    count per body) smallest: no single ratio does better on these bodies."""
    if not ratios:
        return []
    ordered = sorted(ratios)
    candidates = [ordered[int(q * (len(ordered) - 1) / 100)] for q in range(101)]
    best = min(candidates, key=lambda c: statistics.median(abs(c / r - 1) for r in ratios))
    return [abs(best / r - 1) for r in ratios]


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{_percent(values)} / {_percent(values, 0.9)}"


def _mean(values: Sequence[float]) -> str:
    return f"{100 * statistics.fmean(values):.1f}%" if values else "-"


def table(window: int, turns: int, real: tuple[Run, Run], ideal: tuple[Run, Run]) -> list[str]:
    """The rows of one window: measured, ideal, target."""
    summarised, truncated = real
    ideal_summarised, ideal_truncated = ideal
    both, ideal_both = (summarised, truncated), (ideal_summarised, ideal_truncated)
    overflows = sum(r.overflows for r in both)
    early = sum(r.early_overflows for r in both)
    ideal_overflows = sum(r.overflows for r in ideal_both)
    ideal_early = sum(r.early_overflows for r in ideal_both)
    errors = summarised.errors + truncated.errors
    ideal_errors = ideal_summarised.errors + ideal_truncated.errors
    whole = summarised.whole_errors + truncated.whole_errors
    ideal_whole = ideal_summarised.whole_errors + ideal_truncated.whole_errors
    anchored = summarised.anchored_errors + truncated.anchored_errors
    ideal_anchored = ideal_summarised.anchored_errors + ideal_truncated.anchored_errors
    kind = summarised.kind_errors + truncated.kind_errors
    ideal_kind = ideal_summarised.kind_errors + ideal_truncated.kind_errors
    ratios = summarised.body_ratios + truncated.body_ratios
    ideal_ratios = ideal_summarised.body_ratios + ideal_truncated.body_ratios
    cut, ideal_cut = truncated.cut_use, ideal_truncated.cut_use
    gap = (statistics.fmean(ideal_cut) - statistics.fmean(cut)) * 100 \
        if cut and ideal_cut else None
    lines = [
        f"window {window:,} tokens: {turns} turns, {sum(r.rounds for r in both)} rounds "
        f"(summarise {summarised.seconds:.1f}s, truncate {truncated.seconds:.1f}s)",
        f"  {'row':<34} {'measured':>16} {'ideal':>16}  target",
        f"  {'overflows (first 3 replies apart)':<34} {f'{overflows} ({early})':>16} "
        f"{f'{ideal_overflows} ({ideal_early})':>16}  0",
        f"  {'estimate error, median':<34} {_percent(errors):>16} "
        f"{_percent(ideal_errors):>16}  <= 3%",
        f"  {'estimate error, 90th percentile':<34} {_percent(errors, 0.9):>16} "
        f"{_percent(ideal_errors, 0.9):>16}",
        f"  {'  one ratio x whole body':<34} {_spread(whole):>16} "
        f"{_spread(ideal_whole):>16}  median / 90th percentile",
        f"  {'  previous round + ratio x added':<34} {_spread(anchored):>16} "
        f"{_spread(ideal_anchored):>16}  median / 90th percentile",
        f"  {'  best constant ratio in hindsight':<34} {_spread(_floor(ratios)):>16} "
        f"{_spread(_floor(ideal_ratios)):>16}  the floor of one ratio per model",
        f"  {'  one ratio per guessed kind':<34} {_spread(kind):>16} "
        f"{_spread(ideal_kind):>16}  median / 90th percentile",
        f"  {'summarise at (true share)':<34} {_percent(summarised.triggers):>16} "
        f"{_percent(ideal_summarised.triggers):>16}  80% +/- 2 points "
        f"({len(summarised.triggers)} summaries)",
        f"  {'window use when cut (mean)':<34} {_mean(cut):>16} {_mean(ideal_cut):>16}  "
        f"at most 10 points below the ideal"
        + (f" ({gap:.1f} below)" if gap is not None else ""),
        f"  {'requests refused before sending':<34} "
        f"{sum(r.refused for r in both):>16} {sum(r.refused for r in ideal_both):>16}",
    ]
    if not any(r.estimated_rounds for r in both):
        lines.append("  (the runner records no window estimate: the error rows are empty)")
    return lines


def _windows(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated token counts (got {text!r})") from None
    if not values or min(values) < 8_000:
        raise argparse.ArgumentTypeError(f"expected windows of at least 8000 tokens "
                                         f"(got {text!r})")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true",
                        help="30 turns, windows 32k and 200k (what the test runs)")
    parser.add_argument("--turns", type=int, default=None, help="turns per thread")
    parser.add_argument("--windows", type=_windows, default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    turns = args.turns or (30 if args.quick else 200)
    windows = args.windows or (WINDOWS[:2] if args.quick else WINDOWS)
    counter = TiktokenCounter()
    print(f"window_bench: {turns} turns per thread; windows "
          f"{', '.join(f'{w:,}' for w in windows)}; provider ratios "
          + ", ".join(f"{kind} {ratio}" for kind, ratio in RATIOS.items())
          + f"; seed {args.seed}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        home = folder / "home"
        ensure_runtime_home(home)
        for window in windows:
            texts = Texts(args.seed, counter)
            plans = plan_thread(texts, turns, window)
            runs = {(ratios is IDEAL, summarise): run_thread(
                        plans, texts, window, ratios, summarise=summarise, home=home,
                        folder=folder)
                    for ratios in (RATIOS, IDEAL) for summarise in (True, False)}
            print("\n".join(table(window, turns, (runs[False, True], runs[False, False]),
                                  (runs[True, True], runs[True, False]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
