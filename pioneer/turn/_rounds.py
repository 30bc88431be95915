"""What one round of a turn compiles: the turn's compile input with the round's own facts.

A turn fixes its compile input when it starts; four sections depend on the round instead
(docs/hooks-and-sections.md, "Sections that follow the round"):

* **Retry Instruction** after a tool result the application marked as an error
  (``add_tool_result(..., is_error=True)``): the failed tool and the head of its error
  (each distinct failure once, with its count of calls), for the round right after it
  only;
* the **final-answer instruction** in the same section when the round is the turn's last
  (``max_rounds``): the model is told to stop calling tools, and the body lets it call
  none;
* **Recovery Continuation** when the caller asks (``next_body(continue_generation=True)``);
* **Task Orchestration** whenever a tool of the task domain is visible in the round.

:func:`round_input` turns :class:`RoundFacts` into the one compile input of the round (a
copy of the turn's with four fields set), so the round is still one compile call. Every
one of these sections is dynamic: the stable text and ``fingerprint_stable`` are the same
in every round of a turn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from ..compile.compiler import PromptCompiler
from ..compile.inputs import PromptCompileInput
from ..errors import InputError, Problem
from ..sections.runtime import retry_instruction

__all__ = ["ERROR_HEAD_CHARS", "FAILURES_LISTED", "RoundFacts", "check_max_rounds", "round_input"]

#: Characters of a tool's error the Retry Instruction quotes (the whole error is in the
#: tool result right before it).
ERROR_HEAD_CHARS = 500
#: Distinct failures (tool and error head) the Retry Instruction lists after a round;
#: the calls with other errors are counted in one line.
FAILURES_LISTED = 20


@dataclass(frozen=True, slots=True)
class RoundFacts:
    """What the round's sections depend on."""

    #: (tool, error text) of each result of the last round the application marked as an
    #: error, in call order.
    failed: tuple[tuple[str, str], ...] = ()
    #: The round limit when this round is the turn's last, else None.
    final_of: int | None = None
    #: The caller asked the model to continue a reply the output limit cut off.
    continuation: bool = False
    #: A tool of the task domain is visible in this round.
    task_tools: bool = False


def round_input(compiler: PromptCompiler, turn_input: PromptCompileInput,
                facts: RoundFacts) -> PromptCompileInput:
    """The round's compile input: ``turn_input`` with the round's sections switched on.

    A round's own instruction takes the place of a ``retry_instruction`` the turn's input
    carries; the two flags are set when the turn's input or the round asks for them."""
    texts: list[str] = []
    if facts.final_of is not None:
        texts.append(retry_instruction(
            compiler, "final_answer",
            reason=f"this is request {facts.final_of} of at most {facts.final_of} in this turn"))
    else:
        texts += _failures(compiler, facts.failed)
    update: dict[str, object] = {
        "include_task_orchestration_policy":
            turn_input.include_task_orchestration_policy or facts.task_tools,
        "continue_generation_hint": turn_input.continue_generation_hint or facts.continuation,
    }
    if texts:
        update["retry_instruction"] = "\n\n".join(text.strip() for text in texts)
    if all(getattr(turn_input, name) == value for name, value in update.items()):
        return turn_input
    return turn_input.model_copy(update=update)


def _failures(compiler: PromptCompiler, failed: Sequence[tuple[str, str]]) -> list[str]:
    """The Retry Instruction's paragraphs for ``failed``: each distinct failure (tool and
    error head) once, in the order of its first call, with how many calls gave it when
    more than one; past :data:`FAILURES_LISTED`, one line for the calls left out. Each
    error is in its call's result right before, so thousands of parallel calls that fail
    add a few paragraphs, not one each."""
    calls = Counter((tool, _head(error)) for tool, error in failed)
    texts = []
    for (tool, head), count in islice(calls.items(), FAILURES_LISTED):
        text = retry_instruction(compiler, "tool_retry", tool=tool, reason=head).strip()
        texts.append(f"{text}\n- failed calls: {count:,}" if count > 1 else text)
    left_out = sum(islice(calls.values(), FAILURES_LISTED, None))
    if left_out:
        texts.append(f"{left_out:,} more failed calls, with other errors, are not listed "
                     "here: each error is in its call's result.")
    return texts


def _head(error: str) -> str:
    text = error.strip() or "(the tool gave no error text)"
    return text if len(text) <= ERROR_HEAD_CHARS else text[:ERROR_HEAD_CHARS - 1] + "…"


def check_max_rounds(value: object, path: str) -> int | None:
    """``value`` as a round limit (None: no limit), or an :class:`InputError`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(Problem(f"expected a whole number of at least 1 (got {value!r})",
                                 path=path))
    return value
