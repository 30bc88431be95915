"""Fifty turns at once from one asyncio event loop, on the machine's PostgreSQL server.

Each task runs one turn of its own thread through one shared :class:`pioneer.Agent`, the
blocking steps (the first ``next_body``: store and history; ``finish``: the store write)
on worker threads through ``asyncio.to_thread``, as docs/explain.md says. Afterwards every
turn is in the store with its record, and every record reads back as it was made.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import StoreTarget
from stores import Server

from pioneer import Agent, TurnRecord
from pioneer.audit import TurnRecords

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

TURNS = 50


@pytest.fixture
def pg_store(pg_server: Server) -> Iterator[StoreTarget]:
    """A fresh schema on the PostgreSQL server (this test is about PostgreSQL)."""
    schema, url = pg_server.new_schema()
    yield StoreTarget("postgresql", url, lambda *sql: pg_server.execute(schema, *sql), schema)
    pg_server.drop_schema(schema)


async def _one(agent: Agent, number: int) -> TurnRecord:
    thread = f"thread-{number}"
    turn = agent.turn(thread, f"Question {number}", turn_id=f"turn-{number}")
    for calls in agent_loop.script(1 + number % 2):  # three rounds or two
        await asyncio.to_thread(turn.next_body)
        plan = turn.rounds[-1].cache
        assert plan is not None
        await asyncio.sleep(0)  # the model call: other turns go on meanwhile
        step = turn.receive(agent_loop.response(
            "openai-chat", agent.model, "" if calls else f"Answer {number}.", calls,
            agent_loop.usage("openai-chat", plan, 10)))
        for call in step.runnable:
            turn.add_tool_result(call.id, f"result for {thread}")
        if step.done:
            break
    finished = await asyncio.to_thread(turn.finish)
    return finished.record


async def _all(agent: Agent) -> list[TurnRecord]:
    return list(await asyncio.gather(*(_one(agent, n) for n in range(TURNS))))


def test_fifty_concurrent_turns_lose_nothing(pg_store: StoreTarget, tmp_path: Path) -> None:
    with Agent(pg_store.target, provider="openai-chat", model="gpt-5.1",
               hooks=agent_loop.hooks(), tools=[agent_loop.READ_FILE],
               compile_input={"workspace_root": tmp_path}) as agent:
        made = asyncio.run(_all(agent))
        records = TurnRecords(agent.store)
        for number, record in enumerate(made):
            thread = f"thread-{number}"
            [entry] = agent.store.get_thread_conversation_history(thread)
            assert (entry.turn_id, entry.assistant_text) == (f"turn-{number}",
                                                             f"Answer {number}.")
            assert records.get(entry.turn_id) == record
            assert len(record.rounds) == (3 if number % 2 == 0 else 2)
            # Each turn saw its own thread only: its own tool results, nothing else's.
            assert record.thread_id == thread
        snippets = agent.index.snippets("thread-7") if agent.index is not None else ()
        assert {s.turn_id for s in snippets} == {"turn-7"}
