"""Tombstones (a deletion keyed on the source) and derivations (what was derived from which source version).

The tables are defined in sql/0002_corrections.sql and sql/0003_harvest.sql; each statement once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg


@dataclass(frozen=True)
class Derivation:
    """How a derived memory was made: the source version (by fingerprint) and the summarizer."""

    source_fingerprint: str
    summarizer: str
    prompt_version: str


async def purged_at(
    conn: asyncpg.Connection | asyncpg.Pool, memory_id: uuid.UUID, workspace_id: str
) -> datetime | None:
    """When a memory of this workspace was purged, or None if it never was."""
    return await conn.fetchval(
        "SELECT purged_at FROM tombstones WHERE memory_id = $1 AND workspace_id = $2 AND purged_at IS NOT NULL",
        memory_id,
        workspace_id,
    )


async def ever_in(conn: asyncpg.Connection | asyncpg.Pool, memory_id: uuid.UUID, workspace_id: str) -> bool:
    """Whether the memory is, or was until purged, in this workspace (a purged memory keeps its audit events)."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM memories WHERE id = $1 AND workspace_id = $2) "
            "OR EXISTS (SELECT 1 FROM tombstones WHERE memory_id = $1 AND workspace_id = $2)",
            memory_id,
            workspace_id,
        )
    )


async def standing_tombstone(conn: asyncpg.Connection, workspace_id: str, source_uri: str) -> asyncpg.Record | None:
    """The tombstone keeping this source deleted (not restored), if one stands."""
    return await conn.fetchrow(
        "SELECT memory_id, principal, created_at, purged_at FROM tombstones "
        "WHERE workspace_id = $1 AND source_uri = $2 AND restored_at IS NULL",
        workspace_id,
        source_uri,
    )


async def insert_tombstone(
    conn: asyncpg.Connection, row: asyncpg.Record, snapshot: dict[str, Any], reason: str | None, principal: str
) -> asyncpg.Record:
    """A tombstone for a located memory, keyed on its source and current content."""
    return await conn.fetchrow(
        """
        INSERT INTO tombstones (workspace_id, memory_id, source_uri, source_fingerprint, snapshot, reason, principal)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        RETURNING *
        """,
        row["workspace_id"],
        row["id"],
        row["source_uri"],
        row["content_hash"],
        snapshot,
        reason,
        principal,
    )


async def lift_tombstone(conn: asyncpg.Connection, memory_id: uuid.UUID) -> asyncpg.Record | None:
    """Marks the memory's standing tombstone restored; returns it (its snapshot), or None if none stands."""
    return await conn.fetchrow(
        "UPDATE tombstones SET restored_at = now() WHERE memory_id = $1 AND restored_at IS NULL "
        "AND purged_at IS NULL RETURNING snapshot",
        memory_id,
    )


async def purge_tombstone(conn: asyncpg.Connection, memory_id: uuid.UUID) -> asyncpg.Record:
    """Keeps only the standing tombstone's key, who and when: the snapshot and reason go with the content."""
    return await conn.fetchrow(
        """
        UPDATE tombstones SET snapshot = NULL, reason = NULL, purged_at = now()
        WHERE memory_id = $1 AND restored_at IS NULL AND purged_at IS NULL
        RETURNING *
        """,
        memory_id,
    )


async def tombstones_of(conn: asyncpg.Connection, memory_id: uuid.UUID) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT id, snapshot, reason FROM tombstones WHERE memory_id = $1", memory_id)


async def rewrite_tombstone(
    conn: asyncpg.Connection, tombstone_id: int, snapshot: dict[str, Any] | None, reason: str | None
) -> None:
    """Rewrites a tombstone's snapshot and reason in place (redaction)."""
    await conn.execute("UPDATE tombstones SET snapshot = $2, reason = $3 WHERE id = $1", tombstone_id, snapshot, reason)


async def rename_source(conn: asyncpg.Connection, workspace_id: str, old: str, new: str | None) -> None:
    """Carries a source key's rewrite (redaction) to the derivations and tombstones keyed on it."""
    for table in ("derivations", "tombstones"):
        await conn.execute(
            f"UPDATE {table} SET source_uri = $3 WHERE workspace_id = $1 AND source_uri = $2", workspace_id, old, new
        )


async def derived_memory(
    conn: asyncpg.Connection, workspace_id: str, source_uri: str, derivation: Derivation
) -> uuid.UUID | None:
    """The memory already derived from this exact source version this way, if any."""
    return await conn.fetchval(
        """
        SELECT memory_id FROM derivations
        WHERE workspace_id = $1 AND source_uri = $2 AND source_fingerprint = $3
          AND summarizer = $4 AND prompt_version = $5
        """,
        workspace_id,
        source_uri,
        derivation.source_fingerprint,
        derivation.summarizer,
        derivation.prompt_version,
    )


async def record_derivation(
    conn: asyncpg.Connection, workspace_id: str, source_uri: str, derivation: Derivation, memory_id: uuid.UUID
) -> None:
    """Records that the memory's current version was derived from this source version."""
    await conn.execute(
        """
        INSERT INTO derivations (workspace_id, source_uri, source_fingerprint, summarizer, prompt_version,
                                 memory_id, version)
        VALUES ($1, $2, $3, $4, $5, $6, (SELECT version FROM memories WHERE id = $6))
        """,
        workspace_id,
        source_uri,
        derivation.source_fingerprint,
        derivation.summarizer,
        derivation.prompt_version,
        memory_id,
    )
