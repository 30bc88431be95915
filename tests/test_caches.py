"""The one cache type: least recently used, bounded by bytes, refreshed on a hit, never
emptied wholesale; the history store's turn cache keeps serving many threads from
memory; the did-you-mean bound changes no answer."""

from __future__ import annotations

import difflib
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import PioneerSettings
from pioneer.caches import CacheStats, LruCache, cache_stats, entry_bytes
from pioneer.errors import did_you_mean
from pioneer.history.open import open_store
from pioneer.history.sql_store import SqlStore

PAST_NS = 1_600_000_000 * 10**9

# -- the cache type --------------------------------------------------------------------

KEYS = st.sampled_from("abcdefgh")
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("get"), KEYS, st.just(0)),
        st.tuples(st.just("put"), KEYS, st.integers(min_value=0, max_value=60)),
    ),
    max_size=60,
)


@given(budget=st.integers(min_value=0, max_value=150), steps=STEPS)
def test_the_cache_is_a_byte_bounded_lru_map(budget: int,
                                             steps: list[tuple[str, str, int]]) -> None:
    # The reference: (key, size) from least to most recently used. A get of a held key
    # and a put make the key the most recent; a put evicts from the least recent end
    # while the sizes add up to more than the budget (an entry bigger than the whole
    # budget is not kept, and evicts nothing).
    cache: LruCache[str, int] = LruCache("test", budget)
    order: list[tuple[str, int]] = []
    values: dict[str, int] = {}
    hits = misses = evictions = 0
    for number, (action, key, size) in enumerate(steps):
        held = [k for k, _ in order]
        if action == "get":
            assert cache.get(key) == values.get(key)
            if key in held:
                hits += 1
                order.append(order.pop(held.index(key)))
            else:
                misses += 1
            continue
        cache.put(key, number, size)
        if key in held:
            order.pop(held.index(key))
            del values[key]
        if size <= budget:
            order.append((key, size))
            values[key] = number
            while sum(s for _, s in order) > budget:
                gone, _ = order.pop(0)
                del values[gone]
                evictions += 1
        stats = cache.stats()
        assert stats.bytes == sum(s for _, s in order) <= budget
        assert cache.keys() == [k for k, _ in order]
    assert cache.stats() == CacheStats("test", len(order), sum(s for _, s in order), budget,
                                       hits, misses, evictions)


def test_a_hit_refreshes_and_a_full_cache_keeps_the_most_recent() -> None:
    cache: LruCache[int, str] = LruCache("test", 100)
    for key in range(10):
        cache.put(key, f"v{key}", 10)
    assert cache.get(0) == "v0"  # now the most recent: the next put evicts 1, not 0
    cache.put(10, "v10", 10)
    assert cache.keys() == [2, 3, 4, 5, 6, 7, 8, 9, 0, 10]
    for key in range(11, 1000):  # far past the budget: never emptied, always the newest
        cache.put(key, f"v{key}", 10)
        assert len(cache) == 10 and cache.stats().bytes == 100
    assert cache.keys() == list(range(990, 1000))
    assert cache.stats().evictions == 990


def test_get_many_refreshes_and_counts_like_get() -> None:
    cache: LruCache[str, int] = LruCache("test", 30)
    for number, key in enumerate("abc"):
        cache.put(key, number, 10)
    assert cache.get_many(["a", "x", "b"]) == {"a": 0, "b": 1}
    assert cache.keys() == ["c", "a", "b"]
    stats = cache.stats()
    assert (stats.hits, stats.misses) == (2, 1)


def test_an_entry_bigger_than_the_budget_is_not_kept_and_evicts_nothing() -> None:
    cache: LruCache[str, str] = LruCache("test", 50)
    cache.put("a", "small", 20)
    cache.put("b", "huge", 51)
    assert cache.keys() == ["a"] and cache.get("b") is None


def test_resize_evicts_the_least_recent_beyond_the_new_budget() -> None:
    cache: LruCache[str, int] = LruCache("test", 30)
    for number, key in enumerate("abc"):
        cache.put(key, number, 10)
    cache.get("a")
    cache.resize(20)
    assert cache.keys() == ["c", "a"]
    with pytest.raises(ValueError, match="a budget is a number of bytes >= 0"):
        cache.resize(-1)


def test_threads_sharing_a_cache_keep_its_bytes_within_the_budget() -> None:
    cache: LruCache[int, int] = LruCache("test", 1_000)

    def work(seed: int) -> None:
        for step in range(2_000):
            key = (seed * 7919 + step * 104_729) % 300
            if cache.get(key) is None:
                cache.put(key, step, 1 + key % 37)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = cache.stats()
    assert stats.bytes <= 1_000
    assert stats.hits + stats.misses == 8_000


def test_the_process_wide_stats_sum_every_live_cache_by_name() -> None:
    first: LruCache[str, int] = LruCache("test_process_wide", 100)
    second: LruCache[str, int] = LruCache("test_process_wide", 50)
    first.put("a", 1, 10)
    second.put("b", 2, 5)
    second.get("b")
    summed = next(s for s in cache_stats() if s.name == "test_process_wide")
    assert (summed.entries, summed.bytes, summed.budget, summed.hits, summed.hit_rate) == (
        2, 15, 150, 1, 1.0)


# -- did you mean ----------------------------------------------------------------------

NAMES = st.text(alphabet="abcdeo_1", min_size=0, max_size=12)


@settings(max_examples=300)
@given(name=NAMES, known=st.lists(NAMES, max_size=12),
       cutoff=st.sampled_from([0.6, 0.85, 0.95]))
def test_the_cheap_bound_gives_difflibs_answer(name: str, known: list[str],
                                               cutoff: float) -> None:
    close = difflib.get_close_matches(name, sorted(k for k in known if k != name), n=1,
                                      cutoff=cutoff)
    assert did_you_mean(name, known, cutoff=cutoff) == (
        f' (did you mean "{close[0]}"?)' if close else "")


# -- the history store's turn cache ----------------------------------------------------

def test_round_robin_over_many_threads_reads_each_turn_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[int] = []
    original = SqlStore._load

    def counting(self: SqlStore, tx: Any, turn_ids: list[str]) -> Any:
        loaded.append(len(turn_ids))
        return original(self, tx, turn_ids)

    monkeypatch.setattr(SqlStore, "_load", counting)
    threads, turns = 40, 12
    with open_store(tmp_path / "writer.db") as writer:
        for thread in range(threads):
            writer.ensure_thread(f"t{thread}")
            for turn in range(turns):
                writer.add_turn(f"t{thread}", user_text=f"question {turn} " * 20,
                                assistant_text=f"answer {turn} " * 30)
    settings_given = PioneerSettings(store_path=tmp_path / "writer.db",
                                     history_cache_bytes=8 << 20)
    with open_store(settings_given) as reader:
        for _ in range(4):
            for thread in range(threads):
                assert len(reader.get_thread_conversation_history(f"t{thread}")) == turns
        stats = reader.cache_stats()[0]
    assert sum(loaded) == threads * turns  # the first pass read each turn; no pass since
    assert (stats.name, stats.budget, stats.misses) == ("history_turns", 8 << 20,
                                                        threads * turns)
    assert stats.hits == 3 * threads * turns and stats.evictions == 0


def test_a_turn_cache_too_small_for_every_thread_keeps_the_ones_read_last(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path / "h.db") as writer:
        for thread in range(6):
            writer.ensure_thread(f"t{thread}")
            for _ in range(5):
                written = writer.add_turn(f"t{thread}", user_text="u" * 100,
                                          assistant_text="a" * 100)
    per_turn = entry_bytes(written.turn_id, written)  # every turn is the same size
    with open_store(tmp_path / "h.db", cache_bytes=10 * per_turn) as reader:
        for thread in range(6):
            reader.get_thread_conversation_history(f"t{thread}")
        reader.get_thread_conversation_history("t4")  # refreshed: t5 is now the older
        reader.get_thread_conversation_history("t0")  # not held: t5 is evicted, not t4
        before = reader.cache_stats()[0]
        reader.get_thread_conversation_history("t4")
        after = reader.cache_stats()[0]
    assert before.entries == 10 and before.bytes <= 10 * per_turn
    assert after.hits - before.hits == 5 and after.misses == before.misses
