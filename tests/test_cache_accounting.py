"""Every cache entry is charged for what it keeps alive, its key and its value: the bytes
``cache_stats()`` reports match a deep measure of what the caches hold, and a process
that compiles many large inputs stays within its budgets."""

from __future__ import annotations

import enum
import gc
import json
import subprocess
import sys
import types
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import PioneerSettings, PromptCompileInput, PromptCompiler
from pioneer.caches import ENTRY_OVERHEAD, SHARED_TEXT, LruCache, deep_bytes, entry_bytes
from pioneer.compile import bootstrap as bootstrap_module
from pioneer.compile.inputs import RuntimeSectionInput
from pioneer.compile.plan import freeze
from pioneer.compile.render import section_bytes

#: Objects the whole process shares: never part of one entry.
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, enum.Enum)
#: How far above the reference measure (and its repeats) the cache's count may be.
TOLERANCE = 0.02


def reference_bytes(*roots: object) -> tuple[int, int]:
    """A measure that knows nothing of the types involved: every object the garbage
    collector says a root refers to, transitively, by ``sys.getsizeof``, each once (and
    a dict's keys, which the collector leaves out when they are all strings; ``None``
    and the booleans, one object each for the whole process, are left out).

    Also how much more a count may say that counts a text under ``SHARED_TEXT``
    characters, or a number, each time it is met: the size of every repeat.
    """
    seen: set[int] = set()
    stack = list(roots)
    total = repeats = 0
    while stack:
        obj = stack.pop()
        if obj is None or type(obj) is bool or isinstance(obj, _SHARED):
            continue
        if id(obj) in seen:
            if (type(obj) is str and len(obj) < SHARED_TEXT) or type(obj) in (int, float):
                repeats += sys.getsizeof(obj)
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
        if type(obj) is dict:
            stack.extend(obj)
    return total, repeats


def close(reported: int, measured: tuple[int, int]) -> bool:
    """The count is the measure, up to the repeats it may count again (and a few bytes)."""
    once, repeats = measured
    return once - 64 <= reported <= once + repeats + TOLERANCE * once + 64


TEXTS = st.one_of(st.text(max_size=40), st.text(alphabet="ab", min_size=500, max_size=3000),
                  st.text(alphabet="\u00e9\u4e2d\U0001f600", max_size=200))
SECTIONS = st.builds(
    lambda i, c, t: RuntimeSectionInput(id=f"s{i}", title=t, content=c),
    st.integers(0, 99), TEXTS, st.text(alphabet="xyz", max_size=10))
LEAVES = st.one_of(TEXTS, st.binary(max_size=300), st.integers(), st.floats(), st.none(),
                   st.booleans(), SECTIONS,
                   st.builds(PurePosixPath, st.text(alphabet="abc/", max_size=30)))
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=8), inner, max_size=5)),
    max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(key=VALUES, value=VALUES)
def test_an_entry_is_charged_its_key_and_value_as_a_deep_measure_finds_them(
    key: Any, value: Any,
) -> None:
    cache: LruCache[Any, Any] = LruCache("test", 1 << 40)
    frozen = freeze(key)  # a key as the compiler makes it (a frozen list holds models)
    cache.put(frozen, value)
    reported = cache.stats().bytes
    once, repeats = reference_bytes(frozen, value)
    measured = (ENTRY_OVERHEAD + once, repeats)
    assert close(reported, measured), (reported, measured)


def test_deep_bytes_measures_any_depth_without_recursion() -> None:
    deep: Any = "x" * 1000
    for _ in range(200_000):
        deep = [deep]
    assert deep_bytes(deep) >= 200_000 * sys.getsizeof([1]) + 1000


PROFILE = """name = "acct"

[[sections]]
id = "count"
title = "Runtime sections"
stability = "dynamic"
template = "count.md.j2"
when = "runtime_sections|length > 0"

[[sections]]
id = "rest"
title = "Runtime"
stability = "dynamic"
source = "slot"
template = "content.md.j2"
"""
BUDGETS = ("stable", "section", "bootstrap", "file", "condition", "placement", "hint")


def _deployment(tmp_path: Path) -> Path:
    (tmp_path / "p").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "p" / "acct.toml").write_text(PROFILE, encoding="utf-8")
    (tmp_path / "t" / "count.md.j2").write_text(
        "{{ runtime_sections|length }} sections; the first: {{ runtime_sections[0].id }}\n",
        encoding="utf-8")
    (tmp_path / "home" / "SOUL.md").write_text("Calm. \u00e9\U0001f600\n" * 50,
                                               encoding="utf-8")
    return tmp_path


def _compiler(root: Path, budget: int) -> PromptCompiler:
    return PromptCompiler(PioneerSettings(
        profile_path=[root / "p"], template_path=[root / "t"],
        **{f"{name}_cache_bytes": budget for name in BUDGETS}))


def _turn(compiler: PromptCompiler, root: Path, number: int, size: int,
          profile: str = "acct") -> None:
    compiler.compile(PromptCompileInput(
        workspace_root=root / "home", profile=profile, dynamic_context=f"turn {number}",
        runtime_sections=[RuntimeSectionInput(id=f"big_{number}", title="Big",
                                              content=f"{number:06d}" + "x" * size)]))


def test_what_the_compilers_caches_report_is_what_they_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Files are trusted as soon as they are written, so the bootstrap caches keep them.
    monkeypatch.setattr(bootstrap_module, "RACY_NS", 0)
    root = _deployment(tmp_path)
    compiler = _compiler(root, 64 << 20)
    for number in range(12):
        _turn(compiler, root, number, 20_000)
        _turn(compiler, root, number, 3_000, profile="full")
    caches: list[LruCache[Any, Any]] = [
        compiler._stable_memo, compiler._section_memo, compiler._conditions,
        compiler._placements, compiler._id_hints, compiler._bootstrap_loader.cache,
        compiler._bootstrap_loader.reader.cache]
    for cache in caches:
        stats = cache.stats()
        measures = [reference_bytes(key, held[0]) for key, held in cache._items.items()]
        measured = (sum(ENTRY_OVERHEAD + once for once, _ in measures),
                    sum(repeats for _, repeats in measures))
        assert stats.entries > 0, stats.name
        assert close(stats.bytes, measured), (stats.name, stats.bytes, measured)
    conditions = compiler._conditions.stats()
    assert conditions.bytes > 12 * 20_000  # each key holds its turn's input list


@settings(max_examples=40, deadline=None)
@given(contents=st.lists(st.tuples(TEXTS, st.text(max_size=30)), min_size=1, max_size=4),
       context=TEXTS)
def test_a_kept_section_is_counted_as_the_walk_counts_it(
    contents: list[tuple[str, str]], context: str,
) -> None:
    # The sections cache counts a kept section without walking it (its fixed part is
    # measured once per shape); the count is the walk's, to the byte.
    compiler = PromptCompiler(PioneerSettings())
    compiler.compile(PromptCompileInput(
        workspace_root=Path("nowhere"), profile="full", dynamic_context=context,
        runtime_sections=[RuntimeSectionInput(id=f"memory_recall_{n}" if n else "memory_recall",
                                              title=title or None, content=content)
                          for n, (content, title) in enumerate(contents)]))
    entries = compiler._section_memo._items
    assert entries
    for key, (value, size) in entries.items():
        assert size == entry_bytes(key, value) == section_bytes(key, value)


RSS_SCRIPT = """
import gc, json, sys
from pathlib import Path
sys.path[:0] = [sys.argv[3]]
from tests.test_cache_accounting import _compiler, _turn

def rss():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024

root, budget = Path(sys.argv[1]), int(sys.argv[2])
compiler = _compiler(root, budget)
for number in range(20):
    _turn(compiler, root, number, 400_000)
gc.collect()
before = rss()
for number in range(20, 320):
    _turn(compiler, root, number, 400_000)
gc.collect()
print(json.dumps({"growth": rss() - before,
                  "caches": [[s.name, s.entries, s.bytes, s.budget]
                             for s in compiler.cache_stats()]}))
"""


def test_300_compiles_of_400_kb_inputs_stay_within_the_budgets(tmp_path: Path) -> None:
    # A `when` and a template that read `runtime_sections` key their results on the
    # whole input list: 300 distinct 400 KB inputs once grew a process by 124 MiB while
    # the conditions cache reported 0 MiB.
    root = _deployment(tmp_path)
    budget = 2 << 20
    done = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, str(root), str(budget),
         str(Path(__file__).parent.parent)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    caches = {name: (entries, used, held) for name, entries, used, held in found["caches"]}
    for name, (_, used, held) in caches.items():
        assert used <= held == budget, name
    assert caches["conditions"][0] >= 1 and caches["sections"][0] >= 1
    # Every compile's input is let go once its entries are evicted: the process grows by
    # less than the budgets together (the allocator keeps some freed memory).
    assert found["growth"] < len(BUDGETS) * budget + (8 << 20), found
