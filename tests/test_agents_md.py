"""The AGENTS.md hook: the ancestry walk, refusals, rendering and the manifest record."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import compile_round

from pioneer import HookError, HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.files import MAX_LINKS, Beneath, Opened, Refused
from pioneer.hooks.registry import TurnContext
from pioneer.sections.agents_md import (
    HOOK_MAX_CHARS,
    MAX_DEPTH,
    MAX_NOTES,
    agents_md_contribution,
    agents_md_subscription,
    find_agents_md,
)

GOLDENS = Path(__file__).parent / "goldens" / "agents_md"



@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """root/AGENTS.md, root/api/AGENTS.md, an empty root/api/v2/AGENTS.md, root/web/."""
    root = tmp_path / "workspace"
    (root / "api" / "v2" / "handlers").mkdir(parents=True)
    (root / "web").mkdir()
    (root / "AGENTS.md").write_text("Root rules.\n", encoding="utf-8")
    (root / "api" / "AGENTS.md").write_text("API rules.\r\n", encoding="utf-8")
    (root / "api" / "v2" / "AGENTS.md").write_text("  \n\n", encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("folder", "content", "folders"),
    [
        ("api", "API rules.", ("api",)),
        ("api/v2/handlers", "API rules.", ("api",)),  # the empty v2 file is a draft
        ("./api//v2/", "API rules.", ("api",)),
        ("web", "Root rules.", ()),
        (None, "Root rules.", ()),
        ("not/made/yet", "Root rules.", ()),
    ],
)
def test_nearest_active_file_wins(workspace: Path, folder: str | None, content: str,
                                  folders: tuple[str, ...]) -> None:
    lookup = find_agents_md(workspace, folder)
    assert lookup.doc is not None
    assert (lookup.doc.content, lookup.doc.folders, lookup.diagnostics) == (content, folders, ())


def test_no_file_anywhere_means_no_section(tmp_path: Path, compiler: PromptCompiler,
                                           home: Path) -> None:
    (tmp_path / "bare" / "sub").mkdir(parents=True)
    assert find_agents_md(tmp_path / "bare", "sub").doc is None
    registry = HookRegistry()
    registry.add(agents_md_subscription(tmp_path / "bare"))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry,
                           turn=TurnContext(thread_folder="sub"))
    assert "agents_md" not in payload.manifest.section_ids
    assert payload.manifest.hook_sources == []


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("../elsewhere", "thread folder `../elsewhere` leaves the workspace root with `..`"),
        ("api/../../x", "thread folder `api/../../x` leaves the workspace root with `..`"),
        ("/etc", "thread folder `/etc` is absolute; AGENTS.md lookup stays inside the "
                 "workspace root"),
        ("C:\\Users", "thread folder `C:\\Users` is absolute; AGENTS.md lookup stays inside "
                      "the workspace root"),
    ],
)
def test_folders_outside_the_root_are_refused(workspace: Path, folder: str, message: str) -> None:
    lookup = find_agents_md(workspace, folder)
    assert lookup.doc is None
    assert lookup.diagnostics == (message,)


def test_symlinked_file_that_escapes_is_not_read(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("Outside text.", encoding="utf-8")
    (workspace / "web" / "AGENTS.md").symlink_to(secret)
    lookup = find_agents_md(workspace, "web")
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert lookup.diagnostics == (
        "`web/AGENTS.md` resolves outside the workspace root; not read",
    )


def test_symlinked_folder_that_escapes_is_not_read(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("Outside text.", encoding="utf-8")
    (workspace / "linked").symlink_to(outside, target_is_directory=True)
    lookup = find_agents_md(workspace, "linked/deeper/still")
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert lookup.diagnostics == (  # once, for the folder: nothing under it is looked at
        "folder `linked` resolves outside the workspace root; not read",
    )


def test_symlink_inside_the_root_is_followed(workspace: Path) -> None:
    (workspace / "web" / "AGENTS.md").symlink_to(workspace / "api" / "AGENTS.md")
    lookup = find_agents_md(workspace, "web")
    assert lookup.doc is not None and lookup.doc.content == "API rules."


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: p.write_bytes(b"caf\xe9"), "not valid UTF-8"),
        (lambda p: os.mkfifo(p), "not a regular file"),
    ],
    ids=["directory", "not-utf8", "fifo"],
)
def test_unreadable_candidate_is_reported_and_passed_over(
    workspace: Path, make: Callable[[Path], None], reason: str
) -> None:
    make(workspace / "web" / "AGENTS.md")
    lookup = find_agents_md(workspace, "web")
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert lookup.diagnostics == (f"`web/AGENTS.md` could not be read: {reason}",)


def test_section_text_and_manifest_record(workspace: Path, compiler: PromptCompiler, home: Path,
                                          golden: Callable[[Path, str], None]) -> None:
    registry = HookRegistry()
    registry.add(agents_md_subscription(workspace))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry,
                           turn=TurnContext(thread_folder="api/v2/handlers"))
    (section,) = [s for s in payload.sections if s.id == "agents_md"]
    golden(GOLDENS / "nested.txt", section.text + "\n")
    (entry,) = payload.manifest.hook_sources
    assert entry.model_dump(exclude_none=True) == {
        "source": {
            "hook_id": "pioneer.thread_agents_doc_prompt",
            "subscription_id": "pioneer.thread_agents_doc_prompt.turn_pre_prompt_compile",
            "phase": "turn.pre_prompt_compile",
            "contribution_id": "thread_agents_doc.api/AGENTS.md.v"
            + entry.source.contribution_id.rsplit(".v", 1)[1],  # type: ignore[union-attr]
            "contribution_hash": entry.source.contribution_hash,
        },
        "section_id": "agents_md",
        "contribution_kind": "prompt_section",
        "priority": 600,
        "source_count": 1,
        "truncation": "none",
    }


def test_root_document_renders_with_the_root_source(workspace: Path, compiler: PromptCompiler,
                                                    golden: Callable[[Path, str], None]) -> None:
    lookup = find_agents_md(workspace, "web")
    assert lookup.doc is not None
    contribution = agents_md_contribution(lookup.doc, compiler.templates.env)
    golden(GOLDENS / "root.txt", contribution.content + "\n")
    assert contribution.contribution_id.startswith("thread_agents_doc.AGENTS.md.v")
    assert [(r.kind, r.id, r.label) for r in contribution.source_refs] == [
        ("document", "AGENTS.md", "AGENTS.md at thread tree root")
    ]


def test_long_document_is_cut_inside_the_fence(workspace: Path, compiler: PromptCompiler,
                                               home: Path) -> None:
    (workspace / "web" / "AGENTS.md").write_text("x" * 50_000, encoding="utf-8")
    registry = HookRegistry()
    registry.add(agents_md_subscription(workspace))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry,
                           turn=TurnContext(thread_folder="web"))
    (section,) = [s for s in payload.sections if s.id == "agents_md"]
    body = section.text.removeprefix("## AGENTS.md\n")
    assert len(body) == HOOK_MAX_CHARS
    assert body.endswith("x\n</AGENTS_MD>")
    assert payload.manifest.hook_sources[0].truncation == "hook"


@pytest.mark.parametrize(("extra", "cut"), [(0, False), (1, True)],
                         ids=["exactly-16000", "16001"])
def test_hook_cap_boundary(workspace: Path, compiler: PromptCompiler, extra: int,
                           cut: bool) -> None:
    env = compiler.templates.env
    (workspace / "web" / "AGENTS.md").write_text("probe", encoding="utf-8")
    probe = find_agents_md(workspace, "web").doc
    assert probe is not None
    frame = len(agents_md_contribution(probe, env).content) - len(probe.content)
    (workspace / "web" / "AGENTS.md").write_text("y" * (HOOK_MAX_CHARS - frame + extra),
                                                 encoding="utf-8")
    doc = find_agents_md(workspace, "web").doc
    assert doc is not None
    contribution = agents_md_contribution(doc, env)
    assert len(contribution.content) == HOOK_MAX_CHARS
    assert contribution.truncated is cut
    assert contribution.content.endswith("\n</AGENTS_MD>")


def test_escape_is_a_diagnostic_not_an_error(workspace: Path, compiler: PromptCompiler,
                                             home: Path) -> None:
    registry = HookRegistry()
    registry.add(agents_md_subscription(workspace))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry,
                           turn=TurnContext(thread_folder="../x"))
    assert "agents_md" not in payload.manifest.section_ids
    note = payload.manifest.diagnostics[-1]
    assert (note.code, note.section_id, note.message) == (
        "hook_diagnostic", "agents_md",
        "hook `pioneer.thread_agents_doc_prompt`: thread folder `../x` leaves the workspace "
        "root with `..`",
    )
    assert payload.manifest.hook_sources[0].contribution_kind == "prompt_manifest_diagnostic"


def test_hook_is_fail_closed(tmp_path: Path, compiler: PromptCompiler, home: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    import pioneer.sections.agents_md as module
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(module, "find_agents_md", broken)
    registry = HookRegistry()
    registry.add(agents_md_subscription(tmp_path))
    with pytest.raises(HookError) as error:
        compile_round(compiler, PromptCompileInput(workspace_root=home), registry)
    assert str(error.value) == (
        "turn.pre_prompt_compile → pioneer.thread_agents_doc_prompt.turn_pre_prompt_compile: "
        'hook "pioneer.thread_agents_doc_prompt" failed: OSError: disk on fire '
        "(fail-closed, the turn stops)"
    )


# -- deep thread folders: one walk, a bounded depth and few diagnostics -----------------


def test_a_self_link_thousands_deep_makes_a_few_diagnostics(
        workspace: Path, compiler: PromptCompiler, home: Path) -> None:
    (workspace / "a").symlink_to(".", target_is_directory=True)
    registry = HookRegistry()
    registry.add(agents_md_subscription(workspace))
    payload = compile_round(compiler, PromptCompileInput(workspace_root=home), registry,
                           turn=TurnContext(thread_folder="/".join(["a"] * 4000)))
    notes = [d.message for d in payload.manifest.diagnostics if d.section_id == "agents_md"]
    prefix = "hook `pioneer.thread_agents_doc_prompt`: "
    assert notes == [
        f"{prefix}thread folder is 4000 folders deep; AGENTS.md is looked up from its "
        f"first {MAX_DEPTH} folders below the workspace root only",
        f"{prefix}folder `{'/'.join(['a'] * (MAX_LINKS + 1))}` could not be resolved "
        "(symlink loop); not read",
    ]
    assert "Root rules." in payload.dynamic_system_text
    assert len(payload.manifest.to_json()) < 20_000


def test_each_folder_of_the_thread_is_opened_once(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = ["d"] * MAX_DEPTH
    (workspace / "/".join(deep)).mkdir(parents=True)
    opened: list[str] = []
    real_open = os.open

    def counting(path: str, flags: int, *args: object, **kwargs: object) -> int:
        opened.append(path)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting)
    lookup = find_agents_md(workspace, "/".join([*deep, *["x"] * 10_000]))
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    # The root, then for each of its MAX_DEPTH folders the folder and its AGENTS.md (and
    # the root's own): a walk per folder would open 2,080 folders.
    assert (opened.count("d"), opened.count("AGENTS.md"), len(opened)) == (
        MAX_DEPTH, MAX_DEPTH + 1, 2 * MAX_DEPTH + 2)
    assert lookup.diagnostics == (
        f"thread folder is {MAX_DEPTH + 10_000} folders deep; AGENTS.md is looked up from "
        f"its first {MAX_DEPTH} folders below the workspace root only",)


def test_the_diagnostics_of_one_lookup_are_capped(workspace: Path) -> None:
    folders = [f"f{index}" for index in range(MAX_DEPTH)]
    for depth in range(1, MAX_DEPTH + 1):
        folder = workspace.joinpath(*folders[:depth])
        folder.mkdir()
        (folder / "AGENTS.md").write_bytes(b"\xff")  # not UTF-8: one note each
    lookup = find_agents_md(workspace, "/".join(folders))
    assert lookup.doc is not None and lookup.doc.content == "Root rules."
    assert len(lookup.diagnostics) == MAX_NOTES
    deepest = f"{'/'.join(folders)}/AGENTS.md"  # 264 characters: shown cut in the middle
    assert lookup.diagnostics[0] == (f"`{deepest[:100]}…{deepest[-100:]}` could not be read: "
                                     "not valid UTF-8")
    assert lookup.diagnostics[-1] == (
        f"and {MAX_DEPTH - MAX_NOTES + 1} more AGENTS.md problems on the way up to the "
        "workspace root")


#: Symlink targets a random tree may hold: up, sideways, down, to itself, out of the root
#: (relative and absolute), and absolute paths under the root ("{root}" is filled in).
LINK_TARGETS = [".", "..", "../b", "a", "a/b", "b/../a", "../..", "{root}/a", "{root}",
                "/etc", "{root}/b/AGENTS.md", "AGENTS.md"]


def _what(beneath: Beneath, result: Opened | Refused) -> tuple[object, ...]:
    if isinstance(result, Refused):
        return (result.kind, result.errno, result.at)
    os.close(result.fd)
    return ("opened", result.info.st_ino)


def _folder_refusal(beneath: Beneath, folders: list[str]) -> Refused | None:
    """Why the first folder of ``folders`` that cannot be walked fails, if one does."""
    for depth in range(1, len(folders) + 1):
        try:
            os.close(beneath.open(folders[:depth]).fd)
        except Refused as refused:
            if refused.errno == errno.EISDIR:  # a link to "." or a folder: walked
                continue
            if refused.kind == "missing":
                return None
            refused.at = depth - 1 if refused.at is None else refused.at
            return refused
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.dictionaries(
        st.lists(st.sampled_from("ab"), min_size=1, max_size=3).map("/".join),
        st.one_of(st.just("folder"), st.just("file"), st.sampled_from(LINK_TARGETS)),
        max_size=8),
    thread=st.lists(st.sampled_from("ab"), max_size=5),
)
def test_one_walk_opens_what_a_walk_per_folder_opens(entries: dict[str, str],
                                                     thread: list[str]) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary) / "root"
        root.mkdir()
        for name, kind in sorted(entries.items()):
            path = root / name
            if not path.parent.is_dir() or os.path.lexists(path):
                continue
            if kind == "folder":
                path.mkdir()
                (path / "AGENTS.md").write_text(name)
            elif kind == "file":
                path.write_text(name)
            else:
                path.symlink_to(kind.format(root=root))
        (root / "AGENTS.md").write_text("root")
        with Beneath(root) as beneath:
            walked = [(depth, _what(beneath, result))
                      for depth, result in beneath.open_each(thread, "AGENTS.md")]
            one_by_one = []
            for depth in range(len(thread) + 1):
                try:
                    result: Opened | Refused = beneath.open([*thread[:depth], "AGENTS.md"])
                except Refused as refused:
                    result = _folder_refusal(beneath, thread[:depth]) or refused
                    if result.at is not None and result.at < depth:  # a folder on the way
                        one_by_one.append((result.at + 1, _what(beneath, result)))
                        break
                    result.at = depth
                one_by_one.append((depth, _what(beneath, result)))
        # Nothing there is nothing to report (a missing folder ends the walk early).
        assert ([entry for entry in walked if entry[1][0] != "missing"]
                == [entry for entry in one_by_one if entry[1][0] != "missing"])
