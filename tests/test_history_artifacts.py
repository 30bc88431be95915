"""Artifact reference blocks on history messages (docs/history.md, "Artifact blocks")."""

from __future__ import annotations

import pytest

from pioneer.history import ArtifactRef, render_message
from pioneer.history.artifacts import human_size, ref_line


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KB"),
        (1536, "2 KB"),
        (2560, "2 KB"),
        (3584, "4 KB"),
        (862208, "842 KB"),
        (1024 * 1024 - 1, "1024 KB"),
        (1024 * 1024, "1.0 MB"),
        (5 * 1024 * 1024 + 300 * 1024, "5.3 MB"),
        (1024**3, "1.0 GB"),
        (3 * 1024**3 + 512 * 1024**2, "3.5 GB"),
    ],
)
def test_human_size_is_base_1024(size: int, text: str) -> None:
    assert human_size(size) == text


@pytest.mark.parametrize(
    ("ref", "line"),
    [
        (ArtifactRef("a1", "plain.txt", "document"),
         '- artifactId=a1, versionId=null, name="plain.txt", kind=document.'),
        (ArtifactRef("a2", 'say "hi"\\now', "image", version_id="v9", mime_type="image/png",
                     size_bytes=862208, role="user"),
         '- artifactId=a2, versionId=v9, name="say \\"hi\\"\\\\now", kind=image, '
         "mime=image/png, size=842 KB, role=user."),
        (ArtifactRef("a3", "blank mime", "file", mime_type="  ", size_bytes=0),
         '- artifactId=a3, versionId=null, name="blank mime", kind=file, size=0 B.'),
    ],
    ids=["minimal", "everything-escaped", "blank-mime"],
)
def test_ref_line(ref: ArtifactRef, line: str) -> None:
    assert ref_line(ref) == line


REPORT = ArtifactRef("r1", "report.pdf", "document", version_id="v1",
                     mime_type="application/pdf", size_bytes=2048)
CHART = ArtifactRef("c1", "chart.png", "image", version_id="v3", role="assistant")


def test_user_block_follows_the_text() -> None:
    assert render_message("  Please read this.\n", [REPORT], "user") == (
        "Please read this.\n\n"
        "Available artifacts from this user message:\n"
        '- artifactId=r1, versionId=v1, name="report.pdf", kind=document, '
        "mime=application/pdf, size=2 KB."
    )


def test_repeats_are_dropped_by_artifact_and_version() -> None:
    newer = ArtifactRef("r1", "report v2.pdf", "document", version_id="v2")
    renamed = ArtifactRef("r1", "other name", "document", version_id="v1")
    assert render_message("Done.", [CHART, REPORT, renamed, newer, CHART], "assistant") == (
        "Done.\n\n"
        "Available artifacts from this assistant message:\n"
        '- artifactId=c1, versionId=v3, name="chart.png", kind=image, role=assistant.\n'
        '- artifactId=r1, versionId=v1, name="report.pdf", kind=document, '
        "mime=application/pdf, size=2 KB.\n"
        '- artifactId=r1, versionId=v2, name="report v2.pdf", kind=document.'
    )


def test_refs_without_text_are_the_whole_message() -> None:
    assert render_message("   ", [CHART], "assistant") == (
        "Available artifacts from this assistant message:\n"
        '- artifactId=c1, versionId=v3, name="chart.png", kind=image, role=assistant.'
    )


@pytest.mark.parametrize("text", [None, "", " \n\t "])
def test_no_text_and_no_refs_drops_the_message(text: str | None) -> None:
    assert render_message(text, [], "user") is None


def test_text_without_refs_is_only_trimmed() -> None:
    assert render_message("\n hello \n", [], "user") == "hello"
