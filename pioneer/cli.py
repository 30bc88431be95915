"""The ``pioneer`` command line: one parser, one place that maps errors to exit codes.

Subcommands live one per module in :mod:`pioneer.commands`; each module defines
``NAME``, ``HELP``, ``configure(parser)`` and ``run(args, out, err) -> int``, and is
found by name, so adding a command never touches this file. Exit codes: 0 ok, 1 bad
input (a :class:`~pioneer.errors.PioneerError`), 2 bad usage (an unknown option or
command, a missing argument), 3 internal error, 130 interrupted. Every failure a user
can fix ends with the same footer, ``error: N problems``. Output goes through
:class:`Output`, so a closed or full stream is an error message and a character the
terminal cannot encode is escaped, never a crash (docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import io
import os
import pkgutil
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from . import commands
from .errors import (
    PioneerError,
    UsageError,
    counted,
    describe_exception,
    did_you_mean,
    report_lines,
)
from .review.terminal import colour_enabled, needs_escape, visible

__all__ = [
    "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "EXIT_USER", "Output",
    "main", "report",
]

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Values of ``--color``.
COLOUR_CHOICES = ("auto", "always", "never")
_FOOTER = re.compile(r"^error: \d+ problems?( |$)")


class OutputError(PioneerError):
    """Standard output is closed, full or otherwise cannot be written."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}{self._suggestion(message)}")

    def _suggestion(self, message: str) -> str:
        choice = re.match(r"argument .*: invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        if choice:
            return did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown and unknown[1].startswith("--"):
            options = [o for action in self._actions for o in action.option_strings]
            for sub in self._actions:  # options of the chosen subcommand
                if isinstance(sub, argparse._SubParsersAction):
                    for parser in sub.choices.values():
                        options += [o for a in parser._actions for o in a.option_strings]
            return did_you_mean(unknown[1].split("=")[0], options)
        return ""


class _Version(argparse.Action):
    """``-V``/``--version``: the package version, from a module that imports nothing."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        from ._version import VERSION

        print(f"pioneer {VERSION}")
        parser.exit()


def _add_colour_option(parser: argparse.ArgumentParser) -> None:
    # Accepted before the command and after it; SUPPRESS keeps a subcommand's missing
    # option from overwriting the value given before the command.
    parser.add_argument(
        "--color", choices=COLOUR_CHOICES, default=argparse.SUPPRESS, metavar="WHEN",
        help="colour the output: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR "
        "forces it), always or never (default auto)",
    )


class Output(io.TextIOBase):
    """A text stream that never crashes the command that writes to it.

    Every character a terminal would act on (ESC sequences, other controls, bidirectional
    overrides) is written as a visible escape (:func:`pioneer.review.terminal.visible`), whatever
    the command and wherever the text came from: this is the one place the CLI's text
    leaves the process. JSON stays valid and decodes to the same text. A character the
    underlying stream's encoding cannot hold is written as a backslash escape; a closed
    (``None``) or failing stream raises :class:`OutputError` for standard output and is
    silently dropped for standard error (there is nowhere left to say it). A broken pipe
    passes through: the CLI treats it as the reader having left.
    """

    def __init__(self, stream: TextIO | None, name: str, *, quiet_failure: bool = False):
        self._stream, self._name, self._quiet = stream, name, quiet_failure
        #: ``--color``: auto, always or never (read by
        #: :func:`pioneer.review.terminal.colour_enabled`).
        self.colour = "auto"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:  # colour and progress bars ask the stream underneath
        try:
            return self._stream is not None and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError(f"{self._name} is closed")
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def raw(self) -> TextIO | None:
        """The stream underneath, for writers whose own control sequences are wanted (the
        progress bar)."""
        return self._stream

    def write(self, text: str) -> int:
        if self._stream is None:
            return self._failed(None)
        size = len(text)
        if needs_escape(text):
            text = visible(text, colour=colour_enabled(self))
        try:
            self._stream.write(text)
        except UnicodeEncodeError:
            stream, encoding = self._stream, getattr(self._stream, "encoding", None) or "ascii"
            self._guard(lambda: stream.write(
                text.encode(encoding, "backslashreplace").decode(encoding)))
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:
            self._failed(error)
        return size

    def flush(self) -> None:
        if self._stream is not None:
            self._guard(self._stream.flush)

    def _guard(self, action: Any) -> None:
        try:
            action()
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as error:
            self._failed(error)

    def _failed(self, error: Exception | None) -> int:
        stream, self._stream = self._stream, None
        _discard(stream)
        if self._quiet:
            return 0
        reason = "it is closed" if error is None else (
            getattr(error, "strerror", None) or str(error))
        raise OutputError(f"cannot write to {self._name}: {reason}")


def _discard(stream: TextIO | None) -> None:
    """Point a failed standard stream at the null device, so that the interpreter's own
    flush at exit finds nothing left to fail on."""
    if stream is None or not any(stream is s for s in (sys.__stdout__, sys.__stderr__)):
        return
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def report(error: PioneerError) -> str:
    """The text the CLI prints for an error: every problem, each on its own line(s), and
    the footer ``error: N problems`` (with the error's own closing line when it has one)."""
    lines = report_lines(error.problems)
    summary = error.summary
    if summary and _FOOTER.match(summary):
        return "\n".join([*lines, summary])
    if summary:
        lines.append(summary)
    return "\n".join([*lines, f"error: {counted(len(error.problems), 'problem')}"])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every discovered subcommand, or with just ``only`` when it names one.

    Each command module imports what its command needs, so a run that names its command
    imports that one module instead of all of them (start-up time).
    """
    parser = _Parser(prog="pioneer", description="Compile what an LLM agent sees each turn.")
    parser.add_argument("-V", "--version", action=_Version)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    _add_colour_option(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    names = command_names()
    for name in [only] if only in names else names if only != "" else []:
        module = importlib.import_module(f"{commands.__name__}.{name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.configure(command)
        _add_colour_option(command)
        command.set_defaults(_run=module.run)
    return parser


def command_names() -> list[str]:
    """The subcommands, one per module of :mod:`pioneer.commands`, in name order."""
    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if m.name[0] != "_")


def _command_of(argv: Sequence[str]) -> str | None:
    """The first word of ``argv`` that is not an option or the value of ``--color``."""
    value_next = False
    for arg in argv:
        if value_next:
            value_next = False
        elif arg == "--color":
            value_next = True
        elif not arg.startswith("-"):
            return arg
    return None


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the CLI; returns the exit code instead of exiting, so tests call it directly."""
    out = Output(stdout if stdout is not None else sys.stdout, "standard output")
    err = Output(stderr if stderr is not None else sys.stderr, "standard error",
                 quiet_failure=True)
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    if debug:  # accepted after the command too
        args_list = ["--debug", *(a for a in args_list if a != "--debug")]
    name = _command_of(args_list)
    command = name if name is not None and name in command_names() else None
    try:
        asks = {"-h", "--help", "-V", "--version"} & set(args_list)
        if name is None and not asks:  # no command: the help, as a usage error (as ruff does)
            err.write(build_parser().format_help())
            return EXIT_USAGE
        # -V/--version before any command needs no command module (start-up time).
        parser = build_parser("" if name is None and asks - {"-h", "--help"} else name)
        with contextlib.redirect_stdout(out):  # --help writes to the caller's stream
            args = parser.parse_args(args_list)
        out.colour = err.colour = getattr(args, "color", "auto")
        code: int = args._run(args, out, err)
        out.flush()
        return code
    except UsageError as error:
        usage = f"pioneer {command} --help" if command else "pioneer --help"
        print(f"{report(error)}\n(run `{usage}` for usage)", file=err)
        return EXIT_USAGE
    except PioneerError as error:
        print(report(error), file=err)
        return EXIT_USER
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # --help and --version
        with contextlib.suppress(PioneerError):
            out.flush()
        if exit_.code not in (None, 0) and not isinstance(exit_.code, int):
            return EXIT_USAGE
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except BrokenPipeError:
        _discard(stdout if stdout is not None else sys.stdout)
        return EXIT_OK
    except Exception as error:
        print(f"internal error: {describe_exception(error)}", file=err)
        if debug:
            import traceback  # only for --debug

            traceback.print_exc(file=err)
        else:
            print("(run with --debug for the traceback)", file=err)
        return EXIT_INTERNAL
    finally:
        with contextlib.suppress(PioneerError, BrokenPipeError):
            err.flush()


def entry() -> NoReturn:  # pragma: no cover - the console script
    """Console-script entry point.

    The process ends after the command, so every object still alive moves to the
    collector's permanent generation first: the collections the interpreter runs while
    shutting down then skip the whole heap the imports built (pydantic schemas, compiled
    templates), about a tenth of a short command's wall time. Atexit handlers, weakref
    finalizers and the flush of stdout and stderr still run; what is skipped is collecting
    the reference cycles still alive at exit (whose finalizers Python does not promise to
    run then anyway); the operating system reclaims their memory.
    """
    code = main()
    gc.freeze()
    sys.exit(code)
