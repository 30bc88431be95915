"""The post-turn memory extractor: a prompt about a completed turn, and its strict reply.

After a turn completes, an application may ask a model which facts from it are worth
remembering. :func:`memory_extraction_prompt` renders that request from
``templates/memory_extraction.md.j2``, a template of its own: it is not the assistant's
system prompt, and it offers no memory tools, because the model answers with data, not
actions. The reply must be exactly one JSON object, ``{"facts": [{"scope", "category",
"content"}, ...]}`` and nothing else (``schemas/memory_extraction.schema.json``, generated
from :class:`MemoryExtraction`). :func:`parse_memory_extraction` checks it with
jsonschema and returns either the facts or an :class:`ExtractionError` value listing
every problem by location, never quoting the reply; :func:`store_extraction` hands facts
to a :class:`MemorySink` only when the whole reply is valid, so a bad reply stores
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

import jinja2
import jsonschema
from pydantic import Field, ValidationError

from ..errors import format_path, quoted_key, schema_message
from ..files import load_schema
from ..history.models import HistoryEntry
from ..history.summarizer import TRUNCATION_MARK
from ..sections._macros import call_macro
from ..text import EDGE_CONFIG, EdgeModel

__all__ = [
    "MAX_FACTS",
    "MAX_FACT_CHARS",
    "SCHEMA_FILE",
    "ExtractionError",
    "ExtractionResult",
    "FactCategory",
    "FactScope",
    "MemoryExtraction",
    "MemoryFact",
    "MemorySink",
    "memory_extraction_prompt",
    "parse_memory_extraction",
    "store_extraction",
]

TEMPLATE = "memory_extraction.md.j2"
SCHEMA_FILE = "memory_extraction.schema.json"
MAX_FACTS = 20
#: Longest fact; the Memory Recall section shows at most 280 characters of an item.
MAX_FACT_CHARS = 280
#: Longest message text put into the prompt, per side.
MAX_TURN_CHARS = 6000
#: Lists and objects a reply may nest (a valid one nests three); deeper is refused
#: before it is checked, and far deeper than Python's recursion allows is not JSON here.
MAX_NESTING = 32
#: Digits a number in a reply may have (Python refuses to read an integer past 4,300).
MAX_DIGITS = 100

FactScope = Literal["user", "workspace", "thread"]
FactCategory = Literal["preference", "fact", "decision", "goal", "constraint"]



class MemoryFact(EdgeModel):
    """One fact worth remembering."""

    model_config = EDGE_CONFIG
    scope: FactScope = Field(description="Who or what the fact is about.")
    category: FactCategory = Field(description="What kind of fact it is.")
    content: str = Field(
        min_length=1, max_length=MAX_FACT_CHARS, pattern=r"\S",
        description="The fact as one self-contained sentence.",
    )


class MemoryExtraction(EdgeModel):
    """The extractor's whole reply: the facts, possibly none."""

    model_config = EDGE_CONFIG
    facts: list[MemoryFact] = Field(
        max_length=MAX_FACTS, description="Facts from the turn; empty when nothing lasts."
    )


@dataclass(frozen=True, slots=True)
class ExtractionError:
    """Why a reply was refused: ``not_json`` or ``invalid``, with every problem found."""

    kind: Literal["not_json", "invalid"]
    problems: tuple[str, ...]

    @property
    def message(self) -> str:
        """One line naming the kind and the problems."""
        what = "is not JSON" if self.kind == "not_json" else "does not match the schema"
        return f"memory extraction reply {what}: " + "; ".join(self.problems)


ExtractionResult = MemoryExtraction | ExtractionError


class MemorySink(Protocol):
    """Where extracted facts go (an application's memory store)."""

    def remember(self, facts: Sequence[MemoryFact], *, thread_id: str, turn_id: str) -> None:
        """Store the facts extracted from one turn."""
        ...


def _bounded(text: str | None) -> str:
    body = (text or "").strip()
    if len(body) <= MAX_TURN_CHARS:
        return body
    return body[: MAX_TURN_CHARS - len(TRUNCATION_MARK)] + TRUNCATION_MARK


def memory_extraction_prompt(entry: HistoryEntry, env: jinja2.Environment) -> str:
    """The extractor prompt for a completed turn (each side cut to 6000 characters)."""
    return call_macro(
        env, TEMPLATE, "prompt", _bounded(entry.user_text), _bounded(entry.assistant_text),
        list(get_args(FactScope)), list(get_args(FactCategory)), MAX_FACTS, MAX_FACT_CHARS,
    )


class _Refused(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _Refused(f"duplicate key {quoted_key(key)}")
        data[key] = value
    return data


def _no_constants(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _integer(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_DIGITS:
        raise _Refused(f"a number of {digits} digits (at most {MAX_DIGITS})")
    return int(text)


def _nesting(data: Any) -> int:
    """How deeply lists and objects nest in ``data`` (walked without recursion)."""
    deepest, pending = 0, [(data, 1)]
    while pending:
        value, depth = pending.pop()
        items = value.values() if isinstance(value, dict) else value
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_NESTING:
                break
            pending.extend((item, depth + 1) for item in items)
    return deepest


#: The reply's one pattern: text that is not blank.
_PATTERNS = {"\\S": "must not be blank"}


def _problem(error: jsonschema.ValidationError) -> str:
    where = format_path(error.absolute_path) or "reply"
    return f"{where}: {schema_message(error, show_values=False, patterns=_PATTERNS)}"


def _order(error: jsonschema.ValidationError) -> tuple[list[tuple[int, str]], str]:
    # Document order: list positions numerically, keys by name, then the keyword.
    path = [(p, "") if isinstance(p, int) else (-1, str(p)) for p in error.absolute_path]
    return path, str(error.validator)


def parse_memory_extraction(reply: str) -> ExtractionResult:
    """The facts in a strict JSON reply, or an :class:`ExtractionError`; never raises."""
    try:
        data = json.loads(reply, object_pairs_hook=_no_duplicates, parse_constant=_no_constants,
                          parse_int=_integer)
    except _Refused as error:
        return ExtractionError("not_json", (str(error),))
    except json.JSONDecodeError as error:
        return ExtractionError("not_json", (f"line {error.lineno} column {error.colno}: "
                                            f"{error.msg[:1].lower()}{error.msg[1:]}",))
    except RecursionError:  # the parser's own limit (near 1,000, less deep in a call stack)
        return ExtractionError("not_json", ("lists or objects nested too deeply to read",))
    if _nesting(data) > MAX_NESTING:
        return ExtractionError("invalid", (f"reply: lists or objects nested deeper than "
                                           f"{MAX_NESTING}",))
    validator = jsonschema.Draft202012Validator(load_schema(SCHEMA_FILE))
    errors = sorted(validator.iter_errors(data), key=_order)
    # A value of the wrong type fails its other keywords too; the type says it all.
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    errors = [e for e in errors if e.validator == "type" or tuple(e.absolute_path) not in mistyped]
    if errors:
        return ExtractionError("invalid", tuple(dict.fromkeys(map(_problem, errors))))
    try:
        return MemoryExtraction.model_validate(data)
    except ValidationError as error:  # the schema is generated from this model
        return ExtractionError("invalid", tuple(
            f"{format_path(item['loc']) or 'reply'}: {item['msg']}" for item in error.errors()
        ))


def store_extraction(
    reply: str, sink: MemorySink, *, thread_id: str, turn_id: str
) -> ExtractionResult:
    """Parse a reply and store its facts; an invalid reply stores nothing."""
    result = parse_memory_extraction(reply)
    if isinstance(result, MemoryExtraction) and result.facts:
        sink.remember(result.facts, thread_id=thread_id, turn_id=turn_id)
    return result
