"""What a store or the settings must not give away: a store URL's password (in any
message, and in the settings' repr, str and JSON), a malformed URL's text, the summary
key over plain http, and conversations in a home or database other users can read.
"""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import run_cli
from test_history_summarizer import ChatServer

from pioneer import PioneerSettings, StoreError, ensure_runtime_home
from pioneer.cli import main
from pioneer.errors import InputError
from pioneer.history import SqliteStore
from pioneer.history.open import configured_store, open_store, redact_url

PASSWORD = "S3cr3tPw"

# Each way of writing a password that once reached a message, as libpq reads it.
URLS = {
    "query": f"postgresql://app@127.0.0.1:1/pioneer?password={PASSWORD}",
    "hash-and-question-mark": f"postgresql://app:{PASSWORD}#?x@127.0.0.1:1/pioneer",
    "bad-percent": f"postgresql://app:{PASSWORD}%zz@127.0.0.1:1/pioneer",
    "upper-case-scheme": f"POSTGRESQL://app:{PASSWORD}@127.0.0.1:1/pioneer",
    "bad-ipv6": f"postgresql://app:{PASSWORD}@[::1/pioneer",
    # libpq's key=value form is no URL: taken as a path, it was echoed as one.
    "key-value": f"host=127.0.0.1 port=1 dbname=pioneer password={PASSWORD}",
}


def _run_with(how: str, url: str, monkeypatch: pytest.MonkeyPatch,
              tmp_path: Path) -> tuple[int, str, str]:
    """``pioneer history demo`` told the store ``url`` by ``how``."""
    monkeypatch.chdir(tmp_path)
    if how == "--db":
        return run_cli("history", "demo", "--db", url)
    if how == "environment":
        monkeypatch.setenv("PIONEER_STORE_URL", url)
        return run_cli("history", "demo")
    (tmp_path / "pioneer.toml").write_text(f"store_url = {json.dumps(url)}\n")
    return run_cli("history", "demo", "--config", "pioneer.toml")


@pytest.mark.parametrize("how", ["--db", "environment", "pioneer.toml"])
@pytest.mark.parametrize("url", URLS.values(), ids=URLS.keys())
def test_no_message_prints_a_store_password(url: str, how: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _run_with(how, url, monkeypatch, tmp_path)
    assert (code, out) == (1, "")
    assert PASSWORD not in err and "Traceback" not in err
    assert err.endswith("error: 1 problem\n")


@pytest.mark.parametrize("how", ["--db", "store_path"])
def test_a_key_value_string_with_a_password_is_refused_unechoed(
        how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conninfo = URLS["key-value"]
    monkeypatch.chdir(tmp_path)
    if how == "--db":
        code, out, err = run_cli("history", "demo", "--db", conninfo)
    else:
        monkeypatch.setenv("PIONEER_STORE_PATH", conninfo)
        code, out, err = run_cli("history", "demo")
    assert (code, out) == (1, "")
    assert err == ("a libpq key=value string with a password is not a store: give a "
                   "postgresql:// URL or an SQLite path\nerror: 1 problem\n")
    with pytest.raises(StoreError) as info:
        open_store(Path(conninfo))
    assert PASSWORD not in str(info.value) and not list(tmp_path.iterdir())


def test_a_url_libpq_reads_is_named_without_its_password() -> None:
    assert redact_url(URLS["query"]) == "postgresql://app:***@127.0.0.1:1/pioneer"
    assert redact_url(URLS["hash-and-question-mark"]) == (
        "postgresql://app:***@127.0.0.1:1/pioneer")
    assert redact_url(URLS["upper-case-scheme"]) == "postgresql://app:***@127.0.0.1:1/pioneer"
    assert redact_url("postgresql://app@/pioneer?host=/run/pg&options=-csearch_path%3Ds") == (
        "postgresql://app@/pioneer?host=%2Frun%2Fpg&options=-csearch_path%3Ds")


@pytest.mark.parametrize("url", [URLS["bad-ipv6"], URLS["bad-percent"],
                                 f"postgresql://app:pa/{PASSWORD}@h/pioneer"],
                         ids=["bad-ipv6", "bad-percent", "slash-in-password"])
def test_a_malformed_store_url_is_a_located_error_not_an_internal_one(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("history", "demo", "--db", url)
    assert (code, out) == (1, "")
    assert err.startswith("postgresql://…: not a valid PostgreSQL URL (")
    assert PASSWORD not in err
    (tmp_path / "pioneer.toml").write_text(f"# the store\nstore_url = {json.dumps(url)}\n")
    code, out, err = run_cli("history", "demo", "--config", "pioneer.toml")
    assert (code, out) == (1, "")
    assert err.startswith("pioneer.toml:2: store_url: Value error, not a valid PostgreSQL URL (")
    assert PASSWORD not in err
    with pytest.raises(StoreError, match=r"^postgresql://…: not a valid PostgreSQL URL \("):
        open_store(url)


def test_an_ipv6_url_that_is_whole_is_read_as_libpq_reads_it() -> None:
    # The bracketed host the malformed URL above lacks its "]" for: libpq reads it.
    url = f"postgresql://postgres:{PASSWORD}@[::1]:1/pioneer"
    assert redact_url(url) == "postgresql://postgres:***@[::1]:1/pioneer"
    with pytest.raises(StoreError) as raised:
        open_store(url)
    assert str(raised.value).startswith("postgresql://postgres:***@[::1]:1/pioneer: ")
    assert PASSWORD not in str(raised.value)


def test_the_settings_keep_the_store_url_secret() -> None:
    url = f"postgresql://app:{PASSWORD}@db.internal/pioneer"
    settings = PioneerSettings(store_url=url)
    for shown in (repr(settings), str(settings), settings.model_dump_json(),
                  json.dumps(settings.model_dump(mode="json"))):
        assert PASSWORD not in shown
    assert settings.store_url is not None
    assert settings.store_url.get_secret_value() == url
    assert configured_store(settings) == url
    with pytest.raises(InputError) as raised:
        PioneerSettings(store_url=f"mysql://app:{PASSWORD}@db.internal/pioneer")
    assert PASSWORD not in str(raised.value)
    assert "expected a postgresql:// URL" in str(raised.value)


# -- the summary key over plain http ------------------------------------------------


def test_the_summary_key_is_not_sent_over_plain_http_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "history.db"
    with SqliteStore(db) as store:
        # Two threads alike: the refused summary stores a truncation cut on the first.
        for thread in ("demo", "again"):
            store.ensure_thread(thread, model="demo-model")
            for n in range(4):
                store.add_turn(thread, user_text=f"Question {n}?",
                               assistant_text=f"Answer {n}.")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-wire")
    server = ChatServer()
    try:
        argv = ["history", "demo", "--db", str(db), "--home", str(tmp_path),
                "--max-context-tokens", "60", "--reserve-tokens", "0",
                "--summarize", "--summary-url", server.base_url]
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, stdout=out, stderr=err) == 0
        assert server.requests == []  # nothing went out: neither the key nor the history
        assert (f"summarizer failed: {server.base_url}/chat/completions: the key in "
                "OPENAI_API_KEY is not sent over plain http") in out.getvalue()
        monkeypatch.setenv("PIONEER_SUMMARY_ALLOW_HTTP", "true")
        argv[1] = "again"
        assert main(argv, stdout=io.StringIO(), stderr=err) == 0
        assert [headers["Authorization"] for _, headers, _ in server.requests] == [
            "Bearer sk-not-for-the-wire"]
    finally:
        server.close()
    with SqliteStore(db, read_only=True) as store:
        assert store.get_thread_summary("again") is not None


# -- the runtime home and the database ----------------------------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_home_and_the_database_are_the_owners_alone(tmp_path: Path,
                                                         umask_022: None) -> None:
    home = tmp_path / "deploy" / "home"
    code, _out, err = run_cli("init", "--home", str(home))
    assert (code, err) == (0, "")
    assert _mode(home) == 0o700
    settings = PioneerSettings(home=home)
    with open_store(settings) as store:
        store.ensure_thread("t")
        store.add_turn("t", user_text="private", assistant_text="yes")
        files = sorted(home.glob("pioneer.db*"))
        assert [path.name for path in files] == ["pioneer.db", "pioneer.db-shm",
                                                 "pioneer.db-wal"]
        assert {path.name: _mode(path) for path in files} == {
            path.name: 0o600 for path in files}
    # What exists is the user's: neither the folder nor the file is changed.
    existing = tmp_path / "shared"
    existing.mkdir(mode=0o750)
    (existing / "pioneer.db").touch(mode=0o640)
    ensure_runtime_home(existing)
    with SqliteStore(existing / "pioneer.db"):
        pass
    assert (_mode(existing), _mode(existing / "pioneer.db")) == (0o750, 0o640)


def test_an_empty_pioneer_home_is_the_default_home_not_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = tmp_path / "user"
    work = tmp_path / "checkout"
    user.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("PIONEER_HOME", "")
    monkeypatch.chdir(work)
    assert PioneerSettings().home == user / ".pioneer"
    code, _out, err = run_cli("init")
    assert (code, err) == (0, "")
    assert sorted(path.name for path in (user / ".pioneer").iterdir()) == [
        "IDENTITY.md", "SOUL.md"]
    assert list(work.iterdir()) == []
    (work / "pioneer.toml").write_text('home = ""\n')
    assert PioneerSettings.load().home == user / ".pioneer"
