"""A loaded profile: the result of the load stage, what every later stage reads.

:class:`~pioneer.compile.compiler.PromptCompiler` loads each profile once (TOML →
extends → schema → structural rules → templates and conditions) into a
:class:`LoadedProfile`: the validated spec, its fingerprint, the identity files it reads,
the contribution ids it claims or declares, and where each of its values was written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Problem
from ..files import builtin_dir
from ._extends import ProfileSource
from .ids import BUILT_IN_SECTION_IDS, RUNTIME_BUILT_IN_IDS
from .manifest import ManifestSection
from .profile import ContributionSpec, ProfileSpec
from .templates import display_name

__all__ = ["LoadedProfile"]


@dataclass(frozen=True, slots=True)
class LoadedProfile:
    """A validated profile with its templates compiled, ready to interpret."""

    spec: ProfileSpec
    file: str
    fingerprint: str
    bootstrap_files: tuple[tuple[str, bool], ...]
    claimed: frozenset[str]
    #: The resolved profile's files (the extends chain) and where each value was written.
    source: ProfileSource
    #: sha256 by name of every template the profile uses (includes and imports too).
    templates: Mapping[str, str]
    #: The profile's contribution specs by id (what ``[[contributions]]`` declares).
    contributions: Mapping[str, ContributionSpec]
    #: The ids of the ``text`` sections whose template is the deployment's own (their
    #: source is ``text``; a built-in template's is ``builtin``).
    deployment_text: frozenset[str] = frozenset()

    @property
    def known_ids(self) -> frozenset[str]:
        """Contribution ids the profile knows: claimed, declared or built in."""
        return self.claimed | frozenset(self.contributions) | BUILT_IN_SECTION_IDS | (
            RUNTIME_BUILT_IN_IDS)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """What ``check`` warns about in the profile's files (they never fail a compile)."""
        return self.source.locator.warnings

    def template_origin(self, name: str, env: Any) -> tuple[str, bool]:
        """Where template ``name`` is read from, as messages name it, and whether that is
        a deployment folder (not the built-in templates)."""
        try:
            filename = env.loader.get_source(env, name)[1]
        except Exception:  # not found or unreadable: the load already said so
            return name, False
        if Path(filename).resolve().is_relative_to(builtin_dir("templates")):
            return display_name(filename), False
        relative = os.path.relpath(filename)  # as the user would write it, when it can be
        return (filename if relative.startswith("..") else relative), True

    def placed_by_slot(self, record: ManifestSection) -> bool:
        """Whether a kept section is a contribution the slot placed (no section of its own)."""
        return record.source.startswith(("runtime:", "hook:")) and record.id not in self.claimed
