"""Several processes at once: seeding the runtime home, and the stores (SQLite and
PostgreSQL) under writers in processes and threads, summaries racing each other, and a
writer killed mid-write. Small and short: 8 processes at most, a few dozen writes each.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreTarget
from stores import Target, make_store

from pioneer import ensure_runtime_home
from pioneer.compile.bootstrap import SEED_FILES
from pioneer.files import builtin_dir
from pioneer.history.models import summary_message_text
from pioneer.tokens import MESSAGE_OVERHEAD, default_counter

# fork: the children only touch files and their own connections, and start in
# milliseconds (spawn would re-import pioneer in each of them).
FORK = multiprocessing.get_context("fork")
SEEDS = {name: (builtin_dir("templates") / "seed" / name).read_bytes() for name in SEED_FILES}
PROCESSES = 8


def _run_all(target: Callable[..., Any], args: list[tuple[Any, ...]], timeout: float = 60
             ) -> list[Any]:
    """Run ``target(*a, queue)`` in one forked process per ``a``; their results, in order."""
    queue = FORK.Queue()
    processes = [FORK.Process(target=target, args=(*a, queue)) for a in args]
    for process in processes:
        process.start()
    results = [queue.get(timeout=timeout) for _ in processes]
    for process in processes:
        process.join(timeout)
        assert process.exitcode == 0
    return sorted(results, key=repr)


# -- ensure_runtime_home -------------------------------------------------------------


def _seed(home: Path, barrier: Any, queue: Any) -> None:
    barrier.wait()
    try:
        result = ensure_runtime_home(home)
        queue.put(("ok", [p.name for p in result.created], [p.name for p in result.existing]))
    except BaseException as error:
        queue.put(("error", repr(error), []))


def _watch(home: Path, stop: Any, queue: Any) -> None:
    """Read the seed files as fast as possible; report any read that is not complete."""
    torn = []
    while not stop.is_set():
        for name in SEED_FILES:
            try:
                data = (home / name).read_bytes()
            except FileNotFoundError:
                continue
            if data not in (SEEDS[name], b"mine"):
                torn.append((name, len(data)))
    queue.put(("watch", torn, []))


@pytest.mark.parametrize("round_", range(5))
def test_eight_processes_seed_one_home(tmp_path: Path, round_: int) -> None:
    home = tmp_path / "home" / "nested"  # the folders are created concurrently too
    barrier, stop = FORK.Barrier(PROCESSES), FORK.Event()
    queue = FORK.Queue()
    watcher = FORK.Process(target=_watch, args=(home, stop, queue))
    watcher.start()
    results = _run_all(_seed, [(home, barrier)] * PROCESSES)
    stop.set()
    assert queue.get(timeout=30) == ("watch", [], [])
    watcher.join(30)
    assert [r for r in results if r[0] != "ok"] == []
    created = [name for _, made, _ in results for name in made]
    assert sorted(created) == sorted(SEED_FILES)  # each file created exactly once
    for name in SEED_FILES:
        assert (home / name).read_bytes() == SEEDS[name]
    assert sorted(p.name for p in home.iterdir()) == sorted(SEED_FILES)  # no temp files


@pytest.mark.parametrize("existing", [b"mine", b""], ids=["user-file", "empty-user-file"])
def test_eight_processes_never_overwrite_a_user_file(tmp_path: Path, existing: bytes) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "SOUL.md").write_bytes(existing)
    barrier = FORK.Barrier(PROCESSES)
    results = _run_all(_seed, [(home, barrier)] * PROCESSES)
    assert [r for r in results if r[0] != "ok"] == []
    assert [name for _, made, _ in results for name in made] == ["IDENTITY.md"]
    assert all("SOUL.md" in existing_names for _, _, existing_names in results)
    assert (home / "SOUL.md").read_bytes() == existing
    assert (home / "IDENTITY.md").read_bytes() == SEEDS["IDENTITY.md"]


# -- the stores ----------------------------------------------------------------------

THREADS_PER_PROCESS, TURNS_PER_THREAD = 3, 12


def _summary_text(turn_id: str) -> str:
    # Long and self-describing: a torn write could not keep the shape.
    return f"<summary through {turn_id}>" + (" covered " + turn_id) * 400 + "</summary>"


def _write_turns(db: Target, process: int, barrier: Any, queue: Any) -> None:
    errors: list[str] = []
    store = make_store(db)
    barrier.wait()

    def worker(thread: int) -> None:
        try:
            for n in range(TURNS_PER_THREAD):
                turn_id = f"p{process}-t{thread}-{n}"
                store.add_turn("shared", user_text=f"user {turn_id}",
                               assistant_text=f"assistant {turn_id} " + "x" * (n * 200),
                               turn_id=turn_id)
                if n % 4 == 3:  # summaries race each other and the turn writers
                    store.set_thread_summary("shared", _summary_text(turn_id),
                                             through_turn_id=turn_id)
                if n % 4 == 1:  # so do the truncation cuts of cache-aware history
                    store.set_history_cut("shared", first_turn_id=turn_id)
        except BaseException as error:
            errors.append(repr(error))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS_PER_PROCESS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    queue.put((process, errors))


def test_writer_processes_and_threads_lose_no_turn_tear_no_summary_move_no_cut_back(
    store_target: StoreTarget,
) -> None:
    db = store_target.target
    with make_store(db) as store:
        store.ensure_thread("shared")
    processes = 4
    barrier = FORK.Barrier(processes)
    results = _run_all(_write_turns, [(db, p, barrier) for p in range(processes)])
    assert [errors for _, errors in results] == [[]] * processes
    expected = {f"p{p}-t{t}-{n}" for p in range(processes) for t in range(THREADS_PER_PROCESS)
                for n in range(TURNS_PER_THREAD)}
    with make_store(db, read_only=True) as store:
        entries = store.get_thread_conversation_history("shared", limit=10_000)
        summary = store.get_thread_summary("shared")
        window = store.get_history_window("shared")
    ids = [entry.turn_id for entry in entries]
    assert len(ids) == len(set(ids)) and set(ids) == expected  # none lost, none twice
    assert [e.seq for e in entries] == sorted({e.seq for e in entries})
    for entry in entries:  # every turn whole, with the counts of its own text
        turn_id = entry.turn_id
        n = int(turn_id.rsplit("-", 1)[1])
        assert entry.user_text == f"user {turn_id}"
        assert entry.assistant_text == f"assistant {turn_id} " + "x" * (n * 200)
        assert entry.user_tokens == default_counter().count(entry.user_text) + MESSAGE_OVERHEAD
    # The stored summary is one writer's summary, whole, with its own coverage and count.
    assert summary is not None
    assert summary.text == _summary_text(summary.through_turn_id)
    assert summary.tokens == default_counter().count(
        summary_message_text(summary.text)) + MESSAGE_OVERHEAD
    seq_of = {e.turn_id: e.seq for e in entries}
    assert summary.through_seq == seq_of[summary.through_turn_id]
    assert summary.turn_count == sum(1 for e in entries if e.seq <= summary.through_seq)
    # Coverage never moved backwards: no summary written through a later turn was lost.
    summarised = [t for t in expected if int(t.rsplit("-", 1)[1]) % 4 == 3]
    assert summary.through_seq == max(seq_of[t] for t in summarised)
    # Nor did the cut: the stored one is the latest any writer set, with its own turn.
    cut_at = [t for t in expected if int(t.rsplit("-", 1)[1]) % 4 == 1]
    assert window.cut is not None
    assert window.cut.first_seq == max(seq_of[t] for t in cut_at)
    assert window.cut.first_seq == seq_of[window.cut.first_turn_id]


_KILLED_WRITER = """
import sys
from pioneer.history.open import open_store
path, start = sys.argv[1], int(sys.argv[2])
store = open_store(path)
for n in range(start, start + 100000):
    turn_id = f"turn-{n}"
    store.add_turn("t", user_text=f"user {n} " + "u" * 20000,
                   assistant_text=f"assistant {n} " + "a" * 20000, turn_id=turn_id)
    if n % 3 == 0:
        store.set_thread_summary("t", f"summary {n} " + "s" * 20000, through_turn_id=turn_id)
    if n == start:
        print("writing", flush=True)
"""


def _check_consistent(db: Target) -> list[str]:
    if isinstance(db, Path):
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            conn.close()
    with make_store(db) as store:
        entries = store.get_thread_conversation_history("t", limit=100_000)
        summary = store.get_thread_summary("t")
        for entry in entries:
            if entry.user_text == "after":
                continue
            n = int(entry.turn_id.split("-")[1])
            assert entry.user_text == f"user {n} " + "u" * 20000
            assert entry.assistant_text == f"assistant {n} " + "a" * 20000
        if summary is not None:
            n = int(summary.through_turn_id.split("-")[1])
            assert summary.text == f"summary {n} " + "s" * 20000
            assert summary.turn_count == sum(1 for e in entries if e.seq <= summary.through_seq)
        # Still writable after the crash.
        store.add_turn("t", user_text="after", assistant_text="crash")
    return [entry.turn_id for entry in entries]


def _turn_ids(db: Target) -> list[str]:
    with make_store(db, read_only=True) as store:
        return [e.turn_id for e in store.get_thread_conversation_history("t", limit=100_000)]


@pytest.mark.parametrize("delay", [0.1, 0.6])
def test_a_writer_killed_mid_write_leaves_the_store_consistent(store_target: StoreTarget,
                                                               delay: float) -> None:
    db = store_target.target
    with make_store(db) as store:
        store.ensure_thread("t")
    before: list[str] = []
    for attempt in range(2):
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED_WRITER, str(db), str(attempt * 100_000)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL  # it was still writing when killed
        turns = _check_consistent(db)
        assert turns[: len(before)] == before  # nothing committed earlier was lost
        assert len(turns) > len(before)  # the killed writer had committed turns
        before = _turn_ids(db)
