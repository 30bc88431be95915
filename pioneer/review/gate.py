"""Budget gate: fail a compiled prompt that exceeds its token limits, for CI.

Takes a loaded profile and the payload compiled from it; returns the prompt's cl100k
token counts and a located problem for every limit exceeded: the whole prompt over
``pioneer check --max-tokens N`` or over the profile's ``budgets.max_tokens``, and each
section over its declared ``max_tokens`` (for a slot, each contribution it placed). The
whole prompt counts the stable and the dynamic text, which is what a model receives:
the boundary marker never reaches one.

A declared input the turn does not give and that has no default is given its first trial
value (its first example, else its first enum value, else a plain value of its type: what
``pioneer check`` renders with), and the result says so: the gate measures a prompt a
real turn could have, never fails for a value only a real turn knows.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from ..compile.compiler import LoadedProfile, PromptCompiler
from ..compile.declared import InputValue
from ..compile.inputs import PromptCompileInput
from ..compile.manifest import CompiledPromptPayload
from ..errors import Problem
from ..tokens import TokenCounter, default_counter

__all__ = ["GateResult", "budget_gate", "declares_limits", "gate_profiles"]


@dataclasses.dataclass(frozen=True, slots=True)
class GateResult:
    """One profile's prompt measured against its limits."""

    profile: str
    stable_tokens: int
    dynamic_tokens: int
    limit: int | None
    problems: tuple[Problem, ...]
    #: The declared inputs the turn did not give, each with the value the gate used.
    assumed: tuple[tuple[str, InputValue], ...] = ()

    @property
    def tokens(self) -> int:
        """Stable plus dynamic tokens."""
        return self.stable_tokens + self.dynamic_tokens

    def summary(self) -> str:
        """One line: the profile, its tokens and the limit they were held to."""
        limit = f", limit {self.limit}" if self.limit is not None else ""
        assumed = "; ".join(f"inputs.{name} = {json.dumps(value, ensure_ascii=False)}"
                            for name, value in self.assumed)
        if assumed:
            assumed = f"; inputs not given, measured with {assumed} (--var NAME=VALUE chooses)"
        return (f"tokens: {self.profile} {self.tokens} (stable {self.stable_tokens} + "
                f"dynamic {self.dynamic_tokens}){limit}{assumed}")


def declares_limits(profile: LoadedProfile) -> bool:
    """Whether the profile declares any token limit."""
    spec = profile.spec
    return spec.budgets.max_tokens is not None or any(
        section.max_tokens is not None for section in spec.sections
    )


def budget_gate(
    profile: LoadedProfile, payload: CompiledPromptPayload, *, max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> GateResult:
    """Measure ``payload`` against ``max_tokens`` and the limits ``profile`` declares."""
    counter = counter or default_counter()
    stable = counter.count(payload.stable_system_text)
    dynamic = counter.count(payload.dynamic_system_text)
    total = f"the prompt has {stable + dynamic} cl100k tokens (stable {stable} + dynamic {dynamic})"
    problems: list[Problem] = []
    declared = profile.spec.budgets.max_tokens
    if declared is not None and stable + dynamic > declared:
        problems.append(_at(profile, ["budgets", "max_tokens"],
                            f"{total}, over the limit of {declared}"))
    if max_tokens is not None and stable + dynamic > max_tokens:
        problems.append(Problem(f"{total}, over --max-tokens {max_tokens}", file=profile.file))
    problems += _section_problems(profile, payload, counter)
    limits = [limit for limit in (declared, max_tokens) if limit is not None]
    return GateResult(profile.spec.name, stable, dynamic, min(limits, default=None),
                      tuple(problems))


def _at(profile: LoadedProfile, parts: Sequence[str | int], message: str) -> Problem:
    return profile.source.locator.problem(parts, message)


def _section_problems(
    profile: LoadedProfile, payload: CompiledPromptPayload, counter: TokenCounter
) -> list[Problem]:
    sections = profile.spec.sections
    declared = {section.id: index for index, section in enumerate(sections)}
    slot = next((i for i, s in enumerate(sections) if s.source == "slot"), None)
    problems = []
    for kept, compiled in zip(payload.manifest.sections, payload.sections, strict=True):
        placed = profile.placed_by_slot(kept)
        index = slot if placed else declared.get(kept.id)
        limit = sections[index].max_tokens if index is not None else None
        if index is None or limit is None:
            continue
        tokens = kept.tokens if kept.tokens is not None else counter.count(compiled.text)
        if tokens > limit:
            where = f' (placed by slot "{sections[index].id}")' if placed else ""
            problems.append(_at(profile, ["sections", index, "max_tokens"],
                                f'section "{kept.id}"{where} has {tokens} cl100k tokens, '
                                f"over its limit of {limit}"))
    return problems


def gate_profiles(
    compiler: PromptCompiler, names: Sequence[str], compile_input: PromptCompileInput, *,
    max_tokens: int | None, every: bool,
) -> list[GateResult]:
    """Compile ``compile_input`` with each profile that has limits (or ``every`` one)."""
    results = []
    for name in names:
        profile = compiler.load_profile(name)
        if not (every or max_tokens is not None or declares_limits(profile)):
            continue
        assumed = tuple((input_name, spec.trial_values()[0])
                        for input_name, spec in profile.spec.inputs.items()
                        if spec.default is None and input_name not in compile_input.inputs)
        payload = compiler.compile(compile_input.model_copy(update={
            "profile": name, "inputs": {**compile_input.inputs, **dict(assumed)}}))
        result = budget_gate(profile, payload, max_tokens=max_tokens)
        results.append(dataclasses.replace(result, assumed=assumed))
    return results
