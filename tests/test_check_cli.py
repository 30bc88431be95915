"""``pioneer check`` as CI and a deployment run it, through the installed console script:
``--format github`` prints GitHub Actions workflow commands (read back with a parser of
their syntax), and a profile given by its path is checked with the ``pioneer.toml``
found from its own folder upwards, whatever the working folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

PIONEER = Path(sys.executable).with_name("pioneer")

#: A workflow command: ``::name key=value,key=value::message`` on one line (GitHub's
#: "Workflow commands for GitHub Actions"). Property values and the message carry no raw
#: newline; a value carries no raw ``,`` or ``:``, which would end it.
COMMAND = re.compile(r"^::(?P<name>error|warning|notice)"
                     r"(?: (?P<properties>[A-Za-z]+=[^,:\r\n]*(?:,[A-Za-z]+=[^,:\r\n]*)*))?"
                     r"::(?P<message>[^\r\n]*)$")
#: The properties an annotation may have.
PROPERTIES = {"file", "line", "endLine", "col", "endColumn", "title"}
_UNESCAPE = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}


def _unescape(text: str) -> str:
    return re.sub("%25|%0D|%0A|%3A|%2C", lambda match: _UNESCAPE[match[0]], text)


def parse_annotation(line: str) -> dict[str, str]:
    """An annotation's level, properties and message, unescaped; fails on anything that
    is not a well-formed workflow command."""
    match = COMMAND.match(line)
    assert match is not None, f"not a workflow command: {line!r}"
    found = {"level": match["name"], "message": _unescape(match["message"])}
    for pair in (match["properties"] or "").split(",") if match["properties"] else []:
        key, _, value = pair.partition("=")
        assert key in PROPERTIES and key not in found, line
        found[key] = _unescape(value)
    return found


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items()
           if not name.upper().startswith("PIONEER_")}
    return subprocess.run([str(PIONEER), *argv], cwd=cwd, text=True, capture_output=True,
                          env={**env, "PIONEER_HOME": str(cwd / "home")}, check=False)


def test_check_format_github_prints_an_annotation_per_problem(tmp_path: Path) -> None:
    # a folder name with the characters a property value must escape
    folder = tmp_path / "de,ploy:1"
    folder.mkdir()
    (folder / "greet.md.j2").write_text("{{ 100 %}} Hello\n")
    (folder / "bot.toml").write_text(
        'name = "bot"\nextends = "full"\n\n[[sections]]\nid = "greet"\n'
        'after = "assistant_safety"\ntitle = "Greet"\nstability = "stable"\n'
        'template = "greet.md.j2"\n\n[[sections]]\nid = "tone"\nafter = "greet"\n'
        'title = "Tone"\nstabilty = "stable"\ntemplate = "ton.md.j2"\n')
    (folder / "syntax.toml").write_text('name = "syntax"\n[[sections]\n')
    done = _run("check", "--format", "github", "--profile-path", "de,ploy:1",
                "--template-path", "de,ploy:1", "bot", "syntax", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr == "error: 4 problems in 2 profiles\n"
    annotations = [parse_annotation(line) for line in done.stdout.splitlines()]
    assert annotations == [
        {"level": "error", "file": "de,ploy:1/bot.toml", "line": "15",
         "message": 'sections[1] (id "tone") → stabilty: unknown key (did you mean '
                    '"stability"?)'},
        {"level": "error", "file": "de,ploy:1/bot.toml", "line": "16",
         "message": 'sections[1] (id "tone") → template: template "ton.md.j2" not found on the '
                    "template search path; searched de,ploy:1/, the built-in templates"},
        {"level": "error", "file": "de,ploy:1/greet.md.j2", "line": "1",
         "message": "unexpected 'end of print statement'\n"
                    'while checking section "greet" of de,ploy:1/bot.toml'},
        {"level": "error", "file": "de,ploy:1/syntax.toml", "line": "2", "col": "11",
         "message": "expected ']]' at the end of an array declaration (TOML syntax)"},
    ]
    # the same problems, as text and as JSON
    text = _run("check", "--profile-path", "de,ploy:1", "--template-path", "de,ploy:1", "bot",
                "syntax", cwd=tmp_path)
    assert (text.returncode, text.stdout) == (1, "")
    assert text.stderr.splitlines()[0] == (
        'de,ploy:1/bot.toml:15: sections[1] (id "tone") → stabilty: unknown key (did you mean '
        '"stability"?)')
    shown = _run("check", "--format", "json", "--profile-path", "de,ploy:1", "--template-path",
                 "de,ploy:1", "bot", "syntax", cwd=tmp_path)
    assert [(p["file"], p["line"]) for p in json.loads(shown.stdout)["problems"]] == [
        ("de,ploy:1/bot.toml", 15), ("de,ploy:1/bot.toml", 16), ("de,ploy:1/greet.md.j2", 1),
        ("de,ploy:1/syntax.toml", 2)]


def test_check_format_github_without_problems_prints_no_command(tmp_path: Path) -> None:
    done = _run("check", "--format", "github", "minimal", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok: 1 profile (minimal)\n", "")
    assert not COMMAND.match(done.stdout)


def test_check_of_a_profile_path_reads_the_deployment_file_beside_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for folder in ("profiles", "templates", "src"):
        (repo / folder).mkdir(parents=True)
    (repo / "pioneer.toml").write_text('template_path = ["templates"]\n')
    (repo / "templates" / "house.md.j2").write_text("Be brief.\n")
    (repo / "profiles" / "bot.toml").write_text(
        'name = "bot"\nextends = "full"\n\n[[sections]]\nid = "house"\n'
        'after = "assistant_safety"\ntitle = "House"\nstability = "stable"\n'
        'template = "house.md.j2"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    profile = repo / "profiles" / "bot.toml"
    for cwd in (elsewhere, repo / "src", tmp_path):
        done = _run("check", str(profile), cwd=cwd)
        assert (done.returncode, done.stderr) == (0, ""), cwd
        assert done.stdout == f"ok: 1 profile ({profile})\n"
    # without the file, the template is not found, and the message says where it looked
    (repo / "pioneer.toml").unlink()
    done = _run("check", str(profile), cwd=elsewhere)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        f'{profile}:9: sections[0] (id "house") → template: template "house.md.j2" not found '
        "on the template search path; searched the built-in templates")


def test_the_three_mistakes_of_a_derived_profile_show_at_once(tmp_path: Path) -> None:
    # a prompt author's first profile: derived from full, a misspelt key, an unclosed
    # {% for %} and a name the compile context does not hold, all reported in one run
    (tmp_path / "pioneer.toml").write_text(
        'profile_path = ["profiles"]\ntemplate_path = ["templates"]\n')
    for folder in ("profiles", "templates"):
        (tmp_path / folder).mkdir()
    (tmp_path / "templates" / "house_style.md.j2").write_text(
        '{% for rule in ["Be brief."] %}\n- {{ rule }}\n')
    (tmp_path / "templates" / "greeting.md.j2").write_text("Hello {{ user_name }}.\n")
    (tmp_path / "profiles" / "mybot.toml").write_text(
        'name = "mybot"\nextends = "full"\n\n[[sections]]\nid = "house_style"\n'
        'after = "assistant_safety"\ntitle = "House Style"\nstabilty = "stable"\n'
        'template = "house_style.md.j2"\n\n[[sections]]\nid = "greeting"\n'
        'after = "house_style"\ntitle = "Greeting"\nstability = "stable"\n'
        'template = "greeting.md.j2"\n')
    done = _run("check", "mybot", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    problems = [line for line in done.stderr.splitlines() if not line.startswith("  ")]
    assert [line.split(": ", 1)[0] for line in problems] == [
        "profiles/mybot.toml:8", "templates/greeting.md.j2:1", "templates/house_style.md.j2:2",
        "error"]
    assert 'stabilty: unknown key (did you mean "stability"?)' in problems[0]
    assert '"user_name" is undefined (not in the compile context, which holds ' in problems[1]
    assert "The innermost block that needs to be closed is 'for'." in problems[2]
    assert problems[3] == "error: 3 problems in 1 profile"
    annotations = [parse_annotation(line) for line in _run(
        "check", "--format", "github", "mybot", cwd=tmp_path).stdout.splitlines()]
    assert [(a["level"], a["file"], a["line"]) for a in annotations] == [
        ("error", "profiles/mybot.toml", "8"), ("error", "templates/greeting.md.j2", "1"),
        ("error", "templates/house_style.md.j2", "2")]


def test_check_format_github_prints_a_warning_annotation(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bot.toml").write_text(
        'name = "bot"\nextends = "full"\n\n[[sections]]\nid = "assistant_safety"\n'
        'title = "Ground Rules"\nstability = "stable"\n')
    done = _run("check", "--format", "github", "--profile-path", "profiles", "bot",
                cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    (warning, ok) = done.stdout.splitlines()
    annotation = parse_annotation(warning)
    assert {key: annotation[key] for key in ("level", "file", "line")} == {
        "level": "warning", "file": "profiles/bot.toml", "line": "6"}
    assert annotation["message"].startswith(
        'sections[0] (id "assistant_safety") → title: section "assistant_safety" of base '
        'profile "full" exists')
    assert ok == "ok: 1 profile (bot)"
