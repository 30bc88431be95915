"""The turn record: its rules, how the store keeps it, and the provider shape it captures."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import StoreTarget
from pydantic import ValidationError
from stores import make_store

from pioneer import (
    CompiledPromptPayload,
    HistoryLimits,
    PromptCompileInput,
    PromptCompiler,
    StoreError,
    ToolSpec,
)
from pioneer.audit import (
    ExecutionSecurity,
    HistorySnapshot,
    SkillsSnapshot,
    TurnRecord,
    TurnRecords,
    provider_shape,
)
from pioneer.audit.explain import explain_turn, render_text
from pioneer.errors import InputError
from pioneer.history import MIGRATIONS, HistoryBudgeter, SqliteStore
from pioneer.history.sql_store import SqlStore
from pioneer.history.store import StoreTransaction
from pioneer.providers import CacheOptions, ChatMessage, ChatRequest, ToolCall, build_request_body
from pioneer.sections import PermissionProfile, Skill
from pioneer.sections.skills import resolve_skill_outcomes
from pioneer.tools import ToolCatalog, TurnTools
from pioneer.turn import TurnAudit

SYSTEM = CacheOptions(dynamic_placement="system")
GOLDENS = Path(__file__).parent / "goldens" / "explain"


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> CompiledPromptPayload:
    home = tmp_path_factory.mktemp("home")
    return PromptCompiler().compile(PromptCompileInput(workspace_root=home, profile="minimal",
                                                       dynamic_context="Monday."))


def _record(payload: CompiledPromptPayload, turn_id: str = "u1",
            thread_id: str = "t", **audit_options: object) -> TurnRecord:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")])
    audit = TurnAudit(turn_id, thread_id, "chat", **audit_options)  # type: ignore[arg-type]
    audit.add_round(payload.manifest, request, "anthropic", build_request_body("anthropic",
                                                                                request))
    return audit.record()


@pytest.fixture
def store(store_target: StoreTarget) -> Iterator[SqlStore]:
    opened = make_store(store_target.target)
    opened.ensure_thread("t")
    opened.add_turn("t", turn_id="u1", user_text="Hi", assistant_text="Hello")
    yield opened
    opened.close()


# -- the store -------------------------------------------------------------------------


def test_a_record_needs_its_turn_first(store: SqlStore,
                                       payload: CompiledPromptPayload) -> None:
    with pytest.raises(StoreError, match="turn 'u2' does not exist; store the turn before"):
        TurnRecords(store).save(_record(payload, "u2"))


def test_a_record_names_the_thread_of_its_turn(store: SqlStore,
                                               payload: CompiledPromptPayload) -> None:
    store.ensure_thread("other")
    with pytest.raises(StoreError, match="turn 'u1' is in thread 't', not 'other'"):
        TurnRecords(store).save(_record(payload, thread_id="other"))


def test_a_record_is_written_once(store: SqlStore, payload: CompiledPromptPayload) -> None:
    first = _record(payload)
    TurnRecords(store).save(first)
    with pytest.raises(StoreError, match="turn 'u1' already has a record"):
        TurnRecords(store).save(first.model_copy(update={"mode": "agent"}))
    assert TurnRecords(store).get("u1") == first


def test_a_saved_record_fills_the_turns_manifest(store: SqlStore,
                                                payload: CompiledPromptPayload) -> None:
    assert store.get_turn_prompt_manifest("u1") is None
    record = _record(payload)
    TurnRecords(store).save(record)
    stored = store.get_turn_prompt_manifest("u1")
    assert stored == record.rounds[-1].manifest.to_json(indent=None)
    assert stored is not None and '"tokens": 20' in stored  # the counted manifest, as recorded


def test_a_record_written_with_its_turn_fills_the_manifest(
    store: SqlStore, payload: CompiledPromptPayload
) -> None:
    records = TurnRecords(store)
    record = _record(payload, "u2")
    with records.expecting(record):
        store.add_turn("t", turn_id="u2", user_text="Again", assistant_text="Sure")
    assert store.get_turn_prompt_manifest("u2") == record.rounds[-1].manifest.to_json(indent=None)
    assert records.get("u2") == record


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [("manifest", "{not json", "not JSON (Expecting property name enclosed in double quotes)"),
     ("visible_tools", '"read_file"', "rounds[0] → visible_tools: Input should be a valid list")],
)
def test_a_damaged_record_is_a_store_error(store: SqlStore, payload: CompiledPromptPayload,
                                           column: str, value: str, message: str) -> None:
    TurnRecords(store).save(_record(payload))
    store.write(lambda tx: tx.execute(f"UPDATE turn_rounds SET {column} = ?", (value,)))
    with pytest.raises(StoreError) as caught:
        TurnRecords(store).get("u1")
    assert str(caught.value) == f"{store.where}: the record of turn 'u1' is unreadable: {message}"


def test_a_record_saved_again_after_a_lost_commit_is_accepted(
    store: SqlStore, payload: CompiledPromptPayload
) -> None:
    # What a retry sees when the first run's commit went through before the connection
    # broke: its own record, equal to the one it is writing.
    from pioneer.audit.store import write_turn_record

    record = _record(payload)
    TurnRecords(store).save(record)
    store.write(lambda tx: write_turn_record(tx, record, created_at="now", retry=True))
    other = record.model_copy(update={"mode": "agent"})
    with pytest.raises(StoreError, match="turn 'u1' already has a record"):
        store.write(lambda tx: write_turn_record(tx, other, created_at="now", retry=True))


def test_a_version_1_database_gains_the_record_tables(tmp_path: Path,
                                                      payload: CompiledPromptPayload) -> None:
    path = tmp_path / "old.db"
    with SqliteStore(path, migrations=MIGRATIONS[:1]) as old:
        old.ensure_thread("t")
        old.add_turn("t", turn_id="u1", user_text="Hi", assistant_text="Hello")
    with SqliteStore(path) as upgraded:
        TurnRecords(upgraded).save(_record(payload))
        assert TurnRecords(upgraded).get("u1") == _record(payload)
        assert len(upgraded.get_thread_conversation_history("t")) == 1


def _decided(payload: CompiledPromptPayload) -> TurnRecord:
    """A record with a skills decision and an execution security snapshot."""
    resolution = resolve_skill_outcomes([
        Skill("workspace/weather", "Weather", "Forecasts.", "skills/weather", paths=("*.csv",)),
        Skill("workspace/deploy", "Deploy", "Ship it.", "skills/deploy",
              disable_model_invocation=True),
        Skill("workspace/notes", "Notes", "Keep notes.", "skills/notes"),
    ], touched_paths=["oslo.csv"])
    profile = PermissionProfile(mode="read_only", file_write="deny", shell_command="ask",
                                denied_tools=("rm",))
    return _record(payload, skills=SkillsSnapshot.from_resolution(resolution),
                   security=ExecutionSecurity.from_profile(profile, source="admin policy",
                                                           sandbox="read-only container"))


def test_skill_outcomes_and_the_security_snapshot_read_back(
    store: SqlStore, payload: CompiledPromptPayload, golden: Callable[[Path, str], None]
) -> None:
    record = _decided(payload)
    TurnRecords(store).save(record)
    stored = TurnRecords(store).get("u1")
    assert stored == record
    assert stored is not None and stored.security is not None
    assert (stored.security.ask, stored.security.deny) == (["shell_command"], ["file_write"])
    assert stored.skills is not None and stored.skills.outcomes is not None
    assert [(o.skill_id, o.status) for o in stored.skills.outcomes] == [
        ("user:workspace/weather", "resolved"), ("user:workspace/deploy", "disabled"),
        ("user:workspace/notes", "non_implicit")]
    blocks = render_text(explain_turn(stored)).split("\n\n")
    golden(GOLDENS / "decided-record.txt",
           "\n\n".join(b for b in blocks if b.startswith(("4. ", "7. "))) + "\n")


def test_a_version_5_database_keeps_its_records_readable(
    tmp_path: Path, payload: CompiledPromptPayload
) -> None:
    """A record stored before the security and section-title columns existed reads back
    after the upgrade, its snapshot not recorded and its rounds without titles."""
    from pioneer.audit.store import _json

    path = tmp_path / "old.db"
    record = _record(payload, permissions=PermissionProfile(mode="read_only"))
    round_ = record.rounds[0]
    with SqliteStore(path, migrations=MIGRATIONS[:5]) as old:
        old.ensure_thread("t")
        old.add_turn("t", turn_id="u1", user_text="Hi", assistant_text="Hello")

        def insert(tx: StoreTransaction) -> None:
            tx.execute("INSERT INTO turn_records (turn_id, thread_id, mode, permissions, "
                       "created_at) VALUES ('u1', 't', 'chat', ?, 'then')",
                       (_json(record.permissions),))
            tx.execute("INSERT INTO turn_rounds (turn_id, round, manifest, visible_tools, "
                       "hidden_domains, provider, calls, cache) VALUES "
                       "('u1', 1, ?, '[]', '[]', ?, '[]', ?)",
                       (round_.manifest.to_json(indent=None), _json(round_.provider),
                        _json(round_.cache)))

        old.write(insert)
    with SqliteStore(path) as upgraded:
        stored = TurnRecords(upgraded).get("u1")
    assert round_.section_titles
    assert stored == record.model_copy(update={"security": None, "rounds": [
        round_.model_copy(update={"section_titles": {}})]})
    [step] = [s for s in explain_turn(stored).steps if s.name == "permissions"]
    assert step.lines[1] == ("execution security: not recorded (a record written before "
                             "the snapshot was kept)")
    assert step.data["security"] is None


def test_an_older_record_reads_and_explains_what_it_lacks(
    store: SqlStore, payload: CompiledPromptPayload, golden: Callable[[Path, str], None]
) -> None:
    """A row written before outcomes and the security snapshot were kept: the skills
    column without ``outcomes`` and ``diagnostics``, the security column NULL."""
    record = _decided(payload)
    TurnRecords(store).save(record)
    old_skills = json.dumps({"active": [{"reason": "path_match",
                                         "skill_id": "user:workspace/weather"}],
                             "omitted": [], "truncated": False}, sort_keys=True)
    store.write(lambda tx: tx.execute(
        "UPDATE turn_records SET skills = ?, security = NULL WHERE turn_id = ?",
        (old_skills, "u1")))
    stored = TurnRecords(store).get("u1")
    assert stored is not None and stored.security is None
    assert stored.skills is not None and stored.skills.outcomes is None
    blocks = render_text(explain_turn(stored)).split("\n\n")
    golden(GOLDENS / "older-record.txt",
           "\n\n".join(b for b in blocks if b.startswith(("4. ", "7. "))) + "\n")


def test_history_is_kept_as_counts_never_text(store: SqliteStore) -> None:
    decision = HistoryBudgeter(store, HistoryLimits.from_tokens(1000, 100)).build("t")
    snapshot = HistorySnapshot.from_decision(decision)
    assert snapshot.mode == "keep"
    assert [m.model_dump() for m in snapshot.messages] == [
        {"role": "user", "tokens": decision.message_tokens[0]},
        {"role": "assistant", "tokens": decision.message_tokens[1]},
    ]
    assert snapshot.turn_ids == ["u1"]
    assert "Hello" not in snapshot.model_dump_json()


# -- the record's own rules ------------------------------------------------------------


def test_rounds_are_numbered_from_one(payload: CompiledPromptPayload) -> None:
    data = _record(payload).model_dump()
    data["rounds"][0]["round"] = 2
    with pytest.raises(ValidationError, match=r"numbered 1, 2, 3… in order \(got \[2\]\)"):
        TurnRecord.model_validate(data)
    with pytest.raises(InputError, match=r"TurnRecord: rounds: must be numbered 1, 2, 3… in order"):
        TurnRecord(**data)


def test_the_recorded_tools_are_the_tools_sent(payload: CompiledPromptPayload) -> None:
    tools = TurnTools(ToolCatalog.build([ToolSpec(name="read_file"),
                                         ToolSpec(name="memory_get")]))
    round_ = tools.next_round()
    every = ChatRequest(model="m", compiled_prompt=payload,
                        tools=[ToolSpec(name="read_file"), ToolSpec(name="memory_get")])
    audit = TurnAudit("u1", "t", "agent")
    with pytest.raises(InputError) as caught:
        audit.add_round(payload.manifest, every, "openai-chat", {}, round_)
    assert str(caught.value) == (
        "ChatRequest → tools: round 1: the request carries tools ['read_file', 'memory_get'], "
        "but tool round 1 makes visible ['read_file', 'request_tools']"
    )
    request = round_.apply(every)
    record = audit.add_round(payload.manifest, request, "openai-chat",
                             build_request_body("openai-chat", request), round_)
    assert record.visible_tools == ["read_file", "request_tools"]
    assert [h.model_dump() for h in record.hidden_domains] == [
        {"domain": "memory", "tools": ["memory_get"]}]


def test_calls_must_belong_to_a_recorded_round(payload: CompiledPromptPayload) -> None:
    tools = TurnTools(ToolCatalog.build([ToolSpec(name="read_file")]))
    tools.next_round()
    tools.next_round()
    tools.decide(ToolCall(id="c9", name="read_file"))
    audit = TurnAudit("u1", "t", "agent")
    with pytest.raises(InputError, match="tool call 'c9' names round 2, but the turn has 0"):
        audit.record(tools.calls)


# -- provider shape --------------------------------------------------------------------


def test_anthropic_shape_names_every_cache_mark(payload: CompiledPromptPayload) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.system("Summary of earlier conversation:\nHi."),
        ChatMessage.user("Hi", cache_breakpoint=True), ChatMessage.assistant("Hello"),
        ChatMessage.user("Again"),
    ], tools=[ToolSpec(name="read_file")], cache=SYSTEM)
    shape = provider_shape("anthropic", request, build_request_body("anthropic", request))
    assert shape.dynamic_placement == "system"
    assert [(p.kind, p.chars) for p in shape.system] == [
        ("stable", len(payload.stable_system_text)),
        ("dynamic", len(payload.dynamic_system_text)),
        ("message", len("Summary of earlier conversation:\nHi.")),
    ]
    assert shape.cache_breakpoints == ["system[0] (stable)", "messages[0] (user)",
                                       "messages[2] (user)"]
    assert shape.prompt_cache_key is None
    assert shape.tool_count == 1


def test_without_stable_text_the_tools_carry_the_mark() -> None:
    request = ChatRequest(model="m", messages=[ChatMessage.user("Hi")],
                          tools=[ToolSpec(name="a"), ToolSpec(name="b")], cache=SYSTEM)
    shape = provider_shape("anthropic", request, build_request_body("anthropic", request))
    assert shape.cache_breakpoints == ["tools[1] (b)", "messages[0] (user)"]
    assert shape.system == []


def test_cache_first_shape_lists_the_parts_in_the_order_sent(
    payload: CompiledPromptPayload,
) -> None:
    summary = "Summary of earlier conversation:\nHi."
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[
        ChatMessage.system(summary), ChatMessage.user("Hi"), ChatMessage.assistant("Hello"),
        ChatMessage.user("Again"),
    ])
    shape = provider_shape("anthropic", request, build_request_body("anthropic", request))
    assert shape.dynamic_placement == "cache-first"
    assert [(p.kind, p.chars) for p in shape.system] == [
        ("stable", len(payload.stable_system_text)),
        ("message", len(summary)),
        ("dynamic", len(payload.dynamic_system_text)),
    ]
    assert shape.carrier.startswith("system blocks: stable, then system messages; dynamic:")
    # The minimal profile's stable text is far below 1,024 tokens: nothing is worth a mark.
    assert shape.cache_breakpoints == []


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses", "gemini"])
def test_other_providers_have_no_marks_and_count_their_tools(
    payload: CompiledPromptPayload, provider: str
) -> None:
    request = ChatRequest(model="m", compiled_prompt=payload, messages=[ChatMessage.user("Hi")],
                          tools=[ToolSpec(name="a"), ToolSpec(name="b")])
    shape = provider_shape(provider, request, build_request_body(provider, request))
    assert shape.cache_breakpoints == []
    assert shape.tool_count == 2
    expected_key = None if provider == "gemini" else (
        f"pioneer-{payload.manifest.fingerprint_stable[:48]}")
    assert shape.prompt_cache_key == expected_key


def test_the_body_hash_changes_with_the_body(payload: CompiledPromptPayload) -> None:
    def shape(text: str) -> str:
        request = ChatRequest(model="m", compiled_prompt=payload,
                              messages=[ChatMessage.user(text)])
        return provider_shape("gemini", request,
                              build_request_body("gemini", request)).body_sha256

    assert shape("Hi") == shape("Hi")
    assert shape("Hi") != shape("Ho")
