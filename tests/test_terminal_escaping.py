"""Nothing hostile reaches a terminal raw: every CLI text output shows control characters
and bidirectional overrides as visible escapes, and JSON output stays exact.

An ESC sequence that writes the clipboard (OSC 52), sets the window title (OSC 0) and
clears the screen (CSI 2J), behind a right-to-left override, is planted in each place a
command prints from: a tenant's stored message (``history``), a section's text
(``diff --text``), a runtime section's id (``inspect``), a repository's unknown TOML key,
section id and template file name (``check``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from support import run_cli, run_script

from pioneer.history import SqliteStore
from pioneer.review.terminal import STYLES, visible

EVIL = "\x1b]52;c;b3duZWQ=\x07\x1b]0;owned\x07\x1b[2J\u202eevil\x9b\x7f"
#: How it is printed.
SHOWN = "\\x1b]52;c;b3duZWQ=\\x07\\x1b]0;owned\\x07\\x1b[2J\\u202eevil\\u009b\\u007f"
#: Any character a terminal acts on, but tab and newline.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _clean(text: str) -> None:
    assert RAW.search(text) is None, repr(RAW.search(text))


def test_history_shows_a_stored_message_escaped_and_its_json_exact(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    with SqliteStore(db) as store:
        store.ensure_thread("demo", model="demo-model")
        store.add_turn("demo", user_text=f"hello {EVIL}", assistant_text="hi", turn_id="t-0")
    code, out, err = run_script("history", "demo", "--db", str(db), cwd=tmp_path)
    assert (code, err) == (0, "")
    assert f"hello {SHOWN}" in out
    _clean(out)
    code, out, err = run_script("history", "demo", "--db", str(db), "--json", cwd=tmp_path)
    assert (code, err) == (0, "")
    assert json.loads(out)["messages"][0]["content"] == f"hello {EVIL}"


def test_diff_text_shows_section_text_escaped_and_its_json_exact(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run_script("init", "--home", "home", cwd=tmp_path)[0] == 0
    (home / "SOUL.md").write_text("You are calm.\n")
    (tmp_path / "a.json").write_text(run_script("compile", "--home", "home", "--json",
                                                cwd=tmp_path)[1])
    (home / "SOUL.md").write_text(f"You are calm.\n{EVIL}\n")
    (tmp_path / "b.json").write_text(run_script("compile", "--home", "home", "--json",
                                                cwd=tmp_path)[1])
    code, out, err = run_script("diff", "a.json", "b.json", "--text", cwd=tmp_path)
    assert (code, err) == (0, "")
    assert f"\n+{SHOWN}\n" in out
    _clean(out)
    code, out, _ = run_script("diff", "a.json", "b.json", "--text", "--json", cwd=tmp_path)
    texts = {entry["id"]: entry["text_diff"] for entry in json.loads(out)["sections"]}
    assert f"\n+{EVIL}\n" in texts["soul_core"]
    # With colour on, the painter's own colours reach the terminal and nothing else.
    coloured = run_script("diff", "a.json", "b.json", "--text", "--color", "always",
                          cwd=tmp_path)[1]
    assert f"\x1b[38;5;33m+{SHOWN}\x1b[0m" in coloured
    own = "|".join(re.escape(f"\x1b[{code}m") for code in {*STYLES.values(), "0"} if code)
    _clean(re.sub(own, "", coloured))


def test_inspect_shows_a_runtime_section_id_escaped(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text(json.dumps({"runtime_sections": [
        {"id": f"note{EVIL}", "title": f"Note {EVIL}", "content": "text"}]}))
    code, out, err = run_script("inspect", "--home", "home", "--input", "in.json",
                                cwd=tmp_path)
    # Such an id is refused (ids are readable), and the refusal shows it escaped.
    assert (code, out) == (1, "")
    assert "runtime_sections[0] → id: '\\x1b' (U+001B) is not allowed" in err
    assert "(got 'note\\x1b]52;c;b3duZWQ=\\x07\\x1b]0;owned\\x07\\x1b[2J\\u202eevil" in err
    _clean(err)
    # A file name is printed as it is, escaped at the output.
    name = "in\x1b]0;owned\x07.json"
    (tmp_path / name).write_text(json.dumps({"runtime_section": []}))
    code, out, err = run_script("inspect", "--home", "home", "--input", name, cwd=tmp_path)
    assert (code, out) == (1, "")
    assert err.startswith("in\\x1b]0;owned\\x07.json:1: runtime_section: unknown field")
    _clean(err)


def test_check_shows_keys_ids_and_file_names_escaped(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    key = json.dumps(EVIL)  # a TOML basic string takes JSON's escapes
    (tmp_path / "p" / "acme.toml").write_text(
        f'name = "acme"\n{key} = 1\n\n'
        "[[sections]]\n"
        'id = "soul\\u001b[2J"\n'
        'title = "Soul"\n'
        'stability = "stable"\n'
        'template = "evil\\u001b]0;owned\\u0007.md.j2"\n')
    code, out, err = run_script("check", "acme", "--profile-path", "p", cwd=tmp_path)
    assert code == 1
    text = out + err
    _clean(text)
    assert "\\x1b]52;c;b3duZWQ=\\x07" in text  # the unknown key
    assert "soul\\x1b[2J" in text  # the section id
    assert "evil\\x1b]0;owned\\x07.md.j2" in text  # the template file name


def test_json_output_is_exact(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text(json.dumps(
        {"dynamic_context": f"context {EVIL} \u2066x\u2069 \u200e\u061c\x00"}))
    code, out, err = run_cli("compile", "--home", str(tmp_path / "home"), "--input",
                             str(tmp_path / "in.json"), "--json")
    assert (code, err) == (0, "")
    _clean(out)
    text = f"context {EVIL} \u2066x\u2069 \u200e\u061c\x00"
    assert text in json.loads(out)["dynamic_system_text"]


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_visible_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    shown = visible(text)
    _clean(shown)
    if RAW.search(text) is None:
        assert shown == text
    # JSON text run through it parses to the same value.
    document = json.dumps({"k": text}, ensure_ascii=False)
    assert json.loads(visible(document)) == {"k": text}
