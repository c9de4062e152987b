"""The one predicate builder: every read leg and every relaxation gets its WHERE clause here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# Statuses a default read shows; the rest need include_history (a later issue).
VISIBLE_STATUSES: tuple[str, ...] = ("candidate", "active", "confirmed")


@dataclass
class Params:
    """Accumulates bind parameters and hands out their $n placeholders."""

    values: list[Any] = field(default_factory=list)

    def bind(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


@dataclass(frozen=True)
class Scope:
    """What a read may see: the workspaces, and the caller's filters."""

    workspace_ids: Sequence[str] | None
    """workspace_ids are the workspaces readable; None means every workspace (admin reads only)."""
    kinds: Sequence[str] = ()
    tags: Sequence[str] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    statuses: Sequence[str] = VISIBLE_STATUSES


def build_predicate(scope: Scope, params: Params, memory: str = "m", chunk: str | None = None) -> str:
    """The WHERE clause (without WHERE) for memories aliased `memory`, and their chunks if given.

    With a chunk alias, the scope is applied at the chunks table too (workspace_id is
    denormalised onto chunks for exactly this) and only chunks of the current version match.
    """
    clauses = [f"{memory}.status = ANY({params.bind(list(scope.statuses))}::text[])"]
    if scope.workspace_ids is not None:
        if not scope.workspace_ids:
            raise ValueError("a read scope needs at least one workspace (None means all)")
        workspaces = params.bind(list(scope.workspace_ids))
        clauses.append(f"{memory}.workspace_id = ANY({workspaces}::text[])")
        if chunk is not None:
            clauses.append(f"{chunk}.workspace_id = ANY({workspaces}::text[])")
    if chunk is not None:
        clauses.append(f"{chunk}.version = {memory}.version")
    if scope.kinds:
        clauses.append(f"{memory}.kind = ANY({params.bind(list(scope.kinds))}::text[])")
    if scope.tags:
        clauses.append(f"{memory}.tags @> {params.bind(list(scope.tags))}::text[]")
    if scope.created_after is not None:
        clauses.append(f"{memory}.created_at >= {params.bind(scope.created_after)}")
    if scope.created_before is not None:
        clauses.append(f"{memory}.created_at < {params.bind(scope.created_before)}")
    if scope.updated_after is not None:
        clauses.append(f"{memory}.updated_at >= {params.bind(scope.updated_after)}")
    if scope.updated_before is not None:
        clauses.append(f"{memory}.updated_at < {params.bind(scope.updated_before)}")
    return " AND ".join(clauses)
