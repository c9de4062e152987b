"""Proto enum values <-> the short lower-case labels used in SQL, JSON and the CLI ("note").

A label is the value's name without the enum's prefix, lower-cased, unless the value declares
its own with the `(mnemo.common.v1.label)` option (AGENT_CLAUDE_CODE is "claude-code").
"""

from __future__ import annotations

import functools
from typing import Any

from mnemo.common.v1 import options_pb2


@functools.cache
def _labels(descriptor: Any) -> tuple[dict[int, str], dict[str, int]]:
    """An enum's labels by value and values by label, worked out once: reading a value's options
    costs more than the rest of turning a memory into a message (every write and read does it)."""
    # Every Mnemo enum's zero value is <PREFIX>UNSPECIFIED (buf STANDARD style).
    prefix = descriptor.values_by_number[0].name.removesuffix("UNSPECIFIED")
    by_value = {
        number: described.GetOptions().Extensions[options_pb2.label] or described.name.removeprefix(prefix).lower()
        for number, described in descriptor.values_by_number.items()
        if number != 0
    }
    return by_value, {label: number for number, label in by_value.items()}


def enum_label(enum: Any, value: int) -> str:
    """MEMORY_KIND_NOTE -> "note"; the zero value -> ""."""
    if value == 0:
        return ""
    label = _labels(enum.DESCRIPTOR)[0].get(value)
    if label is None:
        raise ValueError(f"{value} is not a value of {enum.DESCRIPTOR.name}")  # as enum.Name() says it
    return label


def enum_labels(enum: Any) -> list[str]:
    """Every label of an enum but the zero value, in declaration order."""
    return [enum_label(enum, v) for v in enum.values() if v != 0]


def enum_value(enum: Any, label: str, field: str) -> int:
    """ "note" -> MEMORY_KIND_NOTE; "" -> 0; anything else is a clear INVALID_ARGUMENT."""
    if not label:
        return 0
    value = _labels(enum.DESCRIPTOR)[1].get(label.strip().lower())
    if value is not None:
        return value
    # Imported here: the errors load grpc, which a client reading only the labels (the CLI) does without.
    from mnemo_platform.errors import InvalidArgument

    if "\x00" in label:
        raise InvalidArgument(f"{field} contains NUL bytes (U+0000); it must be one of {', '.join(enum_labels(enum))}")
    raise InvalidArgument(f"{field} must be one of {', '.join(enum_labels(enum))}; got {label!r}")
