"""Reading JSON and TOML documents, and locating a problem's line inside them.

Every document a user hands pioneer (a profile, a compile input, ``pioneer.toml``, the
model table, a chat request, a lock file) is read here: :func:`read_text` and
:func:`parse_document` turn every way reading or parsing can fail into an error that
names the file and, where it can be found, the line (:func:`json_problem`,
:func:`toml_problem`), and refuse nesting a parser would recurse on without bound.
:func:`json_lines` and :class:`TomlLines` find the line of a JSON path in the source, so
a schema problem found in the parsed data is reported at its line.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import re
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from .errors import InputError, PioneerError, Problem

__all__ = [
    "MAX_DEPTH",
    "STDIN_NAME",
    "LineEnds",
    "TomlLines",
    "json_line",
    "json_lines",
    "json_problem",
    "parse_document",
    "read_document",
    "read_json",
    "read_text",
    "toml_line",
    "toml_problem",
]


_TOML_POSITION = re.compile(
    r"^(?P<msg>.*?) \((?:at line (?P<line>\d+), column (?P<col>\d+)|(?P<end>at end of document))\)$"
)


def toml_problem(error: Exception, file: str) -> Problem:
    """A located problem from a ``tomllib.TOMLDecodeError``."""
    match = _TOML_POSITION.match(str(error))
    if not match:
        return Problem(f"{error} (TOML syntax)", file=file)
    message = match["msg"][:1].lower() + match["msg"][1:]
    if match["end"]:
        return Problem(f"{message} at end of document (TOML syntax)", file=file)
    return Problem(
        f"{message} (TOML syntax)", file=file, line=int(match["line"]), column=int(match["col"])
    )


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _space(text: str, position: int) -> int:
    """The position after the JSON whitespace at ``position``."""
    match = _JSON_SPACE.match(text, position)
    return match.end() if match else position


def json_line(text: str, parts: Sequence[str | int]) -> int | None:
    """Best-effort 1-based line of a JSON path inside JSON source: the line of the key
    of an object member, of the first character of an array item; the nearest line
    found when the text does not hold the whole path."""
    return json_lines(text, [parts])[0]


def json_lines(text: str, paths: Sequence[Sequence[str | int]]) -> list[int | None]:
    """:func:`json_line` of each path, reading the text once however many there are: the
    members and items on the paths' way are walked, everything else is skipped by the
    C decoder, and lines are counted from one index of the text's line ends."""
    wanted: dict[Any, Any] = {}
    for parts in paths:
        node = wanted
        for part in parts:
            node = node.setdefault(part, {})
    skip = json.JSONDecoder().raw_decode
    ends = LineEnds(text)
    found: dict[tuple[str | int, ...], int] = {}

    def walk(position: int, node: dict[Any, Any], at: tuple[str | int, ...]) -> int:
        """Record the lines of ``node``'s paths in the value at ``position``; return the
        position after the value."""
        opener = text[position]
        if not node or opener not in "{[":
            return skip(text, position)[1]
        position = _space(text, position + 1)
        index = 0
        while text[position] not in "}]":
            start = position
            if opener == "{":
                key, position = skip(text, position)
                position = _space(text, _space(text, position) + 1)  # past the colon
                part: str | int = key if isinstance(key, str) else ""
            else:
                part, index = index, index + 1
            child = node.get(part) if isinstance(part, str) == (opener == "{") else None
            here = (*at, part)
            if child is not None and here not in found:  # the first of a repeated key
                found[here] = ends.line(start)
                position = walk(position, child, here)
            else:
                position = skip(text, position)[1]
            position = _space(text, position)
            if text[position] == ",":
                position = _space(text, position + 1)
        return position + 1

    with contextlib.suppress(IndexError, ValueError):  # not the JSON it was parsed from:
        walk(_space(text, 0), wanted, ())  # the lines found so far
    out: list[int | None] = []
    for parts in paths:
        key = tuple(parts)
        out.append(next((found[key[:size]] for size in range(len(key), 0, -1)
                         if key[:size] in found), None))
    return out


class LineEnds:
    """The offsets of a text's line ends, found once: the line of any offset is then a
    binary search (counting the newlines before it again would make locating many
    problems quadratic)."""

    def __init__(self, text: str):
        self._ends = [match.start() for match in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        """The 1-based line of ``offset``."""
        return bisect.bisect_left(self._ends, offset) + 1


def toml_line(text: str, parts: Sequence[str | int]) -> int | None:
    """Best-effort 1-based line of a JSON path inside TOML source."""
    return TomlLines(text).line(parts)


_TOML_KEY = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[^\s="\'\[#]+)\s*=')


class TomlLines:
    """Lines of JSON paths inside one TOML text, from an index built on the first
    question: each table header (by name, arrays of tables in order) and each key at the
    start of a line of each table's body. A file with thousands of problems is read once,
    and one with none is never indexed."""

    def __init__(self, text: str):
        self.text = text
        self._index: tuple[dict[str, int], dict[str, list[int]],
                           dict[int, dict[str, int]]] | None = None

    def _build(self) -> tuple[dict[str, int], dict[str, list[int]], dict[int, dict[str, int]]]:
        tables: dict[str, int] = {}
        arrays: dict[str, list[int]] = {}
        keys: dict[int, dict[str, int]] = {}  # by the body's header line (-1: the root)
        body = keys.setdefault(-1, {})
        for number, line in enumerate(self.text.splitlines()):
            header = _HEADER.match(line)
            if header is not None:
                if line.lstrip().startswith("[["):
                    arrays.setdefault(header[1], []).append(number)
                else:
                    tables.setdefault(header[1], number)
                body = keys.setdefault(number, {})
                continue
            key = _TOML_KEY.match(line)
            if key is not None:
                name = key[1][1:-1] if key[1][0] in "\"'" else key[1]
                body.setdefault(name, number)
        return tables, arrays, keys

    def line(self, parts: Sequence[str | int]) -> int | None:
        """The 1-based line of ``parts``: its key's line, else the nearest table's."""
        if self._index is None:
            self._index = self._build()
        tables, arrays, keys = self._index
        body, found = -1, None
        table: list[str] = []
        for part in parts:
            if isinstance(part, int):
                headers = arrays.get(".".join(table), [])
                if part >= len(headers):
                    return found
                body = headers[part]
                found, table = body + 1, []
                continue
            key_line = keys.get(body, {}).get(part)
            if key_line is not None:
                return key_line + 1
            table.append(part)
            header = tables.get(".".join(table))
            if header is not None:
                body, found, table = header, header + 1, []
        return found


def json_problem(error: json.JSONDecodeError, file: str) -> Problem:
    """A located problem from a ``json.JSONDecodeError``."""
    return Problem(f"{error.msg} (JSON syntax)", file=file, line=error.lineno,
                   column=error.colno)


#: The name a document read from standard input (a ``-`` path) goes by in messages.
STDIN_NAME = "<stdin>"
#: Nesting deeper than this is refused before a parser would run out of stack.
MAX_DEPTH = 200
_LONG_NUMBER = re.compile(rf"\d{{{sys.get_int_max_str_digits() + 1},}}")


def read_text(path: str | os.PathLike[str], what: str,
              error_type: type[PioneerError] | None = None) -> tuple[str, str]:
    """The text of ``path`` (standard input for ``-``) and the name messages give it.

    A file that cannot be read (missing, a folder, a name too long for the file system,
    a NUL byte, not UTF-8) is an error of ``error_type`` (default :class:`InputError`)
    naming the file: ``cannot read {what}: ...``.
    """
    raised = error_type or InputError
    name = os.fspath(path)
    try:
        if name == "-":
            return sys.stdin.read(), STDIN_NAME
        return Path(name).read_text("utf-8"), name
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        shown = name if name.isprintable() and len(name) <= 200 else repr(name[:200])
        raise raised(Problem(f"cannot read {what}: {reason}", file=shown)) from None


def parse_document(text: str, file: str, kind: Literal["json", "toml"],
                   error_type: type[PioneerError] | None = None) -> Any:
    """Parse JSON or TOML text; every way it can fail is an error that names the file
    and, where it can be found, the line: a syntax error, nesting deeper than
    :data:`MAX_DEPTH` (for TOML, a dotted key's or a table header's parts are levels too,
    so a key of thousands of parts is refused before tomllib builds a tuple per prefix),
    or a number longer than Python reads (4,300 digits)."""
    raised = error_type or InputError
    deep = _too_deep(text) if kind == "json" else _toml_too_deep(text)
    if deep is not None:
        raise raised(Problem(f"nested more than {MAX_DEPTH} levels deep", file=file, line=deep))
    long_number = _LONG_NUMBER.search(text)
    try:
        return json.loads(text) if kind == "json" else tomllib.loads(text)
    except json.JSONDecodeError as error:
        raise raised(json_problem(error, file)) from None
    except tomllib.TOMLDecodeError as error:
        raise raised(toml_problem(error, file)) from None
    except (ValueError, RecursionError):
        line = _line_of(text, long_number.start()) if long_number else None
        raise raised(Problem(
            f"a number has more than {sys.get_int_max_str_digits()} digits", file=file, line=line
        )) from None


def read_document(path: str | os.PathLike[str], what: str, kind: Literal["json", "toml"],
                  error_type: type[PioneerError] | None = None) -> tuple[Any, str]:
    """:func:`read_text`, then :func:`parse_document`: the data and the file's name."""
    text, name = read_text(path, what, error_type)
    return parse_document(text, name, kind, error_type), name


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _too_deep(text: str) -> int | None:
    """The line where brackets and braces first nest deeper than :data:`MAX_DEPTH`.

    Quotes are skipped roughly (a backslash escapes the next character), which is exact
    for JSON and close enough for TOML: the parsers still decide what the text means;
    this only keeps them from recursing without bound.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth, quote, escaped = 0, "", False
    for offset, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote or char == "\n":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _line_of(text, offset)
        elif char in "]}":
            depth -= 1
    return None


#: The TOML text the nesting guard reads: strings and comments (skipped whole, so what
#: they hold is never counted), and the characters that open or close a level, end a
#: line or separate the parts of a key.
_TOML_TOKENS = re.compile(
    r'"""(?:[^\\]|\\[\s\S])*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\''
    r"|#[^\n]*|[\[\]{}=.,\n]"
)


def _toml_too_deep(text: str) -> int | None:
    """The line where a TOML document first nests deeper than :data:`MAX_DEPTH`.

    Each part of a table header (one more for ``[[array]]``), each part of a dotted key
    (under its table, or inside an inline table) and each array or inline table of a
    value is a level of the data tomllib would build. Like :func:`_too_deep` this reads
    the text roughly (tomllib still decides what it means, and reports what is wrong);
    it only bounds the levels, and so the length of a dotted key, before anything is
    built: tomllib recurses per level and keeps a tuple for every prefix of a key.
    """
    if text.count("[") + text.count("{") + text.count(".") < MAX_DEPTH:
        return None  # each level past a key's first part takes one of these characters
    table = 0  # levels of the current [table] or [[array]] header
    open_: list[tuple[str, int]] = []  # a value's open "[" or "{" and the level inside it
    state, parts, depth, end = "key", 1, 0, -1
    for match in _TOML_TOKENS.finditer(text):
        token = match[0]
        if token == "\n":
            if not open_:
                state, parts = "key", 1
            continue
        if state == "key":
            if token == ".":
                parts += 1
            elif token == "=":
                state, depth = "value", (open_[-1][1] if open_ else table) + parts
            elif token == "[" and not open_:
                state, parts, table = "header", 1, 0
            elif token == "}" and open_:
                open_.pop()
                state = "value"
        elif state == "header":
            if token == "[" and match.start() == end:
                table = 1  # [[name]]: an array, and a table in it
            elif token == ".":
                parts += 1
            elif token == "]":
                state, table = "done", table + parts
        elif state == "value":
            if token in "[{":
                depth += token == "["
                open_.append((token, depth))
                if token == "{":
                    state, parts = "key", 1
            elif token in "]}" and open_:
                open_.pop()
                depth = open_[-1][1] if open_ else depth
            elif token == "," and open_:
                if open_[-1][0] == "{":
                    state, parts = "key", 1
                else:
                    depth = open_[-1][1]
        end = match.end()
        level = depth if state == "value" else table if state == "done" else (
            (open_[-1][1] if open_ else table) + parts if state == "key" else parts)
        if level > MAX_DEPTH:
            return _line_of(text, match.start())
    return None


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    """The parsed JSON of ``path`` (standard input for ``-``); an :class:`InputError`
    naming the file (and the line and column of a syntax error) when it cannot be read
    or parsed. ``what`` names the file's role in the message: ``cannot read {what}: ...``."""
    return read_document(path, what, "json")[0]
