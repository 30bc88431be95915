"""pioneer diff: section changes and the provider-cache verdict, on golden manifests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support import run_cli as run
from support import run_script

from pioneer import PromptCompileInput, PromptCompiler, PromptManifest
from pioneer.review.diff import diff_manifests, read_manifest, render_json, render_text

CASES = Path(__file__).parent / "cases"
GOLDENS = Path(__file__).parent / "goldens" / "diff"
PAIRS = [
    ("full-everything", "derived-deployment"),
    ("per-file-truncation", "empty-files"),
    ("minimal-everything", "full-everything"),
    ("full-everything", "full-everything"),
]


def _manifest(case: str) -> Path:
    return CASES / case / "expected" / "manifest.json"


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}..{b}" for a, b in PAIRS])
def test_diff_golden(a: str, b: str, golden: Callable[[Path, str], None]) -> None:
    diff = diff_manifests(read_manifest(_manifest(a)), read_manifest(_manifest(b)))
    golden(GOLDENS / f"{a}..{b}.txt", render_text(diff, (a, b)) + "\n")
    golden(GOLDENS / f"{a}..{b}.json", render_json(diff) + "\n")


def _compile(home: Path, profiles: Path, **fields: object) -> PromptManifest:
    compiler = PromptCompiler(profile_path=[profiles])
    return compiler.compile(PromptCompileInput.model_validate(
        {"workspace_root": home, **fields}
    )).manifest


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param("", None, id="only-dynamic"),
        pytest.param('[[sections]]\nid = "first"\nbefore = "identity_base"\ntitle = "First"\n'
                     'stability = "stable"\ntemplate = "identity_base.md.j2"\n',
                     ("first", "added"), id="added"),
        pytest.param('[[sections]]\nid = "assistant_safety"\nremove = true\n',
                     ("assistant_safety", "removed"), id="removed"),
        pytest.param('[[sections]]\nid = "assistant_safety"\nbefore = "identity_base"\n',
                     ("assistant_safety", "moved"), id="moved"),
        pytest.param('[[sections]]\nid = "assistant_safety"\ntitle = "Rules"\n',
                     ("assistant_safety", "changed"), id="changed"),
        pytest.param('[[sections]]\nid = "user_persona"\nstability = "dynamic"\n'
                     'after = "memory_recall"\n',
                     ("user_persona", "now dynamic"), id="now-dynamic"),
    ],
)
def test_first_cache_break_is_named(
    home: Path, tmp_path: Path, edit: str, expected: tuple[str, str] | None
) -> None:
    (home / "USER.md").write_text("Ada")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "acme.toml").write_text('name = "acme"\nextends = "minimal"\n' + edit)
    before = _compile(home, tmp_path / "p", profile="minimal", extra_system="one")
    after = _compile(home, tmp_path / "p", profile="acme", extra_system="two")
    diff = diff_manifests(before, after)
    assert diff.cache_break == expected
    assert diff.stable_changed is (expected is not None)
    assert diff.dynamic_changed


def test_a_payload_and_its_manifest_do_not_differ(tmp_path: Path) -> None:
    code, out, _ = run("compile", "--home", str(tmp_path / "h"), "--json", "--profile", "none")
    (tmp_path / "payload.json").write_text(out)
    (tmp_path / "manifest.json").write_text(json.dumps(json.loads(out)["manifest"]))
    code, out, err = run("diff", str(tmp_path / "payload.json"), str(tmp_path / "manifest.json"))
    assert (code, err) == (0, "")
    assert out.splitlines()[2:] == [
        "  no section changes",
        "stable prefix: unchanged; the provider prompt cache holds",
        "dynamic part: unchanged",
    ]


def test_fail_on_cache_break_exits_1_only_when_the_prefix_changed() -> None:
    a, b = str(_manifest("per-file-truncation")), str(_manifest("empty-files"))
    assert run("diff", a, b)[0] == 0
    assert run("diff", "--fail-on-cache-break", a, b)[0] == 1
    assert run("diff", "--fail-on-cache-break", a, a)[0] == 0


def test_not_a_manifest_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"manifest": {"profile": 3}}')
    (tmp_path / "y.json").write_text("{\n  nope")
    code, out, err = run("diff", str(tmp_path / "x.json"), str(tmp_path / "y.json"))
    assert (code, out) == (1, "")
    assert err.splitlines()[:2] == [
        f"{tmp_path / 'x.json'}: manifest → compiler_version: Field required",
        f"{tmp_path / 'x.json'}: manifest → profile: Input should be a valid string",
    ]
    assert err.splitlines()[-2:] == [
        f"{tmp_path / 'x.json'} is not a pioneer manifest or payload", "error: 10 problems"
    ]
    code, _, err = run("diff", str(tmp_path / "y.json"), str(tmp_path / "x.json"))
    assert err == (f"{tmp_path / 'y.json'}:2:3: Expecting property name enclosed in double "
                   "quotes (JSON syntax)\nerror: 1 problem\n")
    code, _, err = run("diff", str(tmp_path / "missing.json"), str(tmp_path / "x.json"))
    assert code == 1
    assert err == (f"{tmp_path / 'missing.json'}: cannot read manifest: No such file or "
                   "directory\nerror: 1 problem\n")


# -- diff --text -------------------------------------------------------------------------


def _payloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """a.json and b.json (payloads: SOUL.md edited, USER.md added) and a.manifest.json.

    The home is given relative to the working folder (``tmp_path``), so the paths the
    sections print, and so their lengths, do not depend on where pytest puts the folder.
    """
    monkeypatch.chdir(tmp_path)
    home = Path("home")
    assert run("init", "--home", str(home))[0] == 0
    (home / "SOUL.md").write_text("You are calm.\nYou keep answers short.\n")
    (tmp_path / "a.json").write_text(run("compile", "--home", str(home), "--json")[1])
    (tmp_path / "a.manifest.json").write_text(
        run("compile", "--home", str(home), "--manifest")[1])
    (home / "SOUL.md").write_text("You are calm.\nYou keep answers short and plain.\n")
    (home / "USER.md").write_text("Ada, who likes tables.\n")
    (tmp_path / "b.json").write_text(run("compile", "--home", str(home), "--json")[1])


def test_diff_text_shows_how_each_section_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, golden: Callable[[Path, str], None],
) -> None:
    _payloads(tmp_path, monkeypatch)
    code, out, err = run_script("diff", "a.json", "b.json", "--text", cwd=tmp_path)
    assert (code, err) == (0, "")
    golden(GOLDENS / "text-soul-edit.txt", out.replace(str(tmp_path), "$TMP"))
    assert "\n-You keep answers short.\n+You keep answers short and plain.\n" in out
    assert "--- /dev/null\n+++ b/user_persona\n" in out
    assert run("diff", "a.json", "b.json", "--text") == (code, out, err)
    data = json.loads(run("diff", "a.json", "b.json", "--text", "--json")[1])
    texts = {entry["id"]: entry["text_diff"] for entry in data["sections"]}
    assert texts["soul_core"].startswith("--- a/soul_core\n+++ b/soul_core\n@@ ")
    assert "+Ada, who likes tables." in texts["user_persona"]
    assert "text_diff" not in json.loads(run("diff", "a.json", "b.json", "--json")[1]
                                         )["sections"][0]


def test_diff_text_colours_its_lines_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _payloads(tmp_path, monkeypatch)
    plain = run_script("diff", "a.json", "b.json", "--text", cwd=tmp_path)[1]
    coloured = run_script("diff", "a.json", "b.json", "--text", "--color", "always",
                          cwd=tmp_path)[1]
    assert "\x1b[38;5;33m+You keep answers short and plain.\x1b[0m" in coloured
    assert "\x1b[38;5;208m-You keep answers short.\x1b[0m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


def test_diff_text_needs_payloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _payloads(tmp_path, monkeypatch)
    code, out, err = run_script("diff", "a.manifest.json", "b.json", "--text", cwd=tmp_path)
    assert (code, out) == (1, "")
    assert err == ("a.manifest.json: a manifest holds no section text: --text needs two "
                   "payloads (what `pioneer compile --json` prints)\nerror: 1 problem\n")
    assert run_script("diff", "a.manifest.json", "b.json", cwd=tmp_path)[0] == 0
