"""Bootstrap files and AGENTS.md under hostile file systems: bounded, contained, diagnosed.

A FIFO, a socket, a directory, a symlink loop, a dangling symlink, a file that cannot be
opened and bytes that are not UTF-8 each become a diagnostic, within a bounded time; a
multi-gigabyte sparse file costs no more memory or time than its budget; and nothing
outside the declared roots is opened, whatever symlinks point there.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import run_cli, within

from pioneer import PioneerError, PromptCompileInput, PromptCompiler, ensure_runtime_home
from pioneer.compile.bootstrap import COUNT_LIMIT, load_bootstrap
from pioneer.sections.agents_md import HOOK_MAX_CHARS, find_agents_md

FILES = (("SOUL.md", True), ("IDENTITY.md", True), ("USER.md", False))
#: Generous: each case takes milliseconds; only a hang or a full read comes near it.
NEVER_HANGS = 20.0




@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    sockets: list[socket.socket] = []

    def make(path: Path) -> None:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        sockets.append(server)

    yield make
    for server in sockets:
        server.close()


def _loop(path: Path) -> None:
    os.symlink(path.parent / "loop-b", path)
    os.symlink(path, path.parent / "loop-b")


KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (lambda p: os.mkfifo(p), "not a regular file"),
    "directory": (lambda p: p.mkdir(), "Is a directory (os error 21)"),
    "symlink-loop": (_loop, "Too many levels of symbolic links (os error 40)"),
    "not-utf8": (lambda p: p.write_bytes(b"caf\xe9 \xff\xfe"), "stream did not contain valid "
                 "UTF-8"),
}


def _diagnostics(home: Path) -> list[tuple[str, str]]:
    result = within(NEVER_HANGS, lambda: load_bootstrap(
        home, FILES, max_chars_per_file=1000, max_chars_total=5000))
    return [(d.code, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bootstrap_file_of_each_hostile_kind_is_a_read_error(home: Path, kind: str) -> None:
    make, reason = KINDS[kind]
    make(home / "SOUL.md")
    (home / "IDENTITY.md").write_text("Still here.")
    assert _diagnostics(home) == [
        ("file_read_error", f"bootstrap file `SOUL.md` could not be read: {reason}"),
        ("missing_file", "bootstrap file `USER.md` is missing"),
    ]


def test_bootstrap_socket_is_a_read_error(home: Path,
                                          unix_socket: Callable[[Path], None]) -> None:
    unix_socket(home / "USER.md")
    assert _diagnostics(home)[-1] == (
        "file_read_error",
        "bootstrap file `USER.md` could not be read: No such device or address (os error 6)",
    )


def test_bootstrap_dangling_symlink_is_a_missing_file(home: Path) -> None:
    os.symlink(home / "gone.md", home / "SOUL.md")
    assert _diagnostics(home)[0] == ("missing_file", "bootstrap file `SOUL.md` is missing")


def test_bootstrap_permission_denied_is_a_read_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests run as root, where chmod 000 does not deny a read: deny at os.open instead.
    (home / "SOUL.md").write_text("secret")
    real_open = os.open

    def deny(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path).endswith("SOUL.md"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    assert _diagnostics(home)[0] == (
        "file_read_error",
        "bootstrap file `SOUL.md` could not be read: Permission denied (os error 13)",
    )


def test_bootstrap_chmod_000_is_a_read_error() -> None:
    # Root reads a chmod 000 file anyway, so as root the read runs in a forked child
    # that has given up root (the modules it needs are imported before the fork).
    home = Path(tempfile.mkdtemp())
    try:
        home.chmod(0o755)
        (home / "SOUL.md").write_text("secret")
        _diagnostics(home)
        (home / "SOUL.md").chmod(0)
        if os.geteuid() != 0:
            assert _diagnostics(home)[0][0] == "file_read_error"
            return
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, _diagnostics(home)[0][0].encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            code = pipe.read().decode()
        assert os.waitpid(child, 0)[1] == 0
        assert code == "file_read_error"
    finally:
        (home / "SOUL.md").unlink(missing_ok=True)
        home.rmdir()


def test_compile_goes_on_whatever_the_files_are(home: Path,
                                                unix_socket: Callable[[Path], None]) -> None:
    os.mkfifo(home / "SOUL.md")
    (home / "IDENTITY.md").mkdir()
    unix_socket(home / "USER.md")
    payload = within(NEVER_HANGS, lambda: PromptCompiler().compile(
        PromptCompileInput(workspace_root=home)))
    assert [entry.status for entry in payload.manifest.source_manifest] == ["read_error"] * 3
    assert "## Soul Core" not in payload.full_system_text


@pytest.mark.parametrize("failing", ["mkstemp", "link"])
def test_seeding_a_home_that_cannot_be_written_is_a_clear_error(
    home: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    # A read-only or full file system; as root a chmod would not stop the write.
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile if failing == "mkstemp" else os, failing, refuse)
    with pytest.raises(PioneerError) as info:
        ensure_runtime_home(home)
    assert str(info.value) == (
        f"{home}/SOUL.md: cannot create seed file: Read-only file system (os error 30)")
    assert list(home.iterdir()) == []  # no temporary file left behind


# -- huge and sparse files ---------------------------------------------------------


def _sparse(path: Path, head: bytes, size: int) -> None:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)


def test_a_sparse_multi_gigabyte_bootstrap_file_costs_its_budget(home: Path) -> None:
    _sparse(home / "SOUL.md", b"I am a very large soul.", 64 << 30)
    tracemalloc.start()
    try:
        result = within(NEVER_HANGS, lambda: load_bootstrap(
            home, FILES, max_chars_per_file=20_000, max_chars_total=150_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    soul = result.files["SOUL.md"]
    assert soul.content.startswith("I am a very large soul.\0") and len(soul.content) == 20_000
    assert peak < 4 << 20  # the head and a few read chunks, never the file
    # Counting stopped at COUNT_LIMIT bytes, so the original size is a lower bound.
    assert result.diagnostics[-1].message == (
        f"bootstrap file `SOUL.md` truncated by per-file limit: at least {COUNT_LIMIT} -> "
        "20000 chars"
    )
    assert result.source_manifest[0].status == "truncated"


def test_counting_stops_but_a_large_budget_is_still_filled(home: Path) -> None:
    # A budget bigger than the count limit reads as far as the budget needs.
    keep = COUNT_LIMIT // 2
    (home / "SOUL.md").write_bytes("é".encode() * (COUNT_LIMIT + 10))
    result = load_bootstrap(home, FILES[:1], max_chars_per_file=keep, max_chars_total=keep)
    assert len(result.files["SOUL.md"].content) == keep
    assert result.diagnostics[0].message.startswith(
        "bootstrap file `SOUL.md` truncated by per-file limit: at least ")


def test_a_file_just_under_the_count_limit_is_counted_exactly(home: Path) -> None:
    (home / "USER.md").write_bytes(b"u" * (COUNT_LIMIT - 1))
    result = load_bootstrap(home, FILES[2:], max_chars_per_file=10, max_chars_total=10)
    assert result.diagnostics[0].message == (
        f"bootstrap file `USER.md` truncated by per-file limit: {COUNT_LIMIT - 1} -> 10 chars")


def test_a_sparse_multi_gigabyte_agents_md_costs_its_budget(tmp_path: Path) -> None:
    _sparse(tmp_path / "AGENTS.md", b"Rules first.", 64 << 30)
    tracemalloc.start()
    try:
        lookup = within(NEVER_HANGS, lambda: find_agents_md(tmp_path, None))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lookup.doc is not None and lookup.doc.cut
    assert len(lookup.doc.content) == HOOK_MAX_CHARS
    assert peak < 4 << 20


# -- AGENTS.md of each hostile kind -------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_agents_md_of_each_hostile_kind_is_passed_over(tmp_path: Path, kind: str) -> None:
    make = KINDS[kind][0]
    (tmp_path / "AGENTS.md").write_text("Root rules.")
    (tmp_path / "web").mkdir()
    make(tmp_path / "web" / "AGENTS.md")
    lookup = within(NEVER_HANGS, lambda: find_agents_md(tmp_path, "web"))
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert len(lookup.diagnostics) == 1
    assert lookup.diagnostics[0].startswith("`web/AGENTS.md` could not be ")


def test_agents_md_socket_and_denied_file_are_passed_over(
    tmp_path: Path, unix_socket: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "AGENTS.md").write_text("Root rules.")
    (tmp_path / "a" / "b").mkdir(parents=True)
    unix_socket(tmp_path / "a" / "b" / "AGENTS.md")
    (tmp_path / "a" / "AGENTS.md").write_text("Denied.")
    real_open = os.open

    def deny(path: Any, flags: int, *args: Any, dir_fd: int | None = None,
             **kwargs: Any) -> int:
        # Files are opened relative to their folder's descriptor: name the whole path.
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else ""
        if os.path.join(folder, os.fspath(path)).endswith("/a/AGENTS.md"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    lookup = within(NEVER_HANGS, lambda: find_agents_md(tmp_path, "a/b"))
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert lookup.diagnostics == (
        "`a/b/AGENTS.md` could not be read: No such device or address",
        "`a/AGENTS.md` could not be read: Permission denied",
    )


def test_agents_md_dangling_symlink_counts_as_absent(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Root rules.")
    (tmp_path / "web").mkdir()
    os.symlink(tmp_path / "web" / "gone.md", tmp_path / "web" / "AGENTS.md")
    lookup = find_agents_md(tmp_path, "web")
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert lookup.diagnostics == ()


# -- nothing outside the declared roots -------------------------------------------

SECRET = "SECRET-OUTSIDE-THE-ROOT"


def test_a_bootstrap_symlink_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "secret.md").write_text(SECRET)
    os.symlink(tmp_path / "secret.md", home / "SOUL.md")
    os.symlink("../secret.md", home / "USER.md")
    payload = PromptCompiler().compile(PromptCompileInput(workspace_root=home))
    assert SECRET not in payload.full_system_text
    refused = "could not be read: it resolves outside the workspace root (through a " \
              "symlink); not read"
    assert [(d.code, d.message) for d in payload.manifest.diagnostics] == [
        ("file_read_error", f"bootstrap file `SOUL.md` {refused}"),
        ("missing_file", "bootstrap file `IDENTITY.md` is missing"),
        ("file_read_error", f"bootstrap file `USER.md` {refused}"),
    ]


def test_a_symlink_inside_the_root_is_followed(home: Path) -> None:
    (home / "soul-v2.md").write_text("Kept inside.")
    os.symlink("soul-v2.md", home / "SOUL.md")
    result = load_bootstrap(home, FILES, max_chars_per_file=100, max_chars_total=100)
    assert result.files["SOUL.md"].content == "Kept inside."


def test_a_root_reached_through_a_symlink_still_reads_its_files(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    (real / "SOUL.md").write_text("Through the link.")
    os.symlink(real, tmp_path / "home")
    result = load_bootstrap(tmp_path / "home", FILES, max_chars_per_file=100,
                            max_chars_total=100)
    assert result.files["SOUL.md"].content == "Through the link."


# A fresh interpreter records the real path of every file opened while one turn compiles
# (bootstrap files and the AGENTS.md hook): none may lie in the outside folder.
AUDIT = """
import json, os, sys
from pathlib import Path
opened = []
def audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        opened.append(os.path.realpath(os.fsdecode(args[0])))
from pioneer import PioneerError, PromptCompileInput, PromptCompiler, ensure_runtime_home
from pioneer.sections.agents_md import agents_md_subscription
from pioneer.hooks.registry import HookRegistry, TurnContext
compiler = PromptCompiler()
compiler.load_profile("full")
home, workspace = Path(sys.argv[1]), Path(sys.argv[2])
registry = HookRegistry()
registry.add(agents_md_subscription(workspace))
real_open = os.open
def recording_open(path, flags, *args, **kwargs):
    # A file opened relative to a folder's descriptor is named by what it is.
    fd = real_open(path, flags, *args, **kwargs)
    opened.append(os.readlink(f"/proc/self/fd/{fd}"))
    return fd
os.open = recording_open  # after the imports, as a caller's own wrapper would be
sys.addaudithook(audit)
given = PromptCompileInput(workspace_root=home)
hook_run = registry.run_hooks(compiler, given, turn=TurnContext(thread_folder="web/leak"))
payload = compiler.compile(hook_run.round_input(given))
print(json.dumps({"opened": opened, "text": payload.full_system_text}))
"""


def test_nothing_outside_the_roots_is_opened(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    for name in ("secret.md", "dir/AGENTS.md"):
        (outside / name).write_text(SECRET)
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    (workspace / "web").mkdir(parents=True)
    (home / "IDENTITY.md").write_text("Inside.")
    os.symlink(outside / "secret.md", home / "SOUL.md")
    os.symlink(outside / "secret.md", workspace / "web" / "AGENTS.md")
    os.symlink(outside / "dir", workspace / "web" / "leak")
    (workspace / "AGENTS.md").write_text("Root rules.")
    done = subprocess.run([sys.executable, "-c", AUDIT, str(home), str(workspace)],
                          capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(done.stdout)
    assert SECRET not in report["text"]
    assert "Root rules." in report["text"] and "Inside." in report["text"]
    opened = [Path(path) for path in report["opened"]]
    assert any(path.name == "IDENTITY.md" for path in opened)  # the audit does see reads
    assert not [path for path in opened if path.is_relative_to(outside.resolve())]


def test_within_fails_instead_of_hanging() -> None:
    gate = threading.Event()
    with pytest.raises(AssertionError, match=r"still running after 0\.1 s"):
        within(0.1, lambda: gate.wait(5))
    gate.set()
    assert within(1, lambda: 7) == 7


# -- a file swapped while it is read ------------------------------------------------

LEGIT = "Legitimate text inside the root."


@pytest.fixture
def swapping(tmp_path: Path) -> Iterator[Callable[[Path], threading.Event]]:
    """Start a thread that keeps swapping a path between a regular file and a symlink to
    a secret outside the root; returns the event that the swaps have started."""
    secret = tmp_path / "outside-secret.md"
    secret.write_text(SECRET)
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start(target: Path) -> threading.Event:
        started = threading.Event()

        def swap() -> None:
            regular, link = target.with_name(".swap-file"), target.with_name(".swap-link")
            while not stop.is_set():
                regular.write_text(LEGIT)
                os.replace(regular, target)
                os.symlink(secret, link)
                os.replace(link, target)
                started.set()

        thread = threading.Thread(target=swap, daemon=True)
        thread.start()
        threads.append(thread)
        assert started.wait(NEVER_HANGS)
        return started

    yield start
    stop.set()
    for thread in threads:
        thread.join(NEVER_HANGS)


def test_a_symlink_swapped_in_mid_read_never_brings_the_secret_in(
    tmp_path: Path, swapping: Callable[[Path], threading.Event]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    swapping(home / "USER.md")
    compiler = PromptCompiler()
    given = PromptCompileInput(profile="minimal", workspace_root=home)
    outcomes = []
    for _ in range(2000):  # the compile raises nothing, and never holds the secret
        payload = compiler.compile(given)
        assert SECRET not in payload.full_system_text
        outcomes.append(LEGIT in payload.full_system_text)
    # Both sides of the swap were seen (the race was run, not missed).
    assert any(outcomes) and not all(outcomes)


def test_a_symlink_swapped_in_mid_lookup_never_brings_the_secret_in(
    tmp_path: Path, swapping: Callable[[Path], threading.Event]
) -> None:
    (tmp_path / "ws" / "web").mkdir(parents=True)
    (tmp_path / "ws" / "AGENTS.md").write_text("Root rules.")
    swapping(tmp_path / "ws" / "web" / "AGENTS.md")
    found = set()
    for _ in range(2000):
        lookup = find_agents_md(tmp_path / "ws", "web")
        assert lookup.doc is not None and SECRET not in lookup.doc.content
        assert all(SECRET not in note for note in lookup.diagnostics)
        found.add(lookup.doc.content)
    assert found == {LEGIT, "Root rules."}


def test_pioneer_compile_under_a_swapping_symlink_never_prints_the_secret(
    tmp_path: Path, swapping: Callable[[Path], threading.Event]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    swapping(home / "USER.md")
    for _ in range(150):
        code, out, err = run_cli("compile", "-q", "--home", str(home), "--profile", "minimal")
        assert (code, err) == (0, "")
        assert SECRET not in out


@pytest.mark.parametrize(("name", "reason"), [
    ("../secret.md", "it resolves outside the workspace root (with `..`)"),
    ("sub/../../secret.md", "it resolves outside the workspace root (with `..`)"),
    ("via/secret.md", "it resolves outside the workspace root (through a symlink)"),
    ("up/secret.md", "it resolves outside the workspace root (through a symlink)"),
    ("ABSOLUTE", "it is an absolute path outside the workspace root"),
], ids=["dotdot", "dotdot-deeper", "absolute-link", "relative-link", "absolute-name"])
def test_the_outside_diagnostic_says_how_the_path_leaves(
    tmp_path: Path, name: str, reason: str
) -> None:
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (tmp_path / "secret.md").write_text(SECRET)
    os.symlink(tmp_path, home / "via")
    os.symlink("..", home / "up")
    name = str(tmp_path / "secret.md") if name == "ABSOLUTE" else name
    result = load_bootstrap(home, [(name, True)], max_chars_per_file=100, max_chars_total=100)
    assert result.files == {}
    assert [(d.code, d.message) for d in result.diagnostics] == [
        ("file_read_error", f"bootstrap file `{name}` could not be read: {reason}; not read")]


def test_paths_that_stay_inside_are_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "USER.md").write_text("Inside.")
    os.symlink(home / "sub", home / "abs-sub")
    os.symlink("../USER.md", home / "sub" / "up.md")
    for name in ("sub/../USER.md", "abs-sub/up.md", str(home / "USER.md")):
        result = load_bootstrap(home, [(name, True)], max_chars_per_file=100,
                                max_chars_total=100)
        assert result.files[name].content == "Inside.", name


@pytest.mark.parametrize(("name", "reason"), [
    ("SO\0UL.md", "not a valid file name (it holds a NUL byte)"),
    ("SOUL\ud800.md", "not a valid file name (a character cannot be encoded)"),
], ids=["nul", "surrogate"])
def test_a_file_name_no_file_system_can_hold_is_a_read_error(
    home: Path, name: str, reason: str
) -> None:
    result = load_bootstrap(home, [(name, True)], max_chars_per_file=100, max_chars_total=100)
    assert [(d.code, d.message) for d in result.diagnostics] == [
        ("file_read_error", f"bootstrap file `{name}` could not be read: {reason}")]
