"""pioneer diff: section changes and the provider-cache verdict, on golden manifests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support import run_cli as run

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
