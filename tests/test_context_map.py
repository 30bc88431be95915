"""The context map: ``inspect --html`` / ``--json`` data (a golden), the page opened from
disk in headless Chromium (Debian's ``chromium``; .ci/run installs it): blocks, order and
tokens against the manifest and the cache plan, every total the sum of its rows (the
header, the legend, the window by category, the history budget), each block's text
behind a click and never markup, labelled strip blocks, keyboard and hover details, no
console errors, no network, readable without JavaScript, a screenshot that is not blank;
``explain --html`` beside what ``explain`` prints; and text ``inspect`` with
``--messages`` / ``--tools``."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from playwright.sync_api import Browser, Page, sync_playwright
from support import compile_round, run_cli

from pioneer import HistoryLimits, InputError, PromptCompileInput, PromptCompiler, ToolSpec
from pioneer.audit import HistorySnapshot, ReportedUsage, TurnRecord, TurnRecords
from pioneer.audit.cache_report import CacheBlock, CachePlan, plan_cache, request_blocks
from pioneer.compile.inputs import load_compile_input
from pioneer.compile.manifest import PromptManifest
from pioneer.history import HistoryBudgeter, SqliteStore
from pioneer.providers import (
    ChatMessage,
    ChatRequest,
    ToolCall,
    build_request_body,
    load_chat_request,
)
from pioneer.providers.models import model_facts
from pioneer.review import context_map, map_page
from pioneer.tools import ToolCatalog, TurnTools
from pioneer.turn import TurnAudit

CASE = Path(__file__).parent / "context_map"
GOLDENS = Path(__file__).parent / "goldens" / "context_map"
CHROMIUM = "/usr/bin/chromium"
PIONEER = Path(sys.executable).with_name("pioneer")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The case's runtime home copied to a fixed-depth folder, settings from defaults."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("PIONEER_")]:
        monkeypatch.delenv(name)
    shutil.copytree(CASE / "home", tmp_path / "home")
    return tmp_path


def _inspect(case: Path, *extra: str) -> tuple[int, str, str]:
    # A relative home (the test runs in ``case``) keeps the headings, so the counts, fixed.
    return run_cli("inspect", "--home", "home", "--input", str(CASE / "input.json"),
                   "--messages", str(CASE / "messages.json"), "--html", str(case / "ctx.html"),
                   *extra)


def test_the_json_data_behind_the_page(case: Path, golden: Callable[[Path, str], None]) -> None:
    code, out, err = _inspect(case, "--json")
    assert code == 0, err
    assert err == f"wrote {case / 'ctx.html'}: 17 blocks, 5576 tokens (1441 expected from cache)\n"
    golden(GOLDENS / "inspect.json", out.replace(str(case), "<case>"))
    page = (case / "ctx.html").read_text("utf-8")
    embedded = page.split('<script type="application/json" id="context-map-data">')[1]
    assert json.loads(embedded.split("</script>")[0]) == json.loads(out)


def _expected(case: Path) -> tuple[list[dict[str, Any]], ChatRequest, CachePlan]:
    """The blocks as the manifest and the cache plan say they must be, worked out apart
    from the page: the plan of the request against the one the previous turn sent (the
    summary and its own message, other dynamic text), its stable and dynamic blocks
    opened into the manifest's sections."""
    compiler = PromptCompiler(count_tokens=True)
    compile_input = load_compile_input(CASE / "input.json").model_copy(
        update={"workspace_root": Path("home")})
    payload = compiler.compile(compile_input)
    request = load_chat_request(CASE / "messages.json", compiled_prompt=payload)
    before = request.model_copy(update={
        "messages": request.messages[:2],
        "compiled_prompt": payload.model_copy(update={"dynamic_system_text": "Sunday."}),
    })

    def blocks(of: ChatRequest) -> list[CacheBlock]:
        return request_blocks("anthropic", of, build_request_body("anthropic", of))

    plan = plan_cache("anthropic", request.model, blocks(request), [blocks(before)])
    return _rows(plan, payload.manifest), request, plan


_STATUS = {"cached": "read", "written": "written", "uncached": "uncached"}


def _rows(plan: CachePlan, manifest: PromptManifest) -> list[dict[str, Any]]:
    """The plan's blocks, the stable and dynamic ones opened into the manifest's sections
    and, where the block counted whole has more tokens than its sections counted one by
    one, a framing row with the difference."""
    rows: list[dict[str, Any]] = []
    for block in plan.blocks:
        if block.kind in ("stable", "dynamic"):
            inside = [s for s in manifest.sections if s.stability == block.kind]
            rows += [{"kind": s.stability, "id": s.id, "tokens": s.tokens,
                      "truncated": s.truncated, "cache": _STATUS[block.status]}
                     for s in inside]
            rest = block.tokens - sum(s.tokens or 0 for s in inside)
            if rest:
                rows.append({"kind": "framing", "id": f"{block.label} framing",
                             "tokens": rest, "truncated": False,
                             "cache": _STATUS[block.status]})
        else:
            rows.append({"plan_kind": block.kind, "id": block.label.removeprefix("tool "),
                         "tokens": block.tokens, "cache": _STATUS[block.status]})
    return rows


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=FLAGS)
        yield launched
        launched.close()


class Opened:
    def __init__(self, page: Page, console: list[str], requests: list[str]):
        self.page, self.console, self.requests = page, console, requests


@pytest.fixture
def opened(case: Path, browser: Browser) -> Iterator[Opened]:
    code, _, err = _inspect(case)
    assert code == 0, err
    yield from _open(browser, case / "ctx.html", javascript=True)


def _open(browser: Browser, path: Path, *, javascript: bool) -> Iterator[Opened]:
    context = browser.new_context(java_script_enabled=javascript,
                                  viewport={"width": 1280, "height": 900})
    page = context.new_page()
    console: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in (
        "error", "warning") else None)
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    yield Opened(page, console, requests)
    context.close()


def _blocks(page: Page) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.eval_on_selector_all(
        ".strip .block", "els => els.map(e => ({...e.dataset, width: "
        "e.getBoundingClientRect().width}))")
    return found


def test_the_page_shows_every_block_in_provider_order_with_its_tokens(
    opened: Opened, case: Path,
) -> None:
    expected, _, _ = _expected(case)
    shown = _blocks(opened.page)
    assert [b["id"] for b in shown] == [e["id"] for e in expected]
    kinds = {"tools": "tools", "summary": "summary", "history": "history", "turn": "current"}
    for block, want in zip(shown, expected, strict=True):
        assert int(block["tokens"]) == want["tokens"], block["id"]
        if "plan_kind" in want:  # a block of the body, counted as the plan counts it
            assert block["kind"] in (kinds[want["plan_kind"]], "round"), block["id"]
        else:  # a section, counted as the manifest counts it
            assert block["kind"] == want["kind"]
            assert block["truncated"] == ("yes" if want["truncated"] else "no")
    assert [b["kind"] for b in shown][-3:] == ["current", "round", "round"]
    assert shown[[b["id"] for b in shown].index("release_notes")]["truncated"] == "yes"
    # the table has the same blocks, in the same order, with the same numbers
    rows = opened.page.eval_on_selector_all(
        "#blocks tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert [(r[1], r[2], r[3], r[6]) for r in rows] == [
        (b["kind"], b["title"], b["id"], b["tokens"]) for b in shown]
    total = sum(int(b["tokens"]) for b in shown)
    assert opened.page.text_content("#total-tokens") == str(total)
    history = sum(int(b["tokens"]) for b in shown if b["kind"] in ("summary", "history"))
    assert opened.page.text_content("#history-tokens") == str(history)
    assert opened.page.get_attribute("#history-window .line", "style") == "left:80%"
    reserve = opened.page.get_attribute("#window .part-reserve", "style")
    window = model_facts("claude-sonnet-4-5").context_window
    assert reserve == f"width:{100 * 16_000 / window:.2f}%"
    assert opened.console == [] and _only_the_file(opened.requests, case)


def test_the_cache_status_of_each_block_is_the_plans(opened: Opened, case: Path) -> None:
    expected, _, plan = _expected(case)
    shown = _blocks(opened.page)
    assert [b["cache"] for b in shown] == [e["cache"] for e in expected]
    # the previous turn sent the tools, the stable sections, the summary and its own
    # message (now history): that prefix is read from cache, and Anthropic writes the
    # rest at its marks
    newest = next(i for i, b in enumerate(shown) if b["kind"] == "history")
    assert [b["kind"] for b in shown[:newest]][-1] == "summary"
    assert {b["cache"] for b in shown[:newest]} == {"read"}
    assert {b["cache"] for b in shown[newest:]} == {"written"}
    for status, tokens in (("read", plan.cached_tokens), ("written", plan.written_tokens),
                           ("uncached", plan.uncached_tokens)):
        assert opened.page.text_content(f"#plan-{status}") == str(tokens)
    assert plan.cached_tokens > 1024 and plan.uncached_tokens == 0


def test_blocks_are_sized_by_their_tokens(opened: Opened) -> None:
    shown = [b for b in _blocks(opened.page) if int(b["tokens"]) > 500]
    assert len(shown) >= 2
    first, second = shown[0], shown[1]
    ratio = (first["width"] / second["width"]) / (int(first["tokens"]) / int(second["tokens"]))
    assert 0.9 < ratio < 1.1


def test_keyboard_and_hover_show_a_blocks_details(opened: Opened) -> None:
    page = opened.page
    page.focus(".strip .block")
    assert "grep" in (page.text_content("#details") or "")  # tools go by name
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    focused = page.evaluate("document.activeElement.dataset.id")
    assert focused == "assistant_safety"  # after grep, read_file and identity_base
    details = page.text_content("#details") or ""
    assert "assistant_safety" in details and "template: assistant_safety.md.j2" in details
    assert "origin: built-in" in details
    assert page.get_attribute("#row-3", "class") == "cache-read-row current"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.dataset.id") == "messages[4] (user) block 0"
    page.hover(".block.kind-stable[data-id='soul_core']")
    details = page.text_content("#details") or ""
    assert "from: bootstrap file SOUL.md" in details and "file_status: loaded" in details
    page.hover(".block[data-id='release_notes']")
    details = page.text_content("#details") or ""
    assert "truncated" in details and "dynamic_section_truncated" in details
    assert opened.console == []


def test_without_javascript_the_picture_and_the_table_are_there(
    case: Path, browser: Browser,
) -> None:
    assert _inspect(case)[0] == 0
    for opened in _open(browser, case / "ctx.html", javascript=False):
        page = opened.page
        assert page.evaluate("1") == 1  # evaluate still runs; the page's own script did not
        assert page.get_attribute("html", "class") is None
        shown = _blocks(page)
        assert len(shown) == 17 and all(b["width"] >= 4 for b in shown)
        assert page.locator("#blocks tbody tr").count() == 17
        title = page.get_attribute(".block[data-id='soul_core']", "title") or ""
        assert "template bootstrap_file.md.j2" in title and "cache read" in title


def _distinct_bytes(png: bytes) -> int:
    """How many distinct byte values the decoded image data holds (a blank page: few)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, data = 8, b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position:position + 4])
        kind = png[position + 4:position + 8]
        if kind == b"IDAT":
            data += png[position + 8:position + 8 + length]
        position += 12 + length
    return len(set(zlib.decompress(data)))


def test_the_screenshot_is_not_blank(opened: Opened, browser: Browser, tmp_path: Path) -> None:
    shot = opened.page.screenshot(full_page=True)
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title>")
    for empty in _open(browser, blank, javascript=True):
        control = empty.page.screenshot()
    assert _distinct_bytes(control) < 8
    assert _distinct_bytes(shot) > 64


def _only_the_file(requests: list[str], case: Path) -> bool:
    return requests == [(case / "ctx.html").as_uri()]


def test_an_unwritable_page_is_a_clear_error(case: Path) -> None:
    code, _, err = run_cli("inspect", "--home", str(case / "home"), "--html",
                           str(case / "missing" / "ctx.html"))
    assert code == 1
    assert err == (f"{case / 'missing' / 'ctx.html'}: cannot write the context map: "
                   "No such file or directory\nerror: 1 problem\n")


def _console(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``pioneer ARGV...`` through the installed console script."""
    return subprocess.run([str(PIONEER), *argv], cwd=cwd, text=True, capture_output=True,
                          timeout=120, check=False)


def test_messages_without_a_model_say_that_the_model_is_missing(case: Path) -> None:
    conversation = json.loads((CASE / "messages.json").read_text())
    del conversation["model"]
    (case / "messages.json").write_text(json.dumps(conversation))
    for extra in ([], ["--html", "ctx.html"]):
        done = _console("inspect", "--home", "home", "--messages", "messages.json", *extra,
                        cwd=case)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == ('--messages needs --model: messages.json sets no "model"\n'
                               "error: 1 problem\n(run `pioneer inspect --help` for usage)\n")
    assert run_cli("inspect", "--home", "home", "--messages", "messages.json", "--model",
                   "claude-sonnet-4-5")[0] == 0


def _columns(line: str) -> list[str]:
    return line.split()


def test_text_inspect_prints_the_tools_and_messages_of_the_request(
    case: Path, golden: Callable[[Path, str], None],
) -> None:
    code, out, err = run_cli("inspect", "--home", "home", "--input", str(CASE / "input.json"),
                             "--messages", str(CASE / "messages.json"))
    assert (code, err) == (0, "")
    golden(GOLDENS / "inspect-messages.txt", out)
    table, _, request = out.partition("\n\nrequest for anthropic, model claude-sonnet-4-5: ")
    lines = request.splitlines()
    cut = lines[1].index("KIND")  # the BLOCK column holds titles with spaces
    rows = [(line[:cut].strip(), *_columns(line[cut:])[:2]) for line in
            itertools.takewhile(lambda line: not line.startswith("cache:"), lines[2:])]
    assert {title for title, _, _ in rows} >= {
        "tool grep", "tool read_file", "history summary", "user (history)",
        "user message (this turn)"}
    # each category of the summary is the sum of its rows: the sections of the table
    # above (and their framing), the tools, the history, this turn
    section_rows = itertools.takewhile(lambda line: not line.startswith("stable   "),
                                       table.splitlines()[2:])
    sections = sum(int(_columns(line)[3]) for line in section_rows
                   if _columns(line)[3].isdigit())
    by_kind: dict[str, int] = {}
    for _, kind, tokens in rows:
        by_kind[kind] = by_kind.get(kind, 0) + int(tokens)
    summary = {line[:25].strip(): int(_columns(line[25:])[0])
               for line in lines if line.startswith("  ")}
    assert summary["system prompt"] == sections + by_kind.get("framing", 0)
    assert summary["tools"] == by_kind["tools"]
    assert summary["history"] == by_kind["summary"] + by_kind["history"]
    assert summary["this turn"] == by_kind["current"] + by_kind["round"]
    assert sum(summary.values()) == model_facts("claude-sonnet-4-5").context_window


def test_tools_of_their_own_replace_those_of_the_messages_file(case: Path) -> None:
    (case / "tools.json").write_text(json.dumps([
        {"name": "deploy", "description": "Roll out a build.",
         "parameters": {"type": "object", "properties": {"build": {"type": "integer"}}}}]))
    code, out, err = run_cli("inspect", "--home", "home", "--messages",
                             str(CASE / "messages.json"), "--tools", "tools.json", "--json")
    assert (code, err) == (0, "")
    blocks = json.loads(out)["request"]["blocks"]
    tools = [b for b in blocks if b["kind"] == "tools"]
    assert [(b["id"], b["text"]) for b in tools] == [("deploy", json.dumps(
        {"description": "Roll out a build.", "input_schema": {
            "properties": {"build": {"type": "integer"}}, "type": "object"},
         "name": "deploy"}, sort_keys=True))]
    code, out, _ = run_cli("inspect", "--home", "home", "--tools", "tools.json", "--model",
                           "claude-sonnet-4-5")
    assert code == 0 and "\ntool deploy  tools" in out
    (case / "tools.json").write_text('[{"name": "1deploy"}]')
    code, _, err = run_cli("inspect", "--home", "home", "--tools", "tools.json", "--model", "m")
    assert code == 1 and err.startswith("tools.json: tools[0] → name: must match")
    # a definition in a provider's own shape names the fields a tool has
    (case / "tools.json").write_text('[{"name": "deploy", "input_schema": {"type": "object"}}]')
    code, _, err = run_cli("inspect", "--home", "home", "--tools", "tools.json", "--model", "m")
    assert (code, err) == (1, "tools.json: tools[0] → input_schema: unknown field (known: name, "
                              "description, parameters)\nerror: 1 problem in tools.json\n")


# -- explain --html: a stored turn, one row per provider round --------------------------


def _stored_turn(case: Path) -> TurnRecord:
    """An agent turn of two rounds over a stored history; only round 1's usage reported."""
    compiler = PromptCompiler()
    with SqliteStore(case / "pioneer.db") as store:
        store.ensure_thread("t", model="m")
        for n in range(3):
            store.add_turn("t", turn_id=f"old-{n}", user_text=f"question {n} " * 300,
                           assistant_text=f"answer {n} " * 400)
        decision = HistoryBudgeter(store, HistoryLimits.from_tokens(128_000, 16_000)).build("t")
        tools = TurnTools(ToolCatalog.build([ToolSpec(name="read_file"),
                                             ToolSpec(name="memory_search")]))
        audit = TurnAudit("turn-9", "t", "agent", history=HistorySnapshot.from_decision(decision))
        messages = [ChatMessage(role=m.role, content=m.content) for m in decision.messages]
        messages.append(ChatMessage.user("What do I like?"))
        compile_input = PromptCompileInput(workspace_root=Path("home"), dynamic_context="Monday.")
        calls = [ToolCall(id="c1", name="request_tools",
                          arguments={"domains": ["memory"], "reason": "recall a preference"})]
        for number in (1, 2):
            round_ = tools.next_round()
            payload = compile_round(compiler, compile_input, hidden_tool_domains=round_.hidden)
            request = round_.apply(ChatRequest(model="m", compiled_prompt=payload,
                                               messages=messages))
            audit.add_round(payload.manifest, request, "anthropic",
                            build_request_body("anthropic", request), round_)
            if number == 1:
                audit.report_usage(1, ReportedUsage.from_response("anthropic", {
                    "input_tokens": 40, "cache_read_input_tokens": 3000,
                    "cache_creation_input_tokens": 900, "output_tokens": 25}))
                messages.append(ChatMessage.assistant(tool_calls=calls))
                outcome = tools.decide(calls[0])
                assert outcome.result is not None
                messages.append(ChatMessage(role="tool", tool_result=outcome.result))
        store.add_turn("t", turn_id="turn-9", user_text="What do I like?",
                       assistant_text="Tables.")
        record = audit.record(tools.calls)
        TurnRecords(store).save(record)
    return record


def test_explain_html_maps_the_stored_turn_round_by_round(
    case: Path, browser: Browser, golden: Callable[[Path, str], None],
) -> None:
    record = _stored_turn(case)
    code, out, err = run_cli("explain", "turn-9", "--db", str(case / "pioneer.db"),
                             "--html", str(case / "turn.html"), "--json")
    assert (code, err) == (0, f"wrote {case / 'turn.html'}: 17 blocks, 2 provider rounds\n")
    golden(GOLDENS / "explain.json", out)
    last = record.rounds[-1]
    assert last.cache is not None and record.rounds[0].cache is not None
    sections = {s.id: s.tokens for s in last.manifest.sections}
    expected = [(row["id"], row["tokens"]) for row in _rows(last.cache, last.manifest)]
    for opened in _open(browser, case / "turn.html", javascript=True):
        page = opened.page
        shown = _blocks(page)
        assert [(b["id"], int(b["tokens"])) for b in shown] == expected
        assert [int(b["tokens"]) for b in shown if b["kind"] == "stable"] == [
            sections[b["id"]] for b in shown if b["kind"] == "stable"]
        rows = page.eval_on_selector_all(
            "#rounds tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
        planned = [[str(n) for n in (p.cached_tokens, p.written_tokens, p.uncached_tokens)]
                   for p in (r.cache for r in record.rounds) if p is not None]
        # a record written without the window: its fit shows dashes
        assert rows == [["1", *planned[0], "3940", "3000", "900", "25", *"-----"],
                        ["2", *planned[1], "-", "-", "-", "-", *"-----"]]
        # round 2 shows a tool round 1 did not: the tools come first in the request, so
        # nothing round 1 cached can be read back
        data = json.loads(out)
        assert data["rounds"][1]["planned"]["read"] == 0
        assert {b["cache"] for b in shown} == {"written"}
        assert opened.console == []


def test_a_record_without_cache_plans_is_mapped_from_its_counts(case: Path) -> None:
    record = _stored_turn(case)
    bare = record.model_copy(update={
        "rounds": [r.model_copy(update={"cache": None}) for r in record.rounds]})
    cmap = context_map.map_turn(bare, budget=(128_000, 16_000))
    tools = [b for b in cmap.blocks if b.kind == "tools"]
    assert [b.id for b in tools] == record.rounds[-1].visible_tools
    assert {b.tokens for b in tools} == {None}  # the record alone has no count for them
    sections = [b for b in cmap.blocks if b.kind in ("stable", "dynamic")]
    assert [(b.id, b.tokens) for b in sections] == [
        (s.id, s.tokens) for s in record.rounds[-1].manifest.sections]
    assert cmap.plan is None and cmap.rounds[0].reported is not None
    assert cmap.notes[0].startswith("the record keeps no token counts for tool definitions")


def test_a_section_names_its_template_and_the_folder_it_came_from(case: Path) -> None:
    folder = case / "deploy_templates"
    folder.mkdir()
    (folder / "identity_base.md.j2").write_text("You are the Acme assistant.\n")
    code, out, err = run_cli("inspect", "--home", "home", "--template-path", str(folder),
                             "--html", str(case / "ctx.html"), "--json")
    assert code == 0, err
    blocks = {b["id"]: b for b in json.loads(out)["blocks"]}
    # The deployment wrote that text: its source is "text", the shipped one's "builtin".
    assert blocks["identity_base"]["source"] == {
        "from": "deployment text", "template": "identity_base.md.j2",
        "origin": f"deployment folder {folder}"}
    assert blocks["assistant_safety"]["source"]["from"] == "built-in text"
    assert blocks["assistant_safety"]["source"]["origin"] == "built-in"
    assert blocks["soul_core"]["source"] == {
        "from": "bootstrap file SOUL.md", "template": "bootstrap_file.md.j2",
        "origin": "built-in", "file": "home/SOUL.md", "file_status": "loaded"}


@pytest.mark.parametrize(("provider", "model"), [
    ("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-2.5-pro"), ("anthropic", "claude-sonnet-9")])
def test_the_window_and_the_minimum_are_the_models(
    case: Path, browser: Browser, provider: str, model: str,
) -> None:
    facts = model_facts(model, provider)
    code, _, err = run_cli("inspect", "--home", "home", "--provider", provider, "--model",
                           model, "--html", str(case / "ctx.html"))
    assert code == 0, err
    for opened in _open(browser, case / "ctx.html", javascript=True):
        page = opened.page
        assert int(page.text_content("#context-window") or "") == facts.context_window
        assert int(page.text_content("#minimum-tokens") or "") == facts.min_cacheable_tokens
        words = page.text_content("#window-text") or ""
        assert f"from the model table: {facts.row}, models/models.toml" in words
        assert ("is not in the model table" in words) is (not facts.matched)
        prefix = int(page.text_content("#stable-prefix") or "")
        assert ("long enough to cache" in words) is (prefix >= facts.min_cacheable_tokens)
    assert {model_facts(m).context_window for m in ("claude-sonnet-4-5", "gemini-2.5-pro")} \
        == {200_000, 1_048_576}  # the rows differ, so the page cannot pass on one number


def test_a_deployments_model_row_sets_the_window(case: Path) -> None:
    (case / "models.toml").write_text(
        '[[models]]\nmodel = "acme-7"\nfamily = "claude-sonnet"\ncontext_window = 50_000\n'
        'min_cacheable_tokens = 2048\nsource = "our contract"\nsource_date = "2026-11"\n')
    (case / "deploy.toml").write_text('model_path = ["models.toml"]\n')
    code, out, err = run_cli("inspect", "--config", "deploy.toml", "--home", "home", "--model",
                             "acme-7", "--html", str(case / "ctx.html"), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["budget"]["context_window"], data["minimum_tokens"]) == (50_000, 2048)
    assert data["budget"]["window_from"] == "the model table: acme-7, models.toml, 2026-11"


def test_a_partly_cached_block_is_split_row_by_row(case: Path) -> None:
    # OpenAI caches in 128-token steps: the stable message is read up to the last step.
    code, out, err = run_cli("inspect", "--home", "home", "--provider", "openai-chat",
                             "--model", "gpt-5", "--html", str(case / "ctx.html"), "--json")
    data = json.loads(out)
    read = data["plan"]["read"]
    assert code == 0 and read % 128 == 0 and read >= 1024
    blocks = data["blocks"]
    # a row wholly inside the read prefix is read, the one it ends in is read in part
    start = 0
    for block in blocks:
        end = start + block["tokens"]
        assert block["cache"] == ("read" if end <= read else "uncached"), block["id"]
        assert block["split"]["read"] == max(0, min(end, read) - start), block["id"]
        start = end
    assert len([b for b in blocks if 0 < b["split"]["read"] < b["tokens"]]) == 1
    assert sum(b["split"]["read"] for b in blocks) == read == data["totals"]["by_cache"]["read"]
    assert data["totals"]["by_cache"] == data["plan"]
    assert f"the first {read} tokens of messages[0] (system) are read from cache too" in (
        data["notes"][0])
    assert err.endswith(f"({read} expected from cache)\n")


# -- every figure a sum of its rows; texts; labels; explain text beside its page ---------


def _cells(page: Page, selector: str) -> list[list[str]]:
    found: list[list[str]] = page.eval_on_selector_all(
        selector, "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    return found


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat"])
def test_every_total_on_the_page_is_the_sum_of_its_rows(
    case: Path, browser: Browser, provider: str,
) -> None:
    # openai-chat frames each message as JSON (a framing row) and reads its cache in
    # 128-token steps (a row read in part)
    code, _, err = _inspect(case, "--provider", provider)
    assert code == 0, err
    for opened in _open(browser, case / "ctx.html", javascript=True):
        page = opened.page
        shown = _blocks(page)
        total = sum(int(b["tokens"]) for b in shown)
        assert int(page.text_content("#total-tokens") or "") == total
        assert int(page.text_content("#blocks-tokens") or "") == total
        rows = _cells(page, "#blocks tbody tr")
        assert sum(int(r[6]) for r in rows) == total
        for status in ("read", "written", "uncached"):
            assert int(page.text_content(f"#plan-{status}") or "") == sum(
                int(b[status]) for b in shown)
        assert all(int(b["read"]) + int(b["written"]) + int(b["uncached"]) == int(b["tokens"])
                   for b in shown)
        categories = {page.get_attribute(f"#categories tbody tr:nth-child({n})",
                                         "data-category"): int(cells[1])
                      for n, cells in enumerate(_cells(page, "#categories tbody tr"), 1)}
        for name in ("system", "tools", "history", "turn"):
            assert categories[name] == sum(int(b["tokens"]) for b in shown
                                           if b["category"] == name), name
        assert categories["reserve"] == 16_000
        window = int(page.text_content("#context-window") or "")
        assert sum(categories.values()) == window == int(
            page.text_content("#categories-total") or "")
        # the share column adds up as printed: its foot is 100.00%, never 100.01%
        shares = [cells[2] for cells in _cells(page, "#categories tbody tr")]
        assert all(re.fullmatch(r"-?\d+\.\d\d%", share) for share in shares), shares
        assert sum(round(100 * float(share[:-1])) for share in shares) == 10_000
        assert _cells(page, "#categories tfoot tr")[0][2] == "100.00%"
        history = [int(cells[1]) for cells in _cells(page, "#history-rows tbody tr")]
        assert int(page.text_content("#history-tokens") or "") == sum(history) == sum(
            int(b["tokens"]) for b in shown if b["category"] == "history")
        if provider == "openai-chat":
            assert any(b["kind"] == "framing" for b in shown)
            assert any(0 < int(b["read"]) < int(b["tokens"]) for b in shown)
        assert opened.console == []


@given(tokens=st.lists(st.tuples(st.sampled_from(["tools", "stable", "history", "current"]),
                                  st.integers(0, 300_000)), max_size=12),
       window=st.integers(1, 2_000_000), reserve=st.integers(0, 200_000))
def test_the_window_shares_add_up_as_printed(tokens: list[tuple[str, int]], window: int,
                                             reserve: int) -> None:
    # each share to four places (a hundredth of a percent), within one place of the exact
    # share, and together exactly the window, whether the request fits or not
    blocks = tuple(context_map.Block(index=i, kind=kind, id=f"b{i}", title=f"b{i}",
                                     stability="stable", tokens=n, chars=None,
                                     cache="uncached", source={})
                   for i, (kind, n) in enumerate(tokens))
    budget = context_map.Budget(context_window=window, window_from="a test",
                                response_reserve=reserve, history_budget=0,
                                history_threshold=0, history=(), history_counted="request")
    cmap = context_map.ContextMap(title="t", profile="p", profile_fingerprint="f",
                                  profile_file="", provider="anthropic", model="m",
                                  placement="cache-first", blocks=blocks, budget=budget)
    rows = cmap.categories()
    assert sum(row["tokens"] for row in rows) == window
    units = [round(row["share"] * 10_000) for row in rows]
    assert all(abs(row["share"] * 10_000 - unit) < 1e-6
               for row, unit in zip(rows, units, strict=True))
    assert sum(units) == 10_000
    assert all(abs(unit - row["tokens"] * 10_000 / window) < 1
               for row, unit in zip(rows, units, strict=True))


_HOSTILE = ("# Soul\n\nI keep <b>markup</b> & entities (&amp;) as text.\n"
            "</script><script>window.pwned = 1</script>\n"
            '<img src="x" onerror="window.pwned = 2"><!-- a comment -->\n')


def test_a_sections_text_is_behind_a_click_and_never_markup(
    case: Path, browser: Browser,
) -> None:
    (case / "home" / "SOUL.md").write_text(_HOSTILE)
    assert _inspect(case)[0] == 0
    payload = PromptCompiler().compile(load_compile_input(CASE / "input.json").model_copy(
        update={"workspace_root": Path("home")}))
    soul = next(s.text for s in payload.sections if s.id == "soul_core")
    assert "</script><script>window.pwned = 1</script>" in soul
    for opened in _open(browser, case / "ctx.html", javascript=True):
        page = opened.page
        index = page.get_attribute(".block[data-id='soul_core']", "data-index")
        panel = f"#text-{index}"
        assert not page.is_visible(f"{panel} pre")
        page.click(".block[data-id='soul_core']")
        assert page.get_attribute(panel, "open") == ""
        assert page.is_visible(f"{panel} pre")
        assert page.text_content(f"{panel} pre") == soul
        assert page.eval_on_selector(f"{panel} pre", "pre => pre.children.length") == 0
        assert page.evaluate("window.pwned") is None
        # every block of the request has its text, the tools and messages too
        texts = page.eval_on_selector_all("details.text", "ds => ds.map(d => d.id)")
        assert texts == [f"text-{b['index']}" for b in _blocks(page) if b["kind"] != "framing"]
        assert opened.console == [] and _only_the_file(opened.requests, case)
    for opened in _open(browser, case / "ctx.html", javascript=False):
        page = opened.page
        page.click(f"#text-{index} summary")  # the browser's own disclosure, no script
        assert page.text_content(f"#text-{index} pre") == soul


def test_each_block_of_the_strip_is_labelled(opened: Opened) -> None:
    page = opened.page
    labels = page.eval_on_selector_all(".strip .block", """els => els.map(e => ({
        name: e.querySelector('.name').textContent,
        count: e.querySelector('.count').textContent,
        whole: e.querySelector('.name').scrollWidth <= e.querySelector('.name').clientWidth,
        tall: e.querySelector('.name').getBoundingClientRect().height > 0}))""")
    shown = _blocks(page)
    assert [(label["name"], label["count"]) for label in labels] == [
        (b["title"], b["tokens"]) for b in shown]
    wide = [label for label, b in zip(labels, shown, strict=True) if int(b["tokens"]) > 1000]
    assert [label["name"] for label in wide] == ["Soul Core", "Release Notes"]
    assert all(label["whole"] and label["tall"] for label in wide)


def _explain_text_figures(text: str) -> dict[str, Any]:
    """The numbers ``pioneer explain`` prints: the history sent, each section's tokens
    and each round's cache plan."""
    history = re.search(r"sent \d+ turns in \d+ messages, (\d+) tokens", text)
    assert history is not None
    sections = {m[1]: int(m[2]) for m in re.finditer(
        r"^ {5}(?:stable|dynamic) +(\S+) +\d+ chars +(\d+) tokens", text, re.MULTILINE)}
    plans = [tuple(int(n.replace(",", "")) for n in m.groups()) for m in re.finditer(
        r"cache plan: ([\d,]+) of ([\d,]+) tokens cached \(\d+%\), ([\d,]+) written, "
        r"([\d,]+) uncached", text)]
    return {"history": int(history[1]), "sections": sections, "plans": plans}


def test_explain_says_on_its_page_what_it_prints(case: Path, browser: Browser) -> None:
    record = _stored_turn(case)
    code, text, _ = run_cli("explain", "turn-9", "--db", str(case / "pioneer.db"))
    assert code == 0
    said = _explain_text_figures(text)
    assert len(said["plans"]) == len(record.rounds) == 2 and said["sections"]
    assert run_cli("explain", "turn-9", "--db", str(case / "pioneer.db"), "--html",
                   str(case / "turn.html"))[0] == 0
    for opened in _open(browser, case / "turn.html", javascript=True):
        page = opened.page
        assert int(page.text_content("#history-tokens") or "") == said["history"]
        rows = {r[3]: r for r in _cells(page, "#blocks tbody tr")}
        # explain prints round 1's manifest, the page draws round 2, which no longer has
        # the hidden tool domains (round 1 granted them)
        shared = [name for name in said["sections"] if name in rows]
        assert set(said["sections"]) - set(shared) == {"request_tools.hidden_domains"}
        assert {name: int(rows[name][6]) for name in shared} == {
            name: said["sections"][name] for name in shared}
        rounds = [[int(cell) for cell in r[1:4]] for r in _cells(page, "#rounds tbody tr")]
        assert rounds == [[read, written, uncached]
                          for read, _, written, uncached in said["plans"]]
        read, total, written, uncached = said["plans"][-1]  # the blocks are the last round's
        assert int(page.text_content("#total-tokens") or "") == total
        assert [int(page.text_content(f"#plan-{s}") or "") for s in (
            "read", "written", "uncached")] == [read, written, uncached]
        # titles, not ids, in the title column
        titles = {s.id: s.title for s in compile_round(PromptCompiler(), PromptCompileInput(
            workspace_root=Path("home"), dynamic_context="Monday.")).sections}
        assert {name: rows[name][2] for name in shared} == {
            name: titles[name] for name in shared}
        assert rows["soul_core"][2] == "Soul Core"
        assert page.text_content("#no-text") == (
            "No text: a turn record keeps counts and digests, not text: pioneer inspect "
            "--html with the turn's input shows each section's text.")
        # a command in the page's prose is set as code, not shown in backticks
        assert "`" not in (page.text_content("body") or "").split("The text of each block")[0]
        assert page.text_content("#no-text code") == "pioneer inspect --html"
        assert page.text_content("#budget-text code") == "pioneer explain"


def test_markup_in_an_id_or_title_cannot_swallow_the_page_script(
    case: Path, browser: Browser,
) -> None:
    """``<!--<script>`` in the embedded JSON would put the page's own script inside it (the
    HTML parser's double-escaped script state): every ``<`` there is ``\\u003c``."""
    hostile = "x<!--<script>"
    given = json.loads((CASE / "input.json").read_text())
    given["runtime_sections"] = [{"id": "notes", "title": f"Notes {hostile}",
                                  "content": f"See {hostile} and </script> here."}]
    (case / "input.json").write_text(json.dumps(given))
    code, _, err = run_cli("inspect", "--home", "home", "--input", str(case / "input.json"),
                           "--html", str(case / "ctx.html"))
    assert code == 0, err
    page_text = (case / "ctx.html").read_text("utf-8")
    embedded = page_text.split('id="context-map-data">')[1].split("</script>")[0]
    assert "<" not in embedded and "\\u003c!--\\u003cscript>" in embedded
    for opened in _open(browser, case / "ctx.html", javascript=True):
        page = opened.page
        assert page.get_attribute("html", "class") == "js"  # the page's script ran
        data = page.evaluate(
            "JSON.parse(document.getElementById('context-map-data').textContent)")
        titles = {block["id"]: block["title"] for block in data["blocks"]}
        assert titles["notes"] == f"Notes {hostile}"
        page.hover(".block[data-id='notes']")
        assert f"Notes {hostile}" in (page.text_content("#details") or "")
        assert opened.console == [] and _only_the_file(opened.requests, case)


def test_only_the_pages_own_scripts_run(case: Path, browser: Browser) -> None:
    """The policy names the page's two scripts by their sha256: they run, and markup that
    an escaping slip let into the page (an inline script, an event handler, a
    ``javascript:`` link) does not."""
    code, _, err = _inspect(case)
    assert code == 0, err
    page_text = (case / "ctx.html").read_text("utf-8")
    assert "unsafe-inline'; img-src" not in page_text  # styles only, never scripts
    assert f'content="{map_page.CSP}"' in page_text
    assert "script-src 'sha256-" in map_page.CSP
    injected = ("<script>document.documentElement.dataset.pwned = 'script';</script>"
                "<img src=\"data:,x\" onerror=\"document.documentElement.dataset.pwned = "
                "'handler'\"><a id=\"evil\" href=\"javascript:document.documentElement"
                ".dataset.pwned = 'link'\">x</a>")
    (case / "ctx.html").write_text(page_text.replace("<main>", "<main>" + injected, 1),
                                   "utf-8")
    for opened in _open(browser, case / "ctx.html", javascript=True):
        page = opened.page
        page.click("#evil")
        page.wait_for_timeout(200)
        assert page.get_attribute("html", "class") == "js"  # the page's own script ran
        assert page.get_attribute("html", "data-pwned") is None
        page.hover(".strip .block")
        assert "tokens" in (page.text_content("#details") or "")
        # Chromium reports each blocked script; nothing else went wrong.
        assert opened.console and all("Content Security Policy" in line
                                      for line in opened.console), opened.console
    # The live page's reload script is named too, and runs.
    live = map_page.render_error_page("pioneer inspect", "x", live=True)
    (case / "live.html").write_text(live, "utf-8")
    for opened in _open(browser, case / "live.html", javascript=True):
        opened.page.wait_for_selector("html[data-live='on']", timeout=10_000)
        assert opened.console == []


@pytest.mark.parametrize("name", ["x", "none"])
def test_a_profile_given_by_path_is_mapped_from_that_file(case: Path, name: str) -> None:
    """As inspect and compile take it; a file whose name is "none" is not the built-in."""
    (case / "p").mkdir()
    (case / "p" / f"{name}.toml").write_text(f'name = "{name}"\nextends = "minimal"\n')
    code, out, err = run_cli("inspect", "--home", "home", "--profile", f"p/{name}.toml",
                             "--html", str(case / "ctx.html"), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["profile"], data["profile_file"]) == (name, f"p/{name}.toml")
    compiler = PromptCompiler()
    payload = compiler.compile(PromptCompileInput(workspace_root=case / "home",
                                                  profile=f"p/{name}.toml"))
    kept = [block["id"] for block in data["blocks"] if block["kind"] == "stable"]
    assert kept == [s.id for s in payload.manifest.sections if s.stability == "stable"]
    assert "assistant_safety" in kept  # minimal's, which the built-in none leaves out
    request = ChatRequest(model="m", compiled_prompt=payload)
    if name == "none":  # mapped by its manifest's name alone: the built-in none is not it
        with pytest.raises(InputError, match='compiled from another profile than "none"'):
            context_map.map_request(compiler, request, "anthropic", budget=(128_000, 16_000))
    cmap = context_map.map_request(compiler, request, "anthropic", budget=(128_000, 16_000),
                                   profile=f"p/{name}.toml")
    assert cmap.profile_file == f"p/{name}.toml"
