"""Explain: walk the debugging path of a stored turn, each step answered from its record.

Takes a :class:`~pioneer.audit.record.TurnRecord` (read back from the store); gives an
:class:`Explanation`, the steps of "why did the model say that?" in order: the thread
mode; whether history was kept, compressed or truncated; the sections and diagnostics of
the first round's manifest; the skills decision (each skill considered: resolved and
why, disabled, or not implicitly invocable); the memory hook contributions and the memory
tools (who registered them, and whether each was visible in each round); the visible
tools of every round and how each call was judged; the permission profile, the execution
security snapshot and whether Current Permissions was rendered; the provider mapping
(stable/dynamic split, cache breakpoints) and how each round's request fits the context
window; and whether the dynamic sections changed
between rounds, read from the manifests' fingerprints. Each step is data first
(``--json``) and the text is rendered from that data, so both say the same. Nothing is
recompiled or guessed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..compile.manifest import HookSourceEntry, PromptManifest
from ..errors import counted
from ..providers.api import PROVIDER_APIS
from ..sections.permissions import AXES, GUIDANCE_AXES, PermissionProfile
from ..sections.tool_domains import DEFAULT_TOOL_DOMAINS
from ..sections.tool_domains import SECTION_ID as HIDDEN_DOMAINS_ID
from .cache_report import CachePlan
from .record import (
    ExecutionSecurity,
    HistorySnapshot,
    ReplyRecord,
    ReportedUsage,
    RoundRecord,
    SkillsSnapshot,
    ToolCallRecord,
    TurnRecord,
    WindowRecord,
)

__all__ = ["Explanation", "Step", "explain_turn", "render_json", "render_text"]

_MEMORY_SECTIONS = ("memory_recall", "thread_context")
MEMORY_DOMAIN = "memory"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the path: its name, its answer as data, and as lines of text."""

    name: str
    data: dict[str, Any]
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """A stored turn explained step by step."""

    turn_id: str
    thread_id: str
    rounds: int
    steps: tuple[Step, ...]
    #: Why the turn was not finished (None: a finished turn).
    abandoned: str | None = None


def explain_turn(record: TurnRecord) -> Explanation:
    """Every step of the debugging path for ``record``, in order."""
    return Explanation(record.turn_id, record.thread_id, len(record.rounds),
                       tuple(step(record) for step in _STEPS), record.abandoned)


def render_text(explanation: Explanation) -> str:
    """The steps as numbered blocks, for people."""
    head = (f"turn {explanation.turn_id} (thread {explanation.thread_id}): "
            f"{counted(explanation.rounds, 'provider round')}")
    if explanation.abandoned is not None:
        head += (f"\nabandoned: {explanation.abandoned}; not stored as finished, and in no "
                 "history")
    blocks = [head]
    for number, step in enumerate(explanation.steps, start=1):
        if step.lines == (_NONE_CONFIGURED,):  # a feature nobody set up: one line
            blocks.append(f"{number}. {step.name}: {_NONE_CONFIGURED}")
            continue
        blocks.append("\n".join([f"{number}. {step.name}", *(f"   {line}"
                                                           for line in step.lines)]))
    return "\n\n".join(blocks) + "\n"


def render_json(explanation: Explanation) -> str:
    """The steps as JSON, for machines."""
    data = {
        "turn_id": explanation.turn_id,
        "thread_id": explanation.thread_id,
        "rounds": explanation.rounds,
        "abandoned": explanation.abandoned,
        "steps": [{"step": step.name, **step.data} for step in explanation.steps],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- the steps -----------------------------------------------------------------------


def _mode(record: TurnRecord) -> Step:
    what = ("tool calling on; the visible tools are chosen per provider round"
            if record.mode == "agent" else "no tool calling")
    return Step("mode", {"mode": record.mode}, (f"{record.mode}: {what}",))


_HISTORY_WORDS = {"keep": "kept", "summarise": "compressed into a summary",
                  "truncate": "truncated"}


def _history(record: TurnRecord) -> Step:
    h = record.history
    if h is None:
        return Step("history", {"history": None}, ("not recorded",))
    lines = [
        f"{_HISTORY_WORDS[h.mode]}: {h.reason}",
        f"loaded {counted(h.turns_loaded, 'turn')}, {h.total_tokens} tokens; budget {h.budget}, "
        f"threshold {h.threshold}, summary target {h.summary_target}",
        f"sent {counted(h.turns_sent, 'turn')} in {counted(len(h.messages), 'message')}, "
        f"{h.sent_tokens} tokens ({_messages(h)})",
        _summary_line(h),
    ]
    if h.turn_ids:
        shown = h.turn_ids if len(h.turn_ids) <= 8 else [*h.turn_ids[:3], "…", *h.turn_ids[-3:]]
        lines.append(f"turns sent: {', '.join(shown)}")
    if h.artifact_ref_count:
        lines.append(f"artifact refs in the sent messages: {h.artifact_ref_count}")
    return Step("history", {"history": h.model_dump(mode="json")}, tuple(lines))


def _messages(h: HistorySnapshot) -> str:
    counts = {role: sum(1 for m in h.messages if m.role == role)
              for role in ("system", "user", "assistant", "tool")}
    return ", ".join(f"{count} {role}" for role, count in counts.items() if count) or "none"


def _summary_line(h: HistorySnapshot) -> str:
    if not h.summary_sent:
        return "summary: none sent"
    stored = "; stored by this turn" if h.summary_stored else ""
    return f"summary: sent, covers {counted(h.summary_turn_count, 'turn')}{stored}"


def _manifest(record: TurnRecord) -> Step:
    m = record.rounds[0].manifest
    stable = sum(1 for s in m.sections if s.stability == "stable")
    rows = [(s.stability, s.id, f"{s.chars} chars",
             "-" if s.tokens is None else f"{s.tokens} tokens", s.source,
             "truncated" if s.truncated else "") for s in m.sections]
    lines = [
        f"round 1: profile {m.profile} (fingerprint {m.profile_fingerprint[:12]}), "
        f"compiler {m.compiler_version}",
        f"{counted(len(m.sections), 'section')}: {stable} stable, "
        f"{len(m.sections) - stable} dynamic",
        *(f"  {line}" for line in _table(rows, numeric=(2, 3))),
    ]
    if m.diagnostics:
        lines.append(f"{counted(len(m.diagnostics), 'diagnostic')}:")
        lines += [f"  - {d.code}{_about(d.section_id, d.file, d.hook_source)}: {d.message}"
                  for d in m.diagnostics]
    else:
        lines.append("diagnostics: none")
    data = {"round": 1, "profile": m.profile, "profile_fingerprint": m.profile_fingerprint,
            "sections": [s.model_dump(mode="json", exclude_none=True) for s in m.sections],
            "diagnostics": [d.model_dump(mode="json", exclude_none=True)
                            for d in m.diagnostics]}
    return Step("manifest", data, tuple(lines))


def _about(*names: str | None) -> str:
    shown = [name for name in names if name]
    return f" [{', '.join(shown)}]" if shown else ""


def _skills(record: TurnRecord) -> Step:
    rendered = _rounds_with(record, "skills_runtime_prompt")
    section = f"Skills Runtime section: {_rendered(rendered, len(record.rounds))}"
    s = record.skills
    if s is None:
        return Step("skills", {"skills": None, "rendered_in_rounds": rendered},
                    ("resolution not recorded", section) if rendered else (_NONE_CONFIGURED,))
    active = ", ".join(f"{a.skill_id} ({a.reason})" for a in s.active)
    lines = [f"{counted(len(s.active), 'skill')} resolved" + (f": {active}" if active else "")]
    lines += _left_out(s)
    if s.omitted:
        lines.append(f"left out of the full text: {', '.join(s.omitted)}")
    lines += [f"diagnostic: {message}" for message in s.diagnostics]
    lines.append(section + ("; the text was cut to its budget" if s.truncated else ""))
    return Step("skills", {"skills": s.model_dump(mode="json"), "rendered_in_rounds": rendered},
                tuple(lines))


_LEFT_OUT_WORDS = {
    "disable_model_invocation": "model invocation is disabled; only an explicit request "
    "activates it",
    "implicit_off": "not named and no touched path matched; the turn allows no implicit skills",
    "not_user_invocable": "not named and no touched path matched; not user-invocable, so never "
    "implicit",
}


def _left_out(s: SkillsSnapshot) -> list[str]:
    """The skills the resolver left out, and why, as it decided."""
    if s.outcomes is None:
        return ["skills left out: not recorded (the record keeps only the active skills)"]
    out = [o for o in s.outcomes if o.status != "resolved"]
    considered = counted(len(s.outcomes), "skill")
    if not out:
        return [f"skills left out: none of the {considered} considered"]
    return [f"{counted(len(out), 'skill')} left out of the {considered} considered:",
            *(f"  {o.status.replace('_', '-')} {o.skill_id}: {_LEFT_OUT_WORDS[o.reason]}"
              for o in out)]


def _memory(record: TurnRecord) -> Step:
    seen: dict[str, tuple[HookSourceEntry, list[int]]] = {}
    failures: dict[str, tuple[str, list[int]]] = {}
    for r in record.rounds:
        for entry in r.manifest.hook_sources:
            if entry.contribution_kind == "runtime_failure":
                message = _failure(r.manifest, entry.source.hook_id)
                failures.setdefault(entry.source.hook_id, (message, []))[1].append(r.round)
            elif entry.section_id in _MEMORY_SECTIONS:
                key = entry.model_dump_json()
                seen.setdefault(key, (entry, []))[1].append(r.round)
    total = len(record.rounds)
    lines: list[str] = []
    for entry, rounds in seen.values():
        src = entry.source
        what = src.contribution_id or entry.contribution_kind
        lines.append(f"{entry.section_id} <- {src.hook_id} ({what}) at {src.phase}, "
                     f"priority {entry.priority}, {counted(entry.source_count or 0, 'source')}, "
                     f"truncation {entry.truncation}, {_in_rounds(rounds, total)}")
    for hook_id, (message, rounds) in failures.items():
        lines.append(f"failed hook {hook_id} {_in_rounds(rounds, total)}: {message}")
    for section in _MEMORY_SECTIONS:
        lines.append(f"{section} section: {_rendered(_rounds_with(record, section), total)}")
    tools = _memory_tools(record)
    lines += _memory_tool_lines(tools)
    data = {
        "contributions": [{**e.model_dump(mode="json", exclude_none=True), "rounds": rounds}
                          for e, rounds in seen.values()],
        "failed_hooks": [{"hook_id": h, "message": m, "rounds": rounds}
                         for h, (m, rounds) in failures.items()],
        "sections": {s: _rounds_with(record, s) for s in _MEMORY_SECTIONS},
        "memory_tools": tools,
    }
    if not seen:
        lines.insert(0, "no memory or thread-context contribution reached the manifest")
    return Step("memory", data, tuple(lines))


def _memory_tools(record: TurnRecord) -> list[dict[str, Any]] | None:
    """The memory tools of the turn's catalog: who registered each, and per round whether
    it was visible or still hidden (None: the record does not keep the catalog)."""
    if record.tools is None:
        return None
    found = []
    for tool in record.tools:
        if tool.domain != MEMORY_DOMAIN and tool.name not in DEFAULT_TOOL_DOMAINS[MEMORY_DOMAIN]:
            continue
        hidden = [r.round for r in record.rounds
                  if any(tool.name in h.tools for h in r.hidden_domains)]
        found.append({"name": tool.name, "domain": tool.domain, "hook_id": tool.hook_id,
                      "visible_in_rounds": [r.round for r in record.rounds
                                            if tool.name in r.visible_tools],
                      "hidden_in_rounds": hidden})
    return found


def _memory_tool_lines(tools: list[dict[str, Any]] | None) -> list[str]:
    if tools is None:
        return ["memory tools: not recorded (the record does not keep the turn's tools)"]
    if not tools:
        return ["memory tools: none in the turn's tools"]
    by_source: dict[str | None, list[str]] = {}
    for tool in tools:
        by_source.setdefault(tool["hook_id"], []).append(tool["name"])
    sources = "; ".join(
        f"{', '.join(names)} " + (f"(registered by hook {hook})" if hook
                                  else "(the application's tools)")
        for hook, names in by_source.items())
    lines = [f"memory tools: {sources}"]
    for tool in tools:
        seen = []
        if tool["hidden_in_rounds"]:
            seen.append(f"hidden {_round_list(tool['hidden_in_rounds'])}")
        if tool["visible_in_rounds"]:
            seen.append(f"visible {_round_list(tool['visible_in_rounds'])}")
        domain = f" (domain {tool['domain']})" if tool["domain"] else ""
        lines.append(f"  {tool['name']}{domain}: {'; '.join(seen) or 'not offered'}")
    return lines


def _round_list(rounds: Sequence[int]) -> str:
    return f"in round{'s' if len(rounds) > 1 else ''} {', '.join(map(str, rounds))}"


def _failure(manifest: PromptManifest, hook_id: str) -> str:
    return next((d.message for d in manifest.diagnostics
                 if d.code == "hook_best_effort_failed" and d.hook_source == hook_id),
                "no diagnostic recorded")


def _tools(record: TurnRecord) -> Step:
    lines: list[str] = []
    opened = list(dict.fromkeys(t.domain for t in record.tools or ()
                                if t.granted_by == "application" and t.domain is not None))
    if opened:
        lines.append(f"granted by the application before round 1: {', '.join(opened)}")
    for r in record.rounds:
        visible = ", ".join(r.visible_tools) or "none"
        lines.append(f"round {r.round}: {counted(len(r.visible_tools), 'visible tool')}: {visible}")
        hidden = ", ".join(f"{h.domain} ({counted(len(h.tools), 'tool')})"
                           for h in r.hidden_domains)
        shown = HIDDEN_DOMAINS_ID in r.manifest.section_ids
        lines.append(f"  hidden: {hidden or 'none'}; Hidden Tool Domains section "
                     f"{'rendered' if shown else 'not rendered'}")
        for call in r.calls:
            lines.append(f"  call {call.name} ({call.call_id}): {_verdict(call)}")
    data = {"granted_by_application": opened, "rounds": [r.model_dump(mode="json", include={
        "round", "visible_tools", "hidden_domains", "calls"}) for r in record.rounds]}
    return Step("tools", data, tuple(lines))


def _verdict(call: ToolCallRecord) -> str:
    if call.verdict == "granted":
        return f"granted {', '.join(call.granted)}, visible from the next round"
    if call.verdict == "run":
        return "run by the application"
    first = (call.error or "").splitlines()
    return f"{call.verdict}: {first[0] if first else 'no error text recorded'}"


def _permissions(record: TurnRecord) -> Step:
    rendered = _rounds_with(record, "current_permissions")
    total = len(record.rounds)
    p = record.permissions
    security = record.security
    section = f"Current Permissions section: {_rendered(rendered, total)}"
    data: dict[str, Any] = {
        "profile": p.model_dump(mode="json") if p is not None else None,
        "security": security.model_dump(mode="json") if security is not None else None,
        "rendered_in_rounds": rendered,
    }
    if p is None and not rendered and security is not None and _unconfigured(security):
        return Step("permissions", data, (_NONE_CONFIGURED,))
    lines = [_profile_line(p) if p is not None else "profile not recorded",
             *_security_lines(security)]
    if p is not None and not rendered:
        due = security.guidance if security is not None else p.guidance()
        section += (" although the profile narrows access (the prompt profile has no place "
                    "for it, or the caller gave its own text)" if due
                    else " (full access with nothing narrowed)")
    return Step("permissions", data, (*lines, section))


def _profile_line(p: PermissionProfile) -> str:
    parts = [f"mode {p.mode}"]
    parts += [f"{axis} {getattr(p, axis)}" for axis in (*GUIDANCE_AXES, "mcp_read")
              if getattr(p, axis) != "allow"]
    parts += [f"{name}: {', '.join(getattr(p, name))}"
              for name in ("allowed_tools", "denied_tools", "allowed_paths") if getattr(p, name)]
    return "profile: " + "; ".join(parts) + ("" if len(parts) > 1 else "; nothing narrowed")


#: What explain says of a feature the turn did not set up (no skills, no permission
#: profile, source or sandbox): one line instead of a block of "not given".
_NONE_CONFIGURED = "none configured"


def _unconfigured(security: ExecutionSecurity) -> bool:
    return security.profile is None and not security.source and not security.sandbox


def _security_lines(security: ExecutionSecurity | None) -> list[str]:
    """The execution security snapshot: every axis, approvals, refusals, source, sandbox."""
    if security is None:
        return ["execution security: not recorded (a record written before the snapshot "
                "was kept)"]
    if _unconfigured(security):
        return [f"execution security: {_NONE_CONFIGURED}"]
    said = f"source {security.source or 'not given'}; sandbox {security.sandbox or 'not given'}"
    p = security.profile
    if p is None:
        return [f"execution security: no permission profile given; {said}"]
    return [
        f"execution security: mode {p.mode}; {said}",
        "  axes: " + ", ".join(f"{axis} {getattr(p, axis)}" for axis in AXES),
        f"  approval asked for: {', '.join(security.ask) or 'nothing'}; "
        f"denied: {', '.join(security.deny) or 'nothing'}",
    ]


def _provider(record: TurnRecord) -> Step:
    lines: list[str] = []
    for r in record.rounds:
        shape = r.provider
        lines.append(f"round {r.round}: {shape.provider}, {shape.carrier}")
        system = ", ".join(f"{part.kind} {part.chars} chars" for part in shape.system)
        lines.append(f"  system: {system or 'none'}")
        marks = ", ".join(shape.cache_breakpoints) or "none"
        lines.append(f"  cache breakpoints: {marks}")
        if shape.prompt_cache_key:
            lines.append(f"  prompt_cache_key: {shape.prompt_cache_key}")
        lines.append(f"  {counted(shape.tool_count, 'tool definition')}; "
                     f"body sha256 {shape.body_sha256[:16]}")
        if r.cache is not None:
            lines += [f"  {line}" for line in _cache_lines(r.cache, r.usage)]
        if r.reply is not None:
            lines.append(f"  {_reply_line(r.reply)}")
        if r.window is not None:
            lines += [f"  {line}" for line in _window_lines(r.window)]
    data = {"rounds": [{"round": r.round, **r.provider.model_dump(mode="json"),
                        "cache": r.cache.model_dump(mode="json") if r.cache else None,
                        "reply": r.reply.model_dump(mode="json") if r.reply else None,
                        "window": r.window.model_dump(mode="json") if r.window else None}
                       for r in record.rounds]}
    return Step("provider", data, tuple(lines))


def _window_lines(window: WindowRecord) -> list[str]:
    """How the round's request fits the context window, and what the provider counted."""
    used = window.estimated_input_tokens + window.reserve_tokens
    share = used * 100 // window.context_window
    samples = window.ratio_samples
    learnt = (f"learnt from {samples} {'reply' if samples == 1 else 'replies'}"
              if samples else "the model table's prior")
    margin = f", budgeted with a margin of {window.margin:.2f}x" if window.margin > 1 else ""
    lines = [
        f"window: {window.context_window:,} tokens ({window.window_from or 'not recorded'})",
        f"  estimated input {window.estimated_input_tokens:,} (history "
        f"{window.history_tokens:,}) + reserve {window.reserve_tokens:,} "
        f"({window.reserve_from}) = {used:,}, {share}% of the window",
        f"  ratio {window.ratio:.3f} provider tokens per local token ({learnt}{margin}); "
        f"{counted(window.cleared_tool_results, 'tool result')} cleared",
    ]
    if window.reported_input_tokens is not None:
        off = window.reported_input_tokens - window.estimated_input_tokens
        error = f" ({off:+,}, {off * 100 / window.reported_input_tokens:+.1f}%)" \
            if window.reported_input_tokens else ""
        lines.append(f"  reported input {window.reported_input_tokens:,}{error}")
    return lines


def _reply_line(reply: ReplyRecord) -> str:
    """What the provider answered: why it stopped, what it held, what was skipped."""
    said = f" ({reply.provider_stop_reason})" if reply.provider_stop_reason else ""
    parts = [f"reply: {reply.stop_reason}{said}", counted(reply.tool_calls, "tool call"),
             f"{reply.text_chars:,} chars of text"]
    if reply.reasoning_items:
        parts.append(f"{counted(reply.reasoning_items, 'reasoning item')} skipped")
    if reply.unanswered:
        parts.append(f"sent first to {', '.join(reply.unanswered)} (no reply)")
    return ", ".join(parts)


def _cache_lines(plan: CachePlan, reported: ReportedUsage | None) -> list[str]:
    """The cache plan of a round: expected tokens, the first difference, what was reported."""
    share = f" ({plan.cached_tokens * 100 // plan.total_tokens}%)" if plan.total_tokens else ""
    api = PROVIDER_APIS.get(plan.provider)  # a record may name an API no longer known
    # marks (an API that writes only at them) or breakpoints
    writes = (api is not None and api.cache_marks) or plan.written_tokens > 0
    written = f", {plan.written_tokens:,} written" if writes else ""
    lines = [f"cache plan: {plan.cached_tokens:,} of {plan.total_tokens:,} tokens cached"
             f"{share}{written}, {plan.uncached_tokens:,} uncached "
             f"(minimum {plan.minimum_tokens:,}; {plan.shared_blocks} of "
             f"{len(plan.blocks)} blocks shared with an earlier request)"]
    if plan.model_note is not None:
        lines.append(f"  {plan.model_note}")
    difference = plan.first_difference
    if difference is not None:
        verdict = "cache broken" if difference.broken else "differs"
        lines.append(f"  {verdict} at block {difference.index} {difference.label}: "
                     f"{difference.reason}")
    if reported is not None:
        total = f" of {reported.input_tokens:,} input"
        wrote = f", {reported.cache_creation_input_tokens:,} written" \
            if reported.cache_creation_input_tokens is not None else ""
        read = reported.cache_read_input_tokens or 0
        lines.append(f"  reported: {read:,} cached{wrote}{total}; "
                     f"planned {plan.cached_tokens:,} cached{written}"
                     f" of {plan.total_tokens:,}")
    return lines


def _changes(record: TurnRecord) -> Step:
    if len(record.rounds) == 1:
        return Step("changes", {"between": []}, ("one round: nothing to compare",))
    lines: list[str] = []
    between = []
    for before, after in zip(record.rounds, record.rounds[1:], strict=False):
        change = _compare(before, after)
        between.append(change)
        stable = "changed (the provider cache prefix breaks)" if change["stable_changed"] \
            else "unchanged"
        dynamic = "changed" if change["dynamic_changed"] else "unchanged"
        lines.append(f"round {before.round} -> {after.round}: stable {stable}, "
                     f"dynamic {dynamic}")
        for key in ("changed", "added", "removed"):
            if change[key]:
                lines.append(f"  {key}: {', '.join(change[key])}")
        for key in ("diagnostics_added", "diagnostics_removed"):
            for message in change[key]:
                lines.append(f"  {key.replace('_', ' ')}: {message}")
    return Step("changes", {"between": between}, tuple(lines))


def _compare(before: RoundRecord, after: RoundRecord) -> dict[str, Any]:
    a, b = before.manifest, after.manifest
    old = {s.id: s.sha256 for s in a.sections}
    new = {s.id: s.sha256 for s in b.sections}
    old_diag = [d.message for d in a.diagnostics]
    new_diag = [d.message for d in b.diagnostics]
    return {
        "from": before.round,
        "to": after.round,
        "stable_changed": a.fingerprint_stable != b.fingerprint_stable,
        "dynamic_changed": a.fingerprint_dynamic != b.fingerprint_dynamic,
        "fingerprint_dynamic": [a.fingerprint_dynamic, b.fingerprint_dynamic],
        "changed": [i for i in new if i in old and old[i] != new[i]],
        "added": [i for i in new if i not in old],
        "removed": [i for i in old if i not in new],
        "diagnostics_added": [m for m in new_diag if m not in old_diag],
        "diagnostics_removed": [m for m in old_diag if m not in new_diag],
    }


_STEPS: tuple[Callable[[TurnRecord], Step], ...] = (
    _mode, _history, _manifest, _skills, _memory, _tools, _permissions, _provider, _changes,
)


# -- small helpers -------------------------------------------------------------------


def _rounds_with(record: TurnRecord, section_id: str) -> list[int]:
    return [r.round for r in record.rounds if section_id in r.manifest.section_ids]


def _in_rounds(rounds: Sequence[int], total: int) -> str:
    if len(rounds) == total and total > 1:
        return "in every round"
    return f"in round{'s' if len(rounds) > 1 else ''} {', '.join(map(str, rounds))}"


def _rendered(rounds: Sequence[int], total: int) -> str:
    return f"rendered {_in_rounds(rounds, total)}" if rounds else "not rendered"


def _table(rows: Sequence[Sequence[str]], numeric: Sequence[int]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))] if rows else []
    return ["  ".join(cell.rjust(widths[c]) if c in numeric else cell.ljust(widths[c])
                      for c, cell in enumerate(row)).rstrip() for row in rows]
