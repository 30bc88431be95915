"""Bad input through every command that reads it is exit 1 with a located message, never
an internal error: nesting deeper than a parser's stack, numbers longer than Python reads,
NUL bytes and over-long names, and paths that are not UTF-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import run_cli as run

from pioneer import documents
from pioneer.errors import InputError

DEEP = "[" * 100_000 + "]" * 100_000
LONG = "9" * 5000


def _documents(kind: str) -> dict[str, str]:
    if kind == "json":
        return {"deep": '{\n"runtime_sections": ' + DEEP + "}",
                "long": '{\n"artifact_ref_count": ' + LONG + "}"}
    return {"deep": "\nruntime_sections = " + DEEP + "\n",
            "long": "\nartifact_ref_count = " + LONG + "\n"}


MESSAGES = {"deep": "nested more than 200 levels deep",
            "long": "a number has more than 4300 digits"}


@pytest.mark.parametrize("what", ["deep", "long"])
@pytest.mark.parametrize(
    ("name", "kind", "argv"),
    [
        ("in.json", "json", ["compile", "--input", "{file}"]),
        ("in.toml", "toml", ["compile", "--input", "{file}"]),
        ("in.json", "json", ["inspect", "--input", "{file}"]),
        ("chat.json", "json", ["compile", "--provider", "gemini", "--model", "m",
                               "--messages", "{file}"]),
        ("a.json", "json", ["diff", "{file}", "{file}"]),
        ("pioneer.lock", "toml", ["compile", "--locked", "--lock", "{file}"]),
        ("x.toml", "toml", ["check", "--profile-path", "{folder}"]),
        ("pioneer.toml", "toml", ["check"]),
    ],
    ids=["input-json", "input-toml", "inspect-input", "messages", "diff", "lock", "profile",
         "pioneer-toml"],
)
def test_deep_and_long_documents_are_located_user_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str, name: str, kind: str,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIONEER_CONFIG", raising=False)
    folder = tmp_path / "p"
    folder.mkdir()
    file = (folder if name == "x.toml" else tmp_path) / name
    file.write_text(_documents(kind)[what])
    shown = str(file) if name not in ("pioneer.toml",) else "pioneer.toml"
    if name == "x.toml":
        shown = str(file)
    args = [part.format(file=file, folder=folder) for part in argv]
    home = [] if argv[0] == "diff" else ["--home", str(tmp_path / "home")]
    code, out, err = run(*args, *home)
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{shown}:2: {MESSAGES[what]}", err.splitlines()[-1]]
    assert err.splitlines()[-1].startswith("error: 1 problem")


#: TOML whose data nests 600 levels deep through the parts of a key, not brackets.
DOTTED = {"dotted-key": "\n" + ".".join(["a"] * 600) + " = 1\n",
          "table-header": "\n[" + ".".join(["a"] * 600) + "]\nb = 1\n",
          "array-header": "\n[[" + ".".join(["a"] * 600) + "]]\n",
          "inline-table": "\nx = { " + ".".join(["a"] * 600) + " = 1 }\n"}


@pytest.mark.parametrize("text", list(DOTTED.values()), ids=list(DOTTED))
@pytest.mark.parametrize(
    ("name", "argv"),
    [("in.toml", ["compile", "--input", "{file}"]),
     ("x.toml", ["check", "--profile-path", "{folder}"]),
     ("pioneer.toml", ["check"])],
    ids=["input", "profile", "pioneer-toml"],
)
def test_a_key_of_many_parts_is_a_located_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, name: str, argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIONEER_CONFIG", raising=False)
    file = (tmp_path / "p" if name == "x.toml" else tmp_path) / name
    file.parent.mkdir(exist_ok=True)
    file.write_text(text)
    shown = name if name == "pioneer.toml" else str(file)
    args = [part.format(file=file, folder=file.parent) for part in argv]
    assert run(*args, "--home", str(tmp_path / "home")) == (
        1, "", f"{shown}:2: nested more than 200 levels deep\nerror: 1 problem"
        + (" in 1 profile\n" if name == "x.toml" else "\n"))


def test_a_key_of_a_hundred_thousand_parts_is_refused_before_it_is_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # parsed, it would take tens of GB (a tuple for every prefix of the key)
    def parse(text: str) -> None:
        raise AssertionError("tomllib was given the key")

    monkeypatch.setattr(documents.tomllib, "loads", parse)
    for text in (".".join(["a"] * 100_000) + " = 1\n", "[" + ".".join(["a"] * 100_000) + "]\n"):
        with pytest.raises(InputError, match=r"^in\.toml:1: nested more than 200 levels deep$"):
            documents.parse_document(text, "in.toml", "toml")
    # a document of as many dots and brackets that does not nest is still parsed
    with pytest.raises(AssertionError, match="tomllib was given"):
        documents.parse_document("".join(f"k{i}.v = 1.5\n" for i in range(50_000)), "in.toml",
                              "toml")


def test_a_nul_in_a_profile_file_name_is_found_by_check(tmp_path: Path) -> None:
    (tmp_path / "nul.toml").write_text(
        'name = "nul"\n[[sections]]\nid = "soul"\ntitle = "Soul"\nstability = "stable"\n'
        'template = "bootstrap_file.md.j2"\nsource = "bootstrap"\nfile = "SO\\u0000UL.md"\n'
    )
    expected = (
        f"{tmp_path / 'nul.toml'}:8: sections[0] (id \"soul\") → file: must not contain a NUL "
        "character (got 'SO\\x00UL.md')"
    )
    assert run("check", "nul", "--profile-path", str(tmp_path)) == (
        1, "", f"{expected}\nerror: 1 problem in 1 profile\n"
    )
    assert run("compile", "--profile", "nul", "--profile-path", str(tmp_path), "--home",
               str(tmp_path / "home")) == (
        1, "", f"{expected}\nerror: 1 problem in {tmp_path / 'nul.toml'}\n"
    )


def test_an_over_long_profile_name_is_unknown(tmp_path: Path) -> None:
    name = "a" * 5000
    assert run("compile", "--profile", name, "--home", str(tmp_path)) == (1, "", (
        f'unknown profile "{"a" * 80}… (5000 characters)" (known: full, minimal, none)\n'
        "error: 1 problem\n"
    ))
    assert run("compile", "--profile", f"{name}.toml", "--home", str(tmp_path))[:2] == (1, "")


def test_an_over_long_extends_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "d.toml").write_text(f'name = "d"\nextends = "{"b" * 5000}"\n')
    code, _, err = run("check", "d", "--profile-path", str(tmp_path))
    assert code == 1
    assert err.startswith(f'{tmp_path / "d.toml"}:2: extends: unknown profile "{"b" * 80}… '
                          '(5000 characters)"')
    (tmp_path / "d.toml").write_text(f'name = "d"\nextends = "{"b/" * 3000}x.toml"\n')
    code, _, err = run("check", "d", "--profile-path", str(tmp_path))
    assert code == 1 and err.startswith(f'{tmp_path / "d.toml"}:2: extends: profile file "')


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items()
            if not name.upper().startswith("PIONEER_")}


def test_an_undecodable_workspace_root_compiles(tmp_path: Path) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps({"workspace_root": "/x/h\udcff"}))
    for output in ([], ["--json"], ["--manifest"]):
        result = subprocess.run(
            [sys.executable, "-m", "pioneer", "compile", "--input", str(turn), *output],
            capture_output=True, env=_environment(), check=False,
        )
        assert (result.returncode, b"internal error" in result.stderr) == (0, False)
        if output:  # valid UTF-8 JSON: the undecodable byte shows as U+FFFD
            assert "/x/h\ufffd" in json.dumps(json.loads(result.stdout.decode("utf-8")),
                                               ensure_ascii=False)


def test_a_home_that_is_not_utf8_compiles(tmp_path: Path) -> None:
    home = os.fsencode(tmp_path) + b"/h\xff"
    env = _environment()
    for output in ([], [b"--manifest"]):
        result = subprocess.run(
            [sys.executable.encode(), b"-m", b"pioneer", b"compile", b"-q", b"--home", home,
             *output], capture_output=True, env=env, check=False,
        )
        assert (result.returncode, result.stderr) == (0, b"")


#: 1,000 unknown keys, one a line from line 2, in each kind of document a command reads.
MANY = {
    "input-json": ("in.json", "{\n" + ",\n".join(f'"k{i}": {i}' for i in range(1000)) + "\n}\n",
                   ["compile", "--input", "{file}"]),
    "input-toml": ("in.toml", "\n" + "".join(f"k{i} = {i}\n" for i in range(1000)),
                   ["compile", "--input", "{file}"]),
    "profile": ("x.toml", 'name = "x"\n' + "".join(f"k{i} = {i}\n" for i in range(1000))
                + '[[sections]]\nid = "a"\ntitle = "A"\nstability = "stable"\n'
                'template = "assistant_safety.md.j2"\n', ["check", "--profile-path", "{folder}"]),
    "pioneer-toml": ("pioneer.toml", "\n" + "".join(f"k{i} = {i}\n" for i in range(1000)),
                     ["check"]),
}


@pytest.mark.parametrize(("name", "text", "argv"), list(MANY.values()), ids=list(MANY))
def test_many_problems_are_located_from_one_index_and_the_report_is_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIONEER_CONFIG", raising=False)
    file = (tmp_path / "p" if name == "x.toml" else tmp_path) / name
    file.parent.mkdir(exist_ok=True)
    file.write_text(text)
    indexed: list[str] = []  # each text a line index is built for
    build, ends = documents.TomlLines._build, documents.LineEnds.__init__

    def counted_build(self: documents.TomlLines) -> Any:
        indexed.append(self.text)
        return build(self)

    def counted_ends(self: documents.LineEnds, text: str) -> None:
        indexed.append(text)
        ends(self, text)

    monkeypatch.setattr(documents.TomlLines, "_build", counted_build)
    monkeypatch.setattr(documents.LineEnds, "__init__", counted_ends)
    code, out, err = run(*[part.format(file=file, folder=file.parent) for part in argv],
                         "--home", str(tmp_path / "home"))
    lines = err.splitlines()
    assert (code, out, len(lines)) == (1, "", 102)
    shown = name if name == "pioneer.toml" else str(file)
    assert [line.split(": ")[0] for line in lines[:100]] == [
        f"{shown}:{2 + n}" for n in range(100)]
    assert lines[100:] == ["and 900 more problems", lines[-1]]
    assert lines[-1].startswith("error: 1000 problems")
    assert indexed.count(text) == 1  # the lines of the file were indexed once, for all 1,000


@pytest.mark.parametrize(
    ("name", "text", "argv"),
    [("in.json", '{"workspace_root": "home", "profile": "minimal", "K": 1}',
      ["compile", "--input", "{file}"]),
     ("x.toml", 'name = "x"\nK = 1\n[[sections]]\nid = "a"\n',
      ["check", "--profile-path", "{folder}"]),
     ("pioneer.toml", "K = 1\n", ["check"])],
    ids=["input", "profile", "pioneer-toml"],
)
def test_a_key_of_megabytes_is_not_echoed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIONEER_CONFIG", raising=False)
    (tmp_path / "home").mkdir()
    key = "k" * 200 + "m" * 2_000_000 + "z" * 100
    file = (tmp_path / "p" if name == "x.toml" else tmp_path) / name
    file.parent.mkdir(exist_ok=True)
    file.write_text(text.replace("K", key))
    args = [part.format(file=file, folder=file.parent) for part in argv]
    code, out, err = run(*args, "--home", str(tmp_path / "home"))
    assert (code, out) == (1, "")
    shown = f"{'k' * 200}…(2,000,000 characters left out)…{'z' * 100}: unknown "
    assert shown in err and len(err) < 2_000
