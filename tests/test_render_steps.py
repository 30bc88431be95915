"""A render's time is bounded by its steps: loop iterations and calls are charged, so a
template that would hold a worker for minutes stops with a located ``TemplateError``.

The four attacks (nested loops over ``range(20000)``, a 20,000-item runtime-section list
iterated against itself, a recursive macro of 2**22 calls, two nested ``range(100000)``
loops) each ran for 18 s to 7.5 minutes before the limit; each is stopped through
``compile``, ``check``, ``inspect --html --watch`` and the turn runner. The goldens and
the runner's renderer macros stay far below the limit.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import HOSTILE_PROFILE, SCRIPT, hostile_compiler, run_script, within

from pioneer import Agent, PromptCompileInput, TemplateError
from pioneer.compile.allowance import MAX_STEPS, Allowance, TemplateLimitError
from pioneer.compile.sandbox import render_parts
from pioneer.compile.templates import build_environment
from pioneer.settings import RENDER_STEP_LIMIT, PioneerSettings

#: How long one stopped render may take, start-up included: a guard against a hang,
#: far above the second or so a stopped render takes.
NEVER_HANGS = 60.0

_STOPPED = (f"the render ran past its limit of {MAX_STEPS} steps (each loop iteration and "
            "each call is one, a call handed a long list or text more; the "
            "render_step_limit setting)")

#: (name, template, runtime sections in the input): each would run for minutes.
ATTACKS = [
    ("nested-range-20000",
     "fine\n{% for i in range(20000) %}{% for j in range(20000) %}{% endfor %}{% endfor %}\n",
     0),
    ("runtime-sections-squared",
     "fine\n{% for a in runtime_sections %}{% for b in runtime_sections %}{% endfor %}"
     "{% endfor %}\n", 20_000),
    ("recursive-macro",
     "fine\n{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
     "{% endmacro %}{{ f(22) }}\n", 0),
    ("nested-range-100000",
     "fine\n{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
     "{% endfor %}\n", 0),
]
IDS = [name for name, _, _ in ATTACKS]


def _input(sections: int) -> dict[str, object]:
    return {"profile": "acme", "runtime_sections": [
        {"id": f"r{i}", "title": "R", "content": "c"} for i in range(sections)]}


def _folder(tmp_path: Path, template: str, sections: int) -> None:
    for name in ("p", "t", "h"):
        (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / "p" / "acme.toml").write_text(HOSTILE_PROFILE.format(extra=""))
    (tmp_path / "t" / "evil.md.j2").write_text(template)
    (tmp_path / "in.json").write_text(json.dumps(_input(sections)))


_PATHS = ("--profile-path", "p", "--template-path", "t", "--home", "h")


@pytest.mark.parametrize(("template", "sections"), [a[1:] for a in ATTACKS], ids=IDS)
def test_compile_stops_each_attack_with_a_located_error(
        tmp_path: Path, template: str, sections: int) -> None:
    _folder(tmp_path, template, sections)
    code, out, err = within(NEVER_HANGS, lambda: run_script(
        "compile", "--profile", "acme", *_PATHS, "--input", "in.json", cwd=tmp_path))
    assert (code, out) == (1, "")
    assert err == (f't/evil.md.j2:2: {_STOPPED}\n  while rendering section "identity_base"\n'
                   "error: 1 problem\n")


@pytest.mark.parametrize(("template", "sections"), [a[1:] for a in ATTACKS], ids=IDS)
def test_check_stops_each_attack_with_a_located_error(
        tmp_path: Path, template: str, sections: int) -> None:
    # check renders every section against a representative input, and the budget gate
    # compiles the named one (which holds the 20,000 runtime sections).
    _folder(tmp_path, template, sections)
    code, out, err = within(NEVER_HANGS, lambda: run_script(
        "check", "acme", *_PATHS, "--input", "in.json", "--max-tokens", "100000",
        cwd=tmp_path))
    assert code == 1
    assert f"t/evil.md.j2:2: {_STOPPED}" in out + err


@pytest.mark.parametrize(("template", "sections"), [a[1:] for a in ATTACKS], ids=IDS)
def test_the_watch_shows_each_attack_stopped_and_goes_on_watching(
        tmp_path: Path, template: str, sections: int) -> None:
    _folder(tmp_path, template, sections)
    with (tmp_path / "stderr.txt").open("w") as stderr:
        process = subprocess.Popen(
            [str(SCRIPT), "inspect", "--profile", "acme", *_PATHS, "--input", "in.json",
             "--html", "ctx.html", "--watch"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    try:
        deadline = time.monotonic() + NEVER_HANGS
        while "watching" not in (tmp_path / "stderr.txt").read_text():
            assert process.poll() is None, (tmp_path / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "the page was never written"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=NEVER_HANGS) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = (tmp_path / "stderr.txt").read_text()
    assert text.startswith(f"t/evil.md.j2:2: {_STOPPED}\n")
    assert text.endswith("stopped watching; ctx.html keeps the last page\n")
    assert "ran past its limit of 250000 steps" in (tmp_path / "ctx.html").read_text()


@pytest.mark.parametrize(("template", "sections"), [a[1:] for a in ATTACKS], ids=IDS)
def test_the_runner_stops_each_attack_with_a_located_error(
        tmp_path: Path, template: str, sections: int) -> None:
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": template})
    base = {**_input(sections), "workspace_root": str(tmp_path)}
    with Agent(tmp_path / "p.db", provider="anthropic", model="claude-sonnet-4-5",
               compiler=compiler, compile_input=base, chat_profile="acme") as agent:
        turn = agent.turn("thread-1", "Hello")
        with pytest.raises(TemplateError) as info:
            within(NEVER_HANGS, turn.next_body)
    message = str(info.value).replace(f"{tmp_path}/", "")
    assert message == (f"templates/evil.md.j2:2: {_STOPPED}\n"
                       '  while rendering section "identity_base"')


def test_the_limit_is_a_setting_and_a_long_render_within_it_runs(tmp_path: Path) -> None:
    # 1,000 by 1,000 iterations: over the default, within a limit of 2,000,000.
    template = ("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}"
                "ok\n")
    compiler = hostile_compiler(tmp_path, {"evil.md.j2": template})
    with pytest.raises(TemplateError, match="limit of 250000 steps"):
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert PioneerSettings().render_step_limit == RENDER_STEP_LIMIT == MAX_STEPS == 250_000
    env = build_environment([tmp_path / "templates"], step_limit=2_000_000)
    assert render_parts(env.get_template("evil.md.j2"), {}) == ["ok\n"]
    code, _, err = run_script("compile", "--profile", "acme", "--profile-path",
                              str(tmp_path / "profiles"), "--template-path",
                              str(tmp_path / "templates"), cwd=tmp_path,
                              PIONEER_RENDER_STEP_LIMIT="2000000")
    assert (code, err) == (0, "")


def test_a_discovered_pioneer_toml_cannot_raise_the_limit(tmp_path: Path) -> None:
    (tmp_path / "pioneer.toml").write_text("render_step_limit = 1000000000000\n")
    code, _, err = run_script("check", cwd=tmp_path)
    assert code == 1
    assert err.startswith("pioneer.toml:1: render_step_limit: a pioneer.toml found in the "
                          "working folder or a parent may not set this")


@pytest.mark.parametrize(("source", "steps"), [
    ("{% for i in range(10) %}{% endfor %}", 11),  # the call to range, ten iterations
    ("{% for i in range(3) %}{% for j in range(4) %}{% endfor %}{% endfor %}", 1 + 3 + 3 * 5),
    ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(9) }}", 10),
    ("{% for x in [[1, 2], [3]] recursive %}{% if x is iterable %}{{ loop(x) }}{% endif %}"
     "{% endfor %}", 2 + (3 + 2) + 2 + 3 + 3),
    # two items and their tests (one step, plus one per item of the list tested), two
    # loop() calls, their three items and the three items' tests
    ("{{ items|sort|join }}", 2 + 2 * 3000),  # filters are charged for the list they walk
    ("{{ text.count('a') }}{{ text[1:]|length }}{% if 'b' in text %}{% endif %}",
     (1 + 2) + (1 + 1) + 2),
    # a text is charged one step per whole 1,024 characters it is walked: count() on
    # 2,048 characters, a slice of 2,047 and the length filter, ``in`` over 2,048
])
def test_what_a_step_is(source: str, steps: int) -> None:
    env = build_environment([])
    allowance = Allowance(0, 10**9)
    from pioneer.compile.allowance import CURRENT

    template = env.from_string(source)
    token = CURRENT.set(allowance)
    try:
        "".join(template.root_render_func(template.new_context(
            {"items": [str(i) for i in range(3000)], "text": "x" * 2048})))
    finally:
        CURRENT.reset(token)
    assert allowance.steps == steps


def test_a_condition_is_stopped_at_the_limit_too(tmp_path: Path) -> None:
    # Each map is handed 100,000 items and calls the string filter once for each: some
    # 300,000 steps.
    compiler = hostile_compiler(
        tmp_path, {"evil.md.j2": "fine\n"},
        extra="when = \"range(100000)|map('string')|map('string')|list|length > 0\"\n")
    with pytest.raises(TemplateError) as info:
        compiler.compile(PromptCompileInput(workspace_root=tmp_path, profile="acme"))
    assert "→ when: condition failed: " + _STOPPED in str(info.value)


def test_a_render_stops_at_the_same_step_every_time() -> None:
    # Counted, not timed: the same render stops at the same step however fast it runs.
    from pioneer.compile.allowance import CURRENT

    env = build_environment([])
    template = env.from_string("{% for i in range(100000) %}{{ i }}{% endfor %}")
    stopped = []
    for _ in range(3):
        allowance = Allowance(0, 5000)
        token = CURRENT.set(allowance)
        out: list[str] = []
        try:
            with pytest.raises(TemplateLimitError):
                out.extend(template.root_render_func(template.new_context({})))
        finally:
            CURRENT.reset(token)
        stopped.append((allowance.steps, len(out)))
    assert stopped == [(5001, 4999)] * 3  # range() is the first step
