"""Bind parameters for SQL built from fixed fragments: values are always bound, never spliced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Params:
    """Accumulates bind parameters and hands out their $n placeholders."""

    values: list[Any] = field(default_factory=list)

    def bind(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"
