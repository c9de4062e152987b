"""Typed reads of one field of an agent's JSON record: session files are untrusted input, so a
field of the wrong type reads as absent rather than raising or flowing on as the wrong type."""

from __future__ import annotations

from typing import Any, TypeVar, overload

Default = TypeVar("Default")


def field_dict(record: dict[str, Any], key: str) -> dict[str, Any]:
    """record[key] when it is an object, else {}."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


@overload
def field_str(record: dict[str, Any], key: str) -> str: ...
@overload
def field_str(record: dict[str, Any], key: str, default: Default) -> str | Default: ...
def field_str(record: dict[str, Any], key: str, default: Any = "") -> Any:
    """record[key] when it is a string, else `default` ("" unless given)."""
    value = record.get(key)
    return value if isinstance(value, str) else default
