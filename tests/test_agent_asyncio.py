"""A hundred turns at once from one asyncio event loop, on PostgreSQL (the machine's server)
and on SQLite.

Two :class:`pioneer.AsyncAgent` s (two nodes of a gateway; on PostgreSQL each with its own
psycopg async pool) run one turn each of the same fifty threads, all at once from one event loop,
while a second process writes a turn of each of those threads through the sync
:class:`pioneer.Agent`. Every turn loads its history before any of them finishes, so of the
two nodes' turns of a thread the second to finish finds the other stored after its window:
``finish()`` raises :class:`ThreadConflictError` and the task runs the turn again. Afterwards
every thread holds each of its three questions exactly once, nothing else, and every stored
turn's record reads back.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from conftest import StoreTarget

from pioneer import AsyncAgent
from pioneer.audit import TurnRecord, TurnRecords
from pioneer.errors import ThreadConflictError
from pioneer.history.open import open_store

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

THREADS = 50

#: The second process: a turn of each thread through the sync Agent, run again on a conflict.
WRITER = """
import sys
from pioneer import Agent
from pioneer.errors import ThreadConflictError
from pioneer.history.open import open_store

url, home = sys.argv[1], sys.argv[2]
conflicts = 0
with Agent(url, provider="openai-chat", model="gpt-5.1", recall=False,
           compile_input={"workspace_root": home}) as agent:
    print("ready", flush=True)
    sys.stdin.readline()
    for number in range(int(sys.argv[3])):
        attempt = 0
        while True:
            turn = agent.turn(f"thread-{number}", f"Other process {number}",
                              turn_id=f"other-{number}-{attempt}")
            turn.next_body()
            turn.receive({"id": "c", "object": "chat.completion", "created": 0,
                          "model": "gpt-5.1", "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": "Other answer."}}]})
            try:
                turn.finish()
                break
            except ThreadConflictError:
                conflicts += 1
                attempt += 1
print("conflicts", conflicts, flush=True)
"""


async def _one(agent: AsyncAgent, node: str, number: int, loaded: asyncio.Barrier,
               conflicts: list[str]) -> TurnRecord:
    """One turn of ``thread-<number>``, run again after a conflict; its record."""
    thread = f"thread-{number}"
    attempt = 0
    while True:
        async with agent.turn(thread, f"Question {node}-{number}",
                              turn_id=f"turn-{node}-{number}-{attempt}") as turn:
            for calls in agent_loop.script(1 + number % 2):  # three rounds or two
                await turn.next_body()
                if attempt == 0 and len(turn.rounds) == 1:
                    await loaded.wait()  # every turn has loaded its window
                plan = turn.rounds[-1].cache
                assert plan is not None
                step = await turn.receive(agent_loop.response(
                    "openai-chat", "gpt-5.1", "" if calls else f"Answer {node}-{number}.",
                    calls, agent_loop.usage("openai-chat", plan, 10)))
                for call in step.runnable:
                    await turn.add_tool_result(call.id, f"result for {thread}")
                if step.done:
                    break
            try:
                return (await turn.finish()).record
            except ThreadConflictError as conflict:
                assert conflict.thread_id == thread
                conflicts.append(conflict.turn_id)
                attempt += 1


async def _all(url: str, home: Path, writer: subprocess.Popen[str]) -> tuple[
        list[TurnRecord], list[str]]:
    options = {"provider": "openai-chat", "model": "gpt-5.1", "hooks": agent_loop.hooks(),
               "tools": [agent_loop.READ_FILE], "compile_input": {"workspace_root": home}}
    conflicts: list[str] = []
    loaded = asyncio.Barrier(2 * THREADS + 1)
    async with AsyncAgent(url, **options) as node_a, AsyncAgent(url, **options) as node_b:
        tasks = [asyncio.create_task(_one(agent, node, number, loaded, conflicts))
                 for number in range(THREADS)
                 for node, agent in (("a", node_a), ("b", node_b))]
        await loaded.wait()
        assert writer.stdin is not None
        writer.stdin.write("go\n")  # the other process writes while the turns go on
        writer.stdin.flush()
        made = list(await asyncio.gather(*tasks))
    return made, conflicts


def test_a_hundred_concurrent_turns_lose_nothing(store_target: StoreTarget,
                                                 tmp_path: Path) -> None:
    url = str(store_target.target)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen([sys.executable, "-c", WRITER, url, str(tmp_path), str(THREADS)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env=env) as writer:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        made, conflicts = asyncio.run(_all(url, tmp_path, writer))
        tail = writer.communicate(timeout=120)[0]
    assert writer.returncode == 0
    assert tail.startswith("conflicts ") and tail.split()[1].isdigit()
    # Each thread's two nodes loaded their windows before either finished: one conflict
    # each at least, and the other process's turns may have caused more.
    assert len(conflicts) >= THREADS
    assert len(set(conflicts)) == len(conflicts)
    by_id = {record.turn_id: record for record in made}
    with open_store(url) as store:
        records = TurnRecords(store)
        for number in range(THREADS):
            thread = f"thread-{number}"
            entries = store.get_thread_conversation_history(thread, 1000)
            assert Counter(entry.user_text for entry in entries) == Counter({
                f"Question a-{number}": 1, f"Question b-{number}": 1,
                f"Other process {number}": 1})
            for entry in entries:
                record = records.get(entry.turn_id)
                assert record is not None and record.thread_id == thread
                if entry.turn_id in by_id:
                    assert record == by_id[entry.turn_id]
                    assert len(record.rounds) == (3 if number % 2 == 0 else 2)
                    assert entry.user_text is not None
                    assert entry.assistant_text == entry.user_text.replace(
                        "Question", "Answer") + "."
        # A conflicting attempt is no turn of the thread: its id was never stored.
        stored = {entry.turn_id for number in range(THREADS)
                  for entry in store.get_thread_conversation_history(f"thread-{number}", 1000)}
        assert not stored & set(conflicts)
