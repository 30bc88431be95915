"""Lock files: a round trip, and --locked refusing with every change named."""

from __future__ import annotations

import hashlib
import io
import os
import tomllib
from pathlib import Path

import pytest
from support import run_cli as run

from pioneer import PromptCompiler

PROFILE = """name = "acme"
extends = "none"

[[sections]]
id = "rules"
after = "identity_base"
title = "Rules"
stability = "stable"
template = "rules.md.j2"
"""


KIND, KINDER = "Be kind.\n", "Be kinder.\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "p" / "acme.toml").write_text(PROFILE)
    (tmp_path / "t" / "rules.md.j2").write_text("Be kind.\n")
    (tmp_path / "pioneer.toml").write_text('profile_path = ["p"]\ntemplate_path = ["t"]\n'
                                           'home = "h"\n')
    return tmp_path


def test_lock_round_trip(deployment: Path) -> None:
    code, out, err = run("lock", "--profile", "acme")
    compiler = PromptCompiler(profile_path=[deployment / "p"], template_path=[deployment / "t"])
    full = compiler.load_profile("acme").fingerprint
    fingerprint = full[:len(out.split()[3])]  # the summary line shows its start
    assert (code, err) == (0, "")
    assert out == (f"locked acme: fingerprint {fingerprint} (2 profile files, 2 templates)\n"
                   "wrote pioneer.lock\n")
    text = (deployment / "pioneer.lock").read_text()
    assert text.startswith("# Prompt sources pinned by `pioneer lock`")
    entry = tomllib.loads(text)["profiles"]["acme"]
    builtin = Path(__file__).parents[1]
    assert entry["fingerprint"] == full
    assert entry["files"] == {
        "p/acme.toml": sha(PROFILE),
        "<built-in>/profiles/none.toml": sha((builtin / "profiles" / "none.toml").read_text()),
    }
    assert entry["templates"] == {
        "identity_base.md.j2": sha((builtin / "templates" / "identity_base.md.j2").read_text()),
        "rules.md.j2": sha("Be kind.\n"),
    }
    plain = run("compile", "--profile", "acme")
    assert plain[0] == 0 and "## Rules\nBe kind." in plain[1]
    assert run("compile", "--profile", "acme", "--locked") == plain


def test_a_changed_template_is_refused_and_named(deployment: Path) -> None:
    run("lock", "--profile", "acme")
    (deployment / "t" / "rules.md.j2").write_text(KINDER)
    code, out, err = run("compile", "--profile", "acme", "--locked")
    assert (code, out) == (1, "")
    assert err == (
        'pioneer.lock: profiles → acme: template "rules.md.j2" changed '
        f"(locked {sha(KIND)[:12]}, now {sha(KINDER)[:12]})\n"
        'profile "acme" does not match pioneer.lock; refusing to compile '
        "(run `pioneer lock --profile acme` to accept the change)\n"
        "error: 1 problem\n"
    )
    assert run("lock", "--profile", "acme")[0] == 0
    assert run("compile", "--profile", "acme", "--locked")[0] == 0


def test_profile_and_template_set_changes_are_all_named(deployment: Path) -> None:
    run("lock", "--profile", "acme")
    changed = PROFILE.replace("rules.md.j2", "policy.md.j2")
    (deployment / "p" / "acme.toml").write_text(changed)
    (deployment / "t" / "policy.md.j2").write_text("Policy.\n")
    code, _, err = run("compile", "--profile", "acme", "--locked")
    assert code == 1
    assert err.splitlines()[:3] == [
        f"pioneer.lock: profiles → acme: profile file p/acme.toml changed "
        f"(locked {sha(PROFILE)[:12]}, now {sha(changed)[:12]})",
        'pioneer.lock: profiles → acme: template "rules.md.j2" is no longer used',
        'pioneer.lock: profiles → acme: template "policy.md.j2" is new (not in the lock)',
    ]


def test_a_comment_only_edit_keeps_the_lock(deployment: Path) -> None:
    run("lock", "--profile", "acme")
    (deployment / "p" / "acme.toml").write_text("# reviewed by ops\n" + PROFILE)
    assert run("compile", "--profile", "acme", "--locked")[0] == 0


def test_unlocked_profile_and_missing_lock(deployment: Path) -> None:
    assert run("compile", "--profile", "none", "--locked") == (
        1, "", "pioneer.lock: lock file not found; run `pioneer lock` first\nerror: 1 problem\n"
    )
    run("lock", "--profile", "acme")
    assert run("compile", "--profile", "assistant_none", "--locked") == (
        1, "", 'pioneer.lock: profile "none" is not locked; run `pioneer lock --profile none`\n'
        "error: 1 problem\n"
    )


def test_lock_updates_named_profiles_and_a_full_lock_replaces(deployment: Path) -> None:
    run("lock", "--profile", "acme")
    run("lock", "--profile", "assistant_none")
    lock = tomllib.loads((deployment / "pioneer.lock").read_text())
    assert sorted(lock["profiles"]) == ["acme", "none"]
    (deployment / "pioneer.lock").write_text(
        (deployment / "pioneer.lock").read_text().replace("profiles.none", "profiles.gone")
    )
    assert run("lock")[0] == 0
    lock = tomllib.loads((deployment / "pioneer.lock").read_text())
    assert sorted(lock["profiles"]) == ["acme", "full", "minimal", "none"]


def test_an_unreadable_lock_is_never_overwritten(deployment: Path) -> None:
    (deployment / "pioneer.lock").write_text("version = 2\n")
    expected = (1, "", "pioneer.lock: version: Input should be 1\nerror: 1 problem\n")
    assert run("lock", "--profile", "acme") == expected
    assert run("compile", "--profile", "acme", "--locked") == expected
    assert (deployment / "pioneer.lock").read_text() == "version = 2\n"


def test_a_broken_profile_is_not_locked(deployment: Path) -> None:
    (deployment / "p" / "acme.toml").write_text(PROFILE.replace("rules.md.j2", "gone.md.j2"))
    code, out, err = run("lock", "--profile", "acme")
    assert (code, out) == (1, "")
    assert "template \"gone.md.j2\" not found" in err
    assert not (deployment / "pioneer.lock").exists()


def test_a_template_swapped_between_reads_is_compiled_as_hashed(
        deployment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file replaced (``os.replace``) while ``compile --locked`` runs: the check's hash
    and the compiled template come from one read, so the locked text is printed (or the
    change refused), never the other version under the locked fingerprint."""
    import jinja2.loaders

    folder = deployment / "t"
    (folder / "rules.md.j2").write_text('Be kind.\n{% include "part.md.j2" %}\n')
    (folder / "part.md.j2").write_text("Part one.\n")
    assert run("lock", "--profile", "acme")[0] == 0
    versions = {"rules.md.j2": 'Be kinder.\n{% include "part.md.j2" %}\n',
                "part.md.j2": "Part two.\n"}
    reads: dict[str, int] = {}
    real_open = open

    def swapping_open(file: str, *args: object, **kwargs: object) -> object:
        """Read the file, then swap in its other version, as a racing writer would."""
        path = Path(file)
        with real_open(path, *args, **kwargs) as stream:  # type: ignore[call-overload]
            text = stream.read()
        if path.resolve().parent == folder.resolve():
            reads[path.name] = reads.get(path.name, 0) + 1
            spare = folder / f".{path.name}.new"
            spare.write_text(versions[path.name])
            versions[path.name] = text
            os.replace(spare, path)
        return io.StringIO(text)

    monkeypatch.setattr(jinja2.loaders, "open", swapping_open, raising=False)
    code, out, err = run("compile", "--profile", "acme", "--locked")
    assert (code, err) == (0, "")
    assert "## Rules\nBe kind.\nPart one." in out
    assert reads == {"rules.md.j2": 1, "part.md.j2": 1}
