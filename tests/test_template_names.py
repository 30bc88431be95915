"""docs/templates.md lists every name a template can read, made from the code: the page
holds what ``pioneer.review.names`` generates, and each name it lists for a source kind
renders in a template of that kind through ``pioneer check`` (while a name it does not
list for the kind is an error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli as run

from pioneer.compile.compiler import CONDITION_NAMES, PROVIDED_NAMES
from pioneer.review import names

PAGE = Path(__file__).resolve().parent.parent / "docs" / "templates.md"
#: A section of each source kind (what it needs besides its template).
KEYS = {"text": "", "bootstrap": 'source = "bootstrap"\nfile = "SOUL.md"\n',
        "input": 'source = "input"\nfield = "extra_system"\n',
        "contribution": 'source = "contribution"\n', "slot": 'source = "slot"\n'}


def test_the_page_holds_the_generated_names() -> None:
    text = PAGE.read_text("utf-8")
    start, end = text.index(names.MARKERS[0]), text.index(names.MARKERS[1])
    assert text[start:end + len(names.MARKERS[1])] == names.render(), (
        "docs/templates.md differs from the code: run python -m pioneer.review.names")


def test_every_name_a_template_may_read_is_described() -> None:
    for name in set().union(*PROVIDED_NAMES.values()) | CONDITION_NAMES:
        kind, holds = names.describe(name)
        assert kind and holds, name
    with pytest.raises(KeyError, match="does not say what it is"):
        names.describe("user_name")


def _reads(kind: str) -> str:
    """A template printing every name and record field the page lists for ``kind``."""
    records = names._records()
    lines = []
    for name in sorted(PROVIDED_NAMES[kind]):
        fields = records.get(name) or records.get(f"{name}[]")
        if fields is None:
            lines.append(f"{{{{ {name} }}}}")
        elif f"{name}[]" in records:
            lines += [f"{{% for item in {name} %}}{{{{ item.{key} }}}}{{% endfor %}}"
                      for key in fields]
        else:
            lines += [f"{{{{ {name}.{key} }}}}" for key in fields]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", names.KINDS)
def test_each_listed_name_renders_in_a_template_of_its_kind(tmp_path: Path, kind: str) -> None:
    for folder in ("p", "t"):
        (tmp_path / folder).mkdir()
    (tmp_path / "t" / "reads.md.j2").write_text(_reads(kind))
    section_id = "runtime_trial" if kind == "contribution" else "reads"
    condition = " and ".join(f"{name} is defined" for name in sorted(CONDITION_NAMES))
    (tmp_path / "p" / "reads.toml").write_text(
        f'name = "reads"\n[[sections]]\nid = "{section_id}"\ntitle = "Reads"\n'
        f'stability = "dynamic"\ntemplate = "reads.md.j2"\nwhen = "{condition}"\n{KEYS[kind]}')
    paths = ["--profile-path", str(tmp_path / "p"), "--template-path", str(tmp_path / "t")]
    assert run("check", "reads", *paths) == (0, "ok: 1 profile (reads)\n", "")
    unlisted = sorted(set().union(*PROVIDED_NAMES.values()) - PROVIDED_NAMES[kind])
    if unlisted:  # a name of another kind is not this kind's
        (tmp_path / "t" / "reads.md.j2").write_text(f"{{{{ {unlisted[0]} }}}}\n")
        code, _, err = run("check", "reads", *paths)
        assert code == 1 and f'"{unlisted[0]}" is undefined' in err
