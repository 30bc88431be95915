"""Structured sections: skills, AGENTS.md, memory, thread context, permissions, tool
domains and artifact references.

Each module owns its section's data types, its renderer and the name of its template:
it takes plain data and the compiler's sandboxed template environment
(``compiler.templates.env``) and returns the section body, or ``None`` when the section
should not appear. The words live in
``templates/renderers/``, so a deployment can override them like any other template.
"""

from __future__ import annotations

from ._thread_context import (
    RenderedThreadContext,
    ThreadSnippet,
    render_thread_context,
    snippet_artifacts,
    thread_context_contribution,
)
from .memory import MemoryItem, MemoryRecall, render_memory_recall
from .permissions import CurrentPermissions, PermissionProfile, render_current_permissions
from .skills import ActiveSkill, Skill, SkillsPrompt, build_skills_prompt
from .tool_domains import DEFAULT_TOOL_DOMAINS, HiddenToolDomains, render_hidden_tool_domains

__all__ = [
    "DEFAULT_TOOL_DOMAINS",
    "ActiveSkill",
    "CurrentPermissions",
    "HiddenToolDomains",
    "MemoryItem",
    "MemoryRecall",
    "PermissionProfile",
    "RenderedThreadContext",
    "Skill",
    "SkillsPrompt",
    "ThreadSnippet",
    "build_skills_prompt",
    "render_current_permissions",
    "render_hidden_tool_domains",
    "render_memory_recall",
    "render_thread_context",
    "snippet_artifacts",
    "thread_context_contribution",
]
