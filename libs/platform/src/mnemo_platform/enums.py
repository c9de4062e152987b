"""Proto enum values <-> the short lower-case labels used in SQL, JSON and the CLI ("note").

A label is the value's name without the enum's prefix, lower-cased, unless the value declares
its own with the `(mnemo.common.v1.label)` option (AGENT_CLAUDE_CODE is "claude-code").
"""

from __future__ import annotations

from typing import Any

from mnemo.common.v1 import options_pb2


def _prefix(enum: Any) -> str:
    # Every Mnemo enum's zero value is <PREFIX>UNSPECIFIED (buf STANDARD style).
    return enum.Name(0).removesuffix("UNSPECIFIED")


def enum_label(enum: Any, value: int) -> str:
    """MEMORY_KIND_NOTE -> "note"; the zero value -> ""."""
    if value == 0:
        return ""
    described = enum.DESCRIPTOR.values_by_number.get(value)
    if described is None:
        raise ValueError(f"{value} is not a value of {enum.DESCRIPTOR.name}")  # as enum.Name() says it
    declared = described.GetOptions().Extensions[options_pb2.label]
    return declared or described.name.removeprefix(_prefix(enum)).lower()


def enum_labels(enum: Any) -> list[str]:
    """Every label of an enum but the zero value, in declaration order."""
    return [enum_label(enum, v) for v in enum.values() if v != 0]


def enum_value(enum: Any, label: str, field: str) -> int:
    """ "note" -> MEMORY_KIND_NOTE; "" -> 0; anything else is a clear INVALID_ARGUMENT."""
    if not label:
        return 0
    # Imported here: the errors load grpc, which a client reading only the labels (the CLI) does without.
    from mnemo_platform.errors import InvalidArgument

    if "\x00" in label:
        raise InvalidArgument(f"{field} contains NUL bytes (U+0000); it must be one of {', '.join(enum_labels(enum))}")
    wanted = label.strip().lower()
    for value in enum.values():
        if value != 0 and enum_label(enum, value) == wanted:
            return int(value)
    raise InvalidArgument(f"{field} must be one of {', '.join(enum_labels(enum))}; got {label!r}")
