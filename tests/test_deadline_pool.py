"""Deadline hooks run on the process's bounded worker pool (pioneer.hooks.deadline).

Each test gives the process a fresh pool of a few workers, so the bounds it checks are
the pool's and not what earlier tests left running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import compile_round

from pioneer import HookError, HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.hooks import deadline as pool_module
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext

PHASE = "turn.pre_prompt_context"
WORKERS, SPARE = 4, 2
BOUNDED = 30.0


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[threading.Thread]]:
    """A fresh pool of WORKERS workers and SPARE spares; yields the threads before it."""
    monkeypatch.setattr(pool_module, "WORKERS", WORKERS)
    monkeypatch.setattr(pool_module, "SPARE", SPARE)
    monkeypatch.setattr(pool_module, "_POOL", pool_module._Pool())
    yield set(threading.enumerate())


def started_since(before: set[threading.Thread]) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread not in before]


def contribution(n: int) -> PromptSectionContribution:
    return PromptSectionContribution(contribution_id=f"acme.c{n}", section_id=f"acme.s{n}",
                                     domain="acme", content=f"Note number {n}.")


def hooks(count: int, deadline_ms: int | None,
          body: Callable[[int], object] = contribution) -> HookRegistry:
    registry = HookRegistry()
    for n in range(count):
        registry.hook(f"acme.h{n}", phase=PHASE, deadline_ms=deadline_ms,
                      failure="best_effort")(lambda context, n=n: body(n))
    return registry


def test_many_deadline_hooks_run_on_a_bounded_pool_and_give_the_blocking_result(
    pool: set[threading.Thread], compiler: PromptCompiler, home: Path
) -> None:
    given = PromptCompileInput(workspace_root=home)
    seen: list[int] = []

    def counted(n: int) -> PromptSectionContribution:
        seen.append(len(started_since(pool)))
        return contribution(n)

    blocking = compile_round(compiler, given, hooks(200, None))
    for _ in range(3):
        pooled = compile_round(compiler, given, hooks(200, 5_000, counted))
        assert pooled.full_system_text == blocking.full_system_text
        assert pooled.manifest.model_dump() == blocking.manifest.model_dump()
    assert len(seen) == 600
    assert max(seen) <= WORKERS  # 600 hooks, never more than the pool's workers
    assert 1 <= len(started_since(pool)) <= WORKERS
    assert pool_module.pool_threads() == (len(started_since(pool)), 0)


def test_a_stuck_hook_is_its_diagnostic_and_later_turns_still_run(
    pool: set[threading.Thread], compiler: PromptCompiler, home: Path
) -> None:
    given = PromptCompileInput(workspace_root=home)
    release = threading.Event()
    counts: list[int] = []

    def stuck(n: int) -> PromptSectionContribution:
        release.wait(BOUNDED)
        return contribution(n)

    def quick(n: int) -> PromptSectionContribution:
        counts.append(len(started_since(pool)))
        return contribution(n)

    try:
        # More stuck hooks than workers and spares together, over several turns.
        for turn in range(4):
            payload = compile_round(compiler, given, hooks(2, 40, stuck))
            assert [d.message for d in payload.manifest.diagnostics
                    if d.code == "hook_best_effort_failed"] == [
                f"hook `acme.h{n}` at {PHASE} missed its 40 ms deadline; "
                "the turn went on without it" for n in range(2)], turn
            assert "Note number" not in payload.full_system_text
            assert len(started_since(pool)) <= WORKERS + SPARE
        # A turn never waits past its deadlines, even with every worker stuck.
        start = time.monotonic()
        payload = compile_round(compiler, given, hooks(1, 40, quick))
        assert time.monotonic() - start < BOUNDED
        assert len(started_since(pool)) <= WORKERS + SPARE
    finally:
        release.set()
    # The stuck calls return: the pool has its workers again and later turns run.
    give_up = time.monotonic() + BOUNDED
    while pool_module.pool_threads()[1] and time.monotonic() < give_up:
        time.sleep(0.01)
    assert pool_module.pool_threads()[1] == 0
    for _ in range(3):
        payload = compile_round(compiler, given, hooks(3, 5_000, quick))
        assert "## Dynamic: acme.s2\nNote number 2." in payload.dynamic_system_text
        assert not payload.manifest.diagnostics or all(
            d.code != "hook_best_effort_failed" for d in payload.manifest.diagnostics)
    assert max(counts) <= WORKERS + SPARE
    # Workers beyond the pool's size end once their stuck call returned.
    give_up = time.monotonic() + BOUNDED
    while len(started_since(pool)) > WORKERS and time.monotonic() < give_up:
        time.sleep(0.01)
    assert len(started_since(pool)) <= WORKERS


def test_one_stuck_worker_is_replaced_so_the_next_turn_runs_at_once(
    pool: set[threading.Thread], compiler: PromptCompiler, home: Path
) -> None:
    given = PromptCompileInput(workspace_root=home)
    release = threading.Event()
    try:
        for _ in range(WORKERS):  # every worker of the pool stuck once
            compile_round(compiler, given, hooks(1, 30, lambda n: release.wait(BOUNDED)))
        assert pool_module.pool_threads()[1] == SPARE
        payload = compile_round(compiler, given, hooks(2, 5_000))
        assert "## Dynamic: acme.s1\nNote number 1." in payload.dynamic_system_text
    finally:
        release.set()


def test_a_queued_hook_past_its_deadline_never_starts(
    pool: set[threading.Thread], compiler: PromptCompiler, home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool_module, "WORKERS", 1)
    monkeypatch.setattr(pool_module, "SPARE", 0)
    release = threading.Event()
    ran: list[int] = []

    def first_blocks(n: int) -> None:
        ran.append(n)
        if n == 0:
            release.wait(BOUNDED)

    try:
        payload = compile_round(compiler, PromptCompileInput(workspace_root=home),
                               hooks(2, 40, first_blocks))
        assert len([d for d in payload.manifest.diagnostics
                    if d.code == "hook_best_effort_failed"]) == 2
    finally:
        release.set()
    give_up = time.monotonic() + BOUNDED
    while pool_module.pool_threads() != (1, 0) and time.monotonic() < give_up:
        time.sleep(0.01)
    compile_round(compiler, PromptCompileInput(workspace_root=home), hooks(1, 5_000, ran.append))
    assert ran == [0, 0]  # hook 1 was dropped in the queue; the next turn's hook 0 ran


def test_a_fail_closed_hook_that_overruns_on_the_pool_stops_the_turn(
    pool: set[threading.Thread], compiler: PromptCompiler, home: Path
) -> None:
    release = threading.Event()
    registry = HookRegistry()
    registry.hook("acme.slow", phase=PHASE, deadline_ms=20)(lambda c: release.wait(BOUNDED))
    try:
        with pytest.raises(HookError, match="missed its 20 ms deadline"):
            compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    finally:
        release.set()


def test_a_hook_sees_its_own_name_on_its_worker(
    pool: set[threading.Thread], compiler: PromptCompiler, home: Path
) -> None:
    names: list[str] = []

    def record(context: HookContext) -> None:
        names.append(threading.current_thread().name)

    registry = HookRegistry()
    registry.hook("acme.named", phase=PHASE, deadline_ms=5_000)(record)
    compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert names == [f"pioneer-hook:acme.named.{PHASE}"]
    assert [t.name for t in started_since(pool)] == ["pioneer-deadline-1"]


def _deadline_call_in_a_child(queue: object) -> None:
    outcome = pool_module.run_with_deadline(lambda: "ran", 5.0, name="child")
    queue.put((outcome.value, outcome.late))  # type: ignore[attr-defined]


def test_a_forked_child_runs_deadline_calls_on_a_pool_of_its_own(
    pool: set[threading.Thread],
) -> None:
    import multiprocessing

    assert pool_module.run_with_deadline(lambda: 1, 5.0, name="parent").value == 1
    assert pool_module.pool_threads() == (1, 0)  # an idle worker the child will not have
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_deadline_call_in_a_child, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=BOUNDED) == ("ran", False)
    finally:
        child.join(BOUNDED)
    assert child.exitcode == 0
