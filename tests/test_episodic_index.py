"""The episodic index on a real SQLite file: snippets, provenance, search, exclusion, limits."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import StoreTarget
from hypothesis import given, settings
from hypothesis import strategies as st
from stores import make_store

from pioneer import StoreError
from pioneer.episodic import (
    CHUNK_CHARS,
    SMALL_INDEX,
    EpisodicIndex,
    Recall,
    Retained,
    fts_query,
    recall,
    search_form,
    split_text,
)
from pioneer.history import ArtifactRef, HistoryBudgeter, HistoryLimits, SqliteStore
from pioneer.history.sql_store import SqlStore
from pioneer.sections import ThreadSnippet

# Everyday turns that share common words, so the turns under test have rare ones (BM25
# needs a background: a word found in most snippets says little).
FILLER = [
    ("Can you help me plan the week?", "Sure, let us start with Monday."),
    ("What should I cook tonight?", "A simple pasta would do."),
    ("Remind me to call my sister.", "I will keep that in mind for later."),
    ("How long is the walk to the station?", "About twenty minutes."),
    ("Is it going to rain today?", "Probably in the afternoon."),
    ("Summarise the meeting notes please.", "The team agreed to ship on Friday."),
    ("Any good books lately?", "Try a short novel for the weekend."),
    ("Thanks for the help earlier.", "You are welcome."),
]


def add(store: SqlStore, name: str, user: str | None, reply: str | None,
        **extra: object) -> None:
    store.add_turn("t1", user_text=user, assistant_text=reply, turn_id=name,
                   user_item_id=f"{name}-u", assistant_item_id=f"{name}-a", **extra)  # type: ignore[arg-type]


def fill(store: SqlStore) -> None:
    for n, (user, reply) in enumerate(FILLER):
        add(store, f"filler-{n}", user, reply)



@pytest.fixture
def attached(store_target: StoreTarget) -> Iterator[tuple[SqlStore, EpisodicIndex]]:
    """A store (SQLite or PostgreSQL) with an index subscribed to its writes."""
    with make_store(store_target.target) as opened, EpisodicIndex(opened) as index:
        opened.ensure_thread("t1")
        yield opened, index


@pytest.fixture
def store(attached: tuple[SqlStore, EpisodicIndex]) -> SqlStore:
    return attached[0]


@pytest.fixture
def index(attached: tuple[SqlStore, EpisodicIndex]) -> EpisodicIndex:
    return attached[1]


def sources(index: EpisodicIndex, text: str, **options: object) -> list[str]:
    return [hit.source_id for hit in recall(index, "t1", text, **options).kept]  # type: ignore[arg-type]


# -- writing --------------------------------------------------------------------------


def test_writing_a_turn_indexes_both_messages_in_the_full_text_index(
    store_target: StoreTarget, store: SqlStore, index: EpisodicIndex
) -> None:
    add(store, "turn-1", "We moved the billing service to Frankfurt.", "Good, noted.")
    assert [(s.source_id, s.role, s.context, s.text) for s in index.snippets("t1")] == [
        ("thread:t1/turn-1/turn-1-u/c0", "user", "user_visible_thread_item",
         "We moved the billing service to Frankfurt."),
        ("thread:t1/turn-1/turn-1-a/c0", "assistant", "user_visible_thread_item", "Good, noted."),
    ]
    if store_target.dialect == "postgresql":  # a tsvector column under a GIN index
        (method,), (vectors,) = store.read(lambda tx: (
            tx.execute("SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = "
                       "i.indexrelid JOIN pg_am am ON am.oid = c.relam WHERE c.relname = "
                       "'episodic_search'").fetchone(),
            tx.execute("SELECT string_agg(search::text, ' / ' ORDER BY id) "
                       "FROM episodic_snippets").fetchone()))
        assert method == "gin"
        assert vectors == "'bill':4 'frankfurt':7 'move':2 'servic':5 / 'good':1 'note':2"
        return
    conn = sqlite3.connect(store_target.target)
    try:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'episodic_fts'").fetchone()
        (rows,) = conn.execute("SELECT COUNT(*) FROM episodic_fts").fetchone()
    finally:
        conn.close()
    assert "fts5" in sql.lower()
    assert rows == 2


def test_recall_finds_the_turn_after_reopening_the_store(store_target: StoreTarget,
                                                         store: SqlStore) -> None:
    fill(store)
    add(store, "turn-b", "We moved the billing service to Frankfurt.", "The rollout is done.")
    store.close()
    with make_store(store_target.target, read_only=True) as again, \
            EpisodicIndex(again) as reopened:
        assert sources(reopened, "billing in frankfurt?") == [
            "thread:t1/turn-b/turn-b-u/c0"
        ]


def test_a_failed_turn_write_leaves_no_snippets(store: SqlStore,
                                               index: EpisodicIndex) -> None:
    add(store, "turn-1", "first words", "first reply")
    with pytest.raises(StoreError, match="already exists"):
        add(store, "turn-1", "second words", "second reply")
    assert [s.text for s in index.snippets("t1")] == ["first words", "first reply"]


def test_empty_and_missing_texts_make_no_snippets(store: SqlStore,
                                                 index: EpisodicIndex) -> None:
    add(store, "turn-1", "   ", None)
    store.add_turn("t1", user_text=None, assistant_text="only a reply", turn_id="turn-2")
    assert [(s.turn_id, s.role) for s in index.snippets("t1")] == [("turn-2", "assistant")]


def test_concurrent_writers_index_every_turn(db: Path, store: SqlStore,
                                              index: EpisodicIndex) -> None:
    def write(worker: int) -> None:
        for n in range(15):
            add(store, f"w{worker}-{n}", f"worker {worker} message {n}", f"reply {n}")

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    snippets = index.snippets("t1")
    assert len(snippets) == 4 * 15 * 2
    assert len({s.source_id for s in snippets}) == len(snippets)
    assert index.reindex_thread("t1") == len(snippets)


def test_a_store_without_an_index_attached_writes_no_snippets(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "plain.db") as plain:
        plain.ensure_thread("t1")
        plain.add_turn("t1", user_text="unindexed", assistant_text="reply")
    with EpisodicIndex(tmp_path / "plain.db") as index:
        assert index.snippets("t1") == ()


# -- non-ASCII ------------------------------------------------------------------------

# Cyrillic, Greek and full-width letters on purpose: they are what is being tested.
NON_ASCII = [
    ("Wir treffen uns im Café am Kölner Dom.", "wo ist das cafe in koln", "diacritics folded"),
    ("Встреча перенесена в Москве на четверг.", "встреча в МОСКВЕ", "Cyrillic, any case"),  # noqa: RUF001
    ("Η συνάντηση είναι στην Αθήνα.", "ΑΘΉΝΑ", "Greek, any case"),  # noqa: RUF001
    ("東京で会議があります。", "会議はいつ？", "Japanese without spaces"),  # noqa: RUF001
    ("我们明天去上海开会。", "上海", "Chinese without spaces"),
    ("Ship the 🚀 launch checklist ½ done", "launch checklist", "emoji around words"),
]


@pytest.mark.parametrize(("stored", "query", "label"), NON_ASCII, ids=[c[2] for c in NON_ASCII])
def test_non_ascii_text_is_recalled(store: SqlStore, index: EpisodicIndex, stored: str,
                                    query: str, label: str) -> None:
    fill(store)
    add(store, "turn-x", stored, "Okay.")
    assert sources(index, query) == ["thread:t1/turn-x/turn-x-u/c0"]
    assert index.snippets("t1")[-2].text == stored  # shown as written, not as indexed


def test_search_form_sets_ideographs_apart() -> None:
    assert search_form("東京で会議 ok") == " 東  京  で  会  議  ok"


# -- queries --------------------------------------------------------------------------

HOSTILE = [
    'billing" OR "x', "billing NEAR(frankfurt, 2)", "bill* AND ^frank", "text:billing",
    "-billing +frankfurt", "(billing", 'unbalanced "quote billing', "NOT billing",
    '"""billing', "'; DROP billing",
    "billing\x00frankfurt", "{col1 col2}: billing",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_fts_syntax_in_user_text_is_only_words(store: SqlStore, index: EpisodicIndex,
                                               text: str) -> None:
    fill(store)
    add(store, "turn-b", "We moved the billing service to Frankfurt.", "Done.")
    query = fts_query(text)
    assert query is not None
    assert all(part.startswith('"') and part.endswith('"') for part in query.split(" OR "))
    assert sources(index, text) == ["thread:t1/turn-b/turn-b-u/c0"]


def test_lone_surrogates_are_replaced_not_raised(store: SqlStore,
                                                 index: EpisodicIndex) -> None:
    fill(store)
    add(store, "turn-b", "The billing\ud800 service.", "Done.")
    index.add_task_summary("t1", "turn-b", "task-1", "Audited\udfff invoices.")
    texts = [s.text for s in index.snippets("t1") if s.turn_id == "turn-b"]
    assert texts == ["The billing\ufffd service.", "Done.", "Audited\ufffd invoices."]
    assert sources(index, "billing\ud800 invoices") == [
        "thread:t1/turn-b/task-1/c0", "thread:t1/turn-b/turn-b-u/c0"]


def test_query_terms() -> None:
    assert fts_query("Cats OR dogs, and the NEAR cats") == '"cats" OR "dogs" OR "near"'
    assert fts_query("a I the of ? !") is None
    assert fts_query("東京で") == '"東 京" OR "京 で"'
    assert fts_query("x 会") == '"会"'


def test_long_messages_keep_their_longest_words() -> None:
    words = [f"w{n}" for n in range(40)] + ["refactoring"]
    query = fts_query(" ".join(words))
    assert query is not None
    terms = query.split(" OR ")
    assert len(terms) == 32
    assert terms[-1] == '"refactoring"'  # kept, and still in message order


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_makes_a_query_fts5_accepts(text: str) -> None:
    query = fts_query(text)
    if query is None:
        return
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize = "
                     "'porter unicode61 remove_diacritics 2')")
        conn.execute("INSERT INTO f (text) VALUES (?)", (search_form(text),))
        conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (query,)).fetchall()
    finally:
        conn.close()


# -- chunks and provenance ------------------------------------------------------------

LONG = "\n\n".join(
    f"Paragraph {n} about the deployment of service {n}. " + "More detail follows here. " * 12
    for n in range(5)
)


def test_long_texts_are_chunked_at_breaks() -> None:
    chunks = split_text(LONG)
    assert len(chunks) > 3
    assert all(len(chunk) <= CHUNK_CHARS for chunk in chunks)
    assert all(chunk.endswith(".") for chunk in chunks)  # cut after a sentence, not mid-word
    assert split_text(LONG) == chunks


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab .\n東"), max_size=1200),
       st.integers(min_value=1, max_value=120))
def test_chunks_lose_nothing_and_respect_the_limit(text: str, limit: int) -> None:
    chunks = split_text(text, limit)
    assert all(0 < len(chunk) <= limit for chunk in chunks)
    assert "".join("".join(chunks).split()) == "".join(text.split())


def test_provenance_is_stable_across_reindexing(store: SqlStore,
                                                index: EpisodicIndex) -> None:
    fill(store)
    add(store, "turn-long", "Tell me about the deployments.", LONG)
    store.set_thread_summary("t1", "Earlier: the week was planned.", through_turn_id="filler-3")
    index.add_task_summary("t1", "turn-long", "task-7", "Checked every deployment log.")
    written = index.snippets("t1")
    hits = sources(index, "deployment of service 3")
    assert [s.chunk_id for s in written if s.item_id == "turn-long-a"] == [
        f"c{n}" for n in range(len(split_text(LONG)))
    ]
    for _ in range(2):
        assert index.reindex_thread("t1") == len(written)
        assert index.snippets("t1") == written
        assert sources(index, "deployment of service 3") == hits


def test_reindexing_reproduces_what_writing_indexed(tmp_path: Path,
                                                    store: SqlStore,
                                                    index: EpisodicIndex) -> None:
    with SqliteStore(tmp_path / "late.db") as late:
        late.ensure_thread("t1")
        for target in (store, late):
            add(target, "turn-long", "Tell me about the deployments.", LONG)
            add(target, "turn-2", "Grüße aus Köln", "東京で会議")
    with EpisodicIndex(tmp_path / "late.db") as late_index:
        assert late_index.reindex_all() == {"t1": len(index.snippets("t1"))}
        assert late_index.snippets("t1") == index.snippets("t1")


def test_reindexing_an_unknown_thread_is_an_error(index: EpisodicIndex) -> None:
    with pytest.raises(StoreError, match="thread 'nope' does not exist"):
        index.reindex_thread("nope")


# -- summaries ------------------------------------------------------------------------


def test_only_the_current_compaction_summary_is_indexed(store: SqlStore,
                                                        index: EpisodicIndex) -> None:
    fill(store)
    store.set_thread_summary("t1", "The user plans a trip to Lisbon.", through_turn_id="filler-2")
    store.set_thread_summary("t1", "The trip moved to Porto.", through_turn_id="filler-5")
    summaries = [s for s in index.snippets("t1") if s.role == "generated_summary"]
    assert [(s.source_id, s.context, s.text) for s in summaries] == [
        ("thread:t1/filler-5/summary/c0", "thread_compaction_summary", "The trip moved to Porto.")
    ]


def test_task_summaries_are_indexed_and_replaced(store: SqlStore,
                                                 index: EpisodicIndex) -> None:
    fill(store)
    index.add_task_summary("t1", "filler-1", "task-1", "Compared three pasta recipes.")
    index.add_task_summary("t1", "filler-1", "task-1", "Compared four risotto recipes.")
    tasks = [s for s in index.snippets("t1") if s.role == "task_summary"]
    assert [(s.source_id, s.context, s.text) for s in tasks] == [
        ("thread:t1/filler-1/task-1/c0", "user_visible_task_summary",
         "Compared four risotto recipes.")
    ]
    assert sources(index, "risotto") == ["thread:t1/filler-1/task-1/c0"]


@pytest.mark.parametrize(
    ("turn", "item", "text", "message"),
    [
        ("nope", "task-1", "text", "turn 'nope' is not in thread 't1'"),
        ("filler-0", "task-1", "  ", "a task summary must not be empty"),
        ("filler-0", " ", "text", "a task summary needs an item id"),
    ],
)
def test_bad_task_summaries_are_refused(store: SqlStore, index: EpisodicIndex, turn: str,
                                        item: str, text: str, message: str) -> None:
    fill(store)
    with pytest.raises(StoreError, match=message):
        index.add_task_summary("t1", turn, item, text)


# -- exclusion, artifacts, threshold, limits ------------------------------------------


def test_retained_turns_are_left_out_but_their_task_summaries_are_not(
    store: SqlStore, index: EpisodicIndex
) -> None:
    fill(store)
    add(store, "turn-b", "The billing service runs in Frankfurt.", "Billing is stable.")
    index.add_task_summary("t1", "turn-b", "task-1", "Audited the billing invoices.")
    everything = sources(index, "billing")
    assert set(everything) == {"thread:t1/turn-b/turn-b-u/c0", "thread:t1/turn-b/turn-b-a/c0",
                               "thread:t1/turn-b/task-1/c0"}
    assert sources(index, "billing", retained=Retained(frozenset({"turn-b"}))) == [
        "thread:t1/turn-b/task-1/c0"
    ]


def test_a_sent_summary_is_left_out(store: SqlStore, index: EpisodicIndex) -> None:
    fill(store)
    store.set_thread_summary("t1", "The user is moving to Lisbon.", through_turn_id="filler-2")
    assert sources(index, "lisbon") == ["thread:t1/filler-2/summary/c0"]
    assert sources(index, "lisbon", retained=Retained(summary=True)) == []


def test_retained_from_a_history_decision(store: SqlStore, index: EpisodicIndex) -> None:
    fill(store)
    add(store, "turn-b", "The billing service runs in Frankfurt.", "Billing is stable.")
    roomy = HistoryBudgeter(store, HistoryLimits.from_tokens(100_000, 0)).build("t1")
    assert set(roomy.turn_ids) == {f"filler-{n}" for n in range(8)} | {"turn-b"}
    tight = HistoryBudgeter(store, HistoryLimits.from_tokens(40, 0)).build("t1")
    assert tight.mode == "truncate"
    retained = Retained.from_decision(tight)
    assert retained == Retained(frozenset(tight.turn_ids), False)
    assert "turn-b" in tight.turn_ids  # the newest turn fits, so history carries it
    assert sources(index, "billing", retained=retained) == []


def test_default_retained_is_the_keep_window(store: SqlStore, index: EpisodicIndex) -> None:
    fill(store)
    assert index.default_retained("t1") == Retained(
        frozenset(f"filler-{n}" for n in range(8)), False)
    store.set_thread_summary("t1", "Planning and cooking.", through_turn_id="filler-5")
    assert index.default_retained("t1") == Retained(
        frozenset({"filler-6", "filler-7"}), True)
    assert index.default_retained("t1", limit=1) == Retained(frozenset({"filler-7"}), True)
    assert index.default_retained("nope") == Retained()


def test_hits_carry_their_scoped_artifacts(store: SqlStore, index: EpisodicIndex) -> None:
    fill(store)
    chart = ArtifactRef("a-1", "billing chart.png", "image", version_id="v1",
                        turn_item_id="turn-b-a")
    other = ArtifactRef("a-2", "invoice.pdf", "document", turn_item_id="elsewhere")
    upload = ArtifactRef("a-3", "billing.csv", "spreadsheet")
    add(store, "turn-b", "Plot the billing numbers.", "Here is the billing chart.",
        user_artifacts=[upload], assistant_artifacts=[chart, other])
    hits = {hit.role: hit for hit in recall(index, "t1", "billing").kept}
    assert hits["assistant"].artifacts == (chart,)  # bound to the reply's item
    assert hits["user"].artifacts == (upload,)  # nothing bound: the whole user side


def test_only_snippets_above_the_threshold_are_kept(store: SqlStore,
                                                    index: EpisodicIndex) -> None:
    fill(store)
    for n, animal in enumerate(["zebra", "otter", "heron", "lynx", "bison", "crane"]):
        add(store, f"turn-{n}", f"Project notes: the {animal} page.", f"Project {animal} saved.")
    common = recall(index, "t1", "the project")  # in 12 of 28 snippets: says little
    assert len(common.candidates) == 12
    assert common.kept == ()
    found = recall(index, "t1", "the project zebra")
    assert [hit.source_id for hit in found.kept] == [
        "thread:t1/turn-0/turn-0-a/c0", "thread:t1/turn-0/turn-0-u/c0"]
    assert all(hit.score >= 1.0 for hit in found.kept)
    scores = [hit.score for hit in found.candidates]
    assert scores == sorted(scores, reverse=True)


def snippet(score: float) -> ThreadSnippet:
    return ThreadSnippet("turn", "item", f"c{score}", "user", "user_visible_thread_item",
                         score, "text", thread_id="t1")


@pytest.mark.parametrize(
    ("scores", "threshold", "kept"),
    [
        ((4.0, 2.5, 1.9, 1.2), 2.0, (4.0, 2.5)),  # half the best is above the floor
        ((1.6, 1.2, 0.9), 1.0, (1.6, 1.2)),  # the floor is above half the best
        ((0.8, 0.5), 1.0, ()),
        ((), 1.0, ()),
    ],
)
def test_threshold_is_the_floor_or_half_the_best(scores: tuple[float, ...], threshold: float,
                                                 kept: tuple[float, ...]) -> None:
    found = Recall('"x"', tuple(snippet(score) for score in scores))
    assert found.threshold == threshold
    assert tuple(hit.score for hit in found.kept) == kept


def test_candidates_are_capped(store: SqlStore, index: EpisodicIndex) -> None:
    for n in range(50):
        add(store, f"turn-{n}", f"Deployment number {n} went fine.", f"Noted deployment {n}.")
    found = recall(index, "t1", "deployment")
    assert len(found.candidates) == 40
    assert len(recall(index, "t1", "deployment", max_candidates=7).candidates) == 7


def test_a_query_over_its_time_limit_is_stopped_by_the_database(
    store_target: StoreTarget, store: SqlStore, index: EpisodicIndex
) -> None:
    for n in range(200):
        add(store, f"turn-{n}", f"Deployment number {n} went fine.", f"Noted deployment {n}.")
    if store_target.dialect == "postgresql":
        # Another session holds the index's table: the search waits on its lock until the
        # server stops it at the limit.
        import psycopg

        with psycopg.connect(str(store_target.target)) as blocker:
            blocker.execute("LOCK TABLE episodic_snippets IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError,
                               match="episodic search stopped at its 50 ms time limit"):
                index.search("t1", "deployment", timeout_ms=50)
    else:
        with pytest.raises(StoreError, match="episodic search stopped at its 0 ms time limit"):
            index.search("t1", "deployment", timeout_ms=0)
    assert len(index.search("t1", "deployment").candidates) == 40  # the connection still works


def test_other_threads_are_never_searched(store: SqlStore, index: EpisodicIndex) -> None:
    fill(store)
    store.ensure_thread("t2")
    store.add_turn("t2", user_text="Secret billing plans.", assistant_text="Hidden.")
    assert sources(index, "billing") == []


def test_a_hits_provenance_names_its_thread(store: SqlStore, index: EpisodicIndex) -> None:
    store.ensure_thread("team/ops")
    for n, (user, reply) in enumerate(FILLER):
        store.add_turn("team/ops", user_text=user, assistant_text=reply, turn_id=f"f{n}")
    store.add_turn("team/ops", user_text="Rotate the billing keys.", assistant_text="Done.",
                   turn_id="turn-z", user_item_id="u", assistant_item_id="a")
    (hit,) = recall(index, "team/ops", "billing keys").kept
    assert (hit.thread_id, hit.source_id) == ("team/ops", "thread:team/ops/turn-z/u/c0")
    assert [s.source_id for s in index.snippets("team/ops")][-2:] == [
        "thread:team/ops/turn-z/u/c0", "thread:team/ops/turn-z/a/c0"]


def test_small_index_is_where_one_occurrence_stops_being_chance() -> None:
    def once_at_most(n: int) -> float:  # a word in one snippet of four, in n snippets
        return 0.75 ** n + n * 0.25 * 0.75 ** (n - 1)

    assert SMALL_INDEX == 18
    assert once_at_most(SMALL_INDEX - 1) > 0.05 >= once_at_most(SMALL_INDEX)


SMALL = [  # six turns: twelve snippets, fewer than SMALL_INDEX
    ("How slow is the gateway in Frankfurt?", "p50 is 40 ms in Frankfurt."),
    ("Plot the gateway latency.", "Here is the latency chart."),
    ("What should I cook tonight?", "A simple pasta would do."),
    ("Remind me to call my sister.", "I will keep that in mind."),
    ("Is it going to rain today?", "Probably in the afternoon."),
    ("Any good books lately?", "Try a short novel for the weekend."),
]


@pytest.mark.parametrize(("text", "kept"), [
    # one shared word, its other words new to the thread: nothing is recalled
    ("How do I size the connection pool for the weekend batch?", []),
    ("Thanks, is the weekend free?", []),
    # the word alone is the whole message: its snippet is recalled
    ("weekend?", ["turn-5/turn-5-a"]),
    ("会議", []), ("pasta", ["turn-2/turn-2-a"]),
    # two shared words: the best is a yardstick, and half of it is the cut
    ("Redo the latency chart for Maria with new colours", ["turn-1/turn-1-a"]),
])
def test_in_a_small_index_one_shared_word_of_several_recalls_nothing(
    store: SqlStore, index: EpisodicIndex, text: str, kept: list[str],
) -> None:
    for n, (user, reply) in enumerate(SMALL):
        add(store, f"turn-{n}", user, reply)
    found = recall(index, "t1", text)
    assert found.small_index
    assert [hit.source_id.removeprefix("thread:t1/").removesuffix("/c0")
            for hit in found.kept] == kept


def test_a_larger_index_recalls_on_one_rare_word(store: SqlStore, index: EpisodicIndex) -> None:
    for n, (user, reply) in enumerate(SMALL + FILLER):
        add(store, f"turn-{n}", user, reply)
    add(store, "turn-x", "We moved the billing service to Frankfurt.", "Done.")
    found = recall(index, "t1", "Where did the billing service move again?")
    assert not found.small_index
    assert "thread:t1/turn-x/turn-x-u/c0" in [hit.source_id for hit in found.kept]


def test_missing_and_closed_indexes(tmp_path: Path, index: EpisodicIndex) -> None:
    with pytest.raises(StoreError, match="no conversation store at this path"):
        EpisodicIndex(tmp_path / "missing.db", create=False)
    index.close()
    with pytest.raises(StoreError, match="the episodic index is closed"):
        index.search("t1", "anything")


def test_an_index_that_creates_the_store_uses_the_wal_journal(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    index = EpisodicIndex(path)
    index.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
