"""The turn runner: the same thread through Agent and through the low-level pieces, the
cache plan read from the thread, tools from hooks, chat turns, errors, and the example."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreTarget
from support import compile_round

from pioneer import (
    Agent,
    HookRegistry,
    InputError,
    PioneerSettings,
    PromptCompileInput,
    PromptCompiler,
    SamplingOptions,
    ToolSpec,
    Turn,
    ensure_runtime_home,
)
from pioneer.audit import HistorySnapshot, ToolRecord, TurnRecord, TurnRecords
from pioneer.audit.explain import explain_turn, render_text
from pioneer.cli import main
from pioneer.episodic import EpisodicIndex, episodic_recall_subscription
from pioneer.episodic.recall import HISTORY_KEY
from pioneer.history import HistoryBudgeter, HistoryLimits
from pioneer.history.calibration import Calibrator
from pioneer.history.open import configured_store, open_store
from pioneer.history.postgres_store import PostgresStore
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import TURN_PROMPT_PHASES, HookContext, TurnContext
from pioneer.providers import ChatMessage, ChatRequest, build_request_body, read_response
from pioneer.tools import TurnTools
from pioneer.turn import ENTRY_KEY, RECORD_KEY, ProviderName, TurnAudit
from pioneer.turn.hook_tools import HOOK_TOOL_PHASE, HOOK_TOOL_TYPES, catalog_with_hook_tools
from pioneer.turn.window import TurnWindow

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

PROVIDERS: list[ProviderName] = ["anthropic", "openai-chat", "openai-responses", "gemini"]
GOLDENS = Path(__file__).parent / "goldens" / "agent"
THREAD = "thread-1"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runtime home whose stable prompt is above every model's cache minimum."""
    monkeypatch.chdir(tmp_path)
    folder = Path("home")
    ensure_runtime_home(folder)
    (folder / "USER.md").write_text(agent_loop.PERSONA, encoding="utf-8")
    return folder


def _agent(store: Any, home: Path, provider: ProviderName, **options: Any) -> Agent:
    options.setdefault("hooks", agent_loop.hooks())
    options.setdefault("runtime_facts", False)  # compared with the wiring by hand, and goldens
    return Agent(store, provider=provider, model=agent_loop.MODELS[provider],
                 tools=[agent_loop.READ_FILE],
                 compile_input={"workspace_root": home}, **options)


Reply = Callable[[str, list[Any], Any], dict[str, Any]]


def _answer(provider: str, text: str, calls: list[Any], plan: Any) -> dict[str, Any]:
    return agent_loop.response(provider, agent_loop.MODELS[provider], text, calls,
                               agent_loop.usage(provider, plan, 40))


def _run_turn(agent: Agent, number: int, bodies: list[dict[str, Any]] | None = None,
              **options: Any) -> TurnRecord:
    """One scripted turn through the runner; ``bodies`` collects what it sent."""
    turn = agent.turn(THREAD, f"Question {number}: what should I pack?",
                      turn_id=f"turn-{number}", **options)
    for calls in agent_loop.script(number):
        body = turn.next_body()
        if bodies is not None:
            bodies.append(body)
        plan = turn.rounds[-1].cache
        text = "" if calls else f"Answer {number}."
        step = turn.receive(_answer(agent.provider, text, calls, plan))
        for call in step.runnable:
            turn.add_tool_result(call.id, agent_loop.run_tool(call))
        if step.done:
            break
    return turn.finish().record


# -- the runner against the low-level wiring ----------------------------------------------


def _low_level_turn(store: Any, records: TurnRecords, index: EpisodicIndex,
                    compiler: PromptCompiler, home: Path, provider: ProviderName,
                    number: int, bodies: list[dict[str, Any]]) -> TurnRecord:
    """What the runner does, by hand, from the public pieces (docs/explain.md)."""
    model = agent_loop.MODELS[provider]
    user_text = f"Question {number}: what should I pack?"
    store.ensure_thread(THREAD, model=model)
    newest = store.get_thread_conversation_history(THREAD, 1)
    previous = records.get(newest[-1].turn_id) if newest else None
    window = TurnWindow(model, compiler.settings, SamplingOptions(), Calibrator(store))
    limits = window.history_limits(provider, user_text, [agent_loop.READ_FILE], previous,
                                   newest[-1] if previous is not None else None)
    decision = HistoryBudgeter(store, limits,
                               summary_deadline=compiler.settings.summary_timeout).build(THREAD)
    earlier = [r.cache for r in previous.rounds if r.cache] if previous else []
    hooks = HookRegistry()
    for subscription in agent_loop.hooks().subscriptions():
        hooks.add(subscription)
    hooks.add(episodic_recall_subscription(index))
    compile_input = PromptCompileInput(workspace_root=home)
    context = TurnContext(thread_id=THREAD, user_text=user_text, data={HISTORY_KEY: decision})
    hook_run = hooks.run_hooks(compiler, compile_input, turn=context,
                               phases=("turn.pre_tool_materialization", *TURN_PROMPT_PHASES),
                               accept={HOOK_TOOL_PHASE: HOOK_TOOL_TYPES})
    hook_tools = catalog_with_hook_tools([agent_loop.READ_FILE], agent_loop_domains(),
                                         hook_run.offered)
    tools = TurnTools(hook_tools.catalog)
    audit = TurnAudit(f"turn-{number}", THREAD, "agent", history=decision,
                      earlier=earlier,
                      tools=ToolRecord.from_catalog(hook_tools.catalog, hook_tools.registered))
    messages = [ChatMessage.user(user_text)]
    text = ""
    newest: frozenset[str] = frozenset()
    for calls in agent_loop.script(number):
        round_ = tools.next_round()
        payload = compile_round(compiler, compile_input, hook_run=hook_run,
                               hidden_tool_domains=round_.hidden, history=decision.messages)

        def build(conversation: list[ChatMessage], round_: Any = round_,
                  payload: Any = payload) -> ChatRequest:
            return round_.apply(ChatRequest(model=model, compiled_prompt=payload,
                                            messages=conversation))

        fitted = window.fit(provider, round_.number, decision, messages, build,
                            lambda: HistoryBudgeter(store, decision.limits), newest=newest)
        request = fitted.request
        body = build_request_body(provider, request)
        bodies.append(body)
        plan = audit.add_round(payload.manifest, request, provider, body, round_,
                               window=fitted.window).cache
        text = "" if calls else f"Answer {number}."
        reply = read_response(provider, _answer(provider, text, calls, plan))
        audit.report_reply(round_.number, reply)
        window.observe(provider, audit.rounds[-1].window)  # the calibration learns
        if not calls:
            break
        assert reply.message is not None
        messages.append(reply.message)
        for call in reply.tool_calls:
            outcome = tools.decide(call)
            messages.append(ChatMessage.tool(call.id, agent_loop.run_tool(call))
                            if outcome.result is None
                            else ChatMessage(role="tool", tool_result=outcome.result))
        newest = frozenset(call.id for call in reply.tool_calls)
    record = audit.record(tools.calls)
    with records.expecting(record):
        store.add_turn(THREAD, turn_id=f"turn-{number}", user_text=user_text,
                       assistant_text=text)
    return record


def agent_loop_domains() -> dict[str, tuple[str, ...]]:
    from pioneer.sections.tool_domains import DEFAULT_TOOL_DOMAINS

    return {d: tuple(names) for d, names in DEFAULT_TOOL_DOMAINS.items()}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_runner_sends_and_records_what_the_low_level_wiring_does(
    home: Path, provider: ProviderName,
) -> None:
    runner_bodies: list[dict[str, Any]] = []
    with _agent("runner.db", home, provider) as agent:
        by_runner = [_run_turn(agent, n, runner_bodies) for n in range(1, 5)]
    manual_bodies: list[dict[str, Any]] = []
    compiler = PromptCompiler()
    with open_store("manual.db") as store, TurnRecords(store) as records, \
            EpisodicIndex(store) as index:
        by_hand = [_low_level_turn(store, records, index, compiler, home, provider, n,
                                   manual_bodies) for n in range(1, 5)]
    assert len(runner_bodies) == len(manual_bodies) == 3 + 2 + 1 + 2
    assert [json.dumps(b) for b in runner_bodies] == [json.dumps(b) for b in manual_bodies]
    assert by_runner == by_hand
    with open_store("runner.db") as store:
        assert [TurnRecords(store).get(f"turn-{n}") for n in range(1, 5)] == by_runner


# -- the cache plan is read from the thread ----------------------------------------------


def _prefix_tokens(record: TurnRecord) -> tuple[int, int]:
    """(cached, reusable prefix) of the first round: the tools, stable text and history."""
    plan = record.rounds[0].cache
    assert plan is not None
    reused = sum(b.tokens for b in plan.blocks
                 if b.kind in ("tools", "stable", "prompt", "summary", "system", "history"))
    return plan.cached_tokens, reused


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_later_turn_reads_its_prefix_from_cache(
    home: Path, provider: ProviderName, store_target: StoreTarget,
) -> None:
    with _agent(store_target.target, home, provider) as agent:
        records = [_run_turn(agent, n) for n in range(1, 6)]
    first = records[0].rounds[0].cache
    assert first is not None and first.cached_tokens == 0
    stable = sum(b.tokens for b in first.blocks if b.kind in ("tools", "stable"))
    assert stable > first.minimum_tokens  # the stable prefix alone passes the minimum
    for record in records[1:]:
        cached, prefix = _prefix_tokens(record)
        assert cached >= 0.9 * prefix, (record.turn_id, cached, prefix)
        assert record.rounds[0].usage is not None
        assert record.rounds[0].usage.cache_read_input_tokens == cached


def test_the_plan_of_another_provider_is_not_the_threads_cache(home: Path) -> None:
    with _agent("t.db", home, "anthropic") as agent:
        _run_turn(agent, 1)
    with _agent("t.db", home, "openai-chat") as agent:
        second = _run_turn(agent, 3)
    plan = second.rounds[0].cache
    assert plan is not None and plan.cached_tokens == 0 and plan.first_difference is None


# -- tools from hooks, and explain's step 5 ------------------------------------------------


def test_hook_registered_memory_tools_are_recorded_and_explained(
    home: Path, golden: Callable[[Path, str], None],
) -> None:
    with _agent("pioneer.db", home, "anthropic") as agent:
        record = _run_turn(agent, 1)
    assert record.tools == [
        ToolRecord(name="read_file"),
        ToolRecord(name="memory_search", domain="memory", hook_id="demo.memory_tools"),
        ToolRecord(name="memory_get", domain="memory", hook_id="demo.memory_tools"),
    ]
    assert [r.visible_tools for r in record.rounds] == [
        ["read_file", "request_tools"], ["read_file", "memory_search", "memory_get"],
        ["read_file", "memory_search", "memory_get"]]
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", "turn-1", "--db", "pioneer.db"], stdout=out, stderr=err) == 0
    text = out.getvalue()
    step = text[text.index("5. memory"):text.index("6. tools")]
    golden(GOLDENS / "memory-tools-step.txt", step)
    data = {s.name: s.data for s in explain_turn(record).steps}["memory"]
    assert [t["visible_in_rounds"] for t in data["memory_tools"]] == [[2, 3], [2, 3]]


def test_a_hook_tool_with_a_taken_name_is_left_out_with_a_diagnostic(home: Path) -> None:
    hooks = agent_loop.hooks()

    @hooks.hook("acme.clash", phase="turn.pre_tool_materialization")
    def clash(context: HookContext) -> ToolSpec:
        return ToolSpec(name="read_file", description="Another read_file.")

    with Agent("p.db", provider="anthropic", model="m", hooks=hooks,
               tools=[agent_loop.READ_FILE], compile_input={"workspace_root": home}) as agent:
        turn = agent.turn(THREAD, "hi")
        turn.next_body()
        [diagnostic] = [d for d in turn.rounds[0].manifest.diagnostics
                        if d.hook_source == "acme.clash"]
        assert diagnostic.message == ("hook `acme.clash`: tool `read_file` not registered: "
                                      "the turn has a tool of that name already")


def test_a_tool_returned_outside_its_phase_fails_the_hook(home: Path) -> None:
    hooks = HookRegistry()

    @hooks.hook("acme.late", phase="turn.pre_prompt_compile", failure="best_effort")
    def late(context: HookContext) -> ToolSpec:
        return ToolSpec(name="clock")

    with Agent("p.db", provider="anthropic", model="m", hooks=hooks,
               compile_input={"workspace_root": home}) as agent:
        turn = agent.turn(THREAD, "hi")
        turn.next_body()
        [failed] = [d for d in turn.rounds[0].manifest.diagnostics
                    if d.code == "hook_best_effort_failed"]
        assert "hook returned ToolSpec; expected PromptSectionContribution" in failed.message


def test_post_turn_hooks_run_once_the_turn_is_stored(home: Path) -> None:
    hooks, seen = agent_loop.hooks(), []
    stored: list[list[str]] = []

    @hooks.hook("acme.extract", phase="turn.post_turn")
    def extract(context: HookContext) -> None:
        data = context.turn.data
        seen.append((data[ENTRY_KEY].turn_id, data[RECORD_KEY].turn_id))
        stored.append([e.turn_id for e in agent.store.get_thread_conversation_history(THREAD)])

    @hooks.hook("acme.broken", phase="turn.post_turn", failure="best_effort")
    def broken(context: HookContext) -> None:
        raise RuntimeError("boom")

    with _agent("p.db", home, "anthropic", hooks=hooks) as agent:
        turn = agent.turn(THREAD, "Hello", turn_id="turn-1")
        turn.next_body()
        assert seen == []
        turn.receive(_answer("anthropic", "Hi.", [], turn.rounds[0].cache))
        finished = turn.finish()
    assert seen == [("turn-1", "turn-1")] and stored == [["turn-1"]]
    assert [d.message for d in finished.diagnostics] == [
        "hook `acme.broken` at turn.post_turn failed: RuntimeError: boom; the turn went on "
        "without it"]


# -- chat turns ----------------------------------------------------------------------------


def test_a_chat_turn_compiles_minimal_and_offers_no_tools(home: Path) -> None:
    hooks = agent_loop.hooks()

    @hooks.hook("acme.capabilities", phase="turn.pre_prompt_compile")
    def capabilities(context: HookContext) -> PromptSectionContribution:
        return PromptSectionContribution(contribution_id="caps", domain="caps",
                                         section_id="selected_capabilities",
                                         content="- browser: open web pages")

    from pioneer.sections import PermissionProfile

    with Agent("p.db", provider="openai-chat", model="gpt-5.1", hooks=hooks,
               tools=[agent_loop.READ_FILE], compile_input={"workspace_root": home},
               permissions=PermissionProfile(mode="read_only")) as agent:
        turn = agent.turn(THREAD, "Tell me a joke.", mode="chat", turn_id="chat-1")
        body = turn.next_body()
        assert "tools" not in body
        manifest = turn.rounds[0].manifest
        assert manifest.profile == "minimal"
        assert "current_permissions" not in manifest.section_ids
        assert "selected_capabilities" not in manifest.section_ids
        refused = [o for o in manifest.omitted if o.id == "selected_capabilities"]
        assert [o.reason for o in refused] == ["refused"]
        plan = turn.rounds[0].cache
        turn.receive(_answer("openai-chat", "Why did the rock...", [], plan))
        record = turn.finish().record
    assert (record.mode, record.tools, record.rounds[0].visible_tools) == ("chat", [], [])


def test_a_chat_turn_carries_no_tool_guidance(home: Path) -> None:
    hooks, seen = agent_loop.hooks(), []

    @hooks.hook("acme.mode", phase="turn.pre_prompt_compile")
    def mode(context: HookContext) -> None:
        seen.append(context.turn.mode)

    with _agent("p.db", home, "anthropic", hooks=hooks) as agent:
        for mode in ("agent", "chat"):
            turn = agent.turn(THREAD, "What do I like?", mode=mode)
            sent = json.dumps(turn.next_body())
            tools_named = [n for n in ("memory_search", "read_file", "request_tools")
                           if n in sent]
            with pytest.warns(ResourceWarning, match="kept as an abandoned turn"):
                turn.close()
            assert tools_named == ([] if mode == "chat" else ["memory_search", "read_file",
                                                                 "request_tools"]), mode
    assert seen == ["agent", "chat"]


#: What the minimal profile's slot refuses: every contribution that speaks of tools,
#: skills, capabilities or permissions.
TOOL_FLAVOURED = ["request_tools.hidden_domains", "selected_skills", "selected_capabilities",
                  "pioneer_filesystem_capability", "current_permissions",
                  "execution_continuation"]


def test_minimal_refuses_every_tool_and_capability_contribution(home: Path) -> None:
    compiler = PromptCompiler()
    [slot] = [s for s in compiler.load_profile("minimal").spec.sections if s.source == "slot"]
    assert sorted(slot.refuse or ()) == sorted(TOOL_FLAVOURED)
    payload = compiler.compile(PromptCompileInput(
        profile="minimal", workspace_root=home,
        runtime_sections=[{"id": i, "content": f"Flavoured: {i}"} for i in TOOL_FLAVOURED],
        dynamic_sections=[{"id": "acme.weather", "content": "Rain later."}]))
    manifest = payload.manifest
    assert sorted((o.id, o.reason) for o in manifest.omitted if o.id in TOOL_FLAVOURED) == \
        sorted((i, "refused") for i in TOOL_FLAVOURED)
    assert not set(TOOL_FLAVOURED) & set(manifest.section_ids)
    assert "acme.weather" in manifest.section_ids
    assert "Flavoured" not in payload.stable_system_text + payload.dynamic_system_text


# -- the loop's rules ----------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"tools": ["read_file"]}, "tools[0]: expected a ToolSpec (got the string 'read_file')"),
    ({"tools": agent_loop.READ_FILE}, "tools: expected a list of ToolSpec (got one ToolSpec)"),
    ({"domains": {"memory": "memory_search"}},
     "domains → memory: expected a list of tool names (got the string 'memory_search')"),
    ({"domains": ["memory"]}, "domains: expected a mapping of domain names to tool names "
     "(got list)"),
    ({"skills": ["pioneer/weather"]}, "Agent → skills: expected a list of Skill (got "
     "['pioneer/weather'])"),
])
def test_agent_parts_of_the_wrong_shape_are_named(
    home: Path, options: dict[str, Any], message: str,
) -> None:
    with pytest.raises(InputError) as info:
        Agent("p.db", provider="anthropic", model="m", **options)
    assert str(info.value) == message


@pytest.fixture
def started(home: Path) -> Iterator[Turn]:
    with _agent("p.db", home, "anthropic") as agent:
        turn = agent.turn(THREAD, "Question 1", turn_id="turn-1")
        turn.next_body()
        yield turn


def test_each_runnable_call_needs_its_result_before_the_next_body(started: Turn) -> None:
    plan = started.rounds[0].cache
    step = started.receive(_answer("anthropic", "", agent_loop.script(1)[0], plan))
    assert [o.verdict for o in step.outcomes] == ["granted", "run"]
    assert [c.id for c in step.runnable] == ["t1-c2"]
    with pytest.raises(InputError, match="calls t1-c2 have no result"):
        started.next_body()
    with pytest.raises(InputError, match="call 't1-c1' is not a call of the last reply that"):
        started.add_tool_result("t1-c1", "x")
    started.add_tool_result("t1-c2", "notes")
    with pytest.raises(InputError, match="already has a result"):
        started.add_tool_result("t1-c2", "again")
    body = started.next_body()
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["t1-c1", "t1-c2"]


def test_a_reply_without_calls_ends_the_loop(started: Turn) -> None:
    plan = started.rounds[0].cache
    with pytest.raises(InputError, match="'x' is not a call of the last reply"):
        started.add_tool_result("x", "y")
    step = started.receive(_answer("anthropic", "Done.", [], plan))
    assert step.done and step.text == "Done."
    with pytest.raises(InputError, match="no request is waiting for its reply"):
        started.receive(_answer("anthropic", "Again.", [], plan))
    with pytest.raises(InputError, match="answered without a tool call; finish"):
        started.next_body()
    finished = started.finish()
    assert finished.entry.assistant_text == "Done."
    with pytest.raises(InputError, match="is finished"):
        started.next_body()


def test_a_turn_ends_early_only_with_the_text_to_store(started: Turn) -> None:
    with pytest.raises(InputError, match=r"^Turn.finish: the last body has no reply yet; "
                       r"receive\(\) it first, or end the turn here with finish\("):
        started.finish()
    step = started.receive(_answer("anthropic", "", agent_loop.script(1)[0],
                                   started.rounds[0].cache))
    assert not step.done
    with pytest.raises(InputError, match=r"^Turn.finish: the model's last reply asked for "
                       r"tool calls \(t1-c1, t1-c2\); add their results and call next_body"):
        started.finish()
    with pytest.raises(InputError, match="assistant_text: expected a string"):
        started.finish(assistant_text=5)  # type: ignore[arg-type]
    finished = started.finish(assistant_text="Stopped: the round limit was reached.")
    assert finished.entry.assistant_text == "Stopped: the round limit was reached."
    assert len(finished.record.rounds) == 1


def test_a_round_sent_again_to_another_provider_records_the_answer(started: Turn) -> None:
    again = started.next_body("openai-chat")  # the first body got no reply
    assert "choices" not in again and again["model"] == agent_loop.MODELS["anthropic"]
    plan = started.rounds[0].cache
    started.receive(_answer("openai-chat", "Done.", [], plan))
    record = started.finish().record
    [round_] = record.rounds
    assert round_.provider.provider == "openai-chat"
    assert round_.reply is not None and round_.reply.unanswered == ["anthropic"]


def test_gemini_calls_without_ids_get_unique_ones(home: Path) -> None:
    with _agent("g.db", home, "gemini") as agent:
        turn = agent.turn(THREAD, "Read two files")
        ids = []
        for _ in range(2):
            turn.next_body()
            response = {"candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                {"functionCall": {"name": "read_file", "args": {"path": "b"}}}]},
                "finishReason": "STOP"}]}
            step = turn.receive(response)
            ids += [call.id for call in step.calls]
            for call in step.runnable:
                turn.add_tool_result(call.id, "text")
        assert ids == ["call_1", "call_2", "call_1_r2", "call_2_r2"]
        body = turn.next_body()
        names = [p["functionResponse"]["id"] for c in body["contents"] for p in c["parts"]
                 if "functionResponse" in p]
        assert names == ids


def test_a_gemini_thought_signature_goes_back_with_its_call(home: Path) -> None:
    with _agent("g.db", home, "gemini") as agent:
        turn = agent.turn(THREAD, "Read the trip notes")
        turn.next_body()
        step = turn.receive(_answer("gemini", "", agent_loop.script(2)[0], turn.rounds[0].cache))
        [call] = step.runnable
        turn.add_tool_result(call.id, "notes")
        body = turn.next_body()
    sent = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    assert sent == [{"functionCall": {"id": "t2-c1", "name": "read_file",
                                      "args": {"path": "trip-2.md"}},
                     "thoughtSignature": "ZGVtby1zaWduYXR1cmU="}]


def test_the_runner_summarises_with_the_agents_summarizer(home: Path) -> None:
    class Summaries:
        def __init__(self) -> None:
            self.asked: list[int] = []

        def summarize(self, request: Any) -> str:
            self.asked.append(len(request.transcript))
            return f"Summary of {len(request.transcript)} messages."

    summaries = Summaries()
    modes, sent = [], []
    with _agent("s.db", home, "anthropic", summarizer=summaries,
                limits=HistoryLimits.from_tokens(200, 0)) as agent:
        for n in range(4):
            turn = agent.turn(THREAD, f"Question {n}: " + "words " * 30, turn_id=f"t{n}")
            sent.append(json.dumps(turn.next_body()))
            turn.receive(_answer("anthropic", f"Answer {n}: " + "more " * 30, [],
                                 turn.rounds[0].cache))
            record = turn.finish().record
            assert record.history is not None
            modes.append(record.history.mode)
    assert modes == ["keep", "keep", "keep", "summarise"] and summaries.asked == [6]
    assert "Summary of 6 messages." in sent[3] and "Question 0" not in sent[3]


def test_history_decision_is_recorded_as_its_snapshot(home: Path) -> None:
    with _agent("h.db", home, "anthropic") as agent:
        _run_turn(agent, 1)
        record = _run_turn(agent, 3)
        turn = agent.turn(THREAD, "later")
        turn.next_body()
        assert turn.history is not None
        history = record.history
        assert history is not None
        limits = HistoryLimits(history.budget, history.threshold, history.summary_target)
        assert history == HistorySnapshot.from_decision(
            HistoryBudgeter(agent.store, limits).build(THREAD, exclude_turn_id="turn-3"))


# -- one way to open the configured store ------------------------------------------------


def test_open_store_takes_the_settings_url_before_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_target: StoreTarget,
) -> None:
    monkeypatch.setenv("PIONEER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    if store_target.dialect == "postgresql":
        monkeypatch.setenv("PIONEER_STORE_URL", str(store_target.target))
    settings = PioneerSettings()
    with open_store(settings) as store:
        assert isinstance(store, PostgresStore) == (store_target.dialect == "postgresql")
        expected = store_target.target if store_target.dialect == "postgresql" \
            else tmp_path / "home" / "pioneer.db"
        assert configured_store(settings) == expected

    class Secret:
        def __init__(self, value: str) -> None:
            self.value = value

        def get_secret_value(self) -> str:
            return self.value

    fake = settings.model_copy(update={"store_url": Secret("postgresql://x@/y")})
    assert configured_store(fake) == "postgresql://x@/y"


# -- the example, as the "done when" ------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_example_runs_and_explain_shows_the_thread(
    provider: str, store_target: StoreTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    store = str(store_target.target)
    assert agent_loop.main(["--home", "home", "--store", store, "--provider", provider,
                            "--turns", "3"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "thread=thread-demo thread-demo-turn-3".replace(" ", " turn=")
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", "thread-demo-turn-3", "--db", store], stdout=out, stderr=err) == 0
    text = out.getvalue()
    plan = next(line for line in text.splitlines() if "cache plan:" in line)
    assert " 0 of " not in plan and "(0%)" not in plan
    assert "reported: " in text
    assert "memory tools: memory_search, memory_get (registered by hook demo.memory_tools)" \
        in text


def test_the_example_says_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        agent_loop.main(["--home", str(tmp_path / "home"), "--store", "p.db",
                         "--provider", "gemini", "--turns", "0"])
    assert exit_.value.code == 2
    assert "argument --turns: expected at least 1 turn (got 0)" in capsys.readouterr().err
    store = tmp_path / "missing" / "p.db"
    assert agent_loop.main(["--home", str(tmp_path / "home"), "--store", str(store),
                            "--provider", "gemini"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {store}: ") and "Traceback" not in err


# -- the deployment's model table ----------------------------------------------------------


def test_the_settings_model_path_gives_the_agent_its_rules(home: Path, tmp_path: Path) -> None:
    """A model the release does not know, added by the deployment's model file: the
    agent's bodies and cache plans follow its row, not the family's guess."""
    table = tmp_path / "models.toml"
    table.write_text('[[models]]\nmodel = "claude-acme-1"\nfamily = "claude-sonnet"\n'
                     'min_cacheable_tokens = 100000\nsource = "our contract"\n'
                     'source_date = "2026-11"\n', encoding="utf-8")

    def one_turn(settings: PioneerSettings) -> tuple[dict[str, Any], Any, str]:
        with Agent(tmp_path / "p.db", provider="anthropic", model="claude-acme-1",
                   settings=settings, compile_input={"workspace_root": home}) as agent:
            turn = agent.turn(THREAD, "Question 1", turn_id=f"t-{len(settings.model_path)}")
            body = turn.next_body()
            plan = turn.rounds[0].cache
            turn.receive(_answer("anthropic", "Answer 1.", [], plan))
            record = turn.finish().record
            return body, plan, render_text(explain_turn(record))

    note = ("model 'claude-acme-1' is not in the model table; the facts of the anthropic "
            "family are used (models/models.toml)")
    body, plan, explained = one_turn(PioneerSettings(model_path=[table]))
    assert (plan.minimum_tokens, plan.model_note) == (100_000, None)
    assert "cache_control" not in str(body)  # no prefix reaches the deployment's minimum
    assert "is not in the model table" not in explained
    body, plan, explained = one_turn(PioneerSettings())
    assert plan.minimum_tokens == 1024  # the guess of Anthropic's catch-all row
    assert plan.model_note == note
    assert "cache_control" in str(body)
    # explain says, under the round's cache plan, that the model's facts are a guess.
    lines = [line.strip() for line in explained.splitlines()]
    plan_line = next(i for i, line in enumerate(lines) if line.startswith("cache plan:"))
    assert "(minimum 1,024; " in lines[plan_line] and lines[plan_line + 1] == note
