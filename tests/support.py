"""Helpers shared by test modules (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from pioneer import CompiledPromptPayload, PromptCompileInput, PromptCompiler
from pioneer.compile.allowance import INPUT_COPIES, MAX_OUTPUT
from pioneer.compile.compiler import CONDITION_NAMES, PROVIDED_NAMES
from pioneer.history import ArtifactRef, CrudStore
from pioneer.hooks.registry import TURN_PROMPT_PHASES, HookRegistry, HookRun, TurnContext
from pioneer.sections import CurrentPermissions, HiddenToolDomains, PermissionProfile

T = TypeVar("T")

#: What an undefined-name message lists: the names a condition may read, and a text
#: and an input section's template.
CONDITION = ", ".join(sorted(CONDITION_NAMES))
TEXT_SECTION = ", ".join(sorted(PROVIDED_NAMES["text"]))
INPUT_SECTION = ", ".join(sorted(PROVIDED_NAMES["input"]))


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, failing the test (instead of hanging the suite) when it takes too long."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``pioneer ARGV...`` through ``main()``: the exit code, stdout and stderr."""
    from pioneer.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


#: The console script pip installed beside this interpreter: the ``pioneer`` users run.
SCRIPT = Path(sys.executable).with_name("pioneer")


def run_script(*argv: str, cwd: Path | None = None, **env: str) -> tuple[int, str, str]:
    """The installed ``pioneer`` console script with ``argv``, piped: the exit code, stdout
    and stderr. The environment is this one without ``PIONEER_*``, ``NO_COLOR`` and
    ``FORCE_COLOR`` and with an ordinary ``TERM``, plus ``env``."""
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: pip install -e . writes it"
    base = {name: value for name, value in os.environ.items()
            if not name.startswith("PIONEER_") and name not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, cwd=cwd,
                          env={**base, "TERM": "xterm-256color", **env}, check=False,
                          timeout=120)
    return done.returncode, done.stdout, done.stderr


def assert_same_as_validated(record: Any) -> None:
    """``record`` equals a validated copy of itself in values, set fields and order."""
    if isinstance(record, list):
        for item in record:
            assert_same_as_validated(item)
        return
    if not isinstance(record, BaseModel):
        return
    values = {name: getattr(record, name) for name in type(record).model_fields}
    given = {name: values[name] for name in record.model_fields_set}
    validated = type(record).model_validate(given)
    assert record == validated
    assert record.model_fields_set == validated.model_fields_set
    assert list(record.__dict__) == list(validated.__dict__) == list(type(record).model_fields)
    assert record.model_dump(mode="json") == validated.model_dump(mode="json")
    assert record.model_dump_json() == validated.model_dump_json()
    for value in values.values():
        assert_same_as_validated(value)


# -- hostile templates -----------------------------------------------------------------

#: A profile whose one section renders ``evil.md.j2``; ``{extra}`` adds lines to the section.
HOSTILE_PROFILE = """name = "acme"

[[sections]]
id = "identity_base"
title = "Identity"
stability = "stable"
template = "evil.md.j2"
{extra}"""

#: The limit of that section's render: MAX_OUTPUT, plus INPUT_COPIES times the text it is
#: handed (the names it reads: its section's id and title).
HOSTILE_LIMIT = MAX_OUTPUT + INPUT_COPIES * len("identity_base" + "Identity")


def hostile_compiler(tmp_path: Path, templates: dict[str, str], *,
                     extra: str = "") -> PromptCompiler:
    """A compiler for HOSTILE_PROFILE (with ``extra``) and ``templates`` (name: source),
    written under ``tmp_path/profiles`` and ``tmp_path/templates``."""
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "profiles" / "acme.toml").write_text(HOSTILE_PROFILE.format(extra=extra))
    (tmp_path / "templates").mkdir(exist_ok=True)
    for name, source in templates.items():
        (tmp_path / "templates" / name).write_text(source)
    return PromptCompiler(profile_path=[tmp_path / "profiles"],
                          template_path=[tmp_path / "templates"])


# -- a thread to recall from -----------------------------------------------------------

#: (user, assistant) turns of thread ``demo``: a few about the gateway's latency among
#: small talk. Turn 1's reply carries RECALL_CHART.
RECALL_TURNS = [
    ("How slow is the gateway in Frankfurt?", "p50 is 40 ms, p99 is 310 ms in Frankfurt."),
    ("Plot the gateway latency.", "Here is the latency chart."),
    ("What should I cook tonight?", "A simple pasta would do."),
    ("Remind me to call my sister.", "I will keep that in mind."),
    ("Is it going to rain today?", "Probably in the afternoon."),
    ("Any good books lately?", "Try a short novel for the weekend."),
    ("Which gateway endpoint is the worst?", "POST /v1/chat, by far."),
    ("Thanks for the help earlier.", "You are welcome."),
]

RECALL_CHART = ArtifactRef("art-7", "latency chart.png", "image", version_id="v2",
                           size_bytes=48_213, role="assistant")


def add_recall_turns(store: CrudStore, count: int = len(RECALL_TURNS)) -> None:
    """The first ``count`` RECALL_TURNS added to thread ``demo`` as ``turn-N`` (items
    ``uN`` and ``aN``)."""
    for n, (user, reply) in enumerate(RECALL_TURNS[:count]):
        store.add_turn("demo", user_text=user, assistant_text=reply, turn_id=f"turn-{n}",
                       user_item_id=f"u{n}", assistant_item_id=f"a{n}",
                       assistant_artifacts=[RECALL_CHART] if n == 1 else [])


def sqlite_exec(path: Path, *statements: str) -> None:
    """Run ``statements`` on the SQLite file at ``path`` in autocommit, as a foreign client
    (or a damaged row's author) would, then close it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def compile_round(
    compiler: PromptCompiler,
    compile_input: Any,
    hooks: HookRegistry | None = None,
    *,
    turn: TurnContext | None = None,
    permissions: PermissionProfile | None = None,
    hidden_tool_domains: Mapping[str, Sequence[str]] | None = None,
    phases: Sequence[str] = TURN_PROMPT_PHASES,
    history: Sequence[Any] | None = None,
    hook_run: HookRun | None = None,
) -> CompiledPromptPayload:
    """One round as an application writes it by hand: the hook phases (unless
    ``hook_run`` is given), then the one compile of the round's whole input."""
    if not isinstance(compile_input, PromptCompileInput):
        compile_input = PromptCompileInput.model_validate(compile_input)
    if hook_run is None:
        hook_run = (hooks or HookRegistry()).run_hooks(compiler, compile_input, turn=turn,
                                                       phases=phases)
    sections: list[Any] = []
    if permissions is not None:
        sections.append(CurrentPermissions(permissions))
    if hidden_tool_domains:
        sections.append(HiddenToolDomains(hidden_tool_domains))
    texts = None if history is None else [m if isinstance(m, str) else m.content
                                          for m in history]
    return compiler.compile(hook_run.round_input(compile_input, sections=sections,
                                                 history=texts))
