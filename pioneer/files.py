"""Files: where the package's own files live, and opening a user's file beneath a root.

The built-in profiles, templates, schemas and model table are in ``pioneer/_data/`` in a
wheel and in the repository's top-level ``profiles/``, ``templates/``, ``schemas/`` and
``models/`` folders in a source checkout (or an editable install): :func:`builtin_dir` is
the only place that knows both layouts.

A user's file is opened beneath a root folder, so that no symlink can lead the open out
of it. The identity files of the runtime home and AGENTS.md are read from folders other people
can write to. Checking a path and then opening it leaves a window in which a symlink to
any file can be swapped in; :class:`Beneath` closes it by never opening a path by name
from the top. It holds the root open as a directory and resolves a relative path one
component at a time, each opened relative to the directory descriptor of the one before
with ``O_NOFOLLOW`` (``O_DIRECTORY`` for folders). A symlink met on the way is read with
``readlink`` and its target resolved by the same walk: a relative target from the
folder holding the link, an absolute one only when it names a place under the root, and
``..`` by going back up the walk (never past the root). So what is opened is, at the
moment of opening, a file beneath the root, whatever is swapped in between; anything
else is a :class:`Refused` naming why. The final component is opened with
``O_NONBLOCK``, so a FIFO cannot block the open, and the caller gets its ``fstat`` to
judge what it opened (docs/failure-behaviour.md, "Identity files and AGENTS.md").

A basic module (it imports nothing of pioneer): the compile stage reads the runtime
home with it and the sections stage AGENTS.md, and both must share one walk.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

__all__ = ["MAX_LINKS", "Beneath", "Opened", "Refused", "builtin_dir", "load_schema",
           "os_reason"]

_PACKAGE = Path(__file__).resolve().parent


@cache
def builtin_dir(kind: str) -> Path:
    """Return the folder of built-in ``profiles``, ``templates``, ``schemas`` or ``models``."""
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"built-in {kind}/ folder is missing from the pioneer installation")


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Load a JSON Schema shipped in ``schemas/`` by file name."""
    data: dict[str, Any] = json.loads((builtin_dir("schemas") / name).read_text("utf-8"))
    return data

#: Symlinks one open may follow (Linux's own limit) before it is a loop.
MAX_LINKS = 40

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_FOLDER_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _NOCTTY | _CLOEXEC
#: What ``open`` says when ``O_NOFOLLOW`` met a symlink (FreeBSD says EMLINK) or a
#: symlink stood where a folder was wanted.
_MAYBE_LINK = {errno.ELOOP, errno.EMLINK, errno.ENOTDIR}

Kind = Literal["missing", "outside", "error"]


def os_reason(error: OSError) -> str:
    """``Permission denied (os error 13)``: an OS error as the diagnostics show it."""
    return f"{error.strerror or error} (os error {error.errno})"


class Refused(Exception):
    """Why a path beneath the root was not opened.

    ``kind`` is ``missing`` (nothing there, or a folder on the way is not one),
    ``outside`` (the path, or a symlink on it, leads out of the root) or ``error`` (the
    OS refused, or a symlink loop); ``reason`` is the text for a diagnostic and
    ``errno`` the OS error number when there is one.
    """

    def __init__(self, kind: Kind, reason: str, error_number: int | None = None) -> None:
        super().__init__(reason)
        self.kind: Kind = kind
        self.reason = reason
        self.errno = error_number
        #: For ``outside``: the index, in the path asked for, of the component that led
        #: out (the symlink, or the ``..``), so a caller can tell a file from its folder.
        self.at: int | None = None

    @classmethod
    def from_os(cls, error: OSError) -> Refused:
        kind: Kind = "missing" if error.errno in (errno.ENOENT, errno.ENOTDIR) else "error"
        return cls(kind, os_reason(error), error.errno)


class Opened(NamedTuple):
    """An open file beneath the root: its descriptor (the caller closes it) and fstat."""

    fd: int
    info: os.stat_result

    @property
    def regular(self) -> bool:
        return stat.S_ISREG(self.info.st_mode)


#: Opening by descriptor works here (by name: a caller's wrapper of ``os.open`` is still
#: the real function underneath).
_SUPPORTED = bool(_NOFOLLOW and _DIRECTORY) and {
    function.__name__ for function in os.supports_dir_fd} >= {"open", "readlink"}


class Beneath:
    """A root folder, held open, under which paths are opened without leaving it.

    The root itself may be reached through symlinks (it is the caller's choice); only
    what lies under it is resolved by the walk. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        self._fd: int | None = None
        self._error: OSError | None = None
        self._prefixes: tuple[tuple[str, ...], ...] | None = None
        if not _SUPPORTED:  # pragma: no cover - every POSIX system pioneer runs on
            return
        try:
            self._fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except OSError as error:
            self._error = error

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def open(self, path: str | Sequence[str]) -> Opened:
        """Open ``path`` (relative to the root; a string is split at ``/``) for reading.

        Raises :class:`Refused`; never a raw ``OSError``.
        """
        if (type(path) is str and self._fd is not None and "/" not in path
                and path not in ("", ".", "..") and not os.altsep):
            # One name right under the root (an identity file, on every edited turn): the
            # walk's first step, without its bookkeeping. A link is left to the walk, and
            # a name no file system can hold to the checks below.
            try:
                fd = os.open(path, _FILE_FLAGS, dir_fd=self._fd)
            except (ValueError, UnicodeError):
                pass
            except OSError as error:
                if error.errno not in _MAYBE_LINK:
                    raise Refused.from_os(error) from None
            else:
                return Opened(fd, _fstat(fd))
        parts = _split(path) if isinstance(path, str) else [p for p in path if p]
        for part in parts:  # what no file system can name is refused before any open
            try:
                encoded = os.fsencode(part)
            except UnicodeError:
                raise Refused("error", "not a valid file name (a character cannot be "
                              "encoded)") from None
            if b"\0" in encoded:
                raise Refused("error", "not a valid file name (it holds a NUL byte)")
        if not _SUPPORTED:  # pragma: no cover
            return self._open_and_verify(parts)
        if self._fd is None:
            assert self._error is not None
            raise Refused.from_os(self._error)
        if parts and parts[0] == "/":
            try:
                parts = self._under_root(parts, "it is an absolute path outside the "
                                         "workspace root")
            except Refused as refused:
                refused.at = 0
                raise
        return self._walk(parts)

    def open_each(self, folders: Sequence[str], name: str) -> list[tuple[int, Opened | Refused]]:
        """Open the file ``name`` in the root and in each folder of the path ``folders``
        below it, walking that path once (not once per folder, which grows with the
        square of its depth).

        Returns ``(depth, what opening folders[:depth] + [name] gave)`` for depth 0, 1,
        ... in order; the caller closes every :class:`Opened`. A folder on the way that
        cannot be entered ends the list with ``(depth, Refused)``, its ``at`` the index
        of the folder in ``folders`` (``depth - 1``; a file's refusal has ``at == depth``);
        a folder that is not there ends it with nothing more.
        """
        parts = [part for part in folders if part]
        if not _SUPPORTED:  # pragma: no cover
            return self._open_each_by_path(parts, name)
        if self._fd is None:
            assert self._error is not None
            return [(0, Refused.from_os(self._error))]
        found: list[tuple[int, Opened | Refused]] = []
        stack: list[int] = []  # the folders the walk is in, innermost last
        todo = [(part, index) for index, part in reversed(list(enumerate(parts)))]
        links = 0
        try:
            depth = 0
            while True:
                try:
                    found.append((depth, self._walk([name], stack, links)))
                except Refused as refused:
                    refused.at = depth
                    found.append((depth, refused))
                if not todo:
                    return found
                try:
                    while True:  # one folder of ``parts``, with every link on its way
                        part, depth = todo.pop()
                        links, fd = self._step(part, depth, stack, todo, links, last=False)
                        if fd is not None:
                            stack.append(fd)
                        if not todo or todo[-1][1] != depth:
                            break
                except Refused as refused:
                    if refused.kind != "missing":
                        refused.at = depth
                        found.append((depth + 1, refused))
                    return found
                depth += 1
        except BaseException:
            for _, opened in found:
                if isinstance(opened, Opened):
                    os.close(opened.fd)
            raise
        finally:
            for fd in stack:
                os.close(fd)

    # -- the walk ------------------------------------------------------------------

    def _walk(self, parts: list[str], base: Sequence[int] = (), links: int = 0) -> Opened:
        """Open ``parts`` from the folder ``base`` leads to (descriptors of folders below
        the root, innermost last: the caller's, never closed here), ``links`` symlinks
        having been followed on the way there."""
        stack = list(base)  # folders opened below the root, innermost last
        # Components still to walk, each with the index of the component of ``parts`` it
        # comes from (a symlink's target comes from the link); the next is todo[-1].
        todo = [(name, index) for index, name in reversed(list(enumerate(parts)))]
        try:
            while todo:
                name, origin = todo.pop()
                last = not todo
                links, fd = self._step(name, origin, stack, todo, links, last=last,
                                       borrowed=base)
                if fd is None:
                    continue
                if last:
                    return Opened(fd, _fstat(fd))
                stack.append(fd)
            # Only folders were named (or nothing): that is not a file to read.
            raise Refused("error", os_reason(OSError(errno.EISDIR, os.strerror(errno.EISDIR))),
                          errno.EISDIR)
        finally:
            for fd in stack:
                _release(fd, base)

    def _step(self, name: str, origin: int, stack: list[int], todo: list[tuple[str, int]],
              links: int, *, last: bool, borrowed: Sequence[int] = ()) -> tuple[int, int | None]:
        """One component of a walk: go up for ``..``, open a folder (or the file, when
        ``last``), or put a symlink's target on ``todo``. Returns the links followed so
        far and the descriptor opened (``None`` when nothing was)."""
        assert self._fd is not None
        if name in ("", "."):
            return links, None
        if name == "..":
            if not stack:
                how = "through a symlink" if links else "with `..`"
                refused = Refused("outside", f"it resolves outside the workspace root ({how})")
                refused.at = origin
                raise refused
            _release(stack.pop(), borrowed)
            return links, None
        here = stack[-1] if stack else self._fd
        try:
            return links, os.open(name, _FILE_FLAGS if last else _FOLDER_FLAGS, dir_fd=here)
        except OSError as error:
            if error.errno not in _MAYBE_LINK:
                raise Refused.from_os(error) from None
            links += 1
            if links > MAX_LINKS:
                loop = OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                raise Refused("error", os_reason(loop), errno.ELOOP) from None
            try:
                target = os.readlink(name, dir_fd=here)
            except OSError as not_link:
                if not_link.errno != errno.EINVAL:  # gone meanwhile, or unreadable
                    raise Refused.from_os(not_link) from None
                if error.errno == errno.ENOTDIR:  # a file where a folder should be
                    raise Refused.from_os(error) from None
                todo.append((name, origin))  # swapped for a file meanwhile: again
                return links, None
            try:
                expanded = self._target_parts(target, stack, borrowed)
            except Refused as refused:
                refused.at = origin
                raise
            todo.extend((part, origin) for part in reversed(expanded))
            return links, None

    def _target_parts(self, target: str, stack: list[int],
                      borrowed: Sequence[int] = ()) -> list[str]:
        """A symlink's target as components still to walk, from where the walk is."""
        parts = _split(target)
        if parts and parts[0] == "/":
            parts = self._under_root(parts, "it resolves outside the workspace root "
                                     "(through a symlink)")
            for fd in stack:  # an absolute target starts again at the root
                _release(fd, borrowed)
            stack.clear()
        return parts

    def _under_root(self, parts: list[str], reason: str) -> list[str]:
        """The components of an absolute path below the root, or :class:`Refused`."""
        for prefix in self._root_prefixes():
            if tuple(parts[: len(prefix)]) == prefix:
                return parts[len(prefix):]
        raise Refused("outside", reason)

    def _root_prefixes(self) -> tuple[tuple[str, ...], ...]:
        if self._prefixes is None:
            spellings: set[str] = set()
            with contextlib.suppress(OSError, ValueError):  # a removed working folder
                spellings.add(os.path.abspath(self.root))
            with contextlib.suppress(OSError, ValueError):
                spellings.add(os.path.realpath(self.root))
            self._prefixes = tuple(tuple(_split(s)) for s in sorted(spellings))
        return self._prefixes

    # -- where descriptors cannot be used --------------------------------------------

    def _open_each_by_path(self, parts: list[str],
                           name: str) -> list[tuple[int, Opened | Refused]]:  # pragma: no cover
        """:meth:`open_each` one open at a time."""
        found: list[tuple[int, Opened | Refused]] = []
        for depth in range(len(parts) + 1):
            try:
                found.append((depth, self.open([*parts[:depth], name])))
            except Refused as refused:
                found.append((depth, refused))
        return found

    def _open_and_verify(self, parts: list[str]) -> Opened:  # pragma: no cover
        """Open by path, then check that the file opened is the one the resolved path
        names beneath the root (an identity check by ``fstat``)."""
        path = os.path.join(self.root, *parts)
        try:
            fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
        except OSError as error:
            raise Refused.from_os(error) from None
        try:
            info = _fstat(fd)
            real = os.path.realpath(path)
            root = os.path.realpath(self.root)
            resolved = os.stat(real)
        except (OSError, ValueError) as error:
            os.close(fd)
            raise Refused("error", str(error)) from None
        inside = os.path.commonpath([root, real]) == root
        if not inside or (resolved.st_dev, resolved.st_ino) != (info.st_dev, info.st_ino):
            os.close(fd)
            raise Refused("outside", "it resolves outside the workspace root "
                          "(through a symlink)")
        return Opened(fd, info)


def _release(fd: int, borrowed: Sequence[int]) -> None:
    """Close a folder the walk opened (one it was handed belongs to its caller)."""
    if fd not in borrowed:
        os.close(fd)


def _fstat(fd: int) -> os.stat_result:
    try:
        return os.fstat(fd)
    except OSError as error:
        os.close(fd)
        raise Refused.from_os(error) from None


def _split(path: str) -> list[str]:
    """``/a/b`` → ``["/", "a", "b"]``; ``a//b/`` → ``["a", "b"]``."""
    parts = [part for part in path.split("/") if part]
    if os.altsep:  # pragma: no cover - Windows
        parts = [piece for part in parts for piece in part.split(os.altsep) if piece]
    return ["/", *parts] if path.startswith("/") else parts
