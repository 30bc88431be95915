"""Fuzzing the profile loader: any TOML, any mutation of a shipped profile, any template.

Whatever a profile file or a template holds, loading raises a ``PioneerError`` or gives a
profile that compiles (or fails with a ``PioneerError``), and every compile that succeeds
satisfies the output invariants. Example counts are bounded so CI stays fast;
``PIONEER_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz_*.py`` runs a longer campaign.
"""

from __future__ import annotations

import copy
import hashlib
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pioneer import PioneerError, PromptCompileInput, PromptCompiler
from pioneer.compile.boundary import BOUNDARY_MARKER, split_prompt_cache_boundary
from pioneer.files import builtin_dir

FUZZ = settings(max_examples=int(os.environ.get("PIONEER_FUZZ_EXAMPLES", "120")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHIPPED = {name: tomllib.loads((builtin_dir("profiles") / f"{name}.toml").read_text())
           for name in ("full", "minimal", "none")}
TEMPLATES = sorted(p.name for p in builtin_dir("templates").glob("*.j2"))

#: Keys the loader knows (so mutations reach deep rules), plus some it does not.
KEYS = st.sampled_from([
    "name", "description", "extends", "sections", "budgets", "contributions", "id", "title",
    "stability", "template", "source", "when", "file", "field", "max_chars", "max_tokens",
    "keep_empty", "reminder", "runtime_pool", "hook_pool", "max_sections", "sort_key",
    "max_chars_per_file", "max_chars_total", "contribution_max_chars", "insert", "disable",
    "override", "before", "after", "unknown",
]) | st.text(min_size=1, max_size=8)
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=24),
    st.sampled_from(["stable", "dynamic", "text", "bootstrap", "input", "contribution",
                     "slot", "SOUL.md", "extra_system", "full", "minimal", "none",
                     "../full.toml", "fz", "1 / 0", "profile == 'x'", "{{", "(" * 400,
                     *TEMPLATES]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(KEYS, inner, max_size=5), max_leaves=25)
DOCUMENTS = st.dictionaries(KEYS, VALUES, max_size=8)


def _check_invariants(payload: Any) -> None:
    stable, dynamic = payload.stable_system_text, payload.dynamic_system_text
    full = payload.full_system_text
    assert full.count(BOUNDARY_MARKER) <= 1
    if stable and dynamic:
        assert split_prompt_cache_boundary(full) == (stable, dynamic)
    sha = lambda text: hashlib.sha256(text.encode("utf-8")).hexdigest()  # noqa: E731
    manifest = payload.manifest
    assert (manifest.fingerprint_stable, manifest.fingerprint_dynamic,
            manifest.fingerprint_full) == (sha(stable), sha(dynamic), sha(full))
    payload.to_json()


def _load_and_compile(profile_text: str, templates: dict[str, str] | None = None) -> None:
    """Load ``fz`` from a fresh folder and compile it; only PioneerErrors may escape."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "profiles").mkdir()
        (root / "templates").mkdir()
        (root / "home").mkdir()
        (root / "profiles" / "fz.toml").write_text(profile_text, encoding="utf-8")
        for name, source in (templates or {}).items():
            (root / "templates" / name).write_text(source, encoding="utf-8")
        compiler = PromptCompiler(profile_path=[root / "profiles"],
                                  template_path=[root / "templates"], count_tokens=False)
        try:
            compiler.load_profile("fz")
            payload = compiler.compile(PromptCompileInput(
                workspace_root=root / "home", profile="fz", extra_system="extra",
                dynamic_context="context", include_tool_recovery_policy=True))
        except PioneerError:
            return
        _check_invariants(payload)


@FUZZ
@given(DOCUMENTS)
def test_any_toml_document_loads_or_is_a_pioneer_error(document: dict[str, Any]) -> None:
    _load_and_compile(tomli_w.dumps(document))


@FUZZ
@given(st.text(max_size=300))
def test_any_text_loads_or_is_a_pioneer_error(text: str) -> None:
    _load_and_compile(text.encode("utf-8", "replace").decode("utf-8"))


def _like(value: Any) -> st.SearchStrategy[Any]:
    """Values of the same type as ``value``, so a mutation often keeps the profile valid."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-5, 30_000) | st.integers(-(2**63), 2**63 - 1)
    if isinstance(value, str):
        return SCALARS.filter(lambda v: isinstance(v, str))
    return VALUES


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A shipped profile with a few values changed (mostly to one of the same type), keys
    deleted or added, or sections swapped: at the top or in a section, a contribution or
    the budgets."""
    document = copy.deepcopy(SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))])
    for _ in range(draw(st.integers(1, 3))):
        tables: list[dict[str, Any]] = [document]
        for key in ("sections", "contributions"):
            if isinstance(document.get(key), list):
                tables += [t for t in document[key] if isinstance(t, dict)]
        if isinstance(document.get("budgets"), dict):
            tables.append(document["budgets"])
        table = draw(st.sampled_from(tables))
        action = draw(st.sampled_from(["tweak", "tweak", "tweak", "delete", "swap", "set"]))
        if action in ("tweak", "delete") and table:
            key = draw(st.sampled_from(sorted(table)))
            if action == "delete":
                del table[key]
            else:
                table[key] = draw(_like(table[key]))
        elif action == "swap" and isinstance(document.get("sections"), list) \
                and len(document["sections"]) > 1:
            sections = document["sections"]
            i, j = draw(st.integers(0, len(sections) - 1)), draw(st.integers(0, len(sections) - 1))
            sections[i], sections[j] = sections[j], sections[i]
        else:
            table[draw(KEYS)] = draw(VALUES)
    return document


@FUZZ
@given(mutated())
def test_mutated_shipped_profiles_load_or_are_pioneer_errors(document: dict[str, Any]) -> None:
    _load_and_compile(tomli_w.dumps(document))


@FUZZ
@given(st.sampled_from(sorted(SHIPPED)), st.text(max_size=40))
def test_derived_profiles_with_any_overrides_load_or_are_pioneer_errors(
    base: str, title: str
) -> None:
    text = tomli_w.dumps({"name": "fz", "extends": base,
                          "sections": [{"id": "identity_base", "title": title}]})
    _load_and_compile(text)


#: Template sources: jinja fragments the grammar knows, glued at random.
FRAGMENTS = st.sampled_from([
    "{{ ", " }}", "{% ", " %}", "{# ", " #}", "if ", "for x in ", "endif", "endfor", "set ",
    "macro m()", "endmacro", "include 'identity_base.md.j2'", "extra_system", "profile",
    "section.title", "range(3)", "'x' * 3", "|upper", "|join(',')", "(", ")", "[", "]", "1",
    "0", "/", "**", "~", "==", "and", "not ", ".", "__class__", "'{0}'.format", "raw",
    "endraw", "\n", " ", "x", "lipsum", "namespace()", "loop.index", "caller()",
])
SOURCES = st.lists(FRAGMENTS, max_size=30).map("".join) | st.text(max_size=80)


@FUZZ
@given(SOURCES)
def test_any_template_source_loads_or_is_a_pioneer_error(source: str) -> None:
    profile = tomli_w.dumps({"name": "fz", "sections": [
        {"id": "identity_base", "title": "Identity", "stability": "stable",
         "template": "fz.md.j2"},
        {"id": "extra_system", "title": "Extra", "stability": "dynamic", "source": "input",
         "field": "extra_system", "template": "fz.md.j2"},
    ]})
    _load_and_compile(profile, {"fz.md.j2": source})
