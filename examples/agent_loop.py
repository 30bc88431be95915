"""An agent loop through pioneer's turn runner, with a scripted model and no network.

    python examples/agent_loop.py --home DIR --store PATH_OR_URL \
        --provider {anthropic,openai-chat,openai-responses,gemini} --turns N

Each turn of one thread goes through :class:`pioneer.Agent`: the runner hands out each
round's request body, the scripted model answers it with the provider API's own response
JSON (tool calls in some rounds, and usage whose cache counts are what the round's cache
plan expects), and the runner reads the reply back, judges the tool calls, and stores
the turn with its record. A hook registers the memory tools (hidden until the model asks
for them with ``request_tools``) and another recalls a memory into the prompt. The last
line printed is ``thread=<thread id> turn=<last turn id>``, ready for
``pioneer explain <turn> --db <store>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pioneer import (
    Agent,
    HookRegistry,
    PioneerError,
    ProviderName,
    ToolSpec,
    ensure_runtime_home,
)
from pioneer.audit import CachePlan
from pioneer.hooks.models import PromptSectionContribution
from pioneer.hooks.registry import HookContext
from pioneer.providers import ToolCall
from pioneer.sections import MemoryItem, MemoryRecall, render_memory_recall
from pioneer.tools import ToolContribution

PROVIDER_CHOICES = ("anthropic", "openai-chat", "openai-responses", "gemini")
MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai-chat": "gpt-5.1",
    "openai-responses": "gpt-5.1",
    "gemini": "gemini-2.5-flash",
}
THREAD = "thread-demo"
#: A persona long enough that the stable prompt is above every model's cache minimum
#: (the highest of these models': Gemini 2.5's 2,048 tokens).
PERSONA = ("The user is a field geologist who plans trips a month ahead, prefers metric "
           "units, reads tables faster than prose and wants sources named. ") * 60
MEMORY_TOOLS = [
    ToolSpec(name="memory_search", description="Search the user's memories.",
             parameters={"type": "object", "properties": {"query": {"type": "string"}},
                         "required": ["query"]}),
    ToolSpec(name="memory_get", description="Read one memory by id.",
             parameters={"type": "object", "properties": {"id": {"type": "string"}}}),
]
READ_FILE = ToolSpec(name="read_file", description="Read a file of the workspace.",
                     parameters={"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]})


def hooks() -> HookRegistry:
    """The memory hooks: the memory tools, and one recalled memory for the prompt."""
    registry = HookRegistry()

    @registry.hook("demo.memory_tools", phase="turn.pre_tool_materialization")
    def memory_tools(context: HookContext) -> list[ToolContribution]:
        return [ToolContribution(tool=tool, domain="memory") for tool in MEMORY_TOOLS]

    @registry.hook("demo.memory", phase="turn.pre_prompt_context", priority=500)
    def memory(context: HookContext) -> PromptSectionContribution | None:
        if context.turn.mode == "chat":  # no tools: nothing to say about memory tools
            return None
        text = render_memory_recall(MemoryRecall(
            policy="read_only", tools=[tool.name for tool in MEMORY_TOOLS],
            recalled=[MemoryItem("user:1", "preference", "Likes results as tables.")],
        ), context.env)
        if text is None:
            return None
        return PromptSectionContribution(contribution_id="demo.memory.recall",
                                         section_id="memory_recall", domain="memory",
                                         priority=500, content=text)

    return registry


# -- the scripted model: the API's own response JSON ---------------------------------


def script(turn: int) -> list[list[ToolCall]]:
    """The tool calls of each round of ``turn`` (an empty list ends the turn)."""
    rounds: list[list[ToolCall]] = []
    if turn == 1:
        rounds.append([
            ToolCall(id=f"t{turn}-c1", name="request_tools",
                     arguments={"domains": ["memory"], "reason": "recall what the user likes"}),
            ToolCall(id=f"t{turn}-c2", name="read_file", arguments={"path": "notes.md"}),
        ])
        rounds.append([ToolCall(id=f"t{turn}-c3", name="memory_search",
                                arguments={"query": "preferences"})])
    elif turn % 2 == 0:
        rounds.append([ToolCall(id=f"t{turn}-c1", name="read_file",
                                arguments={"path": f"trip-{turn}.md"})])
    rounds.append([])
    return rounds


def usage(provider: str, plan: CachePlan, output: int) -> dict[str, Any]:
    """The usage object the provider would report for a round with ``plan``."""
    total, cached = plan.total_tokens, plan.cached_tokens
    if provider == "anthropic":
        return {"input_tokens": plan.uncached_tokens, "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": plan.written_tokens, "output_tokens": output}
    if provider == "openai-chat":
        return {"prompt_tokens": total, "completion_tokens": output,
                "total_tokens": total + output, "prompt_tokens_details": {"cached_tokens": cached}}
    if provider == "openai-responses":
        return {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": total + output}
    return {"promptTokenCount": total, "candidatesTokenCount": output,
            "cachedContentTokenCount": cached, "totalTokenCount": total + output}


def response(provider: str, model: str, text: str, calls: Sequence[ToolCall],
             reported: dict[str, Any]) -> dict[str, Any]:
    """One response of ``provider`` saying ``text`` and making ``calls``."""
    if provider == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in calls]
        return {"id": "msg_demo", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None, "usage": reported}
    if provider == "openai-chat":
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in calls]
        return {"id": "chatcmpl-demo", "object": "chat.completion", "created": 0,
                "model": model, "usage": reported,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if calls else "stop"}]}
    if provider == "openai-responses":
        output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_demo", "summary": []}]
        if text:
            output.append({"type": "message", "id": "msg_demo", "role": "assistant",
                           "status": "completed",
                           "content": [{"type": "output_text", "text": text,
                                        "annotations": []}]})
        output += [{"type": "function_call", "id": f"fc_{c.id}", "call_id": c.id,
                    "name": c.name, "arguments": json.dumps(c.arguments),
                    "status": "completed"} for c in calls]
        return {"id": "resp_demo", "object": "response", "created_at": 0, "model": model,
                "status": "completed", "output": output, "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": [], "usage": reported}
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [{"functionCall": {"id": c.id, "name": c.name, "args": c.arguments},
               **({"thoughtSignature": "ZGVtby1zaWduYXR1cmU="} if index == 0 else {})}
              for index, c in enumerate(calls)]
    return {"candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": reported, "modelVersion": model}


def run_tool(call: ToolCall) -> str:
    """What the application's tools answer."""
    if call.name == "memory_search":
        return "m-1: likes results as tables"
    return f"(contents of {call.arguments.get('path', '?')})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, type=Path, help="runtime home folder")
    parser.add_argument("--store", required=True, help="SQLite path or postgresql:// URL")
    parser.add_argument("--provider", required=True, choices=PROVIDER_CHOICES)
    parser.add_argument("--turns", type=_positive, default=3, help="turns to run (default 3)")
    args = parser.parse_args(argv)
    try:
        last = run(args.home, args.store, args.provider, args.turns)
    except PioneerError as error:  # a store that cannot be opened, say: said, not a traceback
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"thread={THREAD} turn={last}")
    return 0


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 turn (got {number})")
    return number


def run(home: Path, store: str, provider: ProviderName, turns: int) -> str:
    """Run ``turns`` more turns of the demo thread in ``store``; the id of the last."""
    ensure_runtime_home(home)
    user = home / "USER.md"
    if not user.exists():
        user.write_text(PERSONA, encoding="utf-8")
    model = MODELS[provider]
    last = ""
    with Agent(store, provider=provider, model=model, hooks=hooks(), tools=[READ_FILE],
               compile_input={"workspace_root": home}) as agent:
        done = len(agent.store.get_thread_conversation_history(THREAD)) \
            if agent.store.get_thread(THREAD) else 0
        for number in range(done + 1, done + turns + 1):
            turn = agent.turn(THREAD, f"Question {number}: what should I pack?",
                              turn_id=f"{THREAD}-turn-{number}")
            for calls in script(number):
                turn.next_body()
                plan = turn.rounds[-1].cache
                assert plan is not None
                text = "" if calls else f"Answer {number}: a table of what to pack."
                step = turn.receive(response(provider, model, text, calls,
                                             usage(provider, plan, 40)))
                for call in step.runnable:
                    turn.add_tool_result(call.id, run_tool(call))
                if step.done:
                    break
            finished = turn.finish()
            last = finished.entry.turn_id
            final = finished.record.rounds[-1].cache
            assert final is not None
            print(f"turn {number}: {len(finished.record.rounds)} rounds, "
                  f"cached {final.cached_tokens} of {final.total_tokens} tokens in the last")
    return last


if __name__ == "__main__":
    sys.exit(main())
