"""The AGENTS.md hook: the nearest AGENTS.md above a thread's folder, as a prompt section.

:func:`find_agents_md` walks from the thread's folder up to the workspace root and
returns the first *active* AGENTS.md: a regular UTF-8 file whose text is not blank (a
blank file is a draft and is passed over). It never reads outside the root: a thread
folder that is absolute or climbs with ``..`` is refused outright, and each candidate is
opened by :class:`~pioneer.files.Beneath`, which follows a symlink only while it stays
under the root, so even a symlink swapped in mid-lookup cannot lead it out; a candidate
(or a folder on its way) that leads out is refused without being opened. Both become
diagnostics. :func:`agents_md_subscription` is the built-in hook at
``turn.pre_prompt_compile`` (blocking, fail-closed) that renders the document with its
source folder, a scope line and the document fenced in ``<AGENTS_MD>`` tags
(docs/hooks-and-sections.md, "Built-in structured sections"), using
``templates/renderers/agents_md.md.j2``.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

import jinja2

from ..compile.bootstrap import sanitize
from ..files import Beneath, Opened, Refused
from ..hooks.models import HookDiagnostic, HookOutput, PromptSectionContribution, SourceRef
from ..hooks.registry import HookContext, Subscription
from ._macros import call_macro

__all__ = [
    "DOMAIN",
    "FILE_NAME",
    "HOOK_ID",
    "HOOK_MAX_CHARS",
    "MAX_DEPTH",
    "MAX_NOTES",
    "PRIORITY",
    "SUBSCRIPTION_ID",
    "AgentsDoc",
    "AgentsLookup",
    "agents_md_contribution",
    "agents_md_subscription",
    "find_agents_md",
]

FILE_NAME = "AGENTS.md"
HOOK_ID = "pioneer.thread_agents_doc_prompt"
SUBSCRIPTION_ID = "pioneer.thread_agents_doc_prompt.turn_pre_prompt_compile"
DOMAIN = "pioneer.thread_agents_doc"
PRIORITY = 600
HOOK_MAX_CHARS = 16_000
#: Folders below the workspace root the lookup walks (deeper thread folders are looked
#: up from that depth).
MAX_DEPTH = 64
#: Diagnostics one lookup reports, the last of them counting any more.
MAX_NOTES = 8
#: Characters of a path a diagnostic shows (a longer one is cut in the middle).
MAX_SHOWN = 200
TEMPLATE = "renderers/agents_md.md.j2"


@dataclass(frozen=True, slots=True)
class AgentsDoc:
    """The effective AGENTS.md of a thread."""

    #: Folder names from the root down to the folder holding the file; ``()`` is the root.
    folders: tuple[str, ...]
    content: str
    #: The file was longer than what was read.
    cut: bool
    #: The file sits above the thread's own folder.
    inherited: bool

    @property
    def doc_id(self) -> str:
        """The file's path relative to the root, with ``/`` separators."""
        return "/".join((*self.folders, FILE_NAME))

    @property
    def source(self) -> str:
        """``thread tree / <root>`` or ``thread tree / A / B``."""
        return "thread tree / " + (" / ".join(self.folders) if self.folders else "<root>")


@dataclass(frozen=True, slots=True)
class AgentsLookup:
    """The document found (if any) and what was refused or unreadable on the way."""

    doc: AgentsDoc | None
    diagnostics: tuple[str, ...] = ()


class _Unreadable(Exception):
    pass


def _read_head(opened: Opened, max_chars: int) -> tuple[str, bool]:
    """Up to ``max_chars`` of an opened regular UTF-8 file and whether more follows."""
    fd = opened.fd
    try:
        if not opened.regular:
            raise _Unreadable("not a regular file")
        limit = (max_chars + 1) * 4  # a char is at most 4 UTF-8 bytes
        data = b""
        while len(data) < limit:
            chunk = os.read(fd, limit - len(data))
            if not chunk:
                break
            data += chunk
        more = bool(os.read(fd, 1))
        try:
            text = codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=not more)
        except UnicodeDecodeError:
            raise _Unreadable("not valid UTF-8") from None
        return text, more or len(text) > max_chars
    except OSError as error:
        raise _Unreadable(error.strerror or str(error)) from None
    finally:
        os.close(fd)


def _folder_parts(thread_folder: str | None) -> tuple[str, ...] | str:
    """The folder's parts, or the reason it is refused."""
    if not thread_folder:
        return ()
    shown = _shown(thread_folder)
    if PurePosixPath(thread_folder).is_absolute() or PureWindowsPath(thread_folder).is_absolute():
        return f"thread folder `{shown}` is absolute; AGENTS.md lookup stays inside " \
               "the workspace root"
    parts = tuple(p for p in thread_folder.replace("\\", "/").split("/") if p not in ("", "."))
    if ".." in parts:
        return f"thread folder `{shown}` leaves the workspace root with `..`"
    return parts


def _shown(path: str) -> str:
    """A path as a diagnostic names it: cut in the middle past ``MAX_SHOWN`` characters."""
    if len(path) <= MAX_SHOWN:
        return path
    half = MAX_SHOWN // 2
    return f"{path[:half]}…{path[-half:]}"


def _refusal(shown: str, refused: Refused, *, folder: bool) -> str:
    """The diagnostic for a file (or a folder on the way) that was not opened."""
    what = f"folder `{shown}`" if folder else f"`{shown}`"
    if refused.kind == "outside":
        return f"{what} resolves outside the workspace root; not read"
    if refused.errno == errno.ELOOP:
        return f"{what} could not be resolved (symlink loop); not read"
    detail = os.strerror(refused.errno) if refused.errno else refused.reason
    return f"{what} could not be read: {detail}"


def find_agents_md(
    root: Path, thread_folder: str | None, *, max_chars: int = HOOK_MAX_CHARS
) -> AgentsLookup:
    """The nearest active AGENTS.md from ``root/thread_folder`` up to ``root``.

    The thread's folders are walked once, down from the root, at most ``MAX_DEPTH`` of
    them (a deeper folder is looked up from the folder at that depth, with a
    diagnostic); at most ``MAX_NOTES`` diagnostics are kept, the last one counting the
    rest (docs/hooks-and-sections.md, "Built-in structured sections").
    """
    parts = _folder_parts(thread_folder)
    if isinstance(parts, str):
        return AgentsLookup(None, (parts,))
    notes: list[str] = []
    deepest = len(parts)
    if deepest > MAX_DEPTH:
        notes.append(f"thread folder is {deepest} folders deep; AGENTS.md is looked up "
                     f"from its first {MAX_DEPTH} folders below the workspace root only")
        parts = parts[:MAX_DEPTH]
    with Beneath(root) as beneath:
        found = beneath.open_each(parts, FILE_NAME)
    doc = None
    try:
        while found and doc is None:  # the nearest first; each file popped is read (closed)
            depth, opened = found.pop()
            folders = parts[:depth]
            if isinstance(opened, Refused):
                if opened.kind != "missing":
                    into_folder = opened.at is not None and opened.at < depth
                    shown = "/".join(folders if into_folder else (*folders, FILE_NAME))
                    notes.append(_refusal(_shown(shown), opened, folder=into_folder))
                continue
            try:
                text, more = _read_head(opened, max_chars)
            except _Unreadable as error:
                notes.append(f"`{_shown('/'.join((*folders, FILE_NAME)))}` could not be "
                             f"read: {error}")
                continue
            content = sanitize(text[:max_chars])
            if content:
                doc = AgentsDoc(folders, content, more, depth < deepest)
    finally:
        for _, left in found:  # the files above the one read are closed unread
            if isinstance(left, Opened):
                os.close(left.fd)
    if len(notes) > MAX_NOTES:
        notes[MAX_NOTES - 1:] = [f"and {len(notes) - MAX_NOTES + 1} more AGENTS.md "
                                 "problems on the way up to the workspace root"]
    return AgentsLookup(doc, tuple(notes))


def _render(doc: AgentsDoc, env: jinja2.Environment, max_chars: int) -> tuple[str, bool]:
    """The section text within ``max_chars``, cutting the document, never the fence."""
    document, cut = doc.content, doc.cut
    text = call_macro(env, TEMPLATE, "section", doc.source, document)
    while len(text) > max_chars and document:
        document = document[: max(0, len(document) - (len(text) - max_chars))].rstrip()
        cut = True
        text = call_macro(env, TEMPLATE, "section", doc.source, document)
    return text, cut


def agents_md_contribution(
    doc: AgentsDoc, env: jinja2.Environment, *, max_chars: int = HOOK_MAX_CHARS
) -> PromptSectionContribution:
    """The ``agents_md`` contribution for a found document."""
    text, cut = _render(doc, env, max_chars)
    version = hashlib.sha256(doc.content.encode("utf-8")).hexdigest()[:12]
    where = "root" if not doc.folders else "/ " + " / ".join(doc.folders)
    return PromptSectionContribution(
        contribution_id=f"thread_agents_doc.{doc.doc_id}.v{version}",
        section_id="agents_md",
        title="AGENTS.md",
        domain=DOMAIN,
        priority=PRIORITY,
        content=text,
        max_chars=max_chars,
        truncated=cut,
        source_refs=[SourceRef(kind="document", id=doc.doc_id,
                               label=f"AGENTS.md at thread tree {where}")],
    )


def agents_md_subscription(
    root: str | os.PathLike[str], *, max_chars: int = HOOK_MAX_CHARS
) -> Subscription:
    """The built-in AGENTS.md hook for workspace ``root``: blocking and fail-closed."""
    root = Path(root)

    def agents_md_hook(context: HookContext) -> list[HookOutput]:
        lookup = find_agents_md(root, context.turn.thread_folder, max_chars=max_chars)
        outputs: list[HookOutput] = [
            HookDiagnostic(message=note, section_id="agents_md") for note in lookup.diagnostics
        ]
        if lookup.doc is not None:
            outputs.append(agents_md_contribution(lookup.doc, context.env, max_chars=max_chars))
        return outputs

    return Subscription(
        hook_id=HOOK_ID,
        phase="turn.pre_prompt_compile",
        function=agents_md_hook,
        priority=0,
        deadline_ms=None,
        failure="fail_closed",
        subscription_id=SUBSCRIPTION_ID,
    )
