"""Typed SQL of import batches (`import_batches`) and of the memories a batch holds."""

from __future__ import annotations

import uuid

import asyncpg


async def insert_batch(
    conn: asyncpg.Connection, workspace_id: str, source: str, origin: str, staged: bool, principal: str
) -> asyncpg.Record:
    return await conn.fetchrow(
        """
        INSERT INTO import_batches (id, workspace_id, source, origin, staged, created_by)
        VALUES ($1, $2, $3, $4, $5, $6) RETURNING *
        """,
        uuid.uuid4(),
        workspace_id,
        source,
        origin,
        staged,
        principal,
    )


async def find_batch(conn: asyncpg.Connection, batch_id: uuid.UUID) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM import_batches WHERE id = $1", batch_id)


async def lock_batch(conn: asyncpg.Connection, batch_id: uuid.UUID, workspace_id: str) -> asyncpg.Record | None:
    """The batch, locked until commit, if it is in the workspace: an accept and a rollback take turns."""
    return await conn.fetchrow(
        "SELECT * FROM import_batches WHERE id = $1 AND workspace_id = $2 FOR UPDATE", batch_id, workspace_id
    )


async def decide_batch(conn: asyncpg.Connection, batch_id: uuid.UUID, state: str, principal: str) -> asyncpg.Record:
    return await conn.fetchrow(
        "UPDATE import_batches SET state = $2, decided_by = $3, decided_at = now() WHERE id = $1 RETURNING *",
        batch_id,
        state,
        principal,
    )


async def batch_candidates(conn: asyncpg.Connection, batch_id: uuid.UUID) -> list[asyncpg.Record]:
    """The batch's candidates that are not deleted, locked, oldest first."""
    return await conn.fetch(
        """
        SELECT * FROM memories WHERE import_batch = $1 AND status = 'candidate' AND deleted_at IS NULL
        ORDER BY created_at, id FOR UPDATE
        """,
        batch_id,
    )


async def batch_memories(conn: asyncpg.Connection, batch_id: uuid.UUID) -> list[asyncpg.Record]:
    """Every memory of the batch, deleted ones too, locked, oldest first."""
    return await conn.fetch(
        "SELECT * FROM memories WHERE import_batch = $1 ORDER BY created_at, id FOR UPDATE", batch_id
    )


async def batch_counts(conn: asyncpg.Connection | asyncpg.Pool, batch_id: uuid.UUID) -> dict[str, int]:
    """The batch's memories (not deleted) by status."""
    rows = await conn.fetch(
        "SELECT status, count(*) AS n FROM memories WHERE import_batch = $1 AND deleted_at IS NULL GROUP BY status",
        batch_id,
    )
    return {r["status"]: r["n"] for r in rows}


async def reopen_batch(conn: asyncpg.Connection, batch_id: uuid.UUID) -> asyncpg.Record:
    """Puts an accepted batch back in review (a reversed accept): open, undecided."""
    return await conn.fetchrow(
        "UPDATE import_batches SET state = 'open', decided_by = NULL, decided_at = NULL WHERE id = $1 RETURNING *",
        batch_id,
    )
