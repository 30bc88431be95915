"""Ids are readable: a section id, a contribution id and a profile name hold ASCII
letters, digits and ``_ - . :`` only, so two ids that look the same are the same id.

A look-alike letter of another script, a zero-width space, a bidirectional override, a
control character and a full-width form are each refused with the file, line or JSON
path and the character named, through ``pioneer check`` (profiles), ``pioneer compile``
(a compile input's runtime and hook sections) and a hook's contributions.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import compile_round, run_script

from pioneer import HookError, HookRegistry, InputError, PromptCompileInput, PromptCompiler
from pioneer.compile.ids import ID_PATTERN, check_dynamic_id, id_problem
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext

_RULE = "is not allowed: an id holds ASCII letters, digits, '_', '-', '.' and ':' only"

#: (id, the character named): each looks like, or hides inside, the id ``soul``.
HOSTILE = [
    ("\u0455oul", "'\u0455' (U+0455 CYRILLIC SMALL LETTER DZE)"),  # a Cyrillic look-alike
    ("\u0455\u043e\u0443l", "'\u0455' (U+0455 CYRILLIC SMALL LETTER DZE)"),  # wholly Cyrillic
    ("so\u200bul", "'\\u200b' (U+200B ZERO WIDTH SPACE)"),
    ("soul\u200d", "'\\u200d' (U+200D ZERO WIDTH JOINER)"),
    ("\u202esoul", "'\\u202e' (U+202E RIGHT-TO-LEFT OVERRIDE)"),
    ("soul\x1b[2J", "'\\x1b' (U+001B)"),
    ("\uff53oul", "'\uff53' (U+FF53 FULLWIDTH LATIN SMALL LETTER S)"),  # NFKC folds it to s
    ("soul\n", "'\\n' (U+000A)"),
]
IDS = ["cyrillic-s", "cyrillic-word", "zero-width-space", "zero-width-joiner", "rtl-override",
       "escape", "fullwidth", "trailing-newline"]

PROFILE = """name = "{name}"

[[contributions]]
id = "{contribution}"

[[sections]]
id = "{section}"
title = "Soul"
stability = "stable"
template = "assistant_safety.md.j2"
source = "text"
"""


def _toml(value: str) -> str:
    return json.dumps(value)[1:-1]  # a TOML basic string takes JSON's escapes


@pytest.mark.parametrize(("bad", "named"), HOSTILE, ids=IDS)
def test_a_profile_id_that_could_be_misread_is_refused_at_its_line(
        tmp_path: Path, bad: str, named: str) -> None:
    (tmp_path / "p").mkdir()
    written = _toml(bad)
    (tmp_path / "p" / "acme.toml").write_text(
        PROFILE.format(name=written, contribution=written, section=written))
    code, out, err = run_script("check", "p/acme.toml", cwd=tmp_path)
    assert (code, out) == (1, "")
    shown = json.dumps(bad)
    said = f"{named} {_RULE} (got {bad!r})".replace("\x1b", "\\x1b")
    assert err.replace("\u202e", "\\u202e").splitlines()[:3] == [
        f"p/acme.toml:1: name: {said}",
        f"p/acme.toml:4: contributions[0] (id {shown}) → id: {said}",
        f"p/acme.toml:7: sections[0] (id {shown}) → id: {said}",
    ]


@pytest.mark.parametrize(("bad", "named"), HOSTILE, ids=IDS)
def test_a_runtime_or_hook_section_id_that_could_be_misread_is_refused(
        tmp_path: Path, bad: str, named: str) -> None:
    for field in ("runtime_sections", "dynamic_sections"):
        (tmp_path / "in.json").write_text(json.dumps(
            {field: [{"id": bad, "title": "Notes", "content": "text"}]}))
        code, out, err = run_script("compile", "--home", "home", "--input", "in.json",
                                    cwd=tmp_path)
        assert (code, out) == (1, "")
        said = f"{named} {_RULE}" if not bad.endswith("\n") else \
            "must not have leading or trailing whitespace"  # whitespace is named as such
        message = f"in.json:1: {field}[0] → id: {said} (got {bad!r})"
        assert err == (message.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e")
                       + "\nerror: 1 problem in in.json\n")


def test_a_hooks_contribution_with_a_look_alike_id_is_refused(home: Path) -> None:
    registry = HookRegistry()

    @registry.hook("acme.notes", phase="turn.pre_prompt_compile", failure="fail_closed")
    def notes(context: HookContext) -> PromptSectionContribution:
        return PromptSectionContribution(contribution_id="acme.c", section_id="\u0455oul",
                                         domain="acme", content="hi")

    with pytest.raises(HookError) as info:
        compile_round(PromptCompiler(), PromptCompileInput(workspace_root=home), registry)
    said = f"'\u0455' (U+0455 CYRILLIC SMALL LETTER DZE) {_RULE} (got '\u0455oul')"
    assert said in str(info.value)
    with pytest.raises(InputError, match="U\\+200B ZERO WIDTH SPACE"):
        PromptSectionContribution(contribution_id="acme.c", section_id="acme.\u200bnotes",
                                  domain="acme", content="hi")


def test_every_id_pioneer_ships_and_documents_is_readable() -> None:
    root = Path(__file__).parent.parent
    from pioneer.compile.ids import BUILT_IN_SECTION_IDS, PROFILE_ALIASES, RUNTIME_BUILT_IN_IDS

    for value in [*BUILT_IN_SECTION_IDS, *RUNTIME_BUILT_IN_IDS, *PROFILE_ALIASES,
                  *PROFILE_ALIASES.values()]:
        assert id_problem(value) is None, value
    # Every built-in profile and every profile the tests and docs hold still loads.
    code, out, err = run_script("check", *map(str, sorted((root / "profiles").glob("*.toml"))))
    assert (code, err) == (0, ""), out
    assert ID_PATTERN == "^[A-Za-z0-9_.:-]+$"


@given(st.text(min_size=1, max_size=20))
def test_an_accepted_id_is_ascii_and_nfkc_stable(value: str) -> None:
    try:
        accepted = check_dynamic_id(value)
    except ValueError as error:
        assert "is not allowed" in str(error) or "whitespace" in str(error) \
            or "built-in" in str(error)
        assert any(not (c.isascii() and (c.isalnum() or c in "_-.:")) for c in value) \
            or "built-in" in str(error)
        return
    assert accepted.isascii() and unicodedata.normalize("NFKC", accepted) == accepted
    assert all(c.isalnum() or c in "_-.:" for c in accepted)
