"""Whole-line caps shared by the recall renderers."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["take_lines"]


def take_lines(lines: Sequence[str], *, max_items: int, max_chars: int) -> tuple[list[str], int]:
    """Keep whole lines in order while both caps hold; return them and how many were dropped.

    The character count includes the ``\\n`` that will join the kept lines. Taking stops
    at the first line that does not fit, so a lower-ranked line never takes the place of
    a higher-ranked one.
    """
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = len(line) + (1 if kept else 0)
        if len(kept) >= max_items or used + cost > max_chars:
            break
        kept.append(line)
        used += cost
    return kept, len(lines) - len(kept)
