"""The one predicate builder: every read leg, relaxation, get and list gets its scope here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from mnemo_store.access import Reach, workspace_clause
from mnemo_store.params import Params

# Statuses a default read shows; include_history shows them all. Deleted memories are on no
# read path at all, history or not.
VISIBLE_STATUSES: tuple[str, ...] = ("candidate", "active", "confirmed")
ALL_STATUSES: tuple[str, ...] = (
    "candidate",
    "active",
    "confirmed",
    "superseded",
    "contradicted",
    "retracted",
    "archived",
)


@dataclass(frozen=True)
class Scope:
    """What a read may see: the workspaces, the caller's filters, history and time."""

    reach: Reach
    """reach is the workspaces readable, as the access module decided (mnemo_store.access)."""
    kinds: Sequence[str] = ()
    tags: Sequence[str] = ()
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    include_history: bool = False
    as_of: datetime | None = None
    """as_of reads what was recorded at that time: the version and the status current then."""
    valid_at: datetime | None = None
    """valid_at keeps beliefs whose world-time span (valid_from, valid_to) contains that time."""
    only_statuses: Sequence[str] = ()
    """only_statuses keeps only these of the statuses the read may see; it narrows, never widens
    (a hidden status stays hidden without include_history). Empty keeps them all."""

    @property
    def statuses(self) -> tuple[str, ...]:
        allowed = ALL_STATUSES if self.include_history else VISIBLE_STATUSES
        if self.only_statuses:
            return tuple(status for status in allowed if status in self.only_statuses)
        return allowed

    @property
    def filtered(self) -> bool:
        """Whether the caller's filters (beyond workspace and visibility) may leave out notes; an
        as-of read leaves out what was written after its time."""
        return bool(
            self.as_of
            or self.kinds
            or self.tags
            or self.only_statuses
            or self.created_after
            or self.created_before
            or self.updated_after
            or self.updated_before
            or self.valid_at
        )

    @property
    def indexed_only(self) -> bool:
        """Whether every chunk this read may return is in the search indexes (`indexed`): true for
        a default read; history and as-of reads return chunks the indexes leave out."""
        return not self.include_history and self.as_of is None


@dataclass(frozen=True)
class Scoped:
    """A read's FROM relation for memories and the WHERE clause (without WHERE) that scopes it."""

    source: str
    where: str


# The memories as they were recorded at a time: the version and the status span open then.
# Every column of `memories` that reads use is here, so a query is the same either way.
_AS_OF = """(
    SELECT m.id, m.workspace_id, m.kind, v.title, m.tags, m.metadata, m.source_uri,
           s.status, s.reason AS status_reason, m.trust, m.suspicious, m.author, m.provenance, v.version,
           v.content_hash, s.valid_from, s.valid_to, m.created_at, v.recorded_from AS updated_at,
           s.superseded_by, m.deleted_at, m.feedback_factor
    FROM memories m
    JOIN memory_versions v ON v.memory_id = m.id
         AND v.recorded_from <= {t} AND (v.recorded_to IS NULL OR v.recorded_to > {t})
    JOIN memory_states s ON s.memory_id = m.id
         AND s.recorded_from <= {t} AND (s.recorded_to IS NULL OR s.recorded_to > {t})
)"""


def chunk_clauses(scope: Scope, params: Params, chunk: str) -> list[str]:
    """The clauses of the scope a chunk's own columns answer (`chunks` or `chunk_vectors`, aliased
    `chunk`): its workspace, and for a default read `indexed`. build_scope adds them, with the
    version, when given a chunk alias; a statement that checks the memory elsewhere (the semantic
    leg as of a time) puts them beside the chunk itself."""
    clauses = []
    if not scope.reach.everywhere:
        clauses.append(workspace_clause(scope.reach, params, f"{chunk}.workspace_id"))
    if scope.indexed_only:
        clauses.append(f"{chunk}.indexed")
    return clauses


def build_scope(scope: Scope, params: Params, memory: str = "m", chunk: str | None = None) -> Scoped:
    """The relation to read memories from (aliased `memory`) and the WHERE clause scoping it.

    With a chunk alias (of `chunks` or `chunk_vectors`, which both carry the chunk's scope
    columns), the scope applies at that table too (workspace_id is denormalised for exactly this)
    and only chunks of the version being read match. A default read also says `indexed`, which
    lets the planner use the partial full-text and vector indexes; the other clauses stay, so the
    answer never rests on the flag alone.
    """
    if scope.as_of is not None:
        source = _AS_OF.format(t=params.bind(scope.as_of)) + f" {memory}"
    else:
        source = f"memories {memory}"
    clauses = [
        f"{memory}.deleted_at IS NULL",
        f"{memory}.status = ANY({params.bind(list(scope.statuses))}::text[])",
    ]
    if not scope.reach.everywhere:
        clauses.append(workspace_clause(scope.reach, params, f"{memory}.workspace_id"))
    if chunk is not None:
        clauses += chunk_clauses(scope, params, chunk)
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
    if scope.valid_at is not None:
        at = params.bind(scope.valid_at)
        clauses.append(
            f"({memory}.valid_from IS NULL OR {memory}.valid_from <= {at}) "
            f"AND ({memory}.valid_to IS NULL OR {memory}.valid_to > {at})"
        )
    return Scoped(source=source, where=" AND ".join(clauses))
