"""``pioneer history THREAD --db PATH``: the decision, totals and messages, and its errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from doc_pages import example
from support import run_cli

from pioneer.history import ArtifactRef, SqliteStore

GOLDENS = Path(__file__).parent / "goldens" / "history"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("PIONEER_MAX_CONTEXT_TOKENS", "PIONEER_RESPONSE_RESERVE_TOKENS",
                 "PIONEER_SUMMARY_MODEL", "PIONEER_SUMMARY_BASE_URL", "PIONEER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "history.db"
    chart = ArtifactRef("art-7", "latency chart.png", "image", version_id="v2",
                        mime_type="image/png", size_bytes=48_213, role="assistant")
    with SqliteStore(path) as store:
        store.ensure_thread("demo", model="demo-model")
        store.add_turn("demo", user_text="How slow is the gateway?",
                       assistant_text="p50 is 40 ms, p99 is 310 ms.", turn_id="turn-0")
        store.add_turn("demo", user_text="Plot it.", assistant_text="Here is the chart.",
                       assistant_artifacts=[chart], turn_id="turn-1")
        store.add_turn("demo", user_text="Which endpoint is worst?",
                       assistant_text="POST /v1/chat, by far.", turn_id="turn-2")
    return path


def run(*args: str) -> tuple[int, str, str]:
    return run_cli("history", *args)


def test_keep(db: Path, golden: Callable[[Path, str], None]) -> None:
    code, out, err = run("demo", "--db", str(db))
    assert (code, err) == (0, "")
    golden(GOLDENS / "cli-keep.txt", out)


def test_truncate_without_a_summarizer(db: Path, golden: Callable[[Path, str], None]) -> None:
    code, out, err = run("demo", "--db", str(db), "--max-context-tokens", "120",
                         "--reserve-tokens", "40")
    assert code == 0
    assert err == "note: no summary was attempted; pass --summarize to call the summary endpoint\n"
    golden(GOLDENS / "cli-truncate.txt", out)


def test_summarize_without_an_endpoint_says_how_to_configure_one(db: Path) -> None:
    code, _, err = run("demo", "--db", str(db), "--max-context-tokens", "60", "--summarize")
    assert code == 0
    assert err == ("note: no summary was attempted; configure a summary endpoint "
                   "(--summary-url or summary_base_url)\n")


def test_json(db: Path) -> None:
    code, out, _ = run("demo", "--db", str(db), "--json", "--limit", "3")
    data = json.loads(out)
    assert code == 0
    # demo-model is not in the model table: the first catch-all family's window, 200,000
    assert (data["mode"], data["turns_loaded"], data["budget"]) == ("keep", 3, 184_000)
    assert data["context_window"] == 200_000 and "family anthropic" in data["window_from"]
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"] * 3
    assert data["messages"][0]["content"] == "How slow is the gateway?"
    assert data["artifact_ref_count"] == 1
    assert data["sent_tokens"] == sum(m["tokens"] for m in data["messages"])


@pytest.mark.parametrize(("options", "environment", "window", "source"), [
    (["--model", "gpt-4o"], {}, 128_000, "the model table: gpt-4o, models/models.toml"),
    (["--model", "gemini-2.5-pro", "--provider", "gemini"], {}, 1_048_576,
     "the model table: gemini-2.5-pro"),
    (["--model", "gpt-4o"], {"PIONEER_MAX_CONTEXT_TOKENS": "50000"}, 50_000,
     "the max_context_tokens setting"),
    (["--max-context-tokens", "9000"], {"PIONEER_MAX_CONTEXT_TOKENS": "50000"}, 9_000,
     "--max-context-tokens"),
], ids=["model-table", "model-and-provider", "setting-overrides", "option-overrides"])
def test_the_window_is_the_models_unless_overridden(
    db: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], environment: dict[str, str],
    window: int, source: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    code, out, _ = run("demo", "--db", str(db), "--json", *options)
    data = json.loads(out)
    assert code == 0
    assert (data["context_window"], data["budget"]) == (window, window - 16_000 if window > 16_000
                                                        else 0)
    assert data["window_from"].startswith(source)


def test_a_limit_the_thread_passes_cuts_the_window_back(db: Path) -> None:
    """Past ``--limit`` turns the window drops to 60% of it; a read only reports the cut."""
    code, out, _ = run("demo", "--db", str(db), "--json", "--limit", "2")
    data = json.loads(out)
    assert code == 0
    assert (data["turns_loaded"], data["cut_turn_id"], data["cut_stored"]) == (1, "turn-2", False)
    assert data["reason"].endswith("; the window passed 2 turns: cut to the newest 1 turn")


def test_store_path_comes_from_settings(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIONEER_STORE_PATH", str(db))
    code, out, _ = run("demo")
    assert code == 0
    assert out.startswith("thread demo (demo-model)\n")


@pytest.mark.parametrize(
    ("thread", "database", "message"),
    [("demo", "absent.db", "{tmp}/absent.db: no conversation store at this path"),
     ("nope", "history.db", "{tmp}/history.db: thread 'nope' does not exist")],
    ids=["missing-database", "unknown-thread"],
)
def test_errors_exit_1_without_traceback(
    db: Path, thread: str, database: str, message: str
) -> None:
    code, out, err = run(thread, "--db", str(db.parent / database))
    assert (code, out) == (1, "")
    assert err == message.format(tmp=db.parent) + "\nerror: 1 problem\n"
    assert not (db.parent / "absent.db").exists()


def test_docs_history_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIONEER_STORE_PATH", raising=False)
    code, _ = example("history", "history.md")
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/history.md", "exec"), namespace)
    assert (tmp_path / "home" / "pioneer.db").is_file()
    assert namespace["messages"] == [
        {"role": "user", "content": "Which database?"},
        {"role": "assistant", "content": "SQLite, in WAL mode."},
    ]
