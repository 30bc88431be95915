"""Lock files: pin each profile's prompt sources by fingerprint, and check them.

``pioneer lock`` records, per profile, the profile fingerprint, the pioneer version and
the sha256 of every file of the profile's extends chain and of every template it uses,
in a TOML file written with tomli-w. ``pioneer compile --locked`` loads the profile as
it is now and refuses, naming each file and template that changed, when the fingerprint
or the pioneer version differs from the lock. An edit that leaves the resolved profile
as it was (a comment, a reordered table) keeps the fingerprint and is accepted.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import tomli_w
from pydantic import BaseModel, Field, ValidationError

from ..compile.compiler import LoadedProfile, PromptCompiler
from ..compile.ids import PROFILE_ALIASES
from ..compile.manifest import COMPILER_VERSION
from ..compile.profile import BUILTIN_PREFIX
from ..documents import read_document
from ..errors import LockError, Problem, format_path
from ..text import EDGE_CONFIG

__all__ = [
    "DEFAULT_LOCK_FILE",
    "LockFile",
    "LockedProfile",
    "check_lock",
    "lock_changes",
    "lock_key",
    "locked_profile",
    "read_lock",
    "render_lock",
    "verify_lock",
    "write_lock",
]

DEFAULT_LOCK_FILE = "pioneer.lock"
_HEADER = (
    "# Prompt sources pinned by `pioneer lock`; `pioneer compile --locked` refuses to\n"
    "# compile a profile whose sources differ. Regenerate it instead of editing it.\n"
)
_SHA256 = r"^[0-9a-f]{64}$"


class LockedProfile(BaseModel):
    """What one profile was compiled from when it was locked."""

    model_config = EDGE_CONFIG
    fingerprint: str = Field(pattern=_SHA256, description="manifest.profile_fingerprint.")
    compiler_version: str = Field(description="pioneer version that wrote the entry.")
    files: dict[str, str] = Field(
        description="sha256 of each profile file of the extends chain, requested file first."
    )
    templates: dict[str, str] = Field(description="sha256 of each template used, by name.")


class LockFile(BaseModel):
    """A whole lock file."""

    model_config = EDGE_CONFIG
    version: Literal[1] = Field(description="Lock file format version.")
    profiles: dict[str, LockedProfile] = Field(
        default_factory=dict, description="Locked profiles by the name they are compiled as."
    )


def locked_profile(profile: LoadedProfile) -> LockedProfile:
    """The lock entry for a loaded profile as it is now."""
    files = {f.file: f.sha256 for f in profile.source.files}
    return LockedProfile(
        fingerprint=profile.fingerprint,
        compiler_version=COMPILER_VERSION,
        files=files,
        templates=dict(profile.templates),
    )


def lock_key(name: str) -> str:
    """The key a profile is locked under: its canonical name (or the path given)."""
    return PROFILE_ALIASES.get(name, name)


def read_lock(path: Path) -> LockFile:
    """Read and validate a lock file."""
    file = str(path)
    if not os.path.lexists(path):
        raise LockError(Problem("lock file not found; run `pioneer lock` first", file=file))
    data = read_document(path, "lock file", "toml", LockError)[0]
    try:
        return LockFile.model_validate(data)
    except ValidationError as error:
        raise LockError([
            Problem(str(item["msg"]), file=file, path=format_path(item["loc"]) or "(root)")
            for item in error.errors()
        ]) from None


def render_lock(lock: LockFile) -> str:
    """The lock file text: a header comment, then TOML with profiles in name order."""
    data = lock.model_dump(mode="json")
    data["profiles"] = dict(sorted(data["profiles"].items()))
    return _HEADER + tomli_w.dumps(data)


def write_lock(path: Path, lock: LockFile) -> None:
    """Write a lock file atomically: readers see the old file or the new one."""
    folder = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(render_lock(lock))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _short(digest: str) -> str:
    return digest[:12]


def _compare(kind: str, locked: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    changes = []
    for name in [*locked, *(n for n in now if n not in locked)]:
        label = f'{kind} "{name}"' if kind == "template" else f"{kind} {name}"
        if name not in now:
            changes.append(f"{label} is no longer used")
        elif name not in locked:
            changes.append(f"{label} is new (not in the lock)")
        elif locked[name] != now[name]:
            changes.append(f"{label} changed (locked {_short(locked[name])}, "
                           f"now {_short(now[name])})")
    return changes


def _renamed(locked: Mapping[str, str], now: Mapping[str, str]) -> dict[str, str]:
    """``locked`` with the keys of lock files written before built-in files were named
    ``<built-in>/profiles/NAME.toml`` (they were ``profiles/NAME.toml``) under the new
    name, where the profile now has that file and no deployment file of the old name."""
    return {(BUILTIN_PREFIX + name if name not in now and BUILTIN_PREFIX + name in now
             else name): digest for name, digest in locked.items()}


def lock_changes(locked: LockedProfile, now: LockedProfile) -> list[str]:
    """Why ``now`` does not match ``locked``; empty when it does."""
    changes: list[str] = []
    if locked.compiler_version != now.compiler_version:
        changes.append(f"pioneer version changed (locked {locked.compiler_version}, "
                       f"now {now.compiler_version})")
    if locked.fingerprint == now.fingerprint:
        return changes
    changes += _compare("profile file", _renamed(locked.files, now.files), now.files)
    changes += _compare("template", locked.templates, now.templates)
    return changes or [f"the resolved profile changed (fingerprint {_short(locked.fingerprint)}"
                       f", now {_short(now.fingerprint)})"]


def check_lock(name: str, profile: LoadedProfile, path: Path) -> None:
    """Raise :class:`LockError` naming every change when ``profile`` differs from the lock."""
    key = lock_key(name)
    lock = read_lock(path)
    locked = lock.profiles.get(key)
    if locked is None:
        raise LockError(Problem(
            f'profile "{key}" is not locked; run `pioneer lock --profile {key}`', file=str(path)
        ))
    now = locked_profile(profile)
    changes = lock_changes(locked, now)
    if changes:
        where = format_path(["profiles", key])
        raise LockError(
            [Problem(change, file=str(path), path=where) for change in changes],
            summary=f'profile "{key}" does not match {path}; refusing to compile '
            f"(run `pioneer lock --profile {key}` to accept the change)",
        )


def verify_lock(compiler: PromptCompiler, profiles: str | Sequence[str],
                lock_file: str | os.PathLike[str] | None = None) -> None:
    """Raise :class:`LockError` naming every change when a profile of ``profiles``, as
    ``compiler`` loads it now, differs from the lock file (default: the compiler's
    ``lock_file`` setting), or is not in it. What ``pioneer compile --locked`` checks, for
    programs that compile without the command line (an :class:`~pioneer.Agent` calls it
    when its settings say ``locked``)."""
    path = Path(lock_file) if lock_file is not None else compiler.settings.lock_file
    for name in [profiles] if isinstance(profiles, str) else profiles:
        check_lock(name, compiler.load_profile(name), path)
