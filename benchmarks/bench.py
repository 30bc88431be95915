"""pioneer side by side with the floor and its peers: run on demand, prints one table.

    python benchmarks/bench.py [--rounds N] [--startup-runs N] [--cold] [--keep-gc]

Every row works on the same deterministic workload (``workload.py``). The in-process rows
run interleaved: each round runs every row once, in a shuffled order, so drift in the
machine (frequency scaling, other processes) hits all rows alike. Before its timed call
a row runs its previous turn untimed (``--cold`` skips that), and the garbage collector
is off while rows run (``--keep-gc`` leaves it on); see :func:`run_interleaved`. Untimed
preparation (editing a bootstrap file) happens between the timings. Each pioneer row owns
its compiler and its token counter, so no row warms another's caches.
Timing starts with the setup's objects frozen out of the garbage collector. The history rows
run the real ``HistoryBudgeter`` over a SQLite store, once with the counts stored at
write time and once recounting every loaded message with tiktoken. The start-up rows time
whole processes. Ratios are to floor B's median; every floor and peer is first checked to
produce pioneer's exact text, so all rows do the same job, with one difference: the
floors join the full text to hash it, while pioneer continues the stable hash and joins
``full_system_text`` only when it is read (no provider adapter reads it), so a row that
also reads it stands next to the warm row.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field, Strict

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workload

import pioneer
from pioneer import CompiledPromptPayload, PromptCompiler
from pioneer.compile.bootstrap import fold_home
from pioneer.compile.boundary import BOUNDARY_MARKER
from pioneer.compile.inputs import (
    PromptCompileInput,
    PromptLimits,
    SectionInput,
    parse_compile_input,
)
from pioneer.compile.refs import count_ref_lines
from pioneer.files import builtin_dir
from pioneer.history import HistoryBudgeter, HistoryLimits, HistoryWindow, SqliteStore
from pioneer.history.artifacts import render_message
from pioneer.review.terminal import progress
from pioneer.tokens import TiktokenCounter, message_tokens

#: A fixed past mtime for the workload files (whole seconds, so no filesystem rounds it).
BASE_MTIME_NS = 1_700_000_000 * 10**9


@dataclass
class Row:
    """One benchmark row: untimed ``prepare(round)``, timed ``run(round)``, then an
    untimed ``check(round, result)`` that the run did its job."""

    name: str
    run: Callable[[int], object]
    prepare: Callable[[int], None] = lambda _round: None
    check: Callable[[int, object], None] = lambda _round, _result: None
    target: str = ""
    samples: list[int] = field(default_factory=list)


def _sha3(stable: str, dynamic: str, full: str) -> tuple[str, str, str]:
    return (
        hashlib.sha256(stable.encode()).hexdigest(),
        hashlib.sha256(dynamic.encode()).hexdigest(),
        hashlib.sha256(full.encode()).hexdigest(),
    )


def _full(stable: str, dynamic: str) -> str:
    return stable + BOUNDARY_MARKER + dynamic


class Workload:
    """The turns, their reference output, and what the floors and peers need for them."""

    def __init__(self, root: Path, rounds: int):
        self.root = root
        self.home = root / "home"
        workload.write_home(self.home)
        for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
            _set_mtime(self.home / name, 0)
        #: Each turn's input as a client sends it, and validated.
        self.dicts = [workload.compile_input(self.home, turn) for turn in range(rounds)]
        self.inputs = [parse_compile_input(data) for data in self.dicts]
        reference = PromptCompiler(token_counter=TiktokenCounter())
        self.payloads = [reference.compile(item) for item in self.inputs]
        profile = reference.load_profile("full").spec
        self.specs = {s.id: s for s in profile.sections}
        self.slot = next(s for s in profile.sections if s.source == "slot")
        self.files = {
            name: SimpleNamespace(
                name=name, path=str(self.home / name),
                heading_path=fold_home(str(self.home / name)),
                content=workload.bootstrap_text(name, 0),
            )
            for name in ("SOUL.md", "IDENTITY.md", "USER.md")
        }

    def plan(self, turn: int) -> list[tuple[str, str, str, dict[str, Any]]]:
        """Floor B's work for a turn: (stability, title, template, context) per kept section."""
        item = self.inputs[turn]
        contents = {s.id: s.content for s in [*item.runtime_sections, *item.dynamic_sections]}
        plan: list[tuple[str, str, str, dict[str, Any]]] = []
        for section in self.payloads[turn].sections:
            spec = self.specs.get(section.id, self.slot)
            kind, _, name = section.source.partition(":")
            context: dict[str, Any] = {}
            if kind == "file":
                context = {"file": self.files[name], "reminder": spec.reminder}
            elif kind == "input":
                context = {"content": str(getattr(item, name)).strip()}
            elif kind in ("runtime", "hook"):
                context = {"content": contents[section.id]}
            plan.append((section.stability, section.title, spec.template, context))
        return plan


def _set_mtime(path: Path, version: int) -> None:
    stamp = BASE_MTIME_NS + version * 10**9
    os.utime(path, ns=(stamp, stamp))


def write_revision(path: Path, data: bytes, version: int) -> None:
    """Write a new revision of an identity file (same size, new content, a new past
    mtime) with a few system calls; its bytes are left in the CPU caches, as any write is."""
    view = memoryview(data)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    _set_mtime(path, version)


# -- floors -------------------------------------------------------------------------


def floor_a(work: Workload) -> Row:
    texts = [
        ([s.text for s in p.sections if s.stability == "stable"],
         [s.text for s in p.sections if s.stability == "dynamic"])
        for p in work.payloads
    ]

    def run(turn: int) -> object:
        stable_parts, dynamic_parts = texts[turn]
        stable, dynamic = "\n\n".join(stable_parts), "\n\n".join(dynamic_parts)
        return _sha3(stable, dynamic, _full(stable, dynamic))

    return Row("floor A: join pre-rendered sections + 3 sha256", run)


def floor_b(work: Workload) -> Row:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(builtin_dir("templates"))),
        undefined=jinja2.StrictUndefined, autoescape=False,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    plans = [
        [(stability, title, env.get_template(name), context)
         for stability, title, name, context in work.plan(turn)]
        for turn in range(len(work.inputs))
    ]

    def render(turn: int) -> tuple[str, str]:
        stable: list[str] = []
        dynamic: list[str] = []
        for stability, title, template, context in plans[turn]:
            text = f"## {title}\n{template.render(context).strip()}"
            (stable if stability == "stable" else dynamic).append(text)
        return "\n\n".join(stable), "\n\n".join(dynamic)

    for turn, payload in enumerate(work.payloads):
        if _full(*render(turn)) != payload.full_system_text:
            raise SystemExit(f"floor B does not reproduce pioneer's text for turn {turn}")

    def run(turn: int) -> object:
        stable, dynamic = render(turn)
        return _sha3(stable, dynamic, _full(stable, dynamic))

    return Row("floor B: precompiled jinja2 + join + 3 sha256", run)


# -- pioneer ------------------------------------------------------------------------


def pioneer_warm(work: Workload, *, counted: bool = False, full: bool = False) -> Row:
    """A long-lived compiler; ``counted`` also asks for the manifest's token counts,
    ``full`` also reads ``full_system_text`` (joined on read; no provider needs it)."""
    compiler = PromptCompiler()
    counter = TiktokenCounter()
    compiler.compile(work.inputs[-1]).with_token_counts(counter)

    def run(turn: int) -> object:
        payload = compiler.compile(work.inputs[turn])
        if full:
            return payload.full_system_text
        return payload.with_token_counts(counter) if counted else payload

    name = "pioneer warm, only dynamic inputs changed"
    if counted or full:
        extra = "with_token_counts()" if counted else "read full_system_text"
        return Row(f"{name}, + {extra}", run)
    return Row(name, run)


#: The stored turns of the whole-round row's thread.
WHOLE_ROUND_TURNS = 20


def whole_round(package: Any, work: Any, root: Path, label: str = "pioneer") -> Row:
    """A warm whole round through the turn runner (``package.Agent``): ``next_body()`` of a
    new turn on a thread with stored turns, on the workload's home and compile input
    (history window and budget, recall, hooks, the compile, the request body, the audit).
    The turn is closed untimed; every call finds the same thread. ``package`` and
    ``work`` are a version's package and workload module (versus.py sets two side by
    side)."""
    folder = root / f"whole-round-{label}"
    home = folder / "home"
    work.write_home(home)
    for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
        _set_mtime(home / name, 0)
    texts = work.history_texts(WHOLE_ROUND_TURNS)
    agent = package.Agent(str(folder / "pioneer.db"), provider="anthropic",
                          model="claude-sonnet-4-5", compile_input=work.compile_input(home, 0),
                          runtime_facts=False)
    agent.store.ensure_thread("bench", model="claude-sonnet-4-5")
    for n in range(WHOLE_ROUND_TURNS):
        agent.store.add_turn("bench", user_text=texts[2 * n][1],
                             assistant_text=texts[2 * n + 1][1], turn_id=f"stored-{n}",
                             user_item_id=f"u{n}", assistant_item_id=f"a{n}")
    open_turns: list[Any] = []
    calls = iter(range(10**9))

    def close() -> None:
        while open_turns:
            open_turns.pop().close()

    def run(turn: int) -> object:
        opened = agent.turn("bench", f"Question {turn}: what is next?",
                            turn_id=f"round-{next(calls)}")
        open_turns.append(opened)
        return opened.next_body()

    def check(turn: int, result: object) -> None:
        assert isinstance(result, dict) and result["system"]
        close()

    run(0)
    close()
    return Row(f"{label}: warm whole round (Agent turn, next_body)", run,
               lambda _turn: close(), check)


def pioneer_bootstrap_changed(work: Workload, *, counted: bool) -> Row:
    home = work.root / f"home-edited-{counted}"
    shutil.copytree(work.home, home)
    inputs = [item.model_copy(update={"workspace_root": home}) for item in work.inputs]
    compiler = PromptCompiler()
    counter = TiktokenCounter()
    compiler.compile(inputs[-1]).with_token_counts(counter)

    # Every revision is made and encoded here, so the untimed step between the warm-up
    # and the timed call is the write itself and nothing else.
    revisions = [workload.bootstrap_text("USER.md", turn + 1).encode("utf-8")
                 for turn in range(len(inputs))]
    user_md = home / "USER.md"

    def prepare(turn: int) -> None:
        write_revision(user_md, revisions[turn], turn + 1)

    def run(turn: int) -> object:
        payload = compiler.compile(inputs[turn])
        return payload.with_token_counts(counter) if counted else payload

    def check(turn: int, result: object) -> None:
        # Searching the 61,000-character stable text costs about 25 µs: not timed.
        assert isinstance(result, CompiledPromptPayload)
        if f"(revision {turn + 1})" not in result.stable_system_text:
            raise SystemExit("the edited USER.md did not reach the prompt")

    name = "pioneer warm, USER.md edited + new turn"
    return Row(f"{name}, + with_token_counts()" if counted else name, run, prepare, check)


def pioneer_warm_dict(work: Workload) -> Row:
    """The warm row with each turn's input handed over as the dict a client sends, so the
    compiler validates it (the row beside it takes the validated model)."""
    compiler = PromptCompiler()
    compiler.compile(work.dicts[-1])

    def run(turn: int) -> object:
        return compiler.compile(work.dicts[turn])

    return Row("pioneer warm, only dynamic inputs changed, input as a dict", run,
               target="<= 1.2x the model row")


class _PlainSection(BaseModel):
    """A section input as a plain pydantic model: the fields, types and configuration of
    ``SectionInput`` (strict, frozen, no unknown keys), none of its checks."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    id: str
    title: str | None = None
    content: str
    max_chars: int | None = Field(default=None, ge=0)
    truncated: bool = False


class _PlainLimits(BaseModel):
    """``PromptLimits`` as a plain pydantic model, as ``_PlainSection`` is."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    max_chars_per_file: int | None = Field(default=None, ge=0)
    max_chars_total: int | None = Field(default=None, ge=0)


class _PlainInput(BaseModel):
    """``PromptCompileInput`` as a plain pydantic model, as ``_PlainSection`` is."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    workspace_root: Annotated[Path, Strict(False)] | None = None
    profile: str = Field(default="full", min_length=1)
    skills_prompt: str | None = None
    retry_instruction: str | None = None
    include_tool_recovery_policy: bool = False
    include_task_orchestration_policy: bool = False
    continue_generation_hint: bool = False
    runtime_sections: list[_PlainSection] = Field(default_factory=list)
    dynamic_sections: list[_PlainSection] = Field(default_factory=list)
    artifact_ref_count: int = Field(default=0, ge=0)
    dynamic_context: str | None = None
    extra_system: str | None = None
    limits: _PlainLimits = Field(default_factory=_PlainLimits)
    inputs: dict[str, Any] = Field(default_factory=dict)


def pioneer_warm_dict_floor(work: Workload) -> Row:
    """The dict row's floor: each turn's dict validated into plain pydantic models of the
    same fields (``_PlainInput``), without the edge models' checks (the section ids, the
    root path, lone surrogates in the texts), then the validated model compiled."""
    for plain, model in ((_PlainInput, PromptCompileInput), (_PlainSection, SectionInput),
                         (_PlainLimits, PromptLimits)):
        if list(plain.model_fields) != list(model.model_fields):
            raise SystemExit(f"{plain.__name__} no longer has the fields of {model.__name__}")
    compiler = PromptCompiler()
    compiler.compile(work.inputs[-1])

    def run(turn: int) -> object:
        _PlainInput.model_validate(work.dicts[turn])
        return compiler.compile(work.inputs[turn])

    return Row("input as a dict, floor: plain pydantic models, no checks", run)


def pioneer_fresh(work: Workload) -> Row:
    def run(turn: int) -> object:
        return PromptCompiler().compile(work.inputs[turn])

    return Row("pioneer first call in a fresh compiler", run, target="< 50 ms")


# -- peers --------------------------------------------------------------------------


def _peer_template(work: Workload) -> str:
    """One jinja2 template for the whole prompt, the same for both peers.

    It does what the profile does (conditions, headings, blank inputs left out) with no
    newline straight after a block tag, so it renders the same in any environment.
    """
    nl = "{{ '\\n\\n' }}"
    parts: dict[str, list[str]] = {"stable": [], "dynamic": []}
    for stability, title, name, context in work.plan(0):
        source = (builtin_dir("templates") / name).read_text("utf-8").strip()
        key = title.lower().replace(" ", "_").replace(".", "_").replace(":", "")
        head = f"## {title}\n"
        if "file" in context:
            var = key
            body = (
                f"### {{{{ {var}.name }}}} ({{{{ {var}.path }}}})\n{{{{ {var}.content }}}}"
                f"{{% if {var}_reminder %}}{{{{ '\\n\\n' if {var}.content else '\\n' }}}}"
                "This file is yours to keep current: update it as you learn more about who "
                "you are.{% endif %}"
            )
            snippet = f"{{% if {var} %}}{nl}{head}{body}{{% endif %}}"
        elif "content" in context:
            snippet = (f"{{% if {key} and {key}.strip() %}}{nl}{head}"
                       f"{{{{ {key}.strip() }}}}{{% endif %}}")
        else:
            spec = work.specs[next(s.id for s in work.specs.values() if s.title == title)]
            condition = spec.when or "true"
            snippet = f"{{% if {condition} %}}{nl}{head}{source}{{% endif %}}"
        parts[stability].append(snippet)
    return "".join(parts["stable"]) + "{{ boundary }}" + "".join(parts["dynamic"])


def peer_variables(work: Workload, turn: int) -> dict[str, Any]:
    variables: dict[str, Any] = {
        name: getattr(work.inputs[turn], name)
        for name in ("include_tool_recovery_policy", "include_task_orchestration_policy",
                     "continue_generation_hint")
    }
    # The policy's condition reads the refs the sections carry, as pioneer counts them.
    variables["artifact_ref_count"] = variables["artifact_refs"] = count_ref_lines(
        section.content for section in work.inputs[turn].runtime_sections)
    variables["boundary"] = BOUNDARY_MARKER
    for _stability, title, _name, context in work.plan(turn):
        key = title.lower().replace(" ", "_").replace(".", "_").replace(":", "")
        if "file" in context:
            variables[key] = context["file"]
            variables[f"{key}_reminder"] = context["reminder"]
        elif "content" in context:
            variables[key] = context["content"]
    return variables


def _peer_text(rendered: str) -> str:
    # The template opens every section with a separator; drop the one before each half.
    stable, _, dynamic = rendered.partition(BOUNDARY_MARKER)
    return stable.removeprefix("\n\n") + BOUNDARY_MARKER + dynamic.removeprefix("\n\n")


def peer_langchain(work: Workload) -> Row:
    from langchain_core.prompts import ChatPromptTemplate

    template = _peer_template(work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prompt = ChatPromptTemplate.from_messages([("system", template)],
                                                  template_format="jinja2")
    variables = [peer_variables(work, turn) for turn in range(len(work.inputs))]
    rendered = prompt.format_messages(**variables[0])[0].content
    if _peer_text(str(rendered)) != work.payloads[0].full_system_text:
        raise SystemExit("the langchain-core template does not reproduce pioneer's text")

    def run(turn: int) -> object:
        return prompt.format_messages(**variables[turn])

    return Row("langchain-core ChatPromptTemplate (jinja2)", run)


def peer_banks(work: Workload) -> Row:
    from banks import Prompt  # type: ignore[import-untyped]

    template = _peer_template(work)
    prompt = Prompt(template)
    variables = [peer_variables(work, turn) for turn in range(len(work.inputs))]
    if _peer_text(prompt.text(variables[0])) != work.payloads[0].full_system_text:
        raise SystemExit("the banks template does not reproduce pioneer's text")

    def run(turn: int) -> object:
        return prompt.text(variables[turn])

    return Row("banks Prompt.text", run)


# -- history ------------------------------------------------------------------------


class _Recounting:
    """A store view that counts every loaded message with tiktoken instead of trusting the
    stored counts: what budgeting costs without counts kept at write time."""

    def __init__(self, store: SqliteStore, counter: TiktokenCounter):
        self.store = store
        self.counter = counter

    def _tokens(self, rendered: str | None) -> int:
        return 0 if rendered is None else message_tokens(self.counter, rendered)

    def get_history_window(
        self, thread_id: str, limit: int, *, exclude_turn_id: str | None = None
    ) -> HistoryWindow:
        window = self.store.get_history_window(thread_id, limit, exclude_turn_id=exclude_turn_id)
        entries = tuple(
            dataclasses.replace(
                entry,
                user_tokens=self._tokens(
                    render_message(entry.user_text, entry.user_artifacts, "user")),
                assistant_tokens=self._tokens(
                    render_message(entry.assistant_text, entry.assistant_artifacts, "assistant")),
            )
            for entry in window.entries
        )
        return dataclasses.replace(window, entries=entries)


def history_rows(work: Workload) -> tuple[Row, Row]:
    store = SqliteStore(work.root / "history.db", counter=TiktokenCounter())
    store.ensure_thread("bench")
    texts = workload.history_texts()
    for (_, user), (_, reply) in zip(texts[::2], texts[1::2], strict=True):
        store.add_turn("bench", user_text=user, assistant_text=reply)
    limits = HistoryLimits.from_tokens(128_000, 16_000)
    stored = HistoryBudgeter(store, limits)
    counting = HistoryBudgeter(
        _Recounting(store, TiktokenCounter(cache_bytes=0)), limits  # type: ignore[arg-type]
    )
    # The first pass stores the thread's truncation cut and the second starts from it, so
    # the two decisions differ in how they word the cut; the messages sent must not.
    if stored.build("bench").messages != counting.build("bench").messages:
        raise SystemExit("the two history rows disagree")
    return (
        Row("history: budget 200 turns, stored counts", lambda _turn: stored.build("bench"),
            target="<= 1/50 of tiktoken"),
        Row("history: budget 200 turns, tiktoken counts", lambda _turn: counting.build("bench")),
    )


# -- running ------------------------------------------------------------------------


def settle() -> None:
    """What comes between setting rows up and timing them: the setup's objects (every
    turn's inputs and reference payloads) are not the rows' garbage, so they are frozen
    out of the collector."""
    gc.collect()
    gc.freeze()


def run_interleaved(
    rows: list[Row], rounds: int, *, keep_gc: bool = False, cold: bool = False,
    update: Callable[[int, int], None] = lambda _done, _total: None,
) -> None:
    """Each round runs every row once, in an order shuffled from a fixed seed, so drift
    in the machine hits all rows alike and no row always follows the same neighbour.

    Before its timed call, a row runs its previous turn untimed, as a loop that compiles
    every turn would have just done: the timing then measures the turn's own work, not
    what the neighbour before it (a 30 ms tiktoken pass, say) left in the CPU caches.
    ``cold`` skips that warm-up. Round 0 only warms up and is not counted. As ``timeit``
    does, the garbage collector is off while rows run (a collection is charged to
    whichever row allocates past the threshold, whoever made the garbage) and collects
    between rounds, untimed; ``keep_gc`` leaves it on. ``update(done, rounds)`` runs after
    each round, untimed (the progress bar on a terminal).
    """
    clock = time.perf_counter_ns
    order = random.Random(0)
    for turn in range(rounds):
        if not keep_gc:
            gc.disable()
        for row in order.sample(rows, len(rows)):
            if turn and not cold:
                row.run(turn - 1)
            row.prepare(turn)
            start = clock()
            result = row.run(turn)
            elapsed = clock() - start
            row.check(turn, result)
            # Freeing the result is part of the row's cost, as it was before the check.
            start = clock()
            del result
            elapsed += clock() - start
            if turn:
                row.samples.append(elapsed)
        gc.enable()
        if not keep_gc:
            gc.collect()
        update(turn + 1, rounds)


#: Row → the console script's arguments (a tuple; None: the text compile, filled in by
#: startup()) or the code of a ``python -c`` run. The second row is the baseline.
STARTUP: dict[str, str | tuple[str, ...] | None] = {
    "pioneer compile (text)": None,
    "python -c 'import jinja2, pydantic, jsonschema'": "import jinja2, pydantic, jsonschema",
    # What any program on pioneer's stack loads: BaseModel and pydantic-settings (the
    # baseline's `import pydantic` is lazy and loads neither).
    "python -c 'import jinja2, pydantic_settings; from pydantic import BaseModel'":
        "import jinja2, pydantic_settings; from pydantic import BaseModel",
    "pioneer --version": ("--version",),
}


def startup(home: Path, runs: int) -> dict[str, list[int]]:
    """Wall time of each start-up command, interleaved, after one untimed warm-up run.

    Bytecode is cached as a normal install does (pip compiles it), in a private cache
    folder, for pioneer and the baseline alike; without that, pioneer's own modules would
    be compiled from source on every start whenever PYTHONDONTWRITEBYTECODE is set.
    """
    script = Path(sys.executable).with_name("pioneer")
    pioneer = [str(script)] if script.exists() else [sys.executable, "-m", "pioneer"]
    commands = {
        # -q: the compile's warnings are nothing the table has a use for
        name: [sys.executable, "-c", code] if isinstance(code, str) else [
            *pioneer, *(code or ("compile", "-q", "--home", str(home)))]
        for name, code in STARTUP.items()
    }
    # No deployment file and no PIONEER_* variables: the built-in defaults only.
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PIONEER_") and key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(home.parent / "pycache")
    timings: dict[str, list[int]] = {name: [] for name in commands}
    for warm_up in [True] + [False] * runs:
        for name, command in commands.items():
            start = time.perf_counter_ns()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env,
                           cwd=home.parent)
            if not warm_up:
                timings[name].append(time.perf_counter_ns() - start)
    return timings


def _p95(samples: Sequence[int]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _fmt(ns: float) -> str:
    if ns >= 10**8:
        return f"{ns / 10**9:.3f} s"
    if ns >= 10**6:
        return f"{ns / 10**6:.2f} ms"
    return f"{ns / 10**3:.1f} µs"


def report(rows: list[Row], start: dict[str, list[int]] | None, out: Any) -> None:
    floor = statistics.median(next(r for r in rows if r.name.startswith("floor B")).samples)
    width = max(len(r.name) for r in rows) + 2
    print(f"{'row':<{width}}{'median':>11}{'p95':>11}{'x floor B':>11}  target", file=out)
    for row in rows:
        median = statistics.median(row.samples)
        print(
            f"{row.name:<{width}}{_fmt(median):>11}{_fmt(_p95(row.samples)):>11}"
            f"{median / floor:>11.3f}  {row.target}",
            file=out,
        )
    by_name = {r.name: statistics.median(r.samples) for r in rows}
    warm = by_name["pioneer warm, only dynamic inputs changed"]
    counted_warm = by_name["pioneer warm, only dynamic inputs changed, + with_token_counts()"]
    full_warm = by_name["pioneer warm, only dynamic inputs changed, + read full_system_text"]
    langchain = by_name["langchain-core ChatPromptTemplate (jinja2)"]
    banks = by_name["banks Prompt.text"]
    stored = by_name["history: budget 200 turns, stored counts"]
    counted = by_name["history: budget 200 turns, tiktoken counts"]
    print(file=out)
    print(f"langchain-core / pioneer warm: {langchain / warm:.1f}x "
          f"({langchain / full_warm:.1f}x reading full_system_text, "
          f"{langchain / counted_warm:.1f}x with token counts)", file=out)
    print(f"banks / pioneer warm:          {banks / warm:.2f}x "
          f"({banks / counted_warm:.2f}x with token counts)", file=out)
    print(f"history stored / tiktoken:     1/{counted / stored:.0f} (target <= 1/50)", file=out)
    as_dict = by_name["pioneer warm, only dynamic inputs changed, input as a dict"]
    plain = by_name["input as a dict, floor: plain pydantic models, no checks"]
    print(f"input as a dict / as a model:  {as_dict / warm:.2f}x (target <= 1.2x; "
          f"plain pydantic models, no checks: {plain / warm:.2f}x)", file=out)
    if start is not None:
        names = list(start)
        base = statistics.median(start[names[1]])
        width = max(width, *(len(name) + 2 for name in names))
        print(file=out)
        print(f"{'process start-up':<{width}}{'median':>11}{'p95':>11}{'x baseline':>11}",
              file=out)
        for name in names:
            median = statistics.median(start[name])
            print(f"{name:<{width}}{_fmt(median):>11}{_fmt(_p95(start[name])):>11}"
                  f"{median / base:>11.2f}  {'<= 1.5' if name == names[0] else ''}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="interleaved rounds (200)")
    parser.add_argument("--startup-runs", type=int, default=20,
                        help="process start-ups per command (20; 0 skips the rows)")
    parser.add_argument("--keep-gc", action="store_true",
                        help="leave the garbage collector on while rows run")
    parser.add_argument("--cold", action="store_true",
                        help="no untimed warm-up call before each timed one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pioneer-bench-") as folder:
        work = Workload(Path(folder), args.rounds)
        rows = [
            floor_a(work),
            floor_b(work),
            pioneer_warm(work),
            pioneer_warm(work, full=True),
            pioneer_warm(work, counted=True),
            pioneer_warm_dict(work),
            pioneer_warm_dict_floor(work),
            pioneer_bootstrap_changed(work, counted=False),
            pioneer_bootstrap_changed(work, counted=True),
            pioneer_fresh(work),
            peer_langchain(work),
            peer_banks(work),
            *history_rows(work),
            whole_round(pioneer, workload, work.root),
        ]
        settle()
        with progress(sys.stderr, "timing rounds", args.rounds) as update:
            run_interleaved(rows, args.rounds, keep_gc=args.keep_gc, cold=args.cold,
                            update=update)
        start = startup(work.home, args.startup_runs) if args.startup_runs else None
        p = work.payloads[0]
        print(f"workload: full profile, {len(p.stable_system_text):,} stable + "
              f"{len(p.dynamic_system_text):,} dynamic chars, {len(p.sections)} sections; "
              f"{args.rounds} interleaved rounds"
              f"{', cold (no warm-up call)' if args.cold else ''}, garbage collector "
              f"{'on' if args.keep_gc else 'off while timing'}; "
              f"Python {sys.version.split()[0]}")
        print()
        report(rows, start, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
