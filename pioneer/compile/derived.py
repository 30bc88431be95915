"""Derived profile models: the TOML shape of a profile that ``extends`` another.

A derived profile names its base and lists only what differs: budget overrides (merged
key by key into the base's), contribution defaults (patched or added by id) and section
edits (patched, replaced, removed, inserted or moved by id). The edit models are built
from the base models with every field made optional, so a key added to
:class:`~pioneer.compile.profile.SectionSpec` is at once overridable. :class:`ProfileFile` is
the model behind ``schemas/profile.schema.json``: a file with ``extends`` is checked as
a :class:`DerivedProfileSpec`, any other file (and every resolved profile) as a
:class:`~pioneer.compile.profile.ProfileSpec`. Resolution itself lives in
:mod:`pioneer.compile._extends`.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from ..text import EDGE_CONFIG
from .declared import InputName, InputSpec
from .ids import ID_PATTERN
from .profile import BudgetSpec, ContributionSpec, PoolSpec, ProfileSpec, SectionSpec

__all__ = [
    "BudgetOverrides",
    "ContributionEdit",
    "DerivedProfileSpec",
    "PoolOverride",
    "ProfileFile",
    "SectionEdit",
]



def _optional(
    model: type[BaseModel],
    name: str,
    doc: str,
    *,
    keep: frozenset[str] = frozenset(),
    base: type[BaseModel] | None = None,
    annotations: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """``model`` with every field but ``keep`` optional and unset by default.

    The annotations stay as they are (no ``| None``): TOML has no null, and a plain type
    keeps schema errors pointing at the offending key instead of an ``anyOf``.
    """
    fields: dict[str, Any] = {}
    for field_name, info in model.model_fields.items():
        if field_name in keep:
            fields[field_name] = (info.annotation, info)
            continue
        optional = copy.copy(info)
        optional.default, optional.default_factory = None, None
        annotation = (annotations or {}).get(field_name, info.annotation)
        fields[field_name] = (annotation, optional)
    created: type[BaseModel] = create_model(
        name, __base__=base or _Frozen, __doc__=doc, __module__=__name__, **fields
    )
    return created


class _Frozen(BaseModel):
    model_config = EDGE_CONFIG


PoolOverride = _optional(PoolSpec, "PoolOverride", "Pool keys to change; the rest is inherited.")

BudgetOverrides = _optional(
    BudgetSpec,
    "BudgetOverrides",
    "Budget keys to change; the rest is inherited.",
    annotations={"runtime_pool": PoolOverride, "hook_pool": PoolOverride},
)


class _ContributionOps(_Frozen):
    remove: bool = Field(
        default=False, description="Drop this contribution id from the base's list."
    )


ContributionEdit = _optional(
    ContributionSpec,
    "ContributionEdit",
    "Patch a base contribution id (only the keys given), add a new one, or remove one.",
    keep=frozenset({"id"}),
    base=_ContributionOps,
)


class _SectionOps(_Frozen):
    remove: bool = Field(default=False, description="Drop the base section with this id.")
    replace: bool = Field(
        default=False, description="This entry is the whole new section; nothing is inherited."
    )
    before: str | None = Field(
        default=None, pattern=ID_PATTERN, description="Place the section just before this id."
    )
    after: str | None = Field(
        default=None, pattern=ID_PATTERN, description="Place the section just after this id."
    )


SectionEdit = _optional(
    SectionSpec,
    "SectionEdit",
    "Edit one section by id: patch the keys given, replace, remove, insert or move it.",
    keep=frozenset({"id"}),
    base=_SectionOps,
)


class DerivedProfileSpec(BaseModel):
    """A profile that extends another and lists only what differs."""

    model_config = EDGE_CONFIG
    name: str = Field(pattern=ID_PATTERN, description="Profile name.")
    extends: str = Field(
        min_length=1,
        description="Base profile: a name on the search path (the next one further down "
        "when it is this file's own name) or a .toml path relative to this file.",
    )
    description: str | None = Field(
        default=None, description="What the profile is for (inherited)."
    )
    budgets: BudgetOverrides = Field(  # type: ignore[valid-type]
        default_factory=BudgetOverrides, description="Budget keys to change, merged key by key."
    )
    contributions: list[ContributionEdit] = Field(  # type: ignore[valid-type]
        default_factory=list, description="Contribution defaults patched, added or removed by id."
    )
    sections: list[SectionEdit] = Field(  # type: ignore[valid-type]
        default_factory=list, description="Section edits, applied in order."
    )
    inputs: dict[InputName, InputSpec] = Field(
        default_factory=dict, description="Inputs added to the base's (a base input cannot "
        "be declared again).")


def _branch_on_extends(schema: dict[str, Any]) -> None:
    plain, derived = schema.pop("anyOf")
    schema.update({"type": "object", "if": {"required": ["extends"]}, "then": derived,
                   "else": plain})


class ProfileFile(RootModel[ProfileSpec | DerivedProfileSpec]):
    """A profile file: a whole profile, or a derived one when it has ``extends``."""

    model_config = ConfigDict(frozen=True, json_schema_extra=_branch_on_extends)
