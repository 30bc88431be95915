"""Names the compile input and the profiles share: section id rules and profile aliases.

A leaf module of the compile stage, so the input models, the profile loader and the
contribution pools can all use the same rules without importing one another.
"""

from __future__ import annotations

__all__ = [
    "BUILT_IN_SECTION_IDS",
    "PROFILE_ALIASES",
    "RUNTIME_BUILT_IN_IDS",
    "check_dynamic_id",
    "check_runtime_id",
]

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
    if value in BUILT_IN_SECTION_IDS:
        raise ValueError(f"{value!r} is a built-in section id and cannot be used as a dynamic id")
    return value


def check_runtime_id(value: str) -> str:
    """A runtime section id is a built-in runtime id or a valid dynamic id."""
    if value in RUNTIME_BUILT_IN_IDS:
        return value
    return check_dynamic_id(value)
