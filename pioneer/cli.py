"""The ``pioneer`` command line: one parser, one place that maps errors to exit codes.

Subcommands live one per module in :mod:`pioneer.commands`; each module defines
``NAME``, ``HELP``, ``configure(parser)`` and ``run(args, out, err) -> int``, and is
found by name, so adding a command never touches this file. Exit codes: 0 ok, 1 user
error (a :class:`~pioneer.errors.PioneerError` or bad usage), 3 internal error, 130
interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from . import commands
from .errors import PioneerError

__all__ = ["EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USER", "main"]

EXIT_OK, EXIT_USER, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 3, 130


class _UsageError(PioneerError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every discovered subcommand, or with just ``only`` when it names one.

    Each command module imports what its command needs, so a run that names its command
    imports that one module instead of all of them (start-up time).
    """
    parser = _Parser(prog="pioneer", description="Compile what an LLM agent sees each turn.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    names = sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if m.name[0] != "_")
    for name in [only] if only in names else names:
        module = importlib.import_module(f"{commands.__name__}.{name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.configure(command)
        command.set_defaults(_run=module.run)
    return parser


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the CLI; returns the exit code instead of exiting, so tests call it directly."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    try:
        parser = build_parser(next((a for a in args_list if not a.startswith("-")), None))
        with contextlib.redirect_stdout(out):  # --help writes to the caller's stream
            args = parser.parse_args(args_list)
        code: int = args._run(args, out, err)
        return code
    except PioneerError as error:
        print(error.render(), file=err)
        return EXIT_USER
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # --help and --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except BrokenPipeError:
        return EXIT_OK
    except Exception as error:
        print(f"internal error: {type(error).__name__}: {error}", file=err)
        if debug:
            import traceback  # only for --debug

            traceback.print_exc(file=err)
        else:
            print("(run with --debug for the traceback)", file=err)
        return EXIT_INTERNAL


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
