"""The benchmark workload: one deterministic turn of a busy agent, built from a seed.

A runtime home whose ``SOUL.md``, ``IDENTITY.md`` and ``USER.md`` hold 20,000 characters
each; a compile input for the ``full`` profile with every dynamic section filled; and a
200-turn history of about 300 cl100k tokens per message. Text mixes prose, code and
non-ASCII so that both the UTF-8 paths and the tokenizer see realistic material. The
same seed always gives the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE_CHARS = 20_000
HISTORY_TURNS = 200

_WORDS = """the agent reads a file before it edits it and keeps the user informed about every
step it takes while the tests run in the background and the report is written to the
workspace so that the next turn can pick up where this one stopped without guessing what
happened earlier in the thread or which tool produced which result""".split()
_FOREIGN = """Grüße aus Köln — naïve café déjà vu; 東京で会議があります。 Привет, мир!
Ελληνικά γράμματα. मौसम अच्छा है। 🙂 emoji 🚀 and “quotes” … ½ ≤ ≥ →""".split()
_CODE = [
    "def load(path: Path) -> dict[str, Any]:\n    with path.open() as handle:\n"
    "        return json.load(handle)\n",
    "for (let i = 0; i < items.length; i++) {\n  total += items[i].price * items[i].qty;\n}\n",
    "SELECT id, title FROM turns WHERE thread_id = ? ORDER BY created_at DESC LIMIT 200;\n",
    "fn main() {\n    let xs: Vec<u32> = (0..10).map(|x| x * x).collect();\n"
    "    println!(\"{:?}\", xs);\n}\n",
]


def _paragraph(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return "```\n" + rng.choice(_CODE) + "```"
    if kind == 1:
        return " ".join(rng.choice(_FOREIGN + _WORDS) for _ in range(rng.randint(12, 30))) + "."
    words = [rng.choice(_WORDS) for _ in range(rng.randint(20, 60))]
    return " ".join(words).capitalize() + "."


def text(rng: random.Random, chars: int, prefix: str = "") -> str:
    """Exactly ``chars`` characters of mixed prose, code and non-ASCII, no outer blanks."""
    parts = [prefix] if prefix else []
    size = len(prefix)
    while size < chars + 2:
        paragraph = _paragraph(rng)
        parts.append(paragraph)
        size += len(paragraph) + 2
    body = "\n\n".join(parts)[:chars]
    return body[:-1].rstrip() + "." if body[-1].isspace() else body


def bootstrap_text(name: str, version: int) -> str:
    """The content of one identity file; ``version`` changes its first line."""
    rng = random.Random(f"{name}:file")
    return text(rng, FILE_CHARS, prefix=f"# {name} (revision {version})")


def write_home(home: Path) -> None:
    """Create the runtime home with the three 20,000-char identity files."""
    home.mkdir(parents=True, exist_ok=True)
    for name in ("SOUL.md", "IDENTITY.md", "USER.md"):
        (home / name).write_text(bootstrap_text(name, 0), encoding="utf-8")


def compile_input(home: Path, turn: int) -> dict[str, Any]:
    """The compile input of one turn: every dynamic section filled.

    Only per-turn material changes with ``turn``: the dynamic context, the thread
    recall and the retry instruction. Everything the stable sections read is fixed.
    """
    rng = random.Random("input")
    turn_rng = random.Random(f"turn:{turn}")

    def runtime(section_id: str, chars: int, title: str | None = None) -> dict[str, Any]:
        item: dict[str, Any] = {"id": section_id, "content": text(rng, chars)}
        if title:
            item["title"] = title
        return item

    # The recalled message carries three artifacts: their ref lines bring the Artifact
    # References policy, as refs in a real thread recall do.
    refs = "".join(
        f'\n- artifactId=art-{n}, versionId=v1, name="file{n}.md", kind=document, size=2 KB.'
        for n in range(3)
    )
    thread = {"id": "thread_context", "content": text(turn_rng, 1500, f"turn {turn}") + refs}
    return {
        "workspace_root": str(home),
        "profile": "full",
        "include_tool_recovery_policy": True,
        "include_task_orchestration_policy": True,
        "continue_generation_hint": True,
        "skills_prompt": "[Skills]\n" + text(rng, 1200),
        "retry_instruction": f"Turn {turn}: the last call failed with exit_code=2; "
        "fix the path and retry once.",
        "dynamic_context": text(turn_rng, 600, f"Turn {turn} context."),
        "extra_system": "## Runtime\nlocal time 2026-11-29 10:00 UTC, os linux",
        "runtime_sections": [
            runtime("current_permissions", 400),
            runtime("memory_recall", 1500),
            thread,
            runtime("request_tools.hidden_domains", 600),
            runtime("agents_md", 4000),
            runtime("pioneer_cli_runtime_context", 1000),
            runtime("execution_continuation", 1200),
            runtime("custom.runtime", 500, "Custom Runtime"),
        ],
        "dynamic_sections": [
            runtime("hook.alpha", 800),
            runtime("hook.beta", 800, "Beta"),
        ],
    }


@dataclass(frozen=True, slots=True)
class HistoryMessage:
    """One stored message: its text and the token count the store kept at write time."""

    role: str
    text: str
    tokens: int


def history_texts(turns: int = HISTORY_TURNS) -> list[tuple[str, str]]:
    """``(role, text)`` for a ``turns``-turn conversation, about 300 tokens a message."""
    rng = random.Random("history")
    out: list[tuple[str, str]] = []
    for turn in range(turns):
        out.append(("user", text(rng, rng.randint(1150, 1600), f"[{turn}] ")))
        out.append(("assistant", text(rng, rng.randint(1150, 1600))))
    return out
