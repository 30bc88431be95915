"""What one store keeps, the other keeps: hostile texts (NUL, every control character,
the PostgreSQL store's own escape pairs) round-trip through SQLite and PostgreSQL alike,
in turns, summaries, artifact refs, ids, turn records and the episodic index; ids have a
documented length limit checked before any query; a PostgreSQL error that cannot
succeed on retry is raised at once."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreTarget
from hypothesis import given, settings
from hypothesis import strategies as st
from stores import HOSTILE_TEXTS, admin, make_store, with_database

from pioneer import Agent, AsyncAgent, InputError, StoreError, ensure_runtime_home
from pioneer.audit import TurnRecords
from pioneer.episodic import EpisodicIndex
from pioneer.history import ArtifactRef
from pioneer.history.postgres_migrations import MIGRATIONS as POSTGRES_MIGRATIONS
from pioneer.history.postgres_store import PostgresStore, escape_text, restore_text
from pioneer.history.sql_store import SqlStore
from pioneer.history.store import MAX_ID_CHARS

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

IDS = [f"h{n}" for n in range(len(HOSTILE_TEXTS))]


@pytest.fixture
def store(store_target: StoreTarget) -> Iterator[SqlStore]:
    with make_store(store_target.target) as opened:
        yield opened


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=IDS)
def test_every_character_round_trips_through_both_stores(
    store_target: StoreTarget, text: str,
) -> None:
    thread = "thread " + text
    ref = ArtifactRef("art " + text, "name " + text, "kind", version_id=text or None,
                      mime_type="text/" + text, sha256=text, role="user",
                      message_id=text, turn_item_id=text)
    with make_store(store_target.target) as writer:
        writer.ensure_thread(thread, model="model " + text)
        first = writer.add_turn(thread, user_text=text, assistant_text="reply " + text,
                                user_artifacts=[ref], turn_id="turn " + text,
                                user_item_id="item " + text)
        second = writer.add_turn(thread, user_text="next", assistant_text=text)
        summary = writer.set_thread_summary(thread, "summary " + text,
                                            through_turn_id=first.turn_id)
        writer.update_turn_prompt_manifest(first.turn_id, json.dumps({"note": text}))
    # A reader with no cache reads every field back from the database.
    with make_store(store_target.target, cache_bytes=0) as reader:
        assert reader.get_thread(thread) is not None
        assert reader.get_thread(thread).model == "model " + text  # type: ignore[union-attr]
        assert reader.get_thread_conversation_history(thread) == (first, second)
        stored = reader.get_thread_conversation_history(thread)[0]
        assert (stored.user_text, stored.turn_id, stored.user_item_id) == (
            text, "turn " + text, "item " + text)
        assert stored.user_artifacts == (ref,)
        assert reader.get_thread_summary(thread) == summary
        assert summary.text == ("summary " + text).strip()
        window = reader.get_history_window(thread)
        assert window.summary == summary and window.thread.thread_id == thread
        manifest = reader.get_turn_prompt_manifest(first.turn_id)
        assert manifest is not None and json.loads(manifest) == {"note": text}


#: Any text a store can be handed: every code point but lone surrogates (which become
#: U+FFFD at the edge, on both stores), with NUL and the escape pair's characters often.
ANY_TEXT = st.text(st.one_of(st.sampled_from("\x00\x01\x02 "),
                             st.characters(codec="utf-8")), max_size=40)


def test_any_text_reads_back_as_written(store_target: StoreTarget) -> None:
    with make_store(store_target.target) as writer, \
            make_store(store_target.target, cache_bytes=0) as reader:

        @settings(max_examples=80, deadline=None)
        @given(texts=st.lists(st.tuples(ANY_TEXT, ANY_TEXT), min_size=1, max_size=3),
               thread=ANY_TEXT.filter(lambda t: bool(t.strip())))
        def round_trip(texts: list[tuple[str, str]], thread: str) -> None:
            writer.ensure_thread(thread)
            written = tuple(writer.add_turn(thread, user_text=user, assistant_text=reply)
                            for user, reply in texts)
            assert reader.get_thread_conversation_history(thread)[-len(written):] == written
            assert [(e.user_text, e.assistant_text) for e in written] == texts

        round_trip()


def test_an_open_postgresql_store_connects_nothing_behind_its_callers_back(
    pg_server: Any,
) -> None:
    # The property above draws its examples while both stores are open, and Hypothesis
    # fails a draw during which the process's ``random`` moved. The pool draws from it for
    # every session it opens, on its own threads: a store whose pool was still connecting
    # when it was returned (and that grew a second session for its first caller) moved it
    # in the middle of an example now and then, under load; the example passed when
    # replayed. An open store has its session, and one caller at a time uses only it.
    schema, url = pg_server.new_schema()
    try:
        with make_store(url) as store, make_store(url, cache_bytes=0) as reader:
            state = random.getstate()
            store.ensure_thread("t")
            for n in range(5):
                store.add_turn("t", user_text=f"u{n}", assistant_text="a")
                assert len(reader.get_thread_conversation_history("t")) == n + 1
            moved = random.getstate() != state
            assert not moved
            for opened in (store, reader):
                stats = opened._pool.get_stats()  # type: ignore[attr-defined]
                assert (stats["pool_size"], stats["connections_num"]) == (1, 1)
    finally:
        pg_server.drop_schema(schema)


def test_the_escape_is_one_to_one() -> None:
    alphabet = ["\x00", "\x01", "\x02", "a"]
    texts = [""]
    for _ in range(5):
        texts = [t + c for t in texts for c in alphabet] + texts
    written = {escape_text(t) for t in texts}
    assert len(written) == len(set(texts))
    for text in texts:
        assert "\x00" not in escape_text(text)
        assert restore_text(escape_text(text)) == text
    assert escape_text("plain text") == "plain text"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    ensure_runtime_home(Path("home"))
    return Path("home")


def _answer(text: str) -> dict[str, Any]:
    return {"id": "m", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 3}}


def test_a_paid_turn_with_nul_is_stored_and_recalled_on_both_stores(
    store_target: StoreTarget, home: Path,
) -> None:
    # A model reply and a user message with NUL once made finish() fail on PostgreSQL
    # after every round was paid.
    hostile = "".join(HOSTILE_TEXTS)
    with Agent(store_target.target, provider="anthropic", model=agent_loop.MODELS["anthropic"],
               compile_input={"workspace_root": home}) as agent:
        turn = agent.turn("nul-thread", "Tell me about zucchini\x00 gardens " + hostile,
                          turn_id="nul-turn")
        turn.next_body()
        turn.receive(_answer("Zucchini\x00 grow fast " + hostile))
        finished = turn.finish()
        assert finished.entry.assistant_text == "Zucchini\x00 grow fast " + hostile
        again = agent.turn("nul-thread", "And zucchini soup?")
        body = again.next_body()
        sent = [block["text"] for message in body["messages"] for block in message["content"]
                if block["type"] == "text"]
        assert sent[:2] == ["Tell me about zucchini\x00 gardens " + hostile,
                            "Zucchini\x00 grow fast " + hostile]
    with make_store(store_target.target, cache_bytes=0) as reader, \
            EpisodicIndex(reader) as index:
        [stored] = reader.get_thread_conversation_history("nul-thread")
        assert stored.user_text == "Tell me about zucchini\x00 gardens " + hostile
        record = TurnRecords(reader).get("nul-turn")
        assert record is not None and record.turn_id == "nul-turn"
        found = index.search("nul-thread", "zucchini gardens")
        assert any("zucchini\x00 gardens" in hit.text for hit in found.candidates)


def test_the_async_agent_keeps_nul_on_both_stores(store_target: StoreTarget,
                                                  home: Path) -> None:
    # On PostgreSQL the async agent's store runs on psycopg's async pool, whose sessions
    # escape and restore text the same way.
    hostile = "".join(HOSTILE_TEXTS)

    async def run() -> None:
        async with (
            AsyncAgent(store_target.target, provider="anthropic",
                       model=agent_loop.MODELS["anthropic"],
                       compile_input={"workspace_root": home}) as agent,
            agent.turn("async-nul", "Zucchini\x00 " + hostile, turn_id="async-nul-turn") as turn,
        ):
            await turn.next_body()
            await turn.receive(_answer("Grown\x00 " + hostile))
            await turn.finish()

    asyncio.run(run())
    with make_store(store_target.target, cache_bytes=0) as reader:
        [stored] = reader.get_thread_conversation_history("async-nul")
        assert (stored.user_text, stored.assistant_text) == ("Zucchini\x00 " + hostile,
                                                             "Grown\x00 " + hostile)


# -- id limits -----------------------------------------------------------------------------

HUGE_ID = "x" * (1 << 20)


def test_an_id_over_the_limit_is_refused_before_any_query(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    store.ensure_thread("t1")
    turn = store.add_turn("t1", user_text="u", assistant_text="a")
    at_limit = "y" * MAX_ID_CHARS
    store.ensure_thread(at_limit)  # the limit itself is kept
    store.add_turn(at_limit, user_text="u", assistant_text="a", turn_id=at_limit)

    def queried(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store ran a query")

    monkeypatch.setattr(store, "_run", queried)
    records = TurnRecords(store)
    index = EpisodicIndex(store)
    calls = {
        "thread_id": [
            lambda: store.ensure_thread(HUGE_ID), lambda: store.get_thread(HUGE_ID),
            lambda: store.add_turn(HUGE_ID, user_text="u", assistant_text="a"),
            lambda: store.get_thread_conversation_history(HUGE_ID),
            lambda: store.get_history_window(HUGE_ID), lambda: store.get_thread_summary(HUGE_ID),
            lambda: store.set_thread_summary(HUGE_ID, "s", through_turn_id=turn.turn_id),
            lambda: store.set_history_cut(HUGE_ID, first_turn_id=turn.turn_id),
            lambda: index.search(HUGE_ID, "words"), lambda: index.snippets(HUGE_ID),
            lambda: index.thread_exists(HUGE_ID),
        ],
        "turn_id": [
            lambda: store.add_turn("t1", user_text="u", assistant_text="a", turn_id=HUGE_ID),
            lambda: store.get_turn_prompt_manifest(HUGE_ID),
            lambda: store.update_turn_prompt_manifest(HUGE_ID, "{}"),
            lambda: records.get(HUGE_ID),
        ],
        "through_turn_id": [lambda: store.set_thread_summary("t1", "s", through_turn_id=HUGE_ID)],
        "user_item_id": [lambda: store.add_turn("t1", user_text="u", assistant_text="a",
                                                user_item_id=HUGE_ID)],
    }
    for path, attempts in calls.items():
        for attempt in attempts:
            with pytest.raises(InputError) as info:
                attempt()
            assert str(info.value) == (f"{path}: an id is at most {MAX_ID_CHARS} characters "
                                       f"(got {len(HUGE_ID)}: {'x' * 40!r}...)")


def test_the_runner_refuses_a_long_thread_id_before_anything_is_sent(home: Path) -> None:
    with Agent("ids.db", provider="anthropic", model="m",
               compile_input={"workspace_root": home}) as agent:
        with pytest.raises(InputError, match=r"^Agent.turn → thread_id: an id is at most 256"):
            agent.turn(HUGE_ID, "hello")
        with pytest.raises(InputError, match=r"^Agent.turn → turn_id: an id is at most 256"):
            agent.turn("t", "hello", turn_id=HUGE_ID)


# -- PostgreSQL: text stored before the escape ---------------------------------------------

def test_text_stored_before_the_escape_reads_back_as_written(pg_server: Any) -> None:
    # A store at version 10 wrote text as given: its U+0001 (here in ids and texts, beside
    # what would read as the escape pairs) must not read back as NUL or lose a character.
    schema, url = pg_server.new_schema()
    old_version = next(step.version for step in POSTGRES_MIGRATIONS
                       if step.description.startswith("escaped text")) - 1
    try:
        with PostgresStore(url, migrations=POSTGRES_MIGRATIONS[:old_version]) as old:
            old.ensure_thread("old@id")
            old.add_turn("old@id", user_text="a@b", assistant_text="@@ c @\x02 d @",
                         turn_id="turn@1")
        # The old code's rows, written behind the store's back: "@" becomes U+0001.
        pg_server.execute(
            schema,
            "INSERT INTO threads (thread_id, model, created_at) "
            "SELECT replace(thread_id, '@', chr(1)), model, created_at FROM threads",
            "UPDATE turns SET thread_id = replace(thread_id, '@', chr(1)), "
            "turn_id = replace(turn_id, '@', chr(1)), "
            "user_text = replace(user_text, '@', chr(1)), "
            "assistant_text = replace(assistant_text, '@', chr(1))",
            "DELETE FROM threads WHERE strpos(thread_id, '@') > 0")
        keys = ("SELECT count(*) FROM pg_constraint con JOIN pg_namespace space "
                "ON space.oid = con.connamespace WHERE con.contype = 'f' "
                "AND space.nspname = current_schema()")
        with admin(with_database(pg_server.url, pg_server.database, schema)) as conn:
            before = conn.execute(keys).fetchone()
        with make_store(url) as store:
            [entry] = store.get_thread_conversation_history("old\x01id")
            assert (entry.turn_id, entry.user_text, entry.assistant_text) == (
                "turn\x011", "a\x01b", "\x01\x01 c \x01\x02 d \x01")
            later = store.add_turn("old\x01id", user_text="\x00\x01", assistant_text="x")
            assert store.get_thread_conversation_history("old\x01id") == (entry, later)
        with admin(with_database(pg_server.url, pg_server.database, schema)) as conn:
            assert conn.execute(keys).fetchone() == before != (0,)  # the keys made again
            assert conn.execute("SELECT version FROM pioneer_schema").fetchone() == (
                len(POSTGRES_MIGRATIONS),)
    finally:
        pg_server.drop_schema(schema)


# -- PostgreSQL: errors that cannot succeed are not retried ---------------------------------

@pytest.fixture
def postgres_store(pg_server: Any) -> Iterator[SqlStore]:
    schema, url = pg_server.new_schema()
    with make_store(url) as opened:
        yield opened
    pg_server.drop_schema(schema)


def test_an_index_row_too_large_is_raised_once_not_retried(postgres_store: SqlStore) -> None:
    # The 1 MB thread id of the report, written past the id check: PostgreSQL refuses its
    # index row (program_limit_exceeded, 54000), which no retry can cure.
    runs: list[int] = []

    def work(tx: Any) -> None:
        runs.append(1)
        tx.execute("INSERT INTO threads (thread_id, created_at) VALUES (?, ?)",
                   ("".join(chr(0x4E00 + n % 20000) for n in range(1 << 20)), "now"))

    with pytest.raises(StoreError, match="index row"):
        postgres_store.write(work)
    assert runs == [1]


@pytest.mark.parametrize(("statement", "message"), [
    ("SELECT 1 / 0", "division by zero"),                       # 22012, a data exception
    ("SELECT array_fill(1, ARRAY[1000000000])", "array size"),   # 54000, a program limit
    ("INSERT INTO threads (thread_id, created_at) VALUES ('t', NULL)", "null value"),  # 23502
])
def test_deterministic_errors_are_raised_once(postgres_store: SqlStore, statement: str,
                                              message: str) -> None:
    runs: list[int] = []

    def work(tx: Any) -> None:
        runs.append(1)
        tx.execute(statement)

    with pytest.raises(StoreError, match=message):
        postgres_store.write(work)
    assert runs == [1]
