"""No turn is lost: a turn dropped without finish() is kept as abandoned and warned about;
one open turn per thread per agent; two processes finishing turns of one thread get one
conflict, and nothing is lost or stored twice (SQLite and PostgreSQL, real subprocesses)."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import StoreTarget
from support import run_cli

from pioneer import Agent, InputError, StoreError, ThreadConflictError, Turn, ensure_runtime_home
from pioneer.audit import TurnRecords
from pioneer.audit.explain import explain_turn, render_json, render_text
from pioneer.history.open import open_store

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import agent_loop

ROOT = Path(__file__).parents[1]
THREAD = "thread-1"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    ensure_runtime_home(folder)
    return folder


def _agent(store: Any, home: Path) -> Agent:
    return Agent(store, provider="openai-chat", model=agent_loop.MODELS["openai-chat"],
                 compile_input={"workspace_root": home}, recall=False)


def _answer(turn: Turn, text: str) -> None:
    plan = turn.rounds[-1].cache
    assert plan is not None
    turn.receive(agent_loop.response("openai-chat", turn.agent.model, text, [],
                                     agent_loop.usage("openai-chat", plan, 5)))


def _finished(agent: Agent, number: int) -> str:
    turn = agent.turn(THREAD, f"Question {number}", turn_id=f"turn-{number}")
    turn.next_body()
    _answer(turn, f"Answer {number}.")
    return turn.finish().entry.turn_id


def _history(store: Any) -> list[str]:
    with open_store(store) as opened:
        return [e.turn_id for e in opened.get_thread_conversation_history(THREAD)]


def _record(store: Any, turn_id: str) -> Any:
    with open_store(store) as opened:
        return TurnRecords(opened).get(turn_id)


def test_a_dropped_turn_is_kept_as_abandoned_and_warned(home: Path, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with _agent(db, home) as agent:
        _finished(agent, 1)
        turn = agent.turn(THREAD, "Question 2", turn_id="turn-2")
        turn.next_body()
        with pytest.warns(ResourceWarning, match=r"turn 'turn-2' of thread 'thread-1' was "
                          r"not finished \(dropped without finish\(\) or close\(\)"):
            del turn
            gc.collect()
        _finished(agent, 3)  # the thread is free again, and turn-2 is not in its history
    assert _history(db) == ["turn-1", "turn-3"]
    record = _record(db, "turn-2")
    assert record.abandoned.startswith("dropped without finish()")
    assert len(record.rounds) == 1 and record.rounds[0].reply is None
    assert _record(db, "turn-3").history.turn_ids == ["turn-1"]
    text = render_text(explain_turn(record))
    assert text.splitlines()[1].startswith("abandoned: dropped without finish()")
    code, out, err = run_cli("explain", "turn-2", "--db", str(db))
    assert (code, err) == (0, "") and out == text  # what `pioneer explain` prints
    assert json.loads(render_json(explain_turn(record)))["abandoned"] == record.abandoned
    assert json.loads(render_json(explain_turn(_record(db, "turn-1"))))["abandoned"] is None


def test_leaving_a_with_block_keeps_the_turn_with_its_rounds(home: Path, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with _agent(db, home) as agent:
        with pytest.warns(ResourceWarning, match="left its with block without finish"), \
                agent.turn(THREAD, "Question 1", turn_id="turn-1") as turn:
            turn.next_body()
            _answer(turn, "Half an answer")
        with pytest.warns(ResourceWarning, match=r"left its with block on ValueError: boom"), \
                pytest.raises(ValueError, match="boom"), \
                agent.turn(THREAD, "Question 2", turn_id="turn-2") as turn:
            turn.next_body()
            raise ValueError("boom")
        with agent.turn(THREAD, "Question 3", turn_id="turn-3") as turn:
            pass  # no body sent: nothing kept, no warning (warnings are errors here)
        with pytest.warns(ResourceWarning, match="closed without finish"):
            turn = agent.turn(THREAD, "Question 4", turn_id="turn-4")
            turn.next_body()
            turn.close()
        turn.close()  # once only
        with pytest.raises(InputError, match="'turn-4' is finished"):
            turn.next_body()
    assert _history(db) == []
    first = _record(db, "turn-1")
    assert first.abandoned == "left its with block without finish()"
    assert first.rounds[0].reply is not None
    assert first.rounds[0].reply.text_chars == len("Half an answer")
    with sqlite3.connect(db) as conn:  # the texts are kept beside the record
        assert conn.execute("SELECT user_text, assistant_text FROM abandoned_turns "
                            "WHERE turn_id = 'turn-1'").fetchall() == \
            [("Question 1", "Half an answer")]
    assert _record(db, "turn-2").abandoned == "left its with block on ValueError: boom"
    assert _record(db, "turn-3") is None
    assert _record(db, "turn-4").abandoned == "closed without finish()"


def test_one_open_turn_per_thread(home: Path, tmp_path: Path) -> None:
    with _agent(tmp_path / "p.db", home) as agent:
        first = agent.turn(THREAD, "Question 1", turn_id="turn-1")
        with pytest.raises(InputError, match=r"^Agent.turn → thread_id: thread 'thread-1' "
                           r"already has an open turn, 'turn-1': finish\(\) or close\(\) it"):
            agent.turn(THREAD, "Question 2")
        other = agent.turn("thread-2", "Elsewhere")  # another thread is free
        first.close()  # no body sent: discarded quietly
        second = agent.turn(THREAD, "Question 2", turn_id="turn-2")
        second.close()
        other.close()


def test_an_unfinished_turn_is_kept_at_interpreter_exit(
    store_target: StoreTarget, home: Path,
) -> None:
    db = str(store_target.target)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "examples")!r})
        from pioneer import Agent
        agent = Agent({db!r}, provider="openai-chat", model="gpt-5.1",
                      compile_input={{"workspace_root": {str(home)!r}}}, recall=False)
        turn = agent.turn("thread-1", "Question at exit", turn_id="turn-exit")
        turn.next_body()
        KEEP = (agent, turn)  # alive until the interpreter exits
    """)
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", "-c", script],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr
    assert "ResourceWarning: turn 'turn-exit'" in done.stderr
    assert _record(db, "turn-exit").abandoned.startswith("dropped without finish()")
    assert _history(db) == []


# -- two processes, one thread ---------------------------------------------------------

#: One process's turn: load the window, wait for the go, answer, finish; on a conflict,
#: run the turn again as the error says, and report both.
WORKER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[5])
    import agent_loop
    from pioneer import Agent, ThreadConflictError

    store, home, name, folder = sys.argv[1:5]
    agent = Agent(store, provider="openai-chat", model="gpt-5.1",
                  compile_input={"workspace_root": home}, recall=False)

    def answer(turn, text):
        plan = turn.rounds[-1].cache
        turn.receive(agent_loop.response("openai-chat", "gpt-5.1", text, [],
                                         agent_loop.usage("openai-chat", plan, 5)))

    turn = agent.turn("thread-1", f"Question from {name}", turn_id=f"turn-{name}")
    turn.next_body()
    Path(folder, f"{name}.ready").touch()
    while not Path(folder, "go").exists():
        time.sleep(0.01)
    answer(turn, f"Answer for {name}")
    try:
        turn.finish()
        result = {"finished": turn.turn_id}
    except ThreadConflictError as error:
        retry = agent.turn(error.thread_id, error.user_text, turn_id=f"turn-{name}-retry")
        body = retry.next_body()
        answer(retry, f"Answer for {name}, again")
        retry.finish()
        result = {"conflict": error.turn_id, "conflicting": list(error.conflicting),
                  "assistant_text": error.assistant_text, "retried": retry.turn_id,
                  "retry_saw": [m["content"] for m in body["messages"]
                                if m["role"] == "assistant"]}
    agent.close()
    print(json.dumps(result))
""")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIONEER_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_two_processes_finishing_one_thread_get_one_conflict(
    store_target: StoreTarget, home: Path, tmp_path: Path,
) -> None:
    store = str(store_target.target)
    with _agent(store, home) as agent:  # the store and the thread exist before the race
        _finished(agent, 0)
    folder = tmp_path / "signals"
    folder.mkdir()
    workers = {name: subprocess.Popen(
        [sys.executable, "-c", WORKER, store, str(home), name, str(folder),
         str(ROOT / "examples")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env()) for name in ("a", "b")}
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
    while not all((folder / f"{name}.ready").exists() for name in workers):
        assert time.monotonic() < deadline and all(w.poll() is None for w in workers.values())
        time.sleep(0.02)
    (folder / "go").touch()
    results = {}
    for name, worker in workers.items():
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        results[name] = json.loads(out.splitlines()[-1])
    [winner] = [n for n, r in results.items() if "finished" in r]
    [loser] = [n for n, r in results.items() if "conflict" in r]
    lost = results[loser]
    assert lost["conflicting"] == [f"turn-{winner}"]
    assert lost["assistant_text"] == f"Answer for {loser}"
    assert lost["retry_saw"] == ["Answer 0.", f"Answer for {winner}"]  # the retry sees it
    # Nothing lost, nothing twice: every question once in the history, the losing
    # attempt kept as abandoned with its answer.
    assert _history(store) == ["turn-0", f"turn-{winner}", f"turn-{loser}-retry"]
    with open_store(store) as opened:
        texts = [e.user_text for e in opened.get_thread_conversation_history(THREAD)]
        kept = TurnRecords(opened).get(f"turn-{loser}")
    assert texts == ["Question 0", f"Question from {winner}", f"Question from {loser}"]
    assert kept is not None and kept.abandoned is not None
    assert f"turn-{winner}" in kept.abandoned
    assert kept.rounds[-1].reply is not None
    assert kept.rounds[-1].reply.text_chars == len(f"Answer for {loser}")


def test_a_conflict_in_one_process_is_a_store_error_naming_the_turns(
    home: Path, tmp_path: Path,
) -> None:
    db = tmp_path / "p.db"
    with _agent(db, home) as first, _agent(db, home) as second:
        late = second.turn(THREAD, "Late question", turn_id="turn-late")
        late.next_body()
        _finished(first, 1)
        _answer(late, "Late answer")
        with pytest.raises(ThreadConflictError) as info:
            late.finish()
        assert isinstance(info.value, StoreError)
        assert "turn 'turn-late' was not stored: 1 other turn(s) of thread 'thread-1' " \
            "(turn-1) were stored after it loaded its history" in str(info.value)
        assert (info.value.thread_id, info.value.user_text, info.value.conflicting) == \
            (THREAD, "Late question", ("turn-1",))
        retry = second.turn(THREAD, info.value.user_text)  # the thread is free again
        retry.next_body()
        _answer(retry, "Late answer, again")
        retry.finish()
    assert _history(db) == ["turn-1", retry.turn_id]
    assert _record(db, "turn-late").abandoned is not None


def test_a_block_error_stays_the_error_when_the_turn_cannot_be_kept(
    home: Path, tmp_path: Path,
) -> None:
    agent = _agent(tmp_path / "p.db", home)
    with pytest.raises(ValueError, match="boom") as info, \
            agent.turn(THREAD, "Question 1", turn_id="turn-1") as turn:
        turn.next_body()
        agent.close()  # the store is gone: the abandoned record cannot be written
        raise ValueError("boom")
    [note] = info.value.__notes__
    assert note.startswith("turn 'turn-1' could not be kept as abandoned: ")


def test_a_finish_whose_store_write_fails_leaves_the_turn_open(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "p.db"
    with _agent(db, home) as agent:
        turn = agent.turn(THREAD, "Question 1", turn_id="turn-1")
        turn.next_body()
        _answer(turn, "Answer 1.")
        stored = agent.store.add_turn

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("the database went away")

        monkeypatch.setattr(agent.store, "add_turn", failing)
        with pytest.raises(StoreError, match="went away"):
            turn.finish()
        monkeypatch.setattr(agent.store, "add_turn", stored)
        assert turn.finish().entry.assistant_text == "Answer 1."  # the paid reply is kept
        other = agent.turn(THREAD, "Question 2", turn_id="turn-2")
        other.next_body()
        _answer(other, "Answer 2.")
        monkeypatch.setattr(agent.store, "add_turn", failing)
        with pytest.raises(StoreError, match="went away"):
            other.finish()
        with pytest.warns(ResourceWarning, match="closed without finish"):
            other.close()  # the store can still keep its record
    assert _history(db) == ["turn-1"]
    assert _record(db, "turn-2").abandoned == "closed without finish()"


def test_a_reply_whose_calibration_write_fails_can_be_received_again(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "p.db"
    with _agent(db, home) as agent:
        turn = agent.turn(THREAD, "Question 1", turn_id="turn-1")
        turn.next_body()
        plan = turn.rounds[-1].cache
        assert plan is not None
        response = agent_loop.response("openai-chat", agent.model, "Answer 1.", [],
                                       agent_loop.usage("openai-chat", plan, 5))

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("the database went away")

        monkeypatch.setattr(agent.calibration, "observe", failing)
        with pytest.raises(StoreError, match="went away"):
            turn.receive(response)
        monkeypatch.undo()
        assert turn.receive(response).text == "Answer 1."
        assert turn.finish().entry.assistant_text == "Answer 1."
    assert _record(db, "turn-1").rounds[0].window.reported_input_tokens == plan.total_tokens
