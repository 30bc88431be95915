"""Recorded payloads: the sha256 of every golden case's outputs and provider bodies, of the
benchmark workload's compiles and bodies, and of the runner's bodies on that workload.

``payload_hashes.json`` was written by this file from the code as it was before the
compile path was simplified (one compile per round); the payloads must stay byte for
byte the same. The manifest's ``compiler_version`` is the one field that may change
with a release: it is hashed as ``"*"``, everything else as written.

    PYTHONPATH=$PWD python tests/test_payload_hashes.py   # rewrite the record
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
RECORD = HERE / "payload_hashes.json"
CASES = HERE / "cases"
sys.path.insert(0, str(HERE.parent / "benchmarks"))
sys.path.insert(0, str(HERE.parent / "examples"))

import agent_loop  # noqa: E402
import workload  # noqa: E402

from pioneer import (  # noqa: E402
    Agent,
    CompiledPromptPayload,
    PioneerError,
    PromptCompiler,
    ToolSpec,
)
from pioneer.compile.inputs import parse_compile_input  # noqa: E402
from pioneer.providers import PROVIDERS, ChatMessage, ChatRequest  # noqa: E402

WEATHER = ToolSpec(
    name="get_weather", description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]},
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _manifest(payload: CompiledPromptPayload) -> str:
    data = json.loads(payload.manifest.to_json())
    data["compiler_version"] = "*"
    return json.dumps(data, indent=2, ensure_ascii=False)


def _body(body: dict[str, Any]) -> str:
    return json.dumps(body, indent=2, ensure_ascii=False)


def _payload(prefix: str, payload: CompiledPromptPayload, out: dict[str, str]) -> None:
    out[f"{prefix}/stable"] = _sha(payload.stable_system_text)
    out[f"{prefix}/dynamic"] = _sha(payload.dynamic_system_text)
    out[f"{prefix}/full"] = _sha(payload.full_system_text)
    out[f"{prefix}/manifest"] = _sha(_manifest(payload))


def _bodies(prefix: str, request: ChatRequest, out: dict[str, str]) -> None:
    for provider, adapter in PROVIDERS.items():
        out[f"{prefix}/body/{provider}"] = _sha(_body(adapter(request)))


@contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _case(case: Path, root: Path, out: dict[str, str]) -> None:
    """One golden case as tests/test_cases.py runs it, plus the body of each provider."""
    folder = root / case.name
    folder.mkdir()
    with _inside(folder):
        if (case / "home").is_dir():
            shutil.copytree(case / "home", "home", symlinks=True)
        else:
            Path("home").mkdir()
        data = json.loads((case / "input.json").read_text("utf-8"))
        data.setdefault("workspace_root", "home")
        prefix = f"case/{case.name}"
        try:
            compiler = PromptCompiler(
                profile_path=[case / "profiles"] if (case / "profiles").is_dir() else [],
                template_path=[case / "templates"] if (case / "templates").is_dir() else [],
            )
            payload = compiler.compile(parse_compile_input(data)).with_token_counts()
        except PioneerError as error:
            out[f"{prefix}/error"] = _sha(error.render().replace(str(case), "$CASE"))
            return
        _payload(prefix, payload, out)
        _bodies(prefix, ChatRequest(model="test-model", compiled_prompt=payload,
                                    messages=[ChatMessage.user("Hello.")], tools=[WEATHER]),
                out)


def _workload(root: Path, out: dict[str, str]) -> None:
    """The benchmark workload: three turns' compiles, and bodies with 20 history turns."""
    home = root / "workload-home"
    workload.write_home(home)
    compiler = PromptCompiler()
    history = [ChatMessage.user(text) if role == "user" else ChatMessage.assistant(text)
               for role, text in workload.history_texts(20)]
    for turn in range(3):
        data = workload.compile_input(home, turn)
        data["workspace_root"] = "workload-home"
        with _inside(root):
            payload = compiler.compile(data)
        prefix = f"workload/turn-{turn}"
        _payload(prefix, payload, out)
        _bodies(prefix, ChatRequest(model="test-model", compiled_prompt=payload,
                                    messages=[*history, ChatMessage.user(f"Turn {turn}.")],
                                    tools=[WEATHER]), out)


def _runner(root: Path, out: dict[str, str]) -> None:
    """The runner's bodies on the workload's home and input: hooks, recall, tools."""
    for provider in agent_loop.PROVIDER_CHOICES:
        folder = root / f"runner-{provider}"
        folder.mkdir()
        with _inside(folder):
            workload.write_home(Path("home"))
            base = workload.compile_input(Path("home"), 0)
            base["workspace_root"] = "home"
            with Agent("pioneer.db", provider=provider, model=agent_loop.MODELS[provider],
                       hooks=agent_loop.hooks(), tools=[agent_loop.READ_FILE],
                       compile_input=base, runtime_facts=False) as agent:
                for number in range(3):
                    turn = agent.turn("thread-1", f"Question {number}: what next?",
                                      turn_id=f"turn-{number}")
                    for step_no, calls in enumerate(agent_loop.script(number)):
                        body = turn.next_body()
                        prefix = f"runner/{provider}/turn-{number}/round-{step_no}"
                        out[f"{prefix}/body"] = _sha(_body(body))
                        manifest = json.loads(turn.rounds[-1].manifest.to_json())
                        manifest["compiler_version"] = "*"
                        out[f"{prefix}/manifest"] = _sha(json.dumps(manifest, indent=2))
                        plan = turn.rounds[-1].cache
                        step = turn.receive(agent_loop.response(
                            provider, agent_loop.MODELS[provider],
                            "" if calls else f"Answer {number}.", calls,
                            agent_loop.usage(provider, plan, 40)))
                        for call in step.runnable:
                            turn.add_tool_result(call.id, agent_loop.run_tool(call))
                        if step.done:
                            break
                    turn.finish()


def payload_hashes() -> dict[str, str]:
    """Every recorded payload's sha256, by a name that says where it came from."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        for case in sorted(p for p in CASES.iterdir() if (p / "input.json").is_file()):
            _case(case, root, out)
        _workload(root, out)
        _runner(root, out)
    return out


def test_payloads_are_byte_identical_to_the_record() -> None:
    recorded = json.loads(RECORD.read_text("utf-8"))
    actual = payload_hashes()
    assert len(recorded) > 250
    changed = sorted(k for k in recorded if actual.get(k) != recorded[k])
    added = sorted(set(actual) - set(recorded))
    assert not changed and not added, f"payloads changed: {changed[:20]}; new: {added[:20]}"


if __name__ == "__main__":
    RECORD.write_text(json.dumps(payload_hashes(), indent=1, sort_keys=True) + "\n", "utf-8")
