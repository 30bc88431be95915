"""``pioneer recall THREAD QUERY --db PATH``: hits with provenance and scores, and its errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support import add_recall_turns, run_cli, run_script

from pioneer.episodic import EpisodicIndex
from pioneer.history import SqliteStore

GOLDENS = Path(__file__).parent / "goldens" / "episodic"
@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIONEER_CONFIG", raising=False)
    path = tmp_path / "pioneer.db"
    with SqliteStore(path) as store, EpisodicIndex(store):
        store.ensure_thread("demo")
        add_recall_turns(store, 6)  # turns 0 to 5 (the goldens are their hits)
    return path


def run(*args: str) -> tuple[int, str, str]:
    return run_cli("recall", *args)


def test_hits_with_provenance_and_scores(db: Path, golden: Callable[[Path, str], None]) -> None:
    code, out, err = run("demo", "gateway latency chart?", "--db", str(db))
    assert (code, err) == (0, "")
    golden(GOLDENS / "cli-recall.txt", out)
    assert "thread:demo/turn-1/a1/c0  role=assistant  context=user_visible_thread_item" in out
    assert '- artifactId=art-7, versionId=v2, name="latency chart.png"' in out


def test_all_shows_candidates_below_the_threshold(db: Path) -> None:
    code, out, _ = run("demo", "gateway latency chart", "--db", str(db), "--all")
    assert code == 0
    assert out.count("(below threshold)") == 1
    assert ("thread:demo/turn-0/u0/c0  role=user  context=user_visible_thread_item  "
            "(below threshold)") in out
    kept = run("demo", "gateway latency chart", "--db", str(db))[1]
    assert "thread:demo/turn-0/u0/c0" not in kept


@pytest.mark.parametrize(("options", "kept"), [
    ((), 2), (("--min-share", "0"), 3), (("--min-score", "3.5"), 1), (("--min-share", "1"), 1),
])
def test_threshold_options(db: Path, options: tuple[str, ...], kept: int) -> None:
    code, out, _ = run("demo", "gateway latency chart", "--db", str(db), "--json", *options)
    assert code == 0
    assert [hit["kept"] for hit in json.loads(out)["hits"]].count(True) == kept


def test_json(db: Path) -> None:
    code, out, _ = run("demo", "latency chart", "--db", str(db), "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["thread_id"], data["query"], data["min_score"], data["min_share_of_best"]) == (
        "demo", '"latency" OR "chart"', 1.0, 0.5)
    assert data["threshold"] == round(data["hits"][0]["score"] / 2, 4)
    first = data["hits"][0]
    assert set(first) == {"source_id", "thread_id", "turn_id", "item_id", "chunk_id", "role",
                          "context", "score", "shared_terms", "kept", "text", "artifacts"}
    assert (first["thread_id"], first["shared_terms"]) == ("demo", 2)
    assert (data["words"], data["small_index"]) == (2, True)
    assert first["source_id"] == "thread:demo/turn-1/a1/c0"
    assert first["artifacts"][0]["artifact_id"] == "art-7"


def test_no_hits(db: Path) -> None:
    code, out, _ = run("demo", "volcanoes", "--db", str(db))
    assert code == 0
    assert out.endswith("no hits\n")


def test_one_shared_word_in_a_small_index_is_not_recalled(db: Path) -> None:
    code, out, _ = run("demo", "How do I size the connection pool for the weekend batch?",
                       "--db", str(db))
    assert code == 0
    assert out.endswith("kept none: the index has fewer than 18 snippets and no candidate "
                        "holds two of the message's words\nno hits\n")
    shown = run("demo", "How do I size the connection pool for the weekend batch?", "--db",
                str(db), "--all")[1]
    assert "thread:demo/turn-5/a5/c0" in shown  # the candidate, shown with --all
    data = json.loads(run("demo", "weekend batch", "--db", str(db), "--json")[1])
    assert (data["small_index"], data["words"], [h["kept"] for h in data["hits"]]) == (
        True, 2, [False])
    assert json.loads(run("demo", "weekend", "--db", str(db), "--json")[1])["hits"][0]["kept"]


def test_exclude_history_leaves_out_what_history_sends(db: Path) -> None:
    code, out, _ = run("demo", "gateway latency", "--db", str(db), "--exclude-history")
    assert code == 0
    assert "thread:" not in out.split("query", 1)[1]  # every turn is in the keep window


def test_reindex(db: Path) -> None:
    before = run("demo", "gateway latency", "--db", str(db), "--json")[1]
    code, out, err = run("demo", "gateway latency", "--db", str(db), "--json", "--reindex")
    assert (code, err) == (0, "reindexed thread demo: 12 snippets\n")
    assert out == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope", "gateway"), "thread 'nope' does not exist"),
        (("demo", "the a of ?"), "nothing to search for in 'the a of ?'"),
        (("demo", "gateway", "--limit", "0"), "--limit must be at least 1 (got 0)"),
        (("nope", "gateway", "--reindex"), "thread 'nope' does not exist"),
    ],
)
def test_user_errors(db: Path, args: tuple[str, ...], message: str) -> None:
    code, out, err = run(*args, "--db", str(db))
    assert (code, out) == (1, "")
    assert message in err


def test_missing_database_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    code, _, err = run("demo", "gateway", "--db", str(path))
    assert code == 1
    assert "no conversation store at this path" in err
    assert not path.exists()


def test_a_thread_whose_turns_are_not_indexed_says_to_reindex(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    with SqliteStore(db) as store:  # no index attached: the turns are written unindexed
        store.ensure_thread("demo")
        store.add_turn("demo", user_text="Plot the gateway latency.",
                       assistant_text="Here is the chart.", turn_id="t1")
        store.add_turn("demo", user_text="Thanks.", assistant_text="Welcome.", turn_id="t2")
    code, out, err = run_script("recall", "demo", "gateway latency", "--db", str(db))
    assert code == 0
    assert out.endswith("no hits\n")
    assert err == ("warning: 2 turns of thread 'demo' are not indexed, so recall cannot find "
                   "them: run `pioneer recall demo QUERY --reindex` once to index the thread\n")
    assert run("demo", "gateway latency", "--db", str(db)) == (code, out, err)
    code, _, err = run_script("recall", "demo", "gateway latency", "--db", str(db),
                              "--reindex")
    assert (code, err) == (0, "reindexed thread demo: 4 snippets\n")
    assert run_script("recall", "demo", "gateway latency", "--db", str(db))[2] == ""
