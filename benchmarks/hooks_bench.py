"""What hooks and the structured-section renderers cost on a turn.

    python benchmarks/hooks_bench.py [--rounds N]

Rows, timed in interleaved rounds so machine drift hits every row alike (medians in µs):

* ``compile (floor)``: ``PromptCompiler.compile`` with the same sections already rendered
  and passed as runtime sections: what a turn costs with no hook machinery at all;
* ``round, blocking hooks``: a memory hook, a thread-context hook and the
  AGENTS.md hook (a three-level walk) run inline, then the same compile;
* ``round, deadline hooks``: the same hooks with a deadline, so each runs on a
  worker of the deadline pool (the price of an enforced deadline);
* one row per renderer on its own.

Then ``--hooks`` (1,000) trivial hooks in one phase, blocking and with a deadline, in
``--many-rounds`` interleaved rounds: the cost per hook of each, and the difference (what
handing a hook to the deadline pool and waiting for it adds; a thread per hook cost
0.55-0.76 ms each).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pioneer import HookRegistry, PromptCompileInput, PromptCompiler
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.compile.manifest import CompiledPromptPayload
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext, TurnContext
from pioneer.sections import (
    ActiveSkill,
    MemoryItem,
    MemoryRecall,
    Skill,
    ThreadSnippet,
    build_skills_prompt,
    render_memory_recall,
    render_thread_context,
    thread_context_contribution,
)
from pioneer.sections.agents_md import agents_md_subscription

RECALL = MemoryRecall(tools=["memory_search", "memory_remember"], recalled=[
    MemoryItem("user:1", "preference", f"Remembered fact number {n}, " * 6) for n in range(8)
])
SNIPPETS = [
    ThreadSnippet(f"t{n}", "i", "c", "user", "user_visible_thread_item", 0.9 - n / 10,
                  "An earlier message about the project plan. " * 5, thread_id="bench")
    for n in range(8)
]
SKILLS = [ActiveSkill(Skill(f"ws/s{n}", f"Skill {n}", "Does a thing.", f"/skills/s{n}",
                            body="Body text. " * 40), "path_match") for n in range(5)]



def compile_round(compiler: PromptCompiler, base: PromptCompileInput, hooks: HookRegistry,
                  turn: TurnContext | None = None) -> CompiledPromptPayload:
    """One round: the hook phases, then the one compile of the round's whole input."""
    return compiler.compile(hooks.run_hooks(compiler, base, turn=turn).round_input(base))

def registry(root: Path, deadline: int | None) -> HookRegistry:
    hooks = HookRegistry()
    hooks.add(agents_md_subscription(root))

    def memory(context: HookContext) -> PromptSectionContribution:
        return PromptSectionContribution(
            contribution_id="m", section_id="memory_recall", domain="memory",
            content=render_memory_recall(RECALL, context.env) or "",
        )

    hooks.hook("bench.memory", phase="turn.pre_prompt_context", deadline_ms=deadline)(memory)
    hooks.hook("bench.thread", phase="turn.pre_prompt_context", deadline_ms=deadline)(
        lambda context: thread_context_contribution(SNIPPETS, context.env)
    )
    return hooks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--hooks", type=int, default=1000)
    parser.add_argument("--many-rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "workspace"
        (root / "a" / "b").mkdir(parents=True)
        (root / "AGENTS.md").write_text("Keep commits small.\n" * 30)
        home = Path(folder) / "home"
        home.mkdir()
        compiler = PromptCompiler(count_tokens=False)
        env = compiler.templates.env
        base = PromptCompileInput(workspace_root=home)
        turn = TurnContext(thread_folder="a/b")
        blocking, deadline = registry(root, None), registry(root, 1500)
        rendered = compile_round(compiler, base, blocking, turn=turn)
        floor_input = base.model_copy(update={"runtime_sections": [
            RuntimeSectionInput(id=s.id, content=s.text.split("\n", 1)[1])
            for s in rendered.sections if s.source.startswith("runtime:")
        ]})
        rows: dict[str, Callable[[], object]] = {
            "compile (floor)": lambda: compiler.compile(floor_input),
            "round, blocking hooks": lambda: compile_round(compiler, base, blocking,
                                                                 turn=turn),
            "round, deadline hooks": lambda: compile_round(compiler, base, deadline,
                                                                 turn=turn),
            "render_memory_recall": lambda: render_memory_recall(RECALL, env),
            "render_thread_context": lambda: render_thread_context(SNIPPETS, env),
            "build_skills_prompt": lambda: build_skills_prompt(SKILLS, env),
        }
        samples: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.rounds):
            for name, run in rows.items():
                start = time.perf_counter()
                run()
                samples[name].append((time.perf_counter() - start) * 1e6)
    floor = statistics.median(samples["compile (floor)"])
    print(f"{'row':32} {'median µs':>10} {'p90 µs':>10} {'x floor':>8}")
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:32} {median:10.0f} {p90:10.0f} {median / floor:8.2f}")
    many_hooks(args.hooks, args.many_rounds)
    return 0


def trivial(count: int, deadline: int | None) -> HookRegistry:
    hooks = HookRegistry()
    for n in range(count):
        hooks.hook(f"bench.h{n}", phase="turn.pre_prompt_context", deadline_ms=deadline)(
            lambda context: None)
    return hooks


def many_hooks(count: int, rounds: int) -> None:
    """Per hook: ``count`` trivial hooks of one phase, blocking and with a deadline."""
    with tempfile.TemporaryDirectory() as folder:
        compiler = PromptCompiler(count_tokens=False)
        base = PromptCompileInput(workspace_root=Path(folder))
        rows = {"blocking": trivial(count, None), "deadline": trivial(count, 5000)}
        samples: dict[str, list[float]] = {name: [] for name in rows}
        compile_round(compiler, base, rows["deadline"])  # the pool's workers start here
        for _ in range(rounds):
            for name, hooks in rows.items():
                start = time.perf_counter()
                compile_round(compiler, base, hooks)
                samples[name].append((time.perf_counter() - start) * 1e6 / count)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\n{count:,} trivial hooks in one phase, {rounds} rounds (µs per hook)")
    print(f"{'row':32} {'median µs':>10}")
    for name, median in medians.items():
        print(f"{f'{count:,} hooks, {name}':32} {median:10.1f}")
    print(f"{'deadline pool, added per hook':32} {medians['deadline'] - medians['blocking']:10.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
