"""Names the compile input and the profiles share: section id rules and profile aliases.

**Ids are readable.** A section id, a contribution id (of a runtime section, a hook's
section or a profile's contribution) and a profile's name hold ASCII letters, digits and
``_ - . :`` only (:data:`ID_PATTERN`). Everything a reviewer could misread is refused
with the file, line or JSON path: a look-alike letter from another script (a Cyrillic
DZE beside Latin ``s``), a zero-width or other format character, a bidirectional
override, a control character, a full-width or other compatibility form (which NFKC
would fold into an ASCII id it does not equal). Every id pioneer ships, and every one its
docs and examples use, already fits (docs/profiles.md, "Ids").

A leaf module of the compile stage, so the input models, the profile loader and the
contribution pools can all use the same rules without importing one another.
"""

from __future__ import annotations

import re
import unicodedata

from pydantic.config import JsonDict

__all__ = [
    "BUILT_IN_SECTION_IDS",
    "ID_PATTERN",
    "ID_RULE",
    "ID_SCHEMA",
    "PROFILE_ALIASES",
    "RUNTIME_BUILT_IN_IDS",
    "check_dynamic_id",
    "check_runtime_id",
    "id_problem",
]

#: What a section id, a contribution id and a profile name may hold (the profile schema's
#: ``pattern``; :func:`id_problem` says which character breaks it).
ID_PATTERN = r"^[A-Za-z0-9_.:-]+$"
#: The id rule as the schema of a model that checks it in Python says it (the compile
#: input's and a hook's section ids), so a caller validating against the published schema
#: refuses what the compiler refuses.
ID_SCHEMA: JsonDict = {"pattern": ID_PATTERN}
#: The rule in words, as messages give it.
ID_RULE = "an id holds ASCII letters, digits, '_', '-', '.' and ':' only"
_ID = re.compile(ID_PATTERN[1:-1])
_ID_CHARACTER = re.compile(r"[A-Za-z0-9_.:-]")


def _character(char: str) -> str:
    code = f"U+{ord(char):04X}"
    name = unicodedata.name(char, "")
    return f"{char!r} ({code} {name})" if name else f"{char!r} ({code})"


def id_problem(value: str) -> str | None:
    """What keeps ``value`` from being an id (:data:`ID_PATTERN`), naming the first
    character that may not be in one; ``None`` for a readable id."""
    if _ID.fullmatch(value):
        return None
    if not value:
        return "must not be empty"
    bad = next(char for char in value if not _ID_CHARACTER.fullmatch(char))
    return f"{_character(bad)} is not allowed: {ID_RULE} (got {value!r})"

#: Other names of the built-in profiles, accepted on input (docs/compile-input-and-manifest.md).
PROFILE_ALIASES = {
    "assistant_full": "full",
    "assistant_minimal": "minimal",
    "assistant_none": "none",
}

#: Ids reserved for built-in sections; a dynamic id may not take one of them
#: (docs/hooks-and-sections.md, "Contribution ids").
BUILT_IN_SECTION_IDS: frozenset[str] = frozenset(
    """identity_base assistant_safety artifact_output_contract tool_usage_policy soul_core
    identity_core user_persona tool_recovery_policy task_orchestration_policy
    subagents_policy tasks_policy pioneer_cli_runtime_instructions
    pioneer_cli_runtime_context agents_md memory_recall thread_context selected_skills
    selected_capabilities current_permissions recovery_continuation
    execution_continuation skills_runtime_prompt retry_runtime_instruction
    dynamic_context extra_system artifact_references""".split()
)

#: Built-in ids a runtime section may carry (docs/hooks-and-sections.md, "Contribution ids").
RUNTIME_BUILT_IN_IDS: frozenset[str] = frozenset(
    """pioneer_cli_runtime_instructions pioneer_cli_runtime_context agents_md memory_recall
    thread_context selected_skills selected_capabilities current_permissions
    execution_continuation""".split()
)


def check_dynamic_id(value: str) -> str:
    """Validate a dynamic section id; raise ValueError saying which rule it breaks."""
    if not value:
        raise ValueError("must not be empty")
    if value != value.strip():
        raise ValueError(f"must not have leading or trailing whitespace (got {value!r})")
    if len(value.split()) != 1:  # split() cuts at exactly the characters isspace() names
        raise ValueError(f"must not contain whitespace (got {value!r})")
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    if value in BUILT_IN_SECTION_IDS:
        raise ValueError(f"{value!r} is a built-in section id and cannot be used as a dynamic id")
    return value


def check_runtime_id(value: str) -> str:
    """A runtime section id is a built-in runtime id or a valid dynamic id."""
    if value in RUNTIME_BUILT_IN_IDS:
        return value
    return check_dynamic_id(value)
