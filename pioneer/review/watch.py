"""Watching what a compile reads, for the live context map (``inspect --html --watch``).

:func:`watched_for` lists what a compile of a profile depends on: the profile folders
(every ``*.toml``, so a new profile that shadows a built-in one counts), the template
folders (every file: templates include and import one another), the runtime home's and
the workspace's identity files (top-level ``*.md``, so a file created later counts), the
profile's own files through its extends chain, the bootstrap files the manifest read, the
deployment file and the command's input files. :func:`snapshot` takes the stat signature
of each; :func:`wait_for_change` polls until a snapshot differs and then holds still for
one more poll, so an editor's save in several writes is one change. Polling sees files
that did not exist yet and works on every file system; a poll of the built-in profile
and template folders and a home (about 25 files) takes a few milliseconds, about 1% of a
core at four polls a second.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..files import builtin_dir

if TYPE_CHECKING:
    from ..compile.compiler import LoadedProfile, PromptCompiler
    from ..compile.manifest import PromptManifest

__all__ = ["Watched", "snapshot", "wait_for_change", "watched_for"]

#: A file's (mtime in ns, size, inode); None while it does not exist.
Signature = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Watched:
    """Files, and folders whose files matching a pattern are watched (``**`` recursive)."""

    files: frozenset[Path] = frozenset()
    #: (folder, glob pattern), e.g. (templates/, "**/*") or (home/, "*.md").
    folders: frozenset[tuple[Path, str]] = frozenset()
    #: Files never watched, wherever they are (the page being written, and its partial).
    ignored: frozenset[Path] = field(default=frozenset())

    def __or__(self, other: Watched) -> Watched:
        return Watched(self.files | other.files, self.folders | other.folders,
                       self.ignored | other.ignored)


def watched_for(
    compiler: PromptCompiler, *, profile: LoadedProfile | None = None,
    manifest: PromptManifest | None = None, workspace: Path | None = None,
    files: Iterable[Path] = (), ignored: Iterable[Path] = (),
) -> Watched:
    """What a compile with ``compiler`` depends on; ``profile`` and ``manifest`` (when the
    compile got that far) add the profile's files and the bootstrap files it read."""
    settings = compiler.settings
    folders = {(Path(folder), "**/*.toml") for folder in [*settings.profile_path,
                                                          builtin_dir("profiles")]}
    folders |= {(Path(folder), "**/*") for folder in getattr(
        compiler.templates.env.loader, "searchpath", ())}
    folders |= {(Path(folder), "*.md") for folder in (settings.home, workspace) if folder}
    found = set(files)
    if profile is not None:
        found |= {Path(source.path) for source in profile.source.files}
    if manifest is not None:
        found |= {Path(entry.path) for entry in manifest.source_manifest}
    return Watched(frozenset(found), frozenset(folders), frozenset(ignored))


def snapshot(watched: Watched) -> dict[Path, Signature]:
    """The stat signature of every watched file that exists."""
    out: dict[Path, Signature] = {}
    ignored = {_key(path) for path in watched.ignored}
    candidates: list[Path] = list(watched.files)
    for folder, pattern in sorted(watched.folders):
        candidates += _matching(folder, pattern)
    for path in candidates:
        key = _key(path)
        if key in ignored or key in out:
            continue
        try:
            stat = os.stat(path)
        except OSError:
            continue
        out[key] = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return out


#: How far before a build began a file's time may lie and still count as changed since:
#: the kernel stamps files from a coarse clock, a few milliseconds behind ``time_ns``.
_CLOCK_SLACK_NS = 100_000_000


def snapshot_since(watched: Watched, started_ns: int) -> dict[Path, Signature]:
    """:func:`snapshot`, with every file changed after ``started_ns`` (a build's start)
    marked changed, so that waiting on it returns at once for an edit made meanwhile."""
    changed: Signature = (-1, -1, -1)
    since, now = started_ns - _CLOCK_SLACK_NS, time.time_ns() + _CLOCK_SLACK_NS
    # A time in the future (a file from a machine whose clock runs ahead) is not a change,
    # or the page would be drawn again and again.
    return {path: changed if since <= signature[0] <= now else signature
            for path, signature in snapshot(watched).items()}


def _key(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _matching(folder: Path, pattern: str) -> Iterator[Path]:
    try:
        yield from (path for path in folder.glob(pattern) if path.is_file())
    except OSError:  # a folder removed while it is read: the next poll sees it gone
        return


def wait_for_change(watched: Watched, since: Mapping[Path, Signature], *,
                    interval: float = 0.25,
                    stopped: Callable[[], bool] = lambda: False) -> dict[Path, Signature] | None:
    """Poll until a snapshot differs from ``since`` and then stays the same for one more
    poll; the settled snapshot, or None once ``stopped()`` holds (checked every poll)."""
    while True:
        time.sleep(interval)
        if stopped():
            return None
        now = snapshot(watched)
        if now == since:
            continue
        while True:
            time.sleep(interval)
            if stopped():
                return None
            settled = snapshot(watched)
            if settled == now:
                return settled
            now = settled
