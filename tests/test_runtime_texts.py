"""Built-in runtime texts: the runtime block and the retry instructions, their goldens, the
clock granularity (byte-identical text within one bucket), the setting, and bad input."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pioneer import InputError, PioneerSettings, PromptCompileInput, PromptCompiler, TemplateError
from pioneer.cli import main
from pioneer.sections.runtime import retry_instruction, runtime_block
from pioneer.settings import CLOCK_GRANULARITIES, ClockGranularity

GOLDENS = Path(__file__).parent / "goldens" / "runtime"
OSLO = ZoneInfo("Europe/Oslo")
#: Tuesday 1 December 2026, 10:59:12.5 in Oslo (CET).
NOW = datetime(2026, 12, 1, 10, 59, 12, 500_000, tzinfo=OSLO)
BUCKET = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}


@pytest.fixture(autouse=True)
def no_settings_from_outside(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("PIONEER_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def quiet() -> PromptCompiler:
    return PromptCompiler(settings=PioneerSettings(home=Path("home")), count_tokens=False)


# -- goldens -------------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", CLOCK_GRANULARITIES)
def test_runtime_block_golden(quiet: PromptCompiler, golden: Callable[[Path, str], None],
                              granularity: ClockGranularity) -> None:
    text = runtime_block(quiet, now=NOW, granularity=granularity, system="Linux")
    golden(GOLDENS / f"runtime-{granularity}.txt", text + "\n")


@pytest.mark.parametrize(
    ("name", "kind", "facts"),
    [
        ("retry-tool-retry", "tool_retry",
         {"tool": "web_fetch", "reason": "HTTP 404 for https://example.org/report.pdf\n"
                                         "the page may have moved"}),
        ("retry-tool-exhausted", "tool_exhausted",
         {"tool": "web_fetch", "reason": "timed out after 30 s"}),
        ("retry-final-answer", "final_answer", {}),
        ("retry-final-answer-reason", "final_answer",
         {"reason": "the limit of 8 tool rounds was reached"}),
    ],
)
def test_retry_instruction_golden(quiet: PromptCompiler, golden: Callable[[Path, str], None],
                                  name: str, kind: str, facts: dict[str, str]) -> None:
    text = retry_instruction(quiet, kind, **facts)  # type: ignore[arg-type]
    golden(GOLDENS / f"{name}.txt", text + "\n")


def test_both_texts_compile_into_their_sections(
    quiet: PromptCompiler, golden: Callable[[Path, str], None], tmp_path: Path
) -> None:
    payload = quiet.compile(PromptCompileInput(
        workspace_root=tmp_path,
        extra_system=runtime_block(quiet, now=NOW, system="Linux"),
        retry_instruction=retry_instruction(quiet, "tool_retry", tool="grep_files",
                                            reason="no such folder: src/"),
    ))
    golden(GOLDENS / "dynamic-text.txt", payload.dynamic_system_text + "\n")
    assert payload.manifest.section_ids[-2:] == ["retry_runtime_instruction", "extra_system"]


# -- the clock granularity -----------------------------------------------------------------

ZONES = st.sampled_from([UTC, timezone(timedelta(hours=-3, minutes=-30)), OSLO,
                         ZoneInfo("America/New_York"), ZoneInfo("Australia/Lord_Howe")])
WALL = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2199, 12, 31))


def _bucket_start(moment: datetime, granularity: str) -> datetime:
    cut = {"minute": {"second": 0}, "hour": {"minute": 0, "second": 0},
           "day": {"hour": 0, "minute": 0, "second": 0}}[granularity]
    return moment.replace(microsecond=0, **cut)  # type: ignore[arg-type]


DAY_US = 86_400 * 10**6


@given(granularity=st.sampled_from(CLOCK_GRANULARITIES), zone=ZONES, wall=WALL,
       a=st.integers(0, DAY_US - 1), b=st.integers(0, DAY_US - 1))
def test_two_instants_of_one_bucket_give_identical_bytes(
    quiet: PromptCompiler, granularity: ClockGranularity, zone: timezone, wall: datetime,
    a: int, b: int,
) -> None:
    # Two local wall-clock instants from the start of one minute, hour or day to its end.
    start = _bucket_start(wall, granularity)
    length = BUCKET[granularity] // timedelta(microseconds=1)
    first, second = (
        (start + timedelta(microseconds=offset % length)).replace(tzinfo=zone)
        for offset in (a, b)
    )
    texts = {runtime_block(quiet, now=moment, granularity=granularity, system="Linux")
             .encode("utf-8") for moment in (first, second)}
    assert len(texts) == 1


@given(granularity=st.sampled_from(CLOCK_GRANULARITIES), wall=WALL,
       later=st.integers(1, 10_000))
def test_instants_of_different_buckets_differ(
    quiet: PromptCompiler, granularity: ClockGranularity, wall: datetime, later: int
) -> None:
    first = wall.replace(tzinfo=UTC)
    second = first + BUCKET[granularity] * later
    assert runtime_block(quiet, now=first, granularity=granularity, system="Linux") != (
        runtime_block(quiet, now=second, granularity=granularity, system="Linux"))


def test_the_time_is_cut_down_to_the_granularity(quiet: PromptCompiler) -> None:
    lines = {g: runtime_block(quiet, now=NOW, granularity=g).split("\n")[2]
             for g in CLOCK_GRANULARITIES}
    assert lines == {"minute": "- Local time: 10:59 CET (rounded down to the minute)",
                     "hour": "- Local time: 10:00 CET (rounded down to the hour)",
                     "day": "- Time zone: CET"}


def test_the_zone_is_the_one_of_the_bucket_start(quiet: PromptCompiler) -> None:
    # Oslo moves to summer time at 02:00 on 29 March 2026: the whole day is told by its
    # start, in winter time, so the text does not change at the switch.
    before = datetime(2026, 3, 29, 1, 30, tzinfo=OSLO)
    after = datetime(2026, 3, 29, 14, 0, tzinfo=OSLO)
    assert after.tzname() == "CEST"
    day = {runtime_block(quiet, now=m, granularity="day", system="Linux") for m in (before, after)}
    assert day == {"## Runtime\n- Date: Sunday, 2026-03-29\n- Time zone: CET\n"
                   "- Operating system: Linux"}


def test_a_naive_now_is_local_time(quiet: PromptCompiler) -> None:
    naive = datetime(2026, 12, 1, 10, 59)
    assert runtime_block(quiet, now=naive, granularity="minute") == runtime_block(
        quiet, now=naive.astimezone(), granularity="minute")


def test_without_now_the_clock_is_read(quiet: PromptCompiler) -> None:
    for _ in range(3):  # a day may end between the two readings: read again
        expected = runtime_block(quiet, now=datetime.now().astimezone(), granularity="day")
        if runtime_block(quiet, granularity="day") == expected:
            return
    pytest.fail("the runtime block without now is not the current day's")


def test_the_system_defaults_to_this_machine(quiet: PromptCompiler) -> None:
    import platform

    shown = {"Darwin": "macOS"}.get(platform.system(), platform.system())
    assert runtime_block(quiet, now=NOW).endswith(f"\n- Operating system: {shown}")


@pytest.mark.parametrize(("system", "shown"), [
    ("Darwin", "macOS"), ("Linux", "Linux"), ("Windows", "Windows"), ("", "unknown"),
])
def test_a_given_system_is_shown_as_users_know_it(quiet: PromptCompiler, system: str,
                                                   shown: str) -> None:
    block = runtime_block(quiet, now=NOW, system=system)
    assert block.endswith(f"\n- Operating system: {shown}")


# -- the setting ---------------------------------------------------------------------------


def test_the_default_granularity_is_the_hour() -> None:
    assert PioneerSettings().clock_granularity == "hour"


def test_the_setting_decides_the_granularity(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PIONEER_CLOCK_GRANULARITY", "minute")
    assert "10:59 CET" in runtime_block(PromptCompiler(count_tokens=False), now=NOW)
    monkeypatch.delenv("PIONEER_CLOCK_GRANULARITY")
    (tmp_path / "pioneer.toml").write_text('clock_granularity = "day"\n')
    compiler = PromptCompiler(settings=PioneerSettings.load(), count_tokens=False)
    assert "- Time zone: CET" in runtime_block(compiler, now=NOW)
    assert "10:59" in runtime_block(compiler, now=NOW, granularity="minute")


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_bad_granularity_in_the_file_is_named_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text('# clock\nclock_granularity = "second"\n')
    assert _cli("check")[::2] == (1, (
        "pioneer.toml:2: clock_granularity: Input should be 'minute', 'hour' or 'day'\n"
        "error: 1 problem\n"
    ))


def test_a_bad_granularity_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_CLOCK_GRANULARITY", "Hour")
    assert _cli("check")[::2] == (1, (
        "settings → clock_granularity: Input should be 'minute', 'hour' or 'day'\n"
        "error: 1 problem\n"
    ))


# -- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: runtime_block(c, granularity="second"),  # type: ignore[arg-type]
         "granularity: expected one of minute, hour, day (got 'second')"),
        (lambda c: runtime_block(c, now="2026-12-01"),  # type: ignore[arg-type]
         "now: expected a datetime (got str)"),
        (lambda c: retry_instruction(c, "tool_retri"),  # type: ignore[arg-type]
         "kind: unknown kind 'tool_retri' (did you mean \"tool_retry\"?)"),
        (lambda c: retry_instruction(c, "sleep"),  # type: ignore[arg-type]
         "kind: unknown kind 'sleep' (known: tool_retry, tool_exhausted, final_answer)"),
        (lambda c: retry_instruction(c, "tool_retry", tool="web_fetch"),
         "reason: tool_retry needs the error the tool gave"),
        (lambda c: retry_instruction(c, "tool_exhausted", tool=" ", reason=""),
         "tool: tool_exhausted needs the name of the tool that failed\n"
         "reason: tool_exhausted needs the error the tool gave"),
        (lambda c: retry_instruction(c, "final_answer", tool="web_fetch"),
         "tool: final_answer takes no tool (it ends the tool loop): leave tool out"),
    ],
    ids=["granularity", "now", "kind-typo", "kind-unknown", "no-reason", "blank-facts",
         "final-with-tool"],
)
def test_bad_arguments_are_refused_plainly(
    quiet: PromptCompiler, call: Callable[[PromptCompiler], str], message: str
) -> None:
    with pytest.raises(InputError) as info:
        call(quiet)
    assert "\n".join(p.render() for p in info.value.problems) == message


# -- templates -----------------------------------------------------------------------------


def test_a_deployment_template_replaces_the_words(tmp_path: Path) -> None:
    (tmp_path / "renderers").mkdir()
    (tmp_path / "renderers" / "runtime.md.j2").write_text(
        "{% macro block(date, weekday, time, zone, granularity, system) %}"
        "## Clock\n{{ date }} {{ time }} {{ zone }}{% endmacro %}"
    )
    compiler = PromptCompiler(template_path=[tmp_path], count_tokens=False)
    assert runtime_block(compiler, now=NOW) == "## Clock\n2026-12-01 10:00 CET"


def test_the_template_runs_sandboxed(tmp_path: Path) -> None:
    (tmp_path / "renderers").mkdir()
    (tmp_path / "renderers" / "retry_instruction.md.j2").write_text(
        "{% macro final_answer(reason) %}{{ reason.__class__.__mro__ }}{% endmacro %}"
    )
    compiler = PromptCompiler(template_path=[tmp_path], count_tokens=False)
    with pytest.raises(TemplateError) as info:
        retry_instruction(compiler, "final_answer", reason="x")
    assert str(info.value).startswith(f"{tmp_path}/renderers/retry_instruction.md.j2:1: ")


# -- the command line ----------------------------------------------------------------------


def test_compile_runtime_block_puts_the_block_in_extra_system(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PIONEER_CLOCK_GRANULARITY", "day")
    (tmp_path / "turn.json").write_text('{"extra_system": "Be brief."}')
    for _ in range(3):  # the day may end between the compile and the expected text
        code, out, _ = _cli("compile", "--home", "home", "--input", "turn.json",
                            "--runtime-block", "--json")
        expected = runtime_block(PromptCompiler(count_tokens=False))
        if expected in out:
            break
    assert code == 0
    sections = {s["id"]: s["text"] for s in __import__("json").loads(out)["sections"]}
    assert sections["extra_system"] == f"## Extra System\n{expected}\n\nBe brief."


def test_compile_without_the_option_has_no_runtime_block() -> None:
    code, out, _ = _cli("compile", "--home", "home")
    assert code == 0 and "## Runtime" not in out
