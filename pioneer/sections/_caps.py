"""Whole-line caps shared by the recall renderers."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["take_lines"]


def take_lines(lines: Sequence[str], *, max_items: int, max_chars: int) -> tuple[list[str], int]:
    """Keep whole lines in order while both caps hold; return them and how many were dropped.

    The character count includes the ``\\n`` that joins the kept lines. A line that would
    break the character cap is dropped and a later, shorter one may still fit, so one
    oversized item cannot empty a whole block of ranked recall.
    """
    kept: list[str] = []
    used = 0
    for line in lines:
        if len(kept) >= max_items:
            break
        cost = len(line) + (1 if kept else 0)
        if used + cost <= max_chars:
            kept.append(line)
            used += cost
    return kept, len(lines) - len(kept)
