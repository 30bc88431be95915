"""Bootstrap files: the runtime home, bounded reads, sanitising and budgets.

The identity files (``SOUL.md``, ``IDENTITY.md``, ``USER.md``) are read from the
workspace root in the order the profile declares them, sanitised (CRLF and CR become LF,
then trimmed), cut to the per-file budget and then to what is left of the total budget,
all counted in characters (docs/compile-input-and-manifest.md, "Identity files"). A file
that is missing, unreadable, not a regular file, not UTF-8 or reached through a symlink
(or ``..``) that leaves the workspace root becomes a diagnostic; compiling never fails
because of one. Files are opened by :class:`~pioneer.files.Beneath`, relative to the
root's descriptor and never following a link out of it, so a symlink swapped in
mid-read cannot bring outside text in. Every compile reads the files again. Reads stream
through an incremental decoder, so a huge file costs no more memory than its budget, and
counting stops after :data:`COUNT_LIMIT` bytes (or four bytes per budgeted char, if
more), so a multi-gigabyte or sparse file costs no more time either: its truncation
diagnostic then gives the count so far as a lower bound ("at least N -> kept chars").
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PioneerError, Problem
from ..files import Beneath, Refused, builtin_dir, os_reason
from .manifest import Diagnostic, SourceManifestEntry

__all__ = [
    "SEED_FILES",
    "BootstrapFile",
    "BootstrapResult",
    "SeedResult",
    "ensure_runtime_home",
    "load_bootstrap",
    "sanitize",
]

#: Files seeded into a new runtime home; USER.md is never seeded.
SEED_FILES = ("SOUL.md", "IDENTITY.md")
_CHUNK = 1 << 16
#: Bytes read to count a file's characters before the count becomes a lower bound.
COUNT_LIMIT = 16 << 20


def sanitize(text: str) -> str:
    """CRLF and lone CR become LF, then the text is trimmed."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


@dataclass(frozen=True, slots=True)
class _Read:
    """A successful read: the head of the sanitised text and its char count."""

    head: str
    chars: int
    #: False when counting stopped at the byte limit: ``chars`` is then a lower bound.
    complete: bool = True


class _ReadFailure(Exception):
    def __init__(self, missing: bool, reason: str):
        super().__init__(reason)
        self.missing = missing
        self.reason = reason


def _stream(fd: int, keep: int) -> _Read:
    """Sanitise while streaming: keep ``keep`` chars of the head, count the rest (up to
    :data:`COUNT_LIMIT` bytes, or enough bytes for ``keep`` chars if that is more)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    head: list[str] = []
    head_len = 0
    chars = 0
    trailing_ws = 0
    started = False
    pending_cr = False
    budget = max(COUNT_LIMIT, 4 * (keep + 1))
    complete = True
    while True:
        if budget <= 0:
            complete = False
            break
        chunk = os.read(fd, min(_CHUNK, budget))
        budget -= len(chunk)
        final = not chunk
        try:
            text = decoder.decode(chunk, final=final)
        except UnicodeDecodeError:
            raise _ReadFailure(False, "stream did not contain valid UTF-8") from None
        if pending_cr:
            text = "\r" + text
        pending_cr = not final and text.endswith("\r")
        if pending_cr:
            text = text[:-1]
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if not started:
            text = text.lstrip()
            started = bool(text)
        if text:
            trailing = _trailing_space(text)
            trailing_ws = trailing_ws + trailing if trailing == len(text) else trailing
            chars += len(text)
            if head_len < keep + 1:
                piece = text[: keep + 1 - head_len]
                head.append(piece)
                head_len += len(piece)
        if final:
            break
    total = chars - trailing_ws
    text = "".join(head)[:total].rstrip() if total <= keep else "".join(head)
    return _Read(text, total, complete)


def _trailing_space(text: str) -> int:
    """How many characters of whitespace ``text`` ends with, without copying all of it."""
    if not text[-1].isspace():
        return 0
    tail = text[-_TAIL:]
    kept = len(tail.rstrip())
    if kept or len(tail) == len(text):
        return len(tail) - kept
    return len(text) - len(text.rstrip())  # a long run of whitespace: measure it whole


_TAIL = 256


#: Files up to this size are read with one call and decoded at once.
_WHOLE_LIMIT = 1 << 20


def _read_whole(fd: int, size: int, keep: int) -> _Read | None:
    """The file read in one call, when that call returns exactly the ``size`` its stat
    gave; ``None`` when it returns more (the file grew) or less, and it must be streamed."""
    data = os.read(fd, size + 1)
    if len(data) != size:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _ReadFailure(False, "stream did not contain valid UTF-8") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.strip()
    total = len(text)
    return _Read(text if total <= keep else text[: max(keep + 1, 0)], total)


def _read(beneath: Beneath, name: str, keep: int) -> _Read:
    """Open ``name`` beneath the root (never through a symlink that leaves it) and read it."""
    try:
        opened = beneath.open(name)
    except Refused as refused:
        if refused.kind == "outside":
            raise _ReadFailure(False, f"{refused.reason}; not read") from None
        raise _ReadFailure(refused.kind == "missing" and refused.errno == errno.ENOENT,
                           refused.reason) from None
    fd, info = opened.fd, opened.info
    try:
        if stat.S_ISDIR(info.st_mode):
            raise _ReadFailure(False, os_reason(OSError(errno.EISDIR, "Is a directory")))
        if not stat.S_ISREG(info.st_mode):
            raise _ReadFailure(False, "not a regular file")
        try:
            if info.st_size <= _WHOLE_LIMIT:
                whole = _read_whole(fd, info.st_size, keep)
                if whole is not None:
                    return whole
                os.lseek(fd, 0, os.SEEK_SET)
            return _stream(fd, keep)
        except OSError as error:
            raise _ReadFailure(False, os_reason(error)) from None
    finally:
        os.close(fd)


def fold_home(path: str) -> str:
    """``path`` with the user's home folder written as ``~`` (other paths unchanged).

    The home is what ``~`` expands to (``HOME`` on POSIX). A path inside it keeps its
    separators after the ``~``; the home itself becomes ``~``.
    """
    home = os.path.expanduser("~").rstrip("/\\")
    if not home or home == "~":
        return path
    if path == home:
        return "~"
    if path.startswith(home) and path[len(home):len(home) + 1] in ("/", os.sep):
        return "~" + path[len(home):]
    return path


@dataclass(frozen=True, slots=True)
class BootstrapFile:
    """A bootstrap file that survived budgeting."""

    name: str
    path: str
    content: str
    original_chars: int
    truncated: bool
    #: ``path`` with the user's home folded to ``~`` (:func:`fold_home`): what the block
    #: heading shows, so every node of a deployment compiles the same stable text.
    heading_path: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "heading_path", fold_home(self.path))


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """Kept files by name, the source manifest and the diagnostics, in pipeline order."""

    files: dict[str, BootstrapFile]
    source_manifest: tuple[SourceManifestEntry, ...]
    diagnostics: tuple[Diagnostic, ...]


def _diag(code: str, name: str, path: str, message: str, level: str = "warning") -> Diagnostic:
    return Diagnostic.model_validate(
        {"code": code, "message": f"bootstrap file `{name}` {message}", "file": path,
         "level": level}
    )


def load_bootstrap(
    root: Path,
    files: Sequence[tuple[str, bool]],
    *,
    max_chars_per_file: int,
    max_chars_total: int,
) -> BootstrapResult:
    """Read and budget ``files`` (name, keep_empty) from ``root`` in the order given."""
    load_diags: list[Diagnostic] = []
    budget_diags: list[Diagnostic] = []
    read: list[tuple[str, str, _Read]] = []
    status: dict[str, tuple[str, int]] = {}
    path_of = {name: str(root / name) for name, _ in files}
    with Beneath(root) as beneath:
        for name, kept_when_empty in files:
            path = path_of[name]
            try:
                read.append((name, path, _read(beneath, name, max_chars_per_file)))
            except _ReadFailure as failure:
                if failure.missing:
                    # A file whose section is left out when empty (USER.md) is optional.
                    load_diags.append(_diag("missing_file", name, path, "is missing",
                                            "warning" if kept_when_empty else "info"))
                    status[name] = ("missing", 0)
                else:
                    load_diags.append(_diag("file_read_error", name, path,
                                            f"could not be read: {failure.reason}"))
                    status[name] = ("read_error", 0)

    keep_empty = dict(files)
    kept: dict[str, BootstrapFile] = {}
    used = 0
    for name, path, result in read:
        original = result.chars
        content = result.head[:max_chars_per_file]
        truncated = False
        if len(content) < original or not result.complete:
            truncated = True
            counted = f"{original}" if result.complete else f"at least {original}"
            budget_diags.append(
                _diag(
                    "file_truncated",
                    name,
                    path,
                    f"truncated by per-file limit: {counted} -> {len(content)} chars",
                )
            )
        remaining = max(max_chars_total - used, 0)
        if len(content) > remaining:
            truncated = True
            budget_diags.append(
                _diag(
                    "total_budget_truncated",
                    name,
                    path,
                    f"truncated by total budget: {len(content)} -> {remaining} chars",
                )
            )
            content = content[:remaining]
        used += len(content)
        empty_file = original == 0 and result.complete
        dropped = remaining == 0 or (not content and not (keep_empty[name] and empty_file))
        if dropped:
            status[name] = ("truncated", 0) if truncated else ("missing", 0)
            continue
        kept[name] = BootstrapFile(name, path, content, original, truncated)
        status[name] = ("truncated" if truncated else "loaded", len(content))

    manifest = tuple(SourceManifestEntry.model_validate(
        {"file": name, "path": path_of[name], "status": status[name][0],
         "chars": status[name][1]}) for name, _ in files)
    return BootstrapResult(kept, manifest, tuple(load_diags + budget_diags))


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What :func:`ensure_runtime_home` created and what it found already there."""

    created: tuple[Path, ...]
    existing: tuple[Path, ...]


def ensure_runtime_home(home: str | os.PathLike[str]) -> SeedResult:
    """Create ``home`` and seed SOUL.md and IDENTITY.md; never overwrite anything.

    Each seed is written to a temporary file and hard-linked into place, so a concurrent
    process sees either no file or the complete one, and anything already at a seed's
    name (even an empty file, a directory, a FIFO or a dangling link) always wins: the
    bootstrap read reports what is wrong with it, as a diagnostic. A home it creates is
    the user's alone (mode 0700, whatever the umask); one that exists keeps its mode.
    """
    home = Path(home)
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise PioneerError(Problem("exists but is not a directory", file=str(home))) from None
    except OSError as error:
        raise PioneerError(
            Problem(f"cannot create runtime home: {os_reason(error)}", file=str(home))
        ) from None
    created: list[Path] = []
    existing: list[Path] = []
    seeds = builtin_dir("templates") / "seed"
    for name in SEED_FILES:
        target = home / name
        if _exists(target):
            existing.append(target)
            continue
        content = (seeds / name).read_bytes()
        try:
            made = _create_new(target, content)
        except OSError as error:  # read-only or full disk: nothing is left behind
            raise PioneerError(
                Problem(f"cannot create seed file: {os_reason(error)}", file=str(target))
            ) from None
        (created if made else existing).append(target)
    return SeedResult(tuple(created), tuple(existing))


def _exists(target: Path) -> bool:
    """Something, of any kind, is at ``target`` (a symlink is not followed).

    Whatever it is, it is the user's and stays: a directory, a FIFO or a dangling link
    in place of a seed is not replaced, and reading it later becomes a diagnostic (a
    FIFO is never opened for writing, or opened here at all, so it cannot block).
    """
    try:
        os.lstat(target)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise PioneerError(
            Problem(f"cannot check for an existing file: {os_reason(error)}", file=str(target))
        ) from None
    return True


def _create_new(target: Path, content: bytes) -> bool:
    """Atomically create ``target`` with ``content``; False when it already exists."""
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, target)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temp)
