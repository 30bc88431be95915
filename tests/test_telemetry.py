"""OpenTelemetry spans: compile_turn and each provider round, read back from the SDK's
in-memory exporter, with content capture off and on; and no cost without the API."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support import compile_round

from pioneer import (
    CompiledPromptPayload,
    HookRegistry,
    PromptCompileInput,
    PromptCompiler,
    SamplingOptions,
    ToolSpec,
)
from pioneer.audit import HistorySnapshot, ReportedUsage
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.errors import InputError
from pioneer.providers import ChatMessage, ChatRequest, build_request_body
from pioneer.telemetry import CAPTURE_ENV
from pioneer.tokens import TiktokenCounter
from pioneer.turn import TurnAudit

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    # The API takes one global provider per process: set it, or join the one already set.
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    monkeypatch.delenv(CAPTURE_ENV, raising=False)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def _input(home: Path) -> PromptCompileInput:
    return PromptCompileInput(
        workspace_root=home, profile="minimal", dynamic_context="Monday.",
        runtime_sections=[RuntimeSectionInput(id="x" * 3, content="y" * 9000)],
    )


def test_compile_turn_is_one_span_with_the_manifest_attributes(
    spans: InMemorySpanExporter, compiler: PromptCompiler, home: Path,
) -> None:
    payload = compile_round(compiler, _input(home), HookRegistry())
    span = _one(spans, "pioneer.compile_turn")
    manifest = payload.manifest
    attributes = dict(span.attributes or {})
    assert span.kind is trace.SpanKind.INTERNAL
    assert attributes["pioneer.profile"] == "minimal"
    assert attributes["pioneer.fingerprint_stable"] == manifest.fingerprint_stable
    assert attributes["pioneer.fingerprint_dynamic"] == manifest.fingerprint_dynamic
    assert attributes["pioneer.section_ids"] == tuple(manifest.section_ids)
    assert attributes["pioneer.stable_section_ids"] == tuple(
        s.id for s in manifest.sections if s.stability == "stable")
    assert "dynamic_context" in attributes["pioneer.dynamic_section_ids"]
    assert attributes["pioneer.diagnostics.count"] == len(manifest.diagnostics) == 4
    assert attributes["pioneer.diagnostic_codes"] == ("dynamic_section_truncated",
                                                      "missing_file")
    assert attributes["pioneer.stable.chars"] == len(payload.stable_system_text)
    assert "gen_ai.system_instructions" not in attributes  # content capture is off


@pytest.mark.parametrize("value", ["true", "SPAN_ONLY", "span_and_event"])
def test_with_capture_on_the_compile_span_carries_stable_and_dynamic_text(
    spans: InMemorySpanExporter, compiler: PromptCompiler, home: Path,
    monkeypatch: pytest.MonkeyPatch, value: str,
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, value)
    payload = compile_round(compiler, _input(home))
    instructions = json.loads(str(_one(spans, "pioneer.compile_turn").attributes[
        "gen_ai.system_instructions"]))  # type: ignore[index]
    assert instructions == [
        {"type": "text", "content": payload.stable_system_text},
        {"type": "text", "content": payload.dynamic_system_text},
    ]


@pytest.mark.parametrize("value", ["NO_CONTENT", "EVENT_ONLY", "false", ""])
def test_other_capture_values_keep_content_off_spans(
    spans: InMemorySpanExporter, compiler: PromptCompiler, home: Path,
    monkeypatch: pytest.MonkeyPatch, value: str,
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, value)
    compile_round(compiler, _input(home))
    assert "gen_ai.system_instructions" not in (
        _one(spans, "pioneer.compile_turn").attributes or {})


def test_a_failing_compile_turn_span_records_the_error(
    spans: InMemorySpanExporter, compiler: PromptCompiler, home: Path,
) -> None:
    with pytest.raises(Exception, match="nope"):
        compile_round(compiler, PromptCompileInput(workspace_root=home, profile="nope"))
    span = _one(spans, "pioneer.compile_turn")
    assert span.status.status_code is trace.StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> CompiledPromptPayload:
    home = tmp_path_factory.mktemp("home")
    return PromptCompiler().compile(PromptCompileInput(workspace_root=home, profile="minimal",
                                                       dynamic_context="Monday."))


_HISTORY = HistorySnapshot(
    mode="truncate", reason="r", budget=100, threshold=80, summary_target=10,
    total_tokens=90, sent_tokens=40, turns_loaded=3, turns_sent=2, summary_sent=False,
    summary_stored=False, summary_turn_count=0, artifact_ref_count=0, messages=[],
)


def _audit(payload: CompiledPromptPayload, provider: str = "anthropic") -> TurnAudit:
    request = ChatRequest(
        model="claude-x", compiled_prompt=payload, messages=[ChatMessage.user("Hi")],
        tools=[ToolSpec(name="read_file")],
        sampling=SamplingOptions(max_tokens=512, stop=["END"]),
    )
    audit = TurnAudit("u1", "t1", "agent", history=_HISTORY)
    audit.add_round(payload.manifest, request, provider, build_request_body(provider, request))
    return audit


def test_a_round_is_a_client_chat_span_ended_with_the_reported_usage(
    spans: InMemorySpanExporter, payload: CompiledPromptPayload,
) -> None:
    audit = _audit(payload)
    assert spans.get_finished_spans() == ()  # open while the provider answers
    audit.report_usage(1, ReportedUsage.from_response("anthropic", {
        "input_tokens": 20, "cache_read_input_tokens": 1500,
        "cache_creation_input_tokens": 300, "output_tokens": 42}))
    span = _one(spans, "chat claude-x")
    attributes = dict(span.attributes or {})
    assert span.kind is trace.SpanKind.CLIENT
    assert {key: attributes[key] for key in (
        "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
        "gen_ai.request.max_tokens", "gen_ai.request.stop_sequences",
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
        "pioneer.profile", "pioneer.fingerprint_stable", "pioneer.history.mode",
        "pioneer.diagnostics.count", "pioneer.round", "pioneer.turn_id", "pioneer.tools",
    )} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-x", "gen_ai.request.max_tokens": 512,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.usage.input_tokens": 1820, "gen_ai.usage.output_tokens": 42,
        "gen_ai.usage.cache_read.input_tokens": 1500,
        "gen_ai.usage.cache_creation.input_tokens": 300,
        "pioneer.profile": "minimal",
        "pioneer.fingerprint_stable": payload.manifest.fingerprint_stable,
        "pioneer.history.mode": "truncate", "pioneer.diagnostics.count": 3,
        "pioneer.round": 1, "pioneer.turn_id": "u1", "pioneer.tools": ("read_file",),
    }
    assert "gen_ai.request.temperature" not in attributes  # not set, not sent
    assert "gen_ai.system_instructions" not in attributes
    assert attributes["pioneer.section_ids"] == tuple(payload.manifest.section_ids)


def test_an_unreported_round_ends_when_the_turn_is_recorded_without_usage(
    spans: InMemorySpanExporter, payload: CompiledPromptPayload,
) -> None:
    audit = _audit(payload, "openai-chat")
    audit.record()
    attributes = dict(_one(spans, "chat claude-x").attributes or {})
    assert attributes["gen_ai.provider.name"] == "openai"
    assert not [key for key in attributes if key.startswith("gen_ai.usage.")]


def test_with_capture_on_the_round_span_carries_the_system_parts_sent(
    spans: InMemorySpanExporter, payload: CompiledPromptPayload,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "SPAN_ONLY")
    _audit(payload, "gemini").record()
    attributes = dict(_one(spans, "chat claude-x").attributes or {})
    assert attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert json.loads(str(attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": payload.stable_system_text.strip()},
        {"type": "text", "content": payload.dynamic_system_text.strip()},
    ]


def test_usage_is_reported_once_per_added_round(
    spans: InMemorySpanExporter, payload: CompiledPromptPayload,
) -> None:
    audit = _audit(payload)
    usage = ReportedUsage(input_tokens=10)
    audit.report_usage(1, usage)
    with pytest.raises(InputError, match=r"^round 1: usage already reported \(the turn has 1 "
                                         r"round\(s\)\)$"):
        audit.report_usage(1, usage)
    with pytest.raises(InputError, match=r"^round 2: usage not added"):
        audit.report_usage(2, usage)
    assert audit.record().rounds[0].usage == usage  # the record keeps it for explain
    assert len(spans.get_finished_spans()) == 1


@pytest.mark.parametrize(("provider", "usage", "expected"), [
    ("anthropic", {"input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 2},
     ReportedUsage(input_tokens=10, output_tokens=2, cache_read_input_tokens=3)),
    ("openai-chat", {"prompt_tokens": 2000, "completion_tokens": 5,
                     "prompt_tokens_details": {"cached_tokens": 1920}},
     ReportedUsage(input_tokens=2000, output_tokens=5,
                   cache_read_input_tokens=1920)),
    ("openai-responses", {"input_tokens": 1300, "output_tokens": 9,
                          "input_tokens_details": {"cached_tokens": 1024}},
     ReportedUsage(input_tokens=1300, output_tokens=9,
                   cache_read_input_tokens=1024)),
    ("gemini", {"promptTokenCount": 4000, "candidatesTokenCount": 11,
                "cachedContentTokenCount": 2048}, ReportedUsage(
        input_tokens=4000, output_tokens=11, cache_read_input_tokens=2048)),
    ("openai-chat", {"prompt_tokens": 12}, ReportedUsage(input_tokens=12)),
])
def test_reported_usage_reads_each_providers_usage_object(
    provider: str, usage: dict[str, object], expected: ReportedUsage,
) -> None:
    assert ReportedUsage.from_response(provider, usage) == expected


def test_an_unknown_provider_usage_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider 'x'; expected one of anthropic"):
        ReportedUsage.from_response("x", {})


_BLOCK_OTEL = textwrap.dedent("""
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None
    sys.meta_path.insert(0, Block())
""")


def _run(code: str, tmp_path: Path) -> list[str]:
    script = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True, cwd=tmp_path)
    return [name for name in result.stdout.split() if name.startswith("opentelemetry")]


def test_import_pioneer_and_pioneer_compile_import_no_opentelemetry(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert _run("import pioneer", tmp_path) == []
    assert _run("import io\nfrom pioneer.cli import main\n"
                f"assert main(['compile', '--home', {home!r}], stdout=io.StringIO()) == 0",
                tmp_path) == []


def test_without_the_api_a_turn_compiles_and_records_without_spans(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    loaded = _run(_BLOCK_OTEL + textwrap.dedent(f"""
        from pioneer import PromptCompileInput, PromptCompiler
        from pioneer.turn import TurnAudit
        from pioneer.compile.round import RoundInput
        from pioneer.providers import ChatMessage, ChatRequest, build_request_body
        payload = PromptCompiler().compile(RoundInput(PromptCompileInput(
            workspace_root={home!r})))
        request = ChatRequest(model="m", compiled_prompt=payload,
                              messages=[ChatMessage.user("Hi")])
        audit = TurnAudit("u", "t", "chat")
        audit.add_round(payload.manifest, request, "anthropic",
                        build_request_body("anthropic", request))
        assert audit.record().rounds[0].manifest == payload.manifest.with_token_counts(
            payload.sections)
    """), tmp_path)
    assert loaded == []


# -- the turn runner: one trace per turn ---------------------------------------------------


def test_a_turn_is_one_trace_under_its_invoke_agent_span(
    spans: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
    import agent_loop

    from pioneer import Agent

    monkeypatch.chdir(tmp_path)
    with Agent("p.db", provider="anthropic", model="claude-sonnet-4-5",
               hooks=agent_loop.hooks(), tools=[agent_loop.READ_FILE],
               sampling=SamplingOptions(max_tokens=512),
               compile_input={"workspace_root": tmp_path}) as agent:
        for number in (1, 2):
            turn = agent.turn("thread-7", f"Question {number}", turn_id=f"turn-{number}")
            for calls in agent_loop.script(number):
                turn.next_body()
                plan = turn.rounds[-1].cache
                step = turn.receive(agent_loop.response(
                    "anthropic", agent.model, "" if calls else "Done.", calls,
                    agent_loop.usage("anthropic", plan, 40)))
                for call in step.runnable:
                    turn.add_tool_result(call.id, "ok")
                if step.done:
                    break
            turn.finish()
    finished = spans.get_finished_spans()
    traces: dict[int, list[ReadableSpan]] = {}
    for span in finished:
        assert span.context is not None
        traces.setdefault(span.context.trace_id, []).append(span)
    assert len(traces) == 2
    for number, members in enumerate(traces.values(), start=1):
        [root] = [s for s in members if s.parent is None]
        assert root.name == "invoke_agent"
        assert root.context is not None
        names = sorted(s.name for s in members if s is not root)
        rounds = 3 if number == 1 else 2
        assert names == ["chat claude-sonnet-4-5"] * rounds + ["pioneer.compile_turn"] * rounds
        assert all(s.parent is not None and s.parent.span_id == root.context.span_id
                   for s in members if s is not root)
        attributes = dict(root.attributes or {})
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.conversation.id"] == "thread-7"
        assert attributes["gen_ai.request.max_tokens"] == 512
        assert attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
        chats = [s for s in members if s.name.startswith("chat ")]
        assert attributes["gen_ai.usage.input_tokens"] == sum(
            dict(s.attributes or {})["gen_ai.usage.input_tokens"] for s in chats)
        reasons = [dict(s.attributes or {})["gen_ai.response.finish_reasons"]
                   for s in sorted(chats, key=lambda s: s.start_time or 0)]
        assert reasons == [("tool_use",)] * (rounds - 1) + [("end_turn",)]


def test_the_compile_span_carries_the_token_counters_counts(
    spans: InMemorySpanExporter, home: Path,
) -> None:
    # The compiler keeps no cache of compiles: only a compiler that counts tokens has a
    # cache (its counter's), and its counts ride on the span.
    compile_round(PromptCompiler(), _input(home), HookRegistry())
    plain = next(dict(s.attributes or {}) for s in spans.get_finished_spans()
                 if s.name == "pioneer.compile_turn")
    assert not any(key.startswith("pioneer.cache.") for key in plain)
    spans.clear()
    compiler = PromptCompiler(count_tokens=True, token_counter=TiktokenCounter())
    compile_round(compiler, _input(home), HookRegistry())
    compile_round(compiler, _input(home), HookRegistry())
    first, second = (dict(s.attributes or {}) for s in spans.get_finished_spans()
                     if s.name == "pioneer.compile_turn")
    stats = {s.name: s for s in compiler.cache_stats()}
    assert list(stats) == ["token_counts"]
    assert second["pioneer.cache.token_counts.hits"] > first["pioneer.cache.token_counts.hits"]
    for name, one in stats.items():
        assert (second[f"pioneer.cache.{name}.entries"], second[f"pioneer.cache.{name}.bytes"],
                second[f"pioneer.cache.{name}.hits"], second[f"pioneer.cache.{name}.misses"],
                second[f"pioneer.cache.{name}.evictions"]) == (
            one.entries, one.bytes, one.hits, one.misses, one.evictions)
    assert {key for key in second if key.startswith("pioneer.cache.")} == {
        f"pioneer.cache.{name}.{count}" for name in stats
        for count in ("entries", "bytes", "hits", "misses", "evictions")}
