"""The model table: each provider's rules per model and per model family, read from data.

The built-in table is ``models/models.toml`` (shipped in the package); a deployment adds
rows, or changes some facts of a row, in its own files on the model path (the
``model_path`` setting). Each file is TOML validated against
``schemas/models.schema.json``: ``[[models]]`` rows name one model, ``[[families]]`` rows
a family with a regular expression its models' names match. :func:`model_facts` answers
for any name: the row of that model (or of a dated snapshot or a provider's spelling of
it), else its family's row with ``matched`` False, so the cache plan can say the facts
are a guess. A row that leaves out a fact takes it from the row it overrides, or from
its family's row. docs/providers.md, "The model table", lists the rows and their sources.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from ..documents import parse_document, read_text, toml_line
from ..errors import (
    InputError,
    Problem,
    did_you_mean,
    format_path,
    problem_summary,
    row_labels,
    schema_message,
)
from ..files import builtin_dir, load_schema
from ..text import EDGE_CONFIG, EdgeModel
from ..tokens import Tokenizer
from .names import TABLE_FAMILIES, TableProvider

__all__ = [
    "TOKEN_RATIO_RANGE",
    "BreakpointStyle",
    "FamilyRow",
    "ModelFacts",
    "ModelRow",
    "ModelTable",
    "ModelTableFile",
    "TableProvider",
    "builtin_model_table",
    "load_model_table",
    "model_facts",
    "model_table",
    "using_model_table",
]

#: How a request marks what the provider caches: Anthropic's ``cache_control`` marks,
#: OpenAI's ``prompt_cache_breakpoint`` (GPT-5.6 and later), or nothing (a prefix cache the
#: provider keeps on its own: older OpenAI models, Gemini).
BreakpointStyle = Literal["cache_control", "prompt_cache_breakpoint", "implicit"]

_DATE = r"^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$"
_FACTS = (
    "provider", "family", "context_window", "min_cacheable_tokens", "prefill_allowed",
    "cache_write_price", "cache_read_price", "ttls", "breakpoint_style",
    "max_stop_sequences", "cache_step_tokens",
)
#: Facts a row may leave out even when nothing completes it.
_OPTIONAL = frozenset({"max_stop_sequences", "cache_step_tokens"})
#: How the model counts tokens: facts that a row which leaves them out (and overrides no row
#: and names no family that gives them) takes from its provider's catch-all family.
_TOKEN_FACTS = ("tokenizer", "token_ratio", "token_ratio_source", "token_ratio_date")
#: The range a token ratio must fall in, well around every ratio measured so far (1.0 to 1.7,
#: docs/providers.md, "Token counts per model"): a value outside it is a typo.
TOKEN_RATIO_RANGE = (0.3, 3.0)


class _Facts(EdgeModel):
    model_config = EDGE_CONFIG
    provider: TableProvider | None = Field(
        default=None, description="anthropic, openai or gemini (both OpenAI APIs: openai).")
    context_window: int | None = Field(
        default=None, ge=1, description="Tokens the model takes in one request.")
    min_cacheable_tokens: int | None = Field(
        default=None, ge=0, description="Shortest prefix (tokens) the provider caches.")
    prefill_allowed: bool | None = Field(
        default=None, description="A request may end with an assistant message for the "
        "model to continue (false: the provider refuses it).")
    cache_write_price: float | None = Field(
        default=None, ge=0, description="Price of a token written to the cache, relative to "
        "an uncached input token.")
    cache_read_price: float | None = Field(
        default=None, ge=0, description="Price of a token read from the cache, relative to an "
        "uncached input token.")
    ttls: list[str] | None = Field(
        default=None, description="Cache lifetimes a request can ask for (empty: none).")
    breakpoint_style: BreakpointStyle | None = Field(
        default=None, description="cache_control (Anthropic marks), prompt_cache_breakpoint "
        "(OpenAI GPT-5.6+ explicit breakpoints) or implicit (a prefix cache the request "
        "does not mark).")
    max_stop_sequences: int | None = Field(
        default=None, ge=0, description="Most stop sequences a request takes (absent: no "
        "stated limit).")
    cache_step_tokens: int | None = Field(
        default=None, ge=1, description="A cached prefix is a multiple of this many tokens "
        "(OpenAI before GPT-5.6: 128; absent: 1).")
    tokenizer: Tokenizer | None = Field(
        default=None, description="The local tokenizer the model's counts are estimated "
        "with: o200k (OpenAI gpt-4o and later) or cl100k (every other model).")
    token_ratio: float | None = Field(
        default=None, ge=TOKEN_RATIO_RANGE[0], le=TOKEN_RATIO_RANGE[1],
        description="The provider's tokens per local token of tokenizer: the prior an "
        "estimate starts from before the provider's reported usage calibrates it.")
    token_ratio_source: str | None = Field(
        default=None, min_length=1, description="Where token_ratio comes from (needed "
        "with tokenizer or token_ratio).")
    token_ratio_date: str | None = Field(
        default=None, pattern=_DATE, description="When token_ratio was measured or read: "
        "YYYY-MM or YYYY-MM-DD (needed with tokenizer or token_ratio).")
    source: str = Field(min_length=1, description="Where the facts of this row come from.")
    source_date: str = Field(
        pattern=_DATE, description="When the source was read: YYYY-MM or YYYY-MM-DD.")


class ModelRow(_Facts):
    """One model's facts; left-out facts come from the row it overrides or its family."""

    model: str = Field(min_length=1, description="The model's name as the provider spells it.")
    family: str | None = Field(
        default=None, description="The family row that completes the facts this row leaves "
        "out.")


class FamilyRow(_Facts):
    """The facts of every model whose name matches ``match`` and no model row names."""

    family: str = Field(min_length=1, description="The family's name.")
    match: str | None = Field(
        default=None, description="A regular expression searched for in the model's name "
        "(lower case, snapshot suffix removed); \"\" matches every name.")

    @field_validator("match")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"not a regular expression: {error}") from None
        return value


class ModelTableFile(EdgeModel):
    """A model table file: model rows and family rows."""

    model_config = EDGE_CONFIG
    models: list[ModelRow] = Field(default_factory=list, description="One row per model.")
    families: list[FamilyRow] = Field(
        default_factory=list, description="One row per family, tried in order.")


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the table says about one model name."""

    #: The name asked about.
    model: str
    provider: str
    family: str
    #: True when a model row names the model; False when its family's row (or a
    #: provider's catch-all row) answered: the facts are then a guess.
    matched: bool
    context_window: int
    min_cacheable_tokens: int
    prefill_allowed: bool
    cache_write_price: float
    cache_read_price: float
    ttls: tuple[str, ...]
    breakpoint_style: BreakpointStyle
    max_stop_sequences: int | None
    cache_step_tokens: int
    source: str
    source_date: str
    #: The local tokenizer the model's counts are estimated with: ``cl100k`` or ``o200k``
    #: (a name :func:`pioneer.tokens.counter_for` takes).
    tokenizer: str
    #: The provider's tokens per local token (the prior, before reported usage calibrates it).
    token_ratio: float
    #: Where ``token_ratio`` comes from, and when it was measured or read.
    token_ratio_source: str
    token_ratio_date: str
    #: The row that answered: the model's name, or ``family <name>``.
    row: str = ""
    #: The file the row came from (``models/models.toml`` for the built-in table).
    origin: str = ""

    @property
    def note(self) -> str | None:
        """For a model the table does not name: what the facts were taken from."""
        if self.matched:
            return None
        return f"model {self.model!r} is not in the model table; the facts of the " \
            f"{self.family} family are used ({self.origin})"


@dataclass(frozen=True, slots=True)
class _Row:
    facts: dict[str, Any]
    origin: str
    pattern: re.Pattern[str] | None = None


_VENDOR = re.compile(r"^(?:(?:us|eu|apac|global)\.)?(?:anthropic[./]|openai/|google/|models/)")
_SNAPSHOT = re.compile(
    r"(?:-[0-9]{8}|-[0-9]{4}-[0-9]{2}-[0-9]{2}|-latest|@.*|-v[0-9]+(?::[0-9]+)?|:[0-9]+)$")


def _names(model: str) -> list[str]:
    """``model`` lower-cased without a provider's prefix, then each snapshot suffix off."""
    name = _VENDOR.sub("", model.strip().lower())
    names = [name]
    while (shorter := _SNAPSHOT.sub("", name)) != name and shorter:
        names.append(shorter)
        name = shorter
    return names


def _provider(name: str | None) -> str | None:
    if name is None:
        return None
    return TABLE_FAMILIES.get(name, name)


class ModelTable:
    """Model rows and family rows, the deployment's before the built-in ones."""

    def __init__(self, models: dict[str, _Row], families: list[tuple[str, _Row]]):
        self._models = models
        self._families = families

    def facts(self, model: str, provider: str | None = None) -> ModelFacts:
        """The facts of ``model``; ``provider`` (as ``--provider`` spells it) narrows the
        rows to that provider's."""
        wanted = _provider(provider)
        names = _names(model)
        for name in names:
            row = self._models.get(name)
            if row is not None and wanted in (None, row.facts["provider"]):
                return _facts(model, row, matched=True, label=name)
        # A catch-all row (match "") is tried after every other family, of any provider.
        ranked = sorted(self._families, key=lambda item: item[1].facts["match"] == "")
        for family, row in ranked:
            if wanted not in (None, row.facts["provider"]):
                continue
            assert row.pattern is not None
            if row.pattern.search(names[-1]):
                return _facts(model, row, matched=False, label=f"family {family}")
        raise InputError(Problem(
            f"the model table has no row for {model!r}"
            + (f" and no catch-all family of provider {wanted}" if wanted else "")))

    def model_names(self) -> list[str]:
        """Every model the table names."""
        return list(self._models)

    def family_names(self) -> list[str]:
        """Every family, in the order they are tried."""
        return [family for family, _ in self._families]


def _facts(model: str, row: _Row, *, matched: bool, label: str) -> ModelFacts:
    facts = row.facts
    return ModelFacts(
        model=model, provider=facts["provider"], family=facts["family"], matched=matched,
        context_window=facts["context_window"],
        min_cacheable_tokens=facts["min_cacheable_tokens"],
        prefill_allowed=facts["prefill_allowed"],
        cache_write_price=float(facts["cache_write_price"]),
        cache_read_price=float(facts["cache_read_price"]),
        ttls=tuple(facts["ttls"]), breakpoint_style=facts["breakpoint_style"],
        max_stop_sequences=facts.get("max_stop_sequences"),
        cache_step_tokens=facts.get("cache_step_tokens") or 1,
        source=facts["source"], source_date=facts["source_date"],
        tokenizer=facts["tokenizer"], token_ratio=float(facts["token_ratio"]),
        token_ratio_source=facts["token_ratio_source"],
        token_ratio_date=facts["token_ratio_date"], row=label, origin=row.origin,
    )


# -- reading files ------------------------------------------------------------------------


def _dates_as_text(value: Any) -> Any:
    """TOML date literals as ``YYYY-MM-DD`` text, so ``source_date = 2026-10-13`` reads too."""
    if isinstance(value, date):
        return value.isoformat()[:10]
    if isinstance(value, dict):
        return {key: _dates_as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_dates_as_text(item) for item in value]
    return value


def _parse(path: Path, shown: str) -> tuple[ModelTableFile, str, Any]:
    """A validated table file, its text and its data; every problem located."""
    text, _ = read_text(path, "model table")
    data = _dates_as_text(parse_document(text, shown, "toml"))
    try:
        return ModelTableFile.model_validate(data, strict=True), text, data
    except ValidationError as error:
        pydantic_errors = error.errors()
    import jsonschema  # here, not at the top: only a file with problems needs it

    validator = jsonschema.Draft202012Validator(load_schema("models.schema.json"))
    problems: list[Problem] = []
    for found in validator.iter_errors(data):
        parts = list(found.absolute_path)
        if found.validator == "additionalProperties" and isinstance(found.instance, dict):
            # each unknown key at its own line, with the name it was probably meant to be
            allowed = list((found.schema or {}).get("properties", {}))
            for key in sorted(set(found.instance) - set(allowed)):
                hint = did_you_mean(key, allowed) or f" (known: {', '.join(allowed)})"
                problems.append(_problem(shown, text, data, [*parts, key], f"unknown key{hint}"))
            continue
        problem = _problem(shown, text, data, parts, schema_message(found))
        if problem not in problems:  # one "missing key" error per missing key says it all
            problems.append(problem)
    problems.sort(key=lambda problem: problem.line or 0)
    if not problems:  # a rule the schema cannot say (a regular expression that does not compile)
        problems = [_problem(shown, text, data, list(item["loc"]),
                             str(item["msg"]).removeprefix("Value error, "))
                    for item in pydantic_errors]
    raise InputError(problems, summary=problem_summary(problems, shown))


def _row_label(row: dict[str, Any]) -> str | None:
    name = row.get("model", row.get("family"))
    return f'"{name}"' if isinstance(name, str) else None


def _problem(file: str, text: str, data: Any, parts: list[str | int], message: str) -> Problem:
    """A problem at ``parts`` of a table file, each row labelled by its model or family."""
    labels = row_labels(data, parts, _row_label)
    return Problem(message, file=file, line=toml_line(text, parts),
                   path=format_path(parts, labels) or "(root)")


def _table_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Each model path entry as a file: a folder stands for its ``models.toml``."""
    files = []
    for entry in paths:
        path = Path(entry)
        files.append(path / "models.toml" if path.is_dir() else path)
    return files


def _given(row: ModelRow | FamilyRow) -> dict[str, Any]:
    """The facts a row sets (its name and ``family`` link left out)."""
    return {key: getattr(row, key) for key in row.model_fields_set
            if key not in ("model", "family")}


def _unsourced_ratios(parsed: ModelTableFile, shown: str, text: str,
                      data: Any) -> list[Problem]:
    """A row that gives ``tokenizer`` or ``token_ratio`` without saying where the ratio
    comes from, located at the first of the two it gives."""
    problems = []
    for kind, rows in (("models", parsed.models), ("families", parsed.families)):
        for index, row in enumerate(rows):
            given = [key for key in ("tokenizer", "token_ratio") if key in row.model_fields_set]
            lacking = [key for key in ("token_ratio_source", "token_ratio_date")
                       if key not in row.model_fields_set]
            if given and lacking:
                problems.append(_problem(
                    shown, text, data, [kind, index, given[0]],
                    f"needs {' and '.join(lacking)} too: where the ratio comes from and "
                    "when it was measured or read"))
    return problems


def _lacking(merged: dict[str, Any]) -> list[str]:
    """The token facts a complete row still lacks (only when its provider has no catch-all
    family to take them from)."""
    return [key for key in _TOKEN_FACTS if key not in merged]


class _Layers:
    """The rows read so far, as each file on the model path is laid over them."""

    def __init__(self) -> None:
        self.models: dict[str, _Row] = {}
        self.families: dict[str, _Row] = {}
        self.order: list[str] = []

    def _token_facts(self, merged: dict[str, Any]) -> dict[str, Any]:
        """``merged`` with the token facts it lacks from its provider's catch-all family."""
        if all(key in merged for key in _TOKEN_FACTS):
            return merged
        for row in self.families.values():
            if row.facts["match"] == "" and row.facts["provider"] == merged.get("provider"):
                return {**{key: row.facts[key] for key in _TOKEN_FACTS}, **merged}
        return merged

    def add(self, parsed: ModelTableFile, shown: str, text: str, data: Any, *,
            first: bool) -> list[Problem]:
        """Lay one file's rows over the table; the problems of rows it cannot complete."""
        problems = _unsourced_ratios(parsed, shown, text, data)
        added: list[str] = []
        for index, family in enumerate(parsed.families):
            base = self.families.get(family.family)
            merged = self._token_facts(
                {**(base.facts if base else {}), **_given(family), "family": family.family})
            missing = [key for key in (*_FACTS, "match") if key not in merged
                       and key not in _OPTIONAL] or _lacking(merged)
            if missing:
                problems.append(_problem(shown, text, data, ["families", index],
                                         "a new family needs " + ", ".join(missing)))
                continue
            self.families[family.family] = _Row(merged, shown, re.compile(merged["match"]))
            if base is None:
                added.append(family.family)
        # A deployment's new families are tried before the ones it builds on.
        self.order = [*self.order, *added] if first else [*added, *self.order]
        for index, row in enumerate(parsed.models):
            key = _names(row.model)[0]
            base = self.models.get(key)
            name = row.family if row.family is not None else (
                base.facts["family"] if base else None)
            if name is not None and name not in self.families:
                known = ", ".join(self.families) or "none"
                problems.append(_problem(shown, text, data, ["models", index, "family"],
                                         f"unknown family {name!r} (known: {known})"))
                continue
            start = base.facts if base else {
                k: v for k, v in self.families[name].facts.items() if k != "match"
            } if name is not None else {}
            merged = self._token_facts(
                {**start, **_given(row), **({"family": name} if name else {})})
            missing = [k for k in _FACTS if k not in merged and k not in _OPTIONAL] or (
                _lacking(merged))
            if missing:
                problems.append(_problem(
                    shown, text, data, ["models", index],
                    "a new model needs family (the family row that gives the other facts) "
                    "or " + ", ".join(missing)))
                continue
            self.models[key] = _Row(merged, shown)
        return problems


def load_model_table(paths: Sequence[str | os.PathLike[str]] = ()) -> ModelTable:
    """The built-in table with the rows of each file on ``paths`` over it.

    An entry is a TOML file or a folder holding ``models.toml``; an earlier entry wins
    over a later one, and every entry over the built-in table. A row for a model or a
    family already in the table changes only the facts it gives; a new model row takes
    the facts it leaves out from the family row it names.
    """
    builtin = builtin_dir("models") / "models.toml"
    layers = _Layers()
    files = [(builtin, "models/models.toml"),
             *((file, str(file)) for file in reversed(_table_files(paths)))]
    for file, shown in files:
        parsed, text, data = _parse(file, shown)
        problems = layers.add(parsed, shown, text, data, first=file is builtin)
        if problems:
            raise InputError(problems, summary=problem_summary(problems, shown))
    return ModelTable(layers.models, [(name, layers.families[name]) for name in layers.order])


# -- the table in use ------------------------------------------------------------------------

_ACTIVE: ContextVar[ModelTable | None] = ContextVar("pioneer_model_table", default=None)
_DEFAULT: dict[str, ModelTable] = {}


def builtin_model_table() -> ModelTable:
    """The built-in table alone (read once per process)."""
    table = _DEFAULT.get("")
    if table is None:
        table = _DEFAULT[""] = load_model_table(())
    return table


def model_table() -> ModelTable:
    """The table in use: the one :func:`using_model_table` set, else the built-in table
    with the files of ``PIONEER_MODEL_PATH`` over it."""
    active = _ACTIVE.get()
    if active is not None:
        return active
    variable = os.environ.get("PIONEER_MODEL_PATH", "")
    if not variable:
        return builtin_model_table()
    table = _DEFAULT.get(variable)
    if table is None:
        from ..settings import PioneerSettings

        paths = PioneerSettings.load(discover=False).model_path
        table = _DEFAULT[variable] = load_model_table(paths)
    return table


@contextmanager
def using_model_table(table: ModelTable) -> Iterator[ModelTable]:
    """Answer :func:`model_facts` from ``table`` inside the block (this thread or task only)."""
    token = _ACTIVE.set(table)
    try:
        yield table
    finally:
        _ACTIVE.reset(token)


def model_facts(model: str, provider: str | None = None) -> ModelFacts:
    """What the table in use (:func:`model_table`) says about ``model``.

    ``provider`` (``anthropic``, ``openai-chat``, ``openai-responses``, ``gemini`` or
    ``openai``) keeps to that provider's rows, so a name no row knows gets that provider's
    catch-all row.
    """
    return model_table().facts(model, provider)
