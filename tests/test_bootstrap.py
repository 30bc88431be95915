"""Bootstrap files and the runtime home."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import run_cli, within

from pioneer import PioneerError, PromptCompileInput, PromptCompiler, ensure_runtime_home
from pioneer.compile import bootstrap
from pioneer.compile.bootstrap import fold_home, load_bootstrap, sanitize

FILES = (("SOUL.md", True), ("IDENTITY.md", True), ("USER.md", False))


def test_seeding_creates_soul_and_identity_only(home: Path) -> None:
    result = ensure_runtime_home(home / "nested" / "deeper")
    created = sorted(p.name for p in result.created)
    assert created == ["IDENTITY.md", "SOUL.md"]
    soul = (home / "nested" / "deeper" / "SOUL.md").read_text()
    identity = (home / "nested" / "deeper" / "IDENTITY.md").read_text()
    for heading in (
        "## Core Truths",
        "## Boundaries",
        "## Vibe",
        "## Tone Examples",
        "## Continuity",
    ):
        assert heading in soul
    assert identity.startswith("### Who Am I?")
    assert "- Name: Pioneer" in identity
    assert "- Creature: software-native assistant" in identity
    assert not (home / "nested" / "deeper" / "USER.md").exists()
    assert not [p for p in (home / "nested" / "deeper").iterdir() if p.name.endswith(".tmp")]


def test_seeding_never_overwrites_even_empty_files(home: Path) -> None:
    (home / "SOUL.md").write_text("")
    (home / "IDENTITY.md").write_text("mine")
    result = ensure_runtime_home(home)
    assert result.created == ()
    assert [p.name for p in result.existing] == ["SOUL.md", "IDENTITY.md"]
    assert (home / "SOUL.md").read_text() == ""
    assert (home / "IDENTITY.md").read_text() == "mine"


def test_seeding_is_idempotent(home: Path) -> None:
    first = ensure_runtime_home(home)
    before = (home / "SOUL.md").read_bytes()
    second = ensure_runtime_home(home)
    assert len(first.created) == 2 and second.created == ()
    assert (home / "SOUL.md").read_bytes() == before


@pytest.mark.parametrize("make", [
    lambda p: p.mkdir(), lambda p: os.mkfifo(p), lambda p: os.symlink(p.parent / "gone", p),
], ids=["directory", "fifo", "dangling-link"])
def test_seeding_keeps_whatever_is_in_place_of_a_file(
    home: Path, make: Callable[[Path], None]
) -> None:
    make(home / "SOUL.md")
    result = within(10, lambda: ensure_runtime_home(home))
    assert [p.name for p in result.existing] == ["SOUL.md"]
    assert [p.name for p in result.created] == ["IDENTITY.md"]
    assert os.path.lexists(home / "SOUL.md") and not (home / "SOUL.md").is_file()


@pytest.mark.parametrize(("make", "reason"), [
    (lambda p: os.mkfifo(p), "not a regular file"),
    (lambda p: p.mkdir(), "Is a directory (os error 21)"),
], ids=["fifo", "directory"])
def test_pioneer_compile_with_a_non_file_at_soul_md_gives_a_diagnostic(
    home: Path, make: Callable[[Path], None], reason: str
) -> None:
    make(home / "SOUL.md")
    code, out, err = within(30, lambda: run_cli("compile", "--home", str(home), "--manifest"))
    assert (code, err.splitlines()[0]) == (
        0, f"warning: bootstrap file `SOUL.md` could not be read: {reason} [file_read_error]"
    )
    assert json.loads(out)["diagnostics"][0] == {
        "code": "file_read_error", "file": str(home / "SOUL.md"), "level": "warning",
        "message": f"bootstrap file `SOUL.md` could not be read: {reason}",
    }


def test_seeding_refuses_a_file_in_place_of_the_home(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("not a folder")
    with pytest.raises(PioneerError) as info:
        ensure_runtime_home(tmp_path / "home")
    assert str(info.value) == f"{tmp_path / 'home'}: exists but is not a directory"


def test_sanitize() -> None:
    assert sanitize("\r\n a\r\nb\rc \n") == "a\nb\nc"


@pytest.mark.parametrize("size", [1, 10, 70_000, 200_000])
def test_streamed_read_matches_whole_read(home: Path, size: int) -> None:
    # A chunk boundary can fall between \r and \n, or inside a multi-byte character.
    text = ("  \r\n" + ("é\r\nline ü🙂\r" * size))[: size * 3] + " \n\r\n"
    (home / "SOUL.md").write_bytes(text.encode())
    result = load_bootstrap(home, FILES[:1], max_chars_per_file=10**9, max_chars_total=10**9)
    expected = sanitize(text)
    assert result.files["SOUL.md"].content == expected
    assert result.files["SOUL.md"].original_chars == len(expected)


def _read_both_ways(path: Path, keep: int) -> tuple[object, object]:
    """The read in one call and the streamed read of the same file."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        whole = bootstrap._read_whole(fd, size, keep)
        os.lseek(fd, 0, os.SEEK_SET)
        streamed = bootstrap._stream(fd, keep)
    finally:
        os.close(fd)
    return whole, streamed


@given(
    text=st.text(alphabet=st.sampled_from("ab \n\t\r\u3000\u00a0é🙂"), max_size=300),
    keep=st.integers(min_value=-3, max_value=320),
)
def test_one_call_read_is_the_streamed_read(tmp_path_factory: pytest.TempPathFactory,
                                            text: str, keep: int) -> None:
    path = tmp_path_factory.mktemp("read") / "SOUL.md"
    path.write_bytes(text.encode())
    whole, streamed = _read_both_ways(path, keep)
    assert whole is not None
    assert whole == streamed


def test_one_call_read_refuses_bad_utf8_like_the_stream(home: Path) -> None:
    path = home / "SOUL.md"
    path.write_bytes(b"ok \xff")
    for reader in (bootstrap._read_whole, bootstrap._stream):
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(bootstrap._ReadFailure, match="valid UTF-8"):
                reader(fd, 4, 10) if reader is bootstrap._read_whole else reader(fd, 10)
        finally:
            os.close(fd)


def test_a_file_that_grew_after_its_stat_is_streamed(home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = home / "SOUL.md"
    path.write_text("grown text\r\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        # The stat said fewer bytes than the file holds now: one call cannot tell where it ends.
        assert bootstrap._read_whole(fd, 4, 100) is None
    finally:
        os.close(fd)
    streamed: list[int] = []
    real_stream = bootstrap._stream

    def stream(fd: int, keep: int) -> object:
        streamed.append(keep)
        return real_stream(fd, keep)

    def refused(fd: int, size: int, keep: int, identity: object = None) -> None:
        os.read(fd, size + 1)  # what a refused call has already consumed

    monkeypatch.setattr(bootstrap, "_read_whole", refused)
    monkeypatch.setattr(bootstrap, "_stream", stream)
    result = load_bootstrap(home, FILES[:1], max_chars_per_file=100, max_chars_total=100)
    assert result.files["SOUL.md"].content == "grown text"
    assert streamed == [100]  # streamed from the first byte again


def test_files_over_the_one_call_limit_are_streamed(home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bootstrap, "_WHOLE_LIMIT", 10)
    calls: list[str] = []
    real_whole = bootstrap._read_whole

    def whole(fd: int, size: int, keep: int) -> object:
        calls.append("whole")
        return real_whole(fd, size, keep)

    monkeypatch.setattr(bootstrap, "_read_whole", whole)
    (home / "SOUL.md").write_text("short")
    (home / "IDENTITY.md").write_text("more than ten bytes")
    result = load_bootstrap(home, FILES[:2], max_chars_per_file=100, max_chars_total=100)
    assert [f.content for f in result.files.values()] == ["short", "more than ten bytes"]
    assert calls == ["whole"]


def test_huge_file_keeps_only_the_head(home: Path) -> None:
    with (home / "USER.md").open("wb") as handle:
        handle.write(b"head " + b"x" * 5_000_000)
    result = load_bootstrap(home, FILES, max_chars_per_file=100, max_chars_total=1000)
    user = result.files["USER.md"]
    assert user.content == ("head " + "x" * 95)
    assert user.original_chars == 5_000_005
    assert [d.message for d in result.diagnostics][-1] == (
        "bootstrap file `USER.md` truncated by per-file limit: 5000005 -> 100 chars"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_a_read_error_not_a_hang(home: Path) -> None:
    os.mkfifo(home / "SOUL.md")
    result = load_bootstrap(home, FILES, max_chars_per_file=100, max_chars_total=1000)
    assert next((d.code, d.message) for d in result.diagnostics) == (
        "file_read_error",
        "bootstrap file `SOUL.md` could not be read: not a regular file",
    )


def test_none_profile_reads_no_files(home: Path) -> None:
    (home / "SOUL.md").mkdir()  # would be a read error if it were read
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home, profile="none"))
    assert payload.manifest.source_manifest == []
    assert payload.manifest.diagnostics == []
    assert payload.manifest.section_ids == ["identity_base"]


def test_other_identity_files_are_never_read(home: Path) -> None:
    for name in ("AGENTS.md", "TOOLS.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"):
        (home / name).write_text(f"content of {name}")
    full = PromptCompiler().compile(PromptCompileInput(workspace_root=home)).full_system_text
    for name in ("AGENTS.md", "TOOLS.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"):
        assert name not in full


@given(st.text(alphabet=st.sampled_from("ab \n\t\r\u3000\u00a0x"), min_size=1, max_size=700))
def test_trailing_space_is_what_rstrip_removes(text: str) -> None:
    from pioneer.compile.bootstrap import _trailing_space

    assert _trailing_space(text) == len(text) - len(text.rstrip())


def test_a_heading_shows_the_home_folded_to_a_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two users' nodes with the same files compile the same stable bytes."""
    stable = []
    for user in ("ada", "grace"):
        folder = tmp_path / user
        monkeypatch.setenv("HOME", str(folder))
        runtime = folder / ".pioneer"
        ensure_runtime_home(runtime)
        payload = PromptCompiler().compile(PromptCompileInput(workspace_root=runtime))
        assert "### SOUL.md (~/.pioneer/SOUL.md)" in payload.stable_system_text
        assert str(folder) not in payload.stable_system_text
        # The manifest still names the file where it is.
        assert str(runtime / "SOUL.md") in [e.path for e in payload.manifest.source_manifest]
        stable.append(payload.stable_system_text)
    assert stable[0] == stable[1]
    home = str(tmp_path / "grace")
    assert fold_home(home) == "~"
    assert fold_home(home + "/notes/SOUL.md") == "~/notes/SOUL.md"
    assert fold_home(home + "-other/SOUL.md") == home + "-other/SOUL.md"
    assert fold_home("relative/SOUL.md") == "relative/SOUL.md"


@pytest.mark.parametrize(("limits", "clamped"), [
    ({"max_chars_per_file": 20_001}, ["limits.max_chars_per_file = 20001 is above the 20000"]),
    ({"max_chars_total": 150_001, "max_chars_per_file": 10},
     ["limits.max_chars_total = 150001 is above the 150000"]),
    ({"max_chars_per_file": 20_000, "max_chars_total": 5}, []),  # at or below: obeyed quietly
], ids=["per-file", "total", "within"])
def test_a_limit_above_the_profiles_budget_is_clamped_with_a_diagnostic(
    home: Path, limits: dict[str, int], clamped: list[str]
) -> None:
    (home / "SOUL.md").write_text("s" * 30_000)
    payload = PromptCompiler().compile({"workspace_root": home, "limits": limits})
    found = [d for d in payload.manifest.diagnostics if d.code == "limit_clamped"]
    assert [d.message.split(" of profile", 1)[0] for d in found] == clamped
    assert all(d.level == "warning" and d.message.endswith(
        "(a limit can only lower a budget)") for d in found)
    assert payload.manifest.diagnostics[:len(found)] == found  # first: before the reads
    soul = next(e for e in payload.manifest.source_manifest if e.file == "SOUL.md")
    assert soul.chars == min(20_000, limits.get("max_chars_per_file", 20_000),
                             limits.get("max_chars_total", 150_000))


def test_only_a_missing_optional_file_is_info(home: Path) -> None:
    payload = PromptCompiler().compile({"workspace_root": home})
    levels = {d.file: d.level for d in payload.manifest.diagnostics}
    assert levels == {str(home / "SOUL.md"): "warning", str(home / "IDENTITY.md"): "warning",
                      str(home / "USER.md"): "info"}
