"""Helpers shared by test modules (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, failing the test (instead of hanging the suite) when it takes too long."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``pioneer ARGV...`` through ``main()``: the exit code, stdout and stderr."""
    from pioneer.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def assert_same_as_validated(record: Any) -> None:
    """``record`` equals a validated copy of itself in values, set fields and order."""
    if isinstance(record, list):
        for item in record:
            assert_same_as_validated(item)
        return
    if not isinstance(record, BaseModel):
        return
    values = {name: getattr(record, name) for name in type(record).model_fields}
    given = {name: values[name] for name in record.model_fields_set}
    validated = type(record).model_validate(given)
    assert record == validated
    assert record.model_fields_set == validated.model_fields_set
    assert list(record.__dict__) == list(validated.__dict__) == list(type(record).model_fields)
    assert record.model_dump(mode="json") == validated.model_dump(mode="json")
    assert record.model_dump_json() == validated.model_dump_json()
    for value in values.values():
        assert_same_as_validated(value)
