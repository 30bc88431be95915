"""Every cache entry is charged for what it keeps alive, its key and its value: the bytes
``cache_stats()`` reports match a deep measure of what a cache holds; and a process that
compiles many large inputs keeps none of them (the compiler keeps no cache of compiles)."""

from __future__ import annotations

import enum
import gc
import json
import subprocess
import sys
import types
from pathlib import Path, PurePosixPath
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pioneer import PioneerSettings, PromptCompileInput, PromptCompiler
from pioneer.caches import ENTRY_OVERHEAD, SHARED_TEXT, LruCache, deep_bytes
from pioneer.compile.inputs import RuntimeSectionInput

#: Objects the whole process shares: never part of one entry.
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, enum.Enum)
#: How far above the reference measure (and its repeats) the cache's count may be.
TOLERANCE = 0.02


def hashable(value: Any) -> Any:
    """``value`` as a key: lists and mappings as tuples, all the way down."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *map(hashable, value))
    if isinstance(value, dict):
        return ("mapping", *((key, hashable(item)) for key, item in sorted(value.items())))
    return value


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
    frozen = hashable(key)  # a key of nested tuples (a list of models becomes a tuple)
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


def _compiler(root: Path) -> PromptCompiler:
    return PromptCompiler(PioneerSettings(profile_path=[root / "p"], template_path=[root / "t"]))


def _turn(compiler: PromptCompiler, root: Path, number: int, size: int,
          profile: str = "acct") -> None:
    compiler.compile(PromptCompileInput(
        workspace_root=root / "home", profile=profile, dynamic_context=f"turn {number}",
        runtime_sections=[RuntimeSectionInput(id=f"big_{number}", title="Big",
                                              content=f"{number:06d}" + "x" * size)]))


RSS_SCRIPT = """
import gc, json, sys
from pathlib import Path
sys.path[:0] = [sys.argv[3]]
from tests.test_cache_accounting import _compiler, _turn

def rss():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024

root = Path(sys.argv[1])
compiler = _compiler(root)
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


def test_300_compiles_of_400_kb_inputs_keep_none_of_them(tmp_path: Path) -> None:
    # A `when` and a template that read `runtime_sections` once keyed cached results on
    # the whole input list: 300 distinct 400 KB inputs grew a process by 124 MiB.
    root = _deployment(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, str(root), "0",
         str(Path(__file__).parent.parent)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["caches"] == []
    # Every compile's input is let go: the process grows by less than two of them
    # (the allocator keeps some freed memory).
    assert found["growth"] < (8 << 20), found
