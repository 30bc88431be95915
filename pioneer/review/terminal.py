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

**Escaping.** Text from a store, a file or a tenant can hold characters a terminal acts
on instead of showing: ESC sequences that set the clipboard (OSC 52) or the window title,
clear the screen or hide text, and bidirectional overrides that make two different
strings look alike. :func:`visible` writes each as a visible escape (``\\x1b``,
``\\u202e``); the CLI's output streams pass everything they write through it, so no
command prints them raw (docs/failure-behaviour.md, "The terminal"). The escapes of
characters from DEL up are JSON's own ``\\uXXXX``, so a JSON document stays valid and
decodes to the very same text (C0 characters never reach it raw: JSON writes them as
escapes already).

The progress bar is Rich's, imported only when a bar is actually drawn: a command run
without a terminal, and every command that draws none, never loads it (start-up time).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

__all__ = ["Painter", "colour_enabled", "needs_escape", "painter", "plain", "progress", "visible"]

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


#: What a terminal acts on instead of showing: the C0 controls but tab and newline, DEL,
#: the C1 controls, and the bidirectional marks (U+200E, U+200F, U+061C), embeddings and
#: overrides (U+202A-U+202E) and isolates (U+2066-U+2069).
_HOSTILE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_FIND = re.compile(f"[{_HOSTILE}]")
#: With colour on, the painter's own SGR sequences (and nothing else) are kept.
_OWN = "|".join(re.escape(f"\x1b[{code}m") for code in sorted({*STYLES.values(), "0"} - {""}))
_FIND_KEEPING_COLOUR = re.compile(f"({_OWN})|[{_HOSTILE}]")


def _escape(match: re.Match[str]) -> str:
    if match.lastindex:  # the painter's own colour
        return match[0]
    code = ord(match[0][-1])
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"


def needs_escape(text: str) -> bool:
    """Whether ``text`` holds a character :func:`visible` escapes."""
    return _FIND.search(text) is not None


def visible(text: str, *, colour: bool = False) -> str:
    """``text`` with every character a terminal would act on written as a visible escape:
    a C0 control as ``\\x1b``, DEL, a C1 control or a bidirectional mark as ``\\u202e``.
    Tab and newline are kept. With ``colour``, the painter's own colour sequences
    (:data:`STYLES`) are kept too; any other escape sequence is shown, not run."""
    if _FIND.search(text) is None:
        return text
    return (_FIND_KEEPING_COLOUR if colour else _FIND).sub(_escape, text)


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
    # The bar's own cursor sequences go to the stream underneath the CLI's escaping one.
    stream = getattr(stream, "raw", stream)
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
