"""Profile fingerprint: sha256 over the resolved profile and every template it uses.

Takes a resolved :class:`~pioneer.compile.profile.ProfileSpec` and the template environment;
returns the digest of each template the profile needs (the section templates and,
transitively, whatever they ``include``, ``import`` or ``extend``) and the profile
fingerprint over the canonical profile JSON plus those digests. An audit that stores
``manifest.profile_fingerprint`` therefore knows exactly which prompt source compiled a
turn, and ``pioneer lock`` pins the same values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2
from jinja2 import meta

from .profile import ProfileSpec

__all__ = ["ABSENT", "canonical_profile", "profile_fingerprint", "template_digests"]

#: Digest recorded for a referenced template that is not on the search path (an
#: ``include ... ignore missing``): if it appears later, the fingerprint moves.
ABSENT = "absent"

#: Keys added to the profile models after 0.1.0, per table. They are left out of the
#: canonical form while unset, so adding a key never moves the fingerprint of a profile
#: that does not use it (and the committed golden manifests stay valid).
_ADDED_KEYS: dict[str, tuple[str, ...]] = {
    "budgets": ("max_tokens",),
    "sections": ("max_tokens", "refuse"),
}


def canonical_profile(spec: ProfileSpec) -> str:
    """The resolved profile as canonical JSON (sorted keys)."""
    data: dict[str, Any] = spec.model_dump(mode="json")
    tables = {"budgets": [data["budgets"]], "sections": data["sections"]}
    for table, keys in _ADDED_KEYS.items():
        for row in tables[table]:
            for key in keys:
                if row.get(key) is None:
                    row.pop(key, None)
    # Declared inputs came later still: no table, no key; an unset keyword is left out.
    if data.get("inputs"):
        data["inputs"] = {name: {key: value for key, value in spec.items() if value is not None}
                          for name, spec in data["inputs"].items()}
    else:
        data.pop("inputs", None)
    return json.dumps(data, sort_keys=True)


def template_digests(env: jinja2.Environment, names: Iterable[str]) -> dict[str, str]:
    """sha256 of each named template and of every template it references, by name."""
    digests: dict[str, str] = {}
    pending = sorted(set(names), reverse=True)
    while pending:
        name = pending.pop()
        if name in digests:
            continue
        try:
            source, _, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            digests[name] = ABSENT
            continue
        digests[name] = hashlib.sha256(source.encode("utf-8")).hexdigest()
        try:
            ast = env.parse(source, name)
        except jinja2.TemplateSyntaxError:  # the template check reports it
            continue
        pending += [ref for ref in meta.find_referenced_templates(ast) if ref is not None]
    return dict(sorted(digests.items()))


def profile_fingerprint(spec: ProfileSpec, templates: Mapping[str, str]) -> str:
    """sha256 over the canonical profile and each ``name:digest`` in name order."""
    digest = hashlib.sha256(canonical_profile(spec).encode())
    for name in sorted(templates):
        digest.update(f"\n{name}:{templates[name]}".encode())
    return digest.hexdigest()
