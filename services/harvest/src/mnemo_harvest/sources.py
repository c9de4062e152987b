"""harvest_sources, the one table harvest owns: what it knows of each session, each statement once.

States and skip reasons are the SourceState and SkipReason enums of harvest_service.proto; the
table stores their labels ("skipped", "no-workspace"), which are also what the API shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg

from mnemo.harvest.v1 import harvest_service_pb2 as pb
from mnemo_harvest.model import SourceRef
from mnemo_platform import enum_label
from mnemo_store import Params, Reach, workspace_clause

Key = tuple[str, str]
Row = Mapping[str, Any]
"""Row is what is known of one session: harvest_sources' columns by name."""


def state_label(state: int) -> str:
    return enum_label(pb.SourceState, state)


def skip_label(skip: int) -> str:
    return enum_label(pb.SkipReason, skip)


@dataclass(frozen=True)
class Record:
    """What one look at a session concluded, to be written over its row."""

    state: int
    """state is a SourceState."""
    detail: str
    """detail says why, in words, for people."""
    skip: int = pb.SKIP_REASON_UNSPECIFIED
    """skip is the SkipReason when the state is skipped."""


async def known(pool: asyncpg.Pool) -> dict[Key, asyncpg.Record]:
    """Every session harvest knows, by (agent, session id): one read per run."""
    return {(r["agent"], r["session_id"]): r for r in await pool.fetch("SELECT * FROM harvest_sources")}


async def owed_from_archive(pool: asyncpg.Pool, derived_with: str, agent: str) -> list[asyncpg.Record]:
    """Harvested sessions with an archived copy whose memory is owed a new derivation."""
    return await pool.fetch(
        """
        SELECT agent, session_id, path, harvested_size, harvested_mtime, archive_path FROM harvest_sources
        WHERE state = $3 AND archive_path IS NOT NULL AND harvested_mtime IS NOT NULL
          AND (NOT final OR derived_with IS DISTINCT FROM $1) AND ($2 = '' OR agent = $2)
        """,
        derived_with,
        agent,
        state_label(pb.SOURCE_STATE_HARVESTED),
    )


async def seen(pool: asyncpg.Pool, ref: SourceRef) -> asyncpg.Record | None:
    """Notes where and how large a session was seen (new sessions start idle); returns its row."""
    return await pool.fetchrow(
        """
        INSERT INTO harvest_sources (agent, session_id, path, size, mtime, state)
        VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (agent, session_id) DO UPDATE SET path = $3, size = $4, mtime = $5, last_seen_at = now()
        RETURNING *
        """,
        ref.agent,
        ref.key,
        ref.path,
        ref.size,
        datetime.fromtimestamp(ref.mtime, UTC),
        state_label(pb.SOURCE_STATE_IDLE),
    )


async def record(
    pool: asyncpg.Pool,
    ref: SourceRef,
    outcome: Record,
    *,
    cwd: str | None = None,
    workspace: str | None = None,
    memory_id: str | None = None,
    final: bool = True,
    attempts: bool = False,
    harvested: tuple[SourceRef, datetime] | None = None,
    archive: tuple[str, int] | None = None,
    fingerprint: str | None = None,
    derived_with: str | None = None,
) -> None:
    """Writes a look's conclusion over the session's row; only the fields given change."""
    values: dict[str, Any] = {
        "state": state_label(outcome.state),
        "detail": outcome.detail,
        "skip_reason": skip_label(outcome.skip) or None,
        "final": final,
    }
    if derived_with is not None:
        values["derived_with"] = derived_with
    if fingerprint is not None:
        values["content_hash"] = fingerprint
    if cwd is not None:
        values["cwd"] = cwd
    if workspace is not None:
        values["workspace_id"] = workspace
    if memory_id:
        values["memory_id"] = memory_id
    if harvested is not None:
        values["harvested_size"] = harvested[0].size
        values["harvested_mtime"] = harvested[1]
        values["harvested_at"] = datetime.now(UTC)
    if archive is not None:
        values["archive_path"], values["archive_bytes"] = archive
        values["archived_at"] = datetime.now(UTC)
    columns = list(values)
    assignments = ", ".join(f"{column} = ${i}" for i, column in enumerate(columns, start=3))
    bump = ", attempts = attempts + 1" if attempts else ", attempts = 0"
    await pool.execute(
        f"UPDATE harvest_sources SET {assignments}{bump} WHERE agent = $1 AND session_id = $2",
        ref.agent,
        ref.key,
        *[values[c] for c in columns],
    )


async def archive_evicted(pool: asyncpg.Pool, paths: list[str]) -> None:
    """Forgets archived copies the archive evicted."""
    await pool.execute(
        "UPDATE harvest_sources SET archive_evicted_at = now(), archive_path = NULL, archive_bytes = NULL "
        "WHERE archive_path = ANY($1::text[])",
        paths,
    )


async def within(pool: asyncpg.Pool, reach: Reach) -> list[asyncpg.Record]:
    """The sessions placed in workspaces the reach covers (the unplaced ones only for a reach of all), newest first."""
    params = Params()
    return await pool.fetch(
        f"SELECT * FROM harvest_sources WHERE {workspace_clause(reach, params, 'workspace_id')} "
        "ORDER BY mtime DESC NULLS LAST",
        *params.values,
    )


async def unregistered_dirs(pool: asyncpg.Pool) -> list[str]:
    """Working directories of sessions skipped because no workspace holds them."""
    rows = await pool.fetch(
        "SELECT DISTINCT cwd FROM harvest_sources WHERE state = $1 AND skip_reason = $2 AND cwd IS NOT NULL "
        "ORDER BY cwd",
        state_label(pb.SOURCE_STATE_SKIPPED),
        skip_label(pb.SKIP_REASON_NO_WORKSPACE),
    )
    return [r["cwd"] for r in rows]


async def page(
    pool: asyncpg.Pool, reach: Reach, agent: str, state: str, size: int, offset: int
) -> list[asyncpg.Record]:
    """Up to `size` sessions from `offset` (newest first), of one agent and state when given."""
    params = Params()
    agent_p, state_p = params.bind(agent), params.bind(state)
    return await pool.fetch(
        f"""
        SELECT * FROM harvest_sources
        WHERE ({agent_p} = '' OR agent = {agent_p}) AND ({state_p} = '' OR state = {state_p})
          AND {workspace_clause(reach, params, "workspace_id")}
        ORDER BY mtime DESC NULLS LAST, agent, session_id
        LIMIT {params.bind(size)} OFFSET {params.bind(offset)}
        """,
        *params.values,
    )


class SourceBook(Protocol):
    """Where a harvester keeps what it knows of each session (the engine's only state): the table above
    in-cluster, a file on a laptop that harvests through a gateway (mnemo_harvest.ledger)."""

    async def known(self) -> dict[Key, Row]: ...

    async def owed_from_archive(self, derived_with: str, agent: str) -> list[Row]: ...

    async def seen(self, ref: SourceRef) -> Row | None: ...

    async def record(self, ref: SourceRef, outcome: Record, **fields: Any) -> None: ...

    async def archive_evicted(self, paths: list[str]) -> None: ...


class DatabaseSources:
    """The in-cluster book: harvest_sources, through the statements above."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def known(self) -> dict[Key, Row]:
        return dict(await known(self.pool))

    async def owed_from_archive(self, derived_with: str, agent: str) -> list[Row]:
        return list(await owed_from_archive(self.pool, derived_with, agent))

    async def seen(self, ref: SourceRef) -> Row | None:
        return await seen(self.pool, ref)

    async def record(self, ref: SourceRef, outcome: Record, **fields: Any) -> None:
        await record(self.pool, ref, outcome, **fields)

    async def archive_evicted(self, paths: list[str]) -> None:
        await archive_evicted(self.pool, paths)
