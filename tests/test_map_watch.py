"""``pioneer inspect --html FILE --watch`` through the installed console script: the page
is rewritten after an edit of an identity file, the input, a template and the profile;
a profile that stops compiling puts its error on the page until it is fixed; Ctrl-C and
SIGTERM stop it cleanly; and in Chromium the page reloads itself, keeping the text a
reader had open."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

HOME = Path(__file__).parent / "context_map" / "home"
PIONEER = Path(sys.executable).with_name("pioneer")
CHROMIUM = "/usr/bin/chromium"
#: How long to wait for the page to change before the test fails (never reached when
#: the watch works: a change is drawn within a second or so).
PATIENCE = 60.0

PROFILE = """name = "mybot"
extends = "full"

[[sections]]
id = "identity_base"
template = "identity_base.md.j2"
title = "{title}"
"""


class Watching:
    """A running ``inspect --watch`` and the files it watches."""

    def __init__(self, folder: Path, process: subprocess.Popen[str]):
        self.folder, self.process = folder, process
        self.page = folder / "ctx.html"

    @property
    def stderr(self) -> str:
        return (self.folder / "stderr.txt").read_text()

    def until(self, check: Callable[[str], bool], what: str) -> str:
        """The page once ``check`` holds for it (the watch still running)."""
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the watch ended: {self.stderr}"
            text = self.page.read_text("utf-8") if self.page.exists() else ""
            if check(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"the page never showed {what}; stderr: {self.stderr}")

    def stop(self, how: int = signal.SIGINT) -> int:
        self.process.send_signal(how)
        return self.process.wait(timeout=PATIENCE)


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[Watching]:
    shutil.copytree(HOME, tmp_path / "home")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mybot.toml").write_text(PROFILE.format(title="Who You Are"))
    (tmp_path / "templates").mkdir()
    (tmp_path / "input.json").write_text(json.dumps(
        {"profile": "mybot", "dynamic_context": "The first draft."}))
    with (tmp_path / "stderr.txt").open("w") as stderr:
        process = subprocess.Popen(
            [str(PIONEER), "inspect", "--home", "home", "--profile-path", "profiles",
             "--template-path", "templates", "--input", "input.json", "--html", "ctx.html",
             "--watch"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
            env=_environment())
        watching = Watching(tmp_path, process)
        try:
            watching.until(lambda page: "The first draft." in page, "the first page")
            yield watching
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PIONEER_")}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_the_page_is_rewritten_after_each_edit(watching: Watching) -> None:
    folder = watching.folder
    page = watching.page.read_text("utf-8")
    assert "Who You Are" in page and 'id="live"' in page and "location.reload()" in page
    with (folder / "home" / "SOUL.md").open("a") as soul:  # an identity file
        soul.write("\n- I name the build a change came with.\n")
    watching.until(lambda p: "I name the build a change came with." in p, "the SOUL.md edit")
    _edit(folder / "input.json", "The first draft.", "The second draft.")  # the input
    watching.until(lambda p: "The second draft." in p and "The first draft." not in p,
                   "the input edit")
    (folder / "templates" / "identity_base.md.j2").write_text(  # a template, new
        "You are the Acme release assistant.\n")
    watching.until(lambda p: "You are the Acme release assistant." in p, "the new template")
    _edit(folder / "profiles" / "mybot.toml", "Who You Are", "Release Helper")  # the profile
    watching.until(lambda p: "Release Helper" in p and "Who You Are" not in p,
                   "the profile edit")
    assert watching.stop() == 0
    err = watching.stderr
    assert err.startswith("wrote ctx.html: ") and "\nwatching " in err
    assert err.count("wrote ctx.html: ") == 5
    assert err.endswith("stopped watching; ctx.html keeps the last page\n")


def test_a_profile_that_stops_compiling_shows_its_error_until_it_is_fixed(
    watching: Watching,
) -> None:
    profile = watching.folder / "profiles" / "mybot.toml"
    _edit(profile, 'title = "Who You Are"', 'title = "Who You Are')
    page = watching.until(lambda p: 'id="error"' in p, "the error")
    assert "profiles/mybot.toml:7:" in page and "Who You Are" not in page
    assert "location.reload()" in page  # it keeps reloading, to come back when fixed
    _edit(profile, 'title = "Who You Are', 'title = "Who You Are Now"')
    watching.until(lambda p: "Who You Are Now" in p and 'id="error"' not in p, "the fix")
    assert watching.stop() == 0
    assert "profiles/mybot.toml:7:" in watching.stderr


def test_sigterm_stops_it_cleanly(watching: Watching) -> None:
    assert watching.stop(signal.SIGTERM) == 0
    assert watching.stderr.endswith("stopped watching; ctx.html keeps the last page\n")
    assert not (watching.folder / ".ctx.html.partial").exists()


def test_watch_needs_a_page_to_write(tmp_path: Path) -> None:
    for argv, message in ((["--watch"], "--watch needs --html"),
                          (["--watch", "--html", "x.html", "--json"],
                           "--watch writes the page only: leave out --json"),
                          (["--watch", "--html", "x.html", "--input", "-"],
                           "--watch cannot watch standard input: name the file")):
        done = subprocess.run([str(PIONEER), "inspect", *argv], cwd=tmp_path, text=True,
                              capture_output=True, timeout=PATIENCE, check=False,
                              stdin=subprocess.DEVNULL)
        assert (done.returncode, done.stderr) == (
            2, f"{message}\nerror: 1 problem\n(run `pioneer inspect --help` for usage)\n")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"])
        yield launched
        launched.close()


def test_the_page_reloads_itself_and_keeps_what_was_open(
    watching: Watching, browser: Browser,
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(watching.page.as_uri())
        page.wait_for_function("document.documentElement.dataset.live === 'on'")
        panel = f"#text-{page.get_attribute('.block[data-id=soul_core]', 'data-index')}"
        # The page reloads itself every second: a click that lands on a page already being
        # replaced is lost, and a text is open again only once the new page has restored
        # it. So the test clicks until the text is open, then waits for the edit.
        deadline = time.monotonic() + PATIENCE
        while True:
            page.click(".block[data-id='soul_core']")
            try:
                page.wait_for_selector(f"{panel} pre", state="visible", timeout=3000)
                break
            except PlaywrightTimeoutError:
                assert time.monotonic() < deadline, "the clicked text never opened"
        with (watching.folder / "home" / "SOUL.md").open("a") as soul:
            soul.write("\n- I reload myself.\n")
        page.wait_for_function(
            "selector => ((document.querySelector(selector) || {}).textContent || '')"
            ".includes('I reload myself.')", arg=f"{panel} pre", timeout=PATIENCE * 1000)
        # the open text stayed open
        page.wait_for_selector(f"{panel} pre", state="visible", timeout=PATIENCE * 1000)
        assert errors == []
    finally:
        context.close()
        watching.stop()


def test_an_edit_made_while_a_page_is_built_counts_as_a_change(tmp_path: Path) -> None:
    from pioneer.review.watch import Watched, snapshot, snapshot_since

    old, new = tmp_path / "old.md", tmp_path / "templates" / "new.md.j2"
    old.write_text("before")
    written = time.time_ns() - 5_000_000_000
    os.utime(old, ns=(written, written))  # written well before the build began
    watched = Watched(frozenset({old}), frozenset({(tmp_path / "templates", "**/*")}))
    started = time.time_ns()
    new.parent.mkdir()
    new.write_text("made while the page was built")
    since = snapshot_since(watched, started)
    assert since[old.absolute()] == snapshot(watched)[old.absolute()]
    assert since[new.absolute()] == (-1, -1, -1)  # differs from any snapshot: a change
    assert snapshot(watched) != since


# -- it always stops ----------------------------------------------------------------------


def _start(tmp_path: Path, *argv: str, **env: str) -> subprocess.Popen[str]:
    with (tmp_path / "stderr.txt").open("w") as stderr:
        return subprocess.Popen(
            [str(PIONEER), "inspect", "--home", "home", "--profile-path", "profiles",
             "--template-path", "templates", "--html", "ctx.html", "--watch", *argv],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
            stdin=subprocess.DEVNULL, env={**_environment(), **env})


def test_a_fifo_input_is_refused_without_being_opened(tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: the watch once sat in open()
    # for ten minutes, deaf to SIGTERM. It is judged by stat and never opened.
    shutil.copytree(HOME, tmp_path / "home")
    for folder in ("profiles", "templates"):
        (tmp_path / folder).mkdir()
    os.mkfifo(tmp_path / "input.json")
    process = _start(tmp_path, "--input", "input.json")
    try:
        code = process.wait(timeout=PATIENCE)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=PATIENCE)
    assert (code, (tmp_path / "stderr.txt").read_text()) == (2, (
        "--watch reads regular files only: input.json is a FIFO (named pipe); write what "
        "it carries to a file and watch that\nerror: 1 problem\n"
        "(run `pioneer inspect --help` for usage)\n"))
    assert not (tmp_path / "ctx.html").exists()


def _until_it_handles_stops(process: subprocess.Popen[str]) -> None:
    """Wait until the watch has put in its own SIGTERM handler (and its SIGINT one, put in
    just before): a stop sent earlier, while the interpreter starts, would kill it before
    it could keep its page, however slow the machine. Read from /proc, Linux's own."""
    deadline = time.monotonic() + PATIENCE
    while True:
        assert process.poll() is None, "the watch ended before it was stopped"
        status = Path(f"/proc/{process.pid}/status").read_text()
        caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.M)[1], 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        assert time.monotonic() < deadline, "the watch never handled SIGTERM"
        time.sleep(0.01)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_a_render_that_would_run_for_hours_is_stopped_at_once(tmp_path: Path, how: int) -> None:
    # With the step limit raised out of reach the render would run for hours; a stop
    # request ends it where it is, and the last page is kept.
    shutil.copytree(HOME, tmp_path / "home")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mybot.toml").write_text(PROFILE.format(title="Who"))
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "identity_base.md.j2").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}\n")
    process = _start(tmp_path, "--profile", "mybot",
                     PIONEER_RENDER_STEP_LIMIT=str(10**15))
    try:
        _until_it_handles_stops(process)
        time.sleep(0.5)  # into the render, which begins a few steps after
        assert process.poll() is None
        process.send_signal(how)
        code = process.wait(timeout=PATIENCE)  # a guard against a hang: it stops at once
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0
    assert (tmp_path / "stderr.txt").read_text() == (
        "stopped watching; ctx.html keeps the last page\n")
    assert not (tmp_path / ".ctx.html.partial").exists()
