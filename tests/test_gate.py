"""The budget gate: pioneer check --max-tokens and token limits declared in the profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli as run

from pioneer import PioneerSettings, PromptCompileInput, PromptCompiler
from pioneer.review.gate import budget_gate

CASE = Path(__file__).parent / "cases" / "derived-deployment"
LIMITED = """name = "lim"
extends = "acme"

[budgets]
max_tokens = {total}

[[sections]]
id = "soul_core"
max_tokens = {soul}

[[sections]]
id = "contributions"
max_tokens = {slot}
"""


@pytest.fixture
def deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for folder in ("profiles", "templates", "home"):
        (tmp_path / folder).mkdir()
        for path in (CASE / folder).iterdir():
            (tmp_path / folder / path.name).write_bytes(path.read_bytes())
    (tmp_path / "input.json").write_text((CASE / "input.json").read_text())
    (tmp_path / "pioneer.toml").write_text(
        'profile_path = ["profiles"]\ntemplate_path = ["templates"]\nhome = "home"\n'
    )
    return tmp_path


def test_max_tokens_passes_and_fails(deployment: Path) -> None:
    assert run("check", "acme", "--input", "input.json", "--max-tokens", "765") == (
        0, "tokens: acme 765 (stable 363 + dynamic 402), limit 765\nok: 1 profile (acme)\n", ""
    )
    assert run("check", "acme", "--input", "input.json", "--max-tokens", "764") == (
        1,
        "tokens: acme 765 (stable 363 + dynamic 402), limit 764\n",
        "profiles/acme.toml: the prompt has 765 cl100k tokens (stable 363 + dynamic 402), "
        "over --max-tokens 764\nerror: 1 problem in 1 profile: token budgets exceeded\n",
    )


def test_declared_limits_fail_at_their_lines(deployment: Path) -> None:
    (deployment / "profiles" / "lim.toml").write_text(LIMITED.format(total=600, soul=100,
                                                                     slot=8))
    code, out, err = run("check", "lim", "--input", "input.json")
    assert (code, out) == (1, "tokens: lim 765 (stable 363 + dynamic 402), limit 600\n")
    assert err.splitlines() == [
        "profiles/lim.toml:5: budgets → max_tokens: the prompt has 765 cl100k tokens "
        "(stable 363 + dynamic 402), over the limit of 600",
        'profiles/lim.toml:9: sections[0] (id "soul_core") → max_tokens: section "soul_core" '
        "has 127 cl100k tokens, over its limit of 100",
        'profiles/lim.toml:13: sections[1] (id "contributions") → max_tokens: section '
        '"hook.alpha" (placed by slot "contributions") has 10 cl100k tokens, over its limit '
        "of 8",
        "error: 3 problems in 1 profile: token budgets exceeded",
    ]


def test_declared_limits_pass_and_apply_without_flags(deployment: Path) -> None:
    (deployment / "profiles" / "lim.toml").write_text(LIMITED.format(total=704, soul=127,
                                                                     slot=10))
    assert run("check", "lim", "acme") == (
        0, "tokens: lim 363 (stable 363 + dynamic 0), limit 704\nok: 2 profiles (lim, acme)\n",
        "",
    )


def test_the_tighter_limit_wins(deployment: Path, tmp_path: Path) -> None:
    (deployment / "profiles" / "lim.toml").write_text(LIMITED.format(total=900, soul=900,
                                                                     slot=900))
    compiler = PromptCompiler(PioneerSettings.load())  # reads ./pioneer.toml
    turn = PromptCompileInput.model_validate(
        {**json.loads((deployment / "input.json").read_text()), "profile": "lim",
         "workspace_root": "home"}
    )
    payload = compiler.compile(turn)
    profile = compiler.load_profile("lim")
    assert budget_gate(profile, payload, max_tokens=700).limit == 700
    assert budget_gate(profile, payload, max_tokens=1000).limit == 900
    assert budget_gate(profile, payload).problems == ()
    assert budget_gate(profile, payload, max_tokens=0).problems[0].render() == (
        "profiles/lim.toml: the prompt has 765 cl100k tokens (stable 363 + dynamic 402), "
        "over --max-tokens 0"
    )


def test_plain_check_does_not_compile() -> None:
    assert run("check") == (0, "ok: 3 profiles (full, minimal, none)\n", "")
