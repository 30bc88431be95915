"""Recall scores are the thread's own: BM25 over its snippets, whatever the store holds.

On SQLite each thread's snippets take one rowid range (its slot), so a search reads only
that range of the full-text index; the score is computed from the thread's own counts.
These tests hold the score to BM25 computed by hand, a thread's results to what it gives
alone in its store, the rowid layout through every kind of write, and the migration that
brings an older store to that layout.
"""

from __future__ import annotations

import math
import random
import sqlite3
import tempfile
from pathlib import Path

import pytest
from conftest import StoreTarget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stores import make_store

from pioneer.episodic import EpisodicIndex, search_form
from pioneer.episodic.chunks import turn_snippets
from pioneer.episodic.writer import slot_rowids
from pioneer.history import MIGRATIONS, SqliteStore
from pioneer.history.sql_store import SqlStore

WORDS = ("billing", "export", "Frankfurt", "latency", "gateway", "chart", "pasta", "rain",
         "novel", "weekend", "sister", "station", "deploy", "cluster", "invoice", "budget")


def hits(index: EpisodicIndex, thread: str, text: str) -> list[tuple[str, float]]:
    return [(hit.source_id, hit.score) for hit in index.search(thread, text).candidates]


def random_turns(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) + ".",
             " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) + ".") for _ in range(count)]


def write(store: SqlStore, thread: str, turns: list[tuple[str, str]]) -> None:
    store.ensure_thread(thread)
    for n, (user, reply) in enumerate(turns):
        store.add_turn(thread, user_text=user, assistant_text=reply, turn_id=f"{thread}-{n}",
                       user_item_id=f"{thread}-{n}-u", assistant_item_id=f"{thread}-{n}-a")


# -- the score ------------------------------------------------------------------------


def test_the_score_is_bm25_over_the_threads_own_snippets(tmp_path: Path) -> None:
    texts = ["billing billing export for the team", "the weekend was calm",
             "pasta for dinner tonight", "billing questions can wait",
             "a long note about the station, the rain, the novel and the weekend walk",
             "the chart is ready"]
    with SqliteStore(tmp_path / "s.db") as store, EpisodicIndex(store) as index:
        store.ensure_thread("t")
        for n, text in enumerate(texts):
            store.add_turn("t", user_text=text, assistant_text=None, turn_id=f"turn-{n}",
                           user_item_id=f"u{n}")
        # Another thread full of the same word changes nothing below.
        write(store, "other", [("billing billing billing", "billing")] * 30)
        found = {hit.source_id: hit.score for hit in index.search("t", "billing export").candidates}
    average = sum(len(text) for text in texts) / len(texts)

    def term(found_in: int, occurs: int, length: int) -> float:
        weight = math.log((len(texts) - found_in + 0.5) / (found_in + 0.5))
        return weight * occurs * 2.2 / (occurs + 1.2 * (0.25 + 0.75 * length / average))

    assert set(found) == {"thread:t/turn-0/u0/c0", "thread:t/turn-3/u3/c0"}
    assert found["thread:t/turn-0/u0/c0"] == pytest.approx(
        term(2, 2, len(texts[0])) + term(1, 1, len(texts[0])), rel=1e-12)
    assert found["thread:t/turn-3/u3/c0"] == pytest.approx(term(2, 1, len(texts[3])), rel=1e-12)


def test_occurrences_are_counted_whatever_characters_the_text_holds(tmp_path: Path) -> None:
    # The count is the text's growth under highlight()'s one-character marker: a text that
    # already holds that character is counted the same.
    with SqliteStore(tmp_path / "s.db") as store, EpisodicIndex(store) as index:
        for thread, text in (("plain", "invoice note invoice"),
                             ("marked", "invoice\x01note\x01invoice")):
            write(store, thread, [(text, "ok")] + [(f"{w} {w}", "fine") for w in WORDS[:12]])
        plain, marked = (index.search(t, "invoice").candidates for t in ("plain", "marked"))
    assert [hit.score for hit in plain] == pytest.approx([hit.score for hit in marked])


def test_a_term_in_half_the_thread_or_more_finds_candidates_scoring_nothing(
        tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store, EpisodicIndex(store) as index:
        write(store, "t", [("billing again", "billing done"), ("rain", "billing")])
        found = index.search("t", "billing")
    assert [hit.score for hit in found.candidates] == [0.0, 0.0, 0.0]
    assert [hit.turn_id for hit in found.candidates] == ["t-1", "t-0", "t-0"]  # newest first


# -- one thread's results, whatever else the store holds -------------------------------


def test_a_threads_results_do_not_depend_on_the_other_threads(store_target: StoreTarget,
                                                               tmp_path: Path) -> None:
    mine = random_turns(1, 25)
    queries = ["billing export", "Frankfurt latency chart", "pasta for the weekend",
               "deploy the cluster budget", "station"]
    with make_store(store_target.target) as store, EpisodicIndex(store) as index:
        write(store, "mine", mine)
        alone = {query: hits(index, "mine", query) for query in queries}
        for other in range(12):
            write(store, f"other-{other}", random_turns(100 + other, 20))
        write(store, "mine-too", mine)  # the same turns again, in another thread
        assert {query: hits(index, "mine", query) for query in queries} == alone
        assert any(alone.values())


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mine=st.integers(0, 10_000), others=st.lists(st.integers(0, 10_000), max_size=4),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
def test_other_threads_never_move_a_threads_hits(tmp_path: Path, mine: int, others: list[int],
                                                  query: list[str]) -> None:
    text = " ".join(query)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))  # a new pair of files for each example
    with SqliteStore(folder / "alone.db") as alone, EpisodicIndex(alone) as index:
        write(alone, "mine", random_turns(mine, 12))
        expected = hits(index, "mine", text)
    with SqliteStore(folder / "shared.db") as shared, EpisodicIndex(shared) as index:
        # Other threads written before, between and after: their rows surround the thread's.
        for n, seed in enumerate(others[:2]):
            write(shared, f"before-{n}", random_turns(seed, 10))
        turns = random_turns(mine, 12)
        write(shared, "mine", turns[:6])
        for n, seed in enumerate(others[2:]):
            write(shared, f"between-{n}", random_turns(seed, 10))
        for n, (user, reply) in enumerate(turns[6:], start=6):
            shared.add_turn("mine", user_text=user, assistant_text=reply, turn_id=f"mine-{n}",
                            user_item_id=f"mine-{n}-u", assistant_item_id=f"mine-{n}-a")
        write(shared, "after", random_turns(mine + 1, 10))
        assert hits(index, "mine", text) == expected


# -- the rowid layout (SQLite) ----------------------------------------------------------


def rowids(path: Path) -> dict[str, list[int]]:
    with sqlite3.connect(path) as conn:
        found: dict[str, list[int]] = {}
        for thread, rowid in conn.execute(
                "SELECT thread_id, id FROM episodic_snippets ORDER BY id"):
            found.setdefault(thread, []).append(rowid)
        fts = sorted(rowid for (rowid,) in conn.execute("SELECT rowid FROM episodic_fts"))
        slots = dict(conn.execute("SELECT thread_id, slot FROM episodic_threads"))
        conn.execute("INSERT INTO episodic_fts (episodic_fts) VALUES ('integrity-check')")
    assert fts == sorted(rowid for ids in found.values() for rowid in ids)
    for thread, ids in found.items():
        first, last = slot_rowids(slots[thread])
        assert all(first < rowid <= last for rowid in ids), thread
    assert len(set(slots.values())) == len(slots)
    return found


def test_every_write_keeps_a_threads_snippets_in_its_slot(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store, EpisodicIndex(store) as index:
        for round_ in range(3):  # the threads' turns interleaved
            for thread in ("a", "b", "c"):
                store.ensure_thread(thread)
                store.add_turn(thread, user_text=f"billing round {round_} " + "x" * 500,
                               assistant_text="ok", turn_id=f"{thread}-{round_}")
        index.add_task_summary("b", "b-1", "task", "Exported the Frankfurt billing.")
        store.set_thread_summary("a", "The billing rounds so far.", through_turn_id="a-2")
        index.reindex_thread("c")
        before = hits(index, "b", "Frankfurt billing")
        index.reindex_thread("b")
        assert hits(index, "b", "Frankfurt billing") == before
    layout = rowids(path)
    assert set(layout) == {"a", "b", "c"}


def old_store(path: Path) -> None:
    """A version-8 store whose snippets took rowids in the order they were written, the
    threads' interleaved (before the slots)."""
    with SqliteStore(path, migrations=MIGRATIONS[:8]) as store:
        for round_, (user, reply) in enumerate(random_turns(7, 6)):
            for thread in ("t1", "team/ops", "t3"):
                store.ensure_thread(thread)
                store.add_turn(thread, user_text=f"{thread} {user}", assistant_text=reply,
                               turn_id=f"{thread}-{round_}")
    with sqlite3.connect(path) as conn:
        turns = conn.execute("SELECT thread_id, turn_id, seq, user_item_id, user_text, "
                             "assistant_item_id, assistant_text FROM turns ORDER BY rowid")
        for thread, turn, seq, user_item, user, reply_item, reply in turns.fetchall():
            for snippet in turn_snippets(thread, turn, seq, user_item_id=user_item,
                                         user_text=user, assistant_item_id=reply_item,
                                         assistant_text=reply):
                rowid = conn.execute(
                    "INSERT INTO episodic_snippets (thread_id, turn_id, item_id, chunk_id, "
                    "role, seq, text) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (snippet.thread_id, snippet.turn_id, snippet.item_id, snippet.chunk_id,
                     snippet.role, snippet.seq, snippet.text)).fetchone()[0]
                conn.execute("INSERT INTO episodic_fts (rowid, text) VALUES (?, ?)",
                             (rowid, search_form(snippet.text)))


def test_an_older_store_is_renumbered_into_slots(tmp_path: Path) -> None:
    old, fresh = tmp_path / "old.db", tmp_path / "fresh.db"
    old_store(old)
    with sqlite3.connect(old) as conn:
        written = [row[0] for row in conn.execute(
            "SELECT thread_id FROM episodic_snippets ORDER BY id")]
    assert written[:4] == ["t1", "t1", "team/ops", "team/ops"]  # interleaved before
    queries = ["billing export", "Frankfurt latency", "pasta rain weekend"]
    with SqliteStore(old) as store, EpisodicIndex(store) as index:
        migrated = {thread: ([s.source_id for s in index.snippets(thread)],
                             [hits(index, thread, q) for q in queries])
                    for thread in ("t1", "team/ops", "t3")}
        index.reindex_all()
        reindexed = {thread: ([s.source_id for s in index.snippets(thread)],
                              [hits(index, thread, q) for q in queries])
                     for thread in ("t1", "team/ops", "t3")}
    assert migrated == reindexed
    assert any(found for _, searches in migrated.values() for found in searches)
    layout = rowids(old)
    # Renumbered in their order: each thread's rows one run, the first thread first.
    assert [len(ids) for ids in layout.values()] == [12, 12, 12]
    assert all(ids == list(range(ids[0], ids[0] + 12)) for ids in layout.values())
    with SqliteStore(fresh) as store, EpisodicIndex(store) as index:
        for thread in ("t1", "team/ops", "t3"):
            store.ensure_thread(thread)
        assert hits(index, "t1", "billing") == []
