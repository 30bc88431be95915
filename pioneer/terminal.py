"""The terminal: colour for tables and a progress bar, only where a person watches.

Colour follows ``--color`` when the stream carries one (the CLI's streams do: ``always``
or ``never``); otherwise (``auto``) it is off when ``NO_COLOR`` is set to anything but
the empty string (https://no-color.org), on when ``FORCE_COLOR`` is
(https://force-color.org), off when ``TERM`` is ``dumb``, and else on for a terminal
only, the order CPython's own colour check uses (docs/cli.md, "Colour and progress").
Anything piped or redirected gets plain text, byte for byte what the tables print
without colour. Cells are padded before they are
painted, so the escape codes never disturb the alignment. The palette keeps to blue and
orange for the two cache sides (told apart by the common forms of colour blindness),
with bold and dim for cut and omitted rows, so no state is carried by hue alone.

The progress bar is Rich's, imported only when a bar is actually drawn: a command run
without a terminal, and every command that draws none, never loads it (start-up time).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["Painter", "colour_enabled", "painter", "plain", "progress"]

#: Paints ``text`` in a named style; the plain painter returns it unchanged.
Painter = Callable[[str, str], str]

#: Style name → SGR parameters. Names are the words the tables print.
STYLES: dict[str, str] = {
    "stable": "38;5;33",  # blue
    "dynamic": "38;5;208",  # orange
    "kept": "",
    "truncated": "1;38;5;208",  # bold orange: a budget cut it
    "omitted": "2",  # dim: not in the prompt
    "changed": "1;38;5;208",
    "breaks": "1;4;38;5;208",  # bold underlined: the provider cache breaks
    "heading": "1",
    # diff --text: what was added blue, what was removed orange, hunk headers dim (the +
    # and - that open each line say it without colour)
    "added": "38;5;33",
    "removed": "38;5;208",
    "hunk": "2",
}


def colour_enabled(stream: IO[str] | Any) -> bool:
    """Whether to colour what is written to ``stream``: its ``colour`` attribute
    (``always``, ``never``; ``auto`` when missing), then the environment, then whether it
    is a terminal."""
    choice = getattr(stream, "colour", "auto")
    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return os.environ.get("TERM") != "dumb" and _tty(stream)


def plain(text: str, style: str) -> str:
    """No colour."""
    return text


def _ansi(text: str, style: str) -> str:
    code = STYLES.get(style, "")
    return f"\x1b[{code}m{text}\x1b[0m" if code and text else text


def painter(stream: IO[str] | Any) -> Painter:
    """The painter for ``stream``: ANSI colour on a terminal, :func:`plain` otherwise."""
    return _ansi if colour_enabled(stream) else plain


@contextmanager
def progress(stream: IO[str] | Any, description: str,
             total: int | None = None) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on ``stream`` while the block runs; yields ``update(done, total)``.

    Off a terminal the update does nothing and nothing is imported; with ``NO_COLOR`` the
    bar is drawn without colour.
    """
    if not _tty(stream):
        yield lambda _done, _total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    console = Console(file=stream, no_color=not colour_enabled(stream))
    # No refresh thread: the bar is redrawn only when the work reports, so a benchmark's
    # timings never share the process with it.
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                  transient=True, auto_refresh=False) as bar:
        task = bar.add_task(description, total=total)

        def update(done: int, of: int) -> None:
            bar.update(task, completed=done, total=of, refresh=True)

        yield update


def _tty(stream: IO[str] | Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False
