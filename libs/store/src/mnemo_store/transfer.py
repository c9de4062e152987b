"""Export and restore (docs/export-format.md): reading whole workspaces as they are stored, and writing
them back with their recorded history, ids and times. Each statement once, typed.

Reads take the export's connection (one read-only snapshot); writes take the restore's transaction.
Chunks are not here: a restore chunks again and inserts through memories.insert_chunks, the one
place chunks (and their embedding and lexical queues) are written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

# The action of the audit events a restore appends, one per record written (docs/export-format.md).
IMPORT_ACTIONS = {"workspace": "import_workspace", "memory": "import", "tombstone": "import_tombstone"}
IMPORT_HEAD_ACTION = "import_audit_head"


# -- export: reads ---------------------------------------------------------------------------------


async def workspaces_by_id(conn: asyncpg.Connection, workspace_ids: Sequence[str] | None) -> list[asyncpg.Record]:
    """The workspaces with these ids (every one when None), by id."""
    if workspace_ids is None:
        return await conn.fetch("SELECT id, name, root_path, created_at FROM workspaces ORDER BY id")
    return await conn.fetch(
        "SELECT id, name, root_path, created_at FROM workspaces WHERE id = ANY($1::text[]) ORDER BY id",
        list(workspace_ids),
    )


async def memory_page(
    conn: asyncpg.Connection, workspace_id: str, after: tuple[datetime, uuid.UUID] | None, limit: int
) -> list[asyncpg.Record]:
    """Up to `limit` memories of the workspace, every column, deleted or not, oldest first, after the cursor."""
    if after is None:
        return await conn.fetch(
            "SELECT * FROM memories WHERE workspace_id = $1 ORDER BY created_at, id LIMIT $2", workspace_id, limit
        )
    return await conn.fetch(
        "SELECT * FROM memories WHERE workspace_id = $1 AND (created_at, id) > ($2, $3) "
        "ORDER BY created_at, id LIMIT $4",
        workspace_id,
        after[0],
        after[1],
        limit,
    )


async def histories(conn: asyncpg.Connection, memory_ids: Sequence[uuid.UUID]) -> dict[str, dict[uuid.UUID, list]]:
    """Every version, status span and derivation of these memories, by table and memory, oldest first."""
    ids = list(memory_ids)
    found: dict[str, dict[uuid.UUID, list]] = {"versions": {}, "states": {}, "derivations": {}}
    for name, sql in (
        ("versions", "SELECT * FROM memory_versions WHERE memory_id = ANY($1::uuid[]) ORDER BY memory_id, version"),
        ("states", "SELECT * FROM memory_states WHERE memory_id = ANY($1::uuid[]) ORDER BY memory_id, recorded_from"),
        ("derivations", "SELECT * FROM derivations WHERE memory_id = ANY($1::uuid[]) ORDER BY memory_id, id"),
    ):
        for row in await conn.fetch(sql, ids):
            found[name].setdefault(row["memory_id"], []).append(row)
    return found


async def tombstones_in(conn: asyncpg.Connection, workspace_id: str) -> list[asyncpg.Record]:
    """Every tombstone of the workspace (standing, restored or purged), oldest first."""
    return await conn.fetch("SELECT * FROM tombstones WHERE workspace_id = $1 ORDER BY id", workspace_id)


async def audit_head(conn: asyncpg.Connection, workspace_id: str) -> asyncpg.Record:
    """The workspace's chain: how many events, and the last one's id, hash and time (None when empty)."""
    row = await conn.fetchrow(
        """
        SELECT (SELECT count(*) FROM audit_events WHERE workspace_id = $1) AS events, last.id, last.hash, last.at
        FROM (SELECT 1) AS one
        LEFT JOIN LATERAL (SELECT id, hash, at FROM audit_events WHERE workspace_id = $1 ORDER BY id DESC LIMIT 1)
             AS last ON true
        """,
        workspace_id,
    )
    assert row is not None  # one row, whatever the chain holds
    return row


# -- restore: writes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoredMemory:
    """A memory as an export recorded it: its row, every version and status span, its derivations."""

    row: dict[str, Any]
    """row has every column of `memories` (superseded_by is written only once that memory exists)."""
    versions: Sequence[dict[str, Any]]
    states: Sequence[dict[str, Any]]
    derivations: Sequence[dict[str, Any]]


async def insert_workspace(conn: asyncpg.Connection, row: dict[str, Any]) -> bool:
    """The workspace with its exported id, name, root and time; False when any of those is taken."""
    return bool(
        await conn.fetchval(
            "INSERT INTO workspaces (id, name, root_path, created_at) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT DO NOTHING RETURNING true",
            row["id"],
            row["name"],
            row["root_path"],
            row["created_at"],
        )
    )


async def workspace_row(conn: asyncpg.Connection, workspace_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT id, name, root_path, created_at FROM workspaces WHERE id = $1", workspace_id)


async def memories_not_restored(conn: asyncpg.Connection, workspace_id: str) -> int:
    """How many memories of the workspace no restore wrote (their first event is not an import)."""
    return int(
        await conn.fetchval(
            """
            SELECT count(*) FROM memories m
            WHERE m.workspace_id = $1
              AND NOT EXISTS (SELECT 1 FROM audit_events a WHERE a.memory_id = m.id AND a.action = $2)
            """,
            workspace_id,
            IMPORT_ACTIONS["memory"],
        )
    )


async def restored_digest(
    conn: asyncpg.Connection, workspace_id: str, action: str, memory_id: uuid.UUID | None, digest: str
) -> bool:
    """Whether a restore already wrote the record with this digest (its import event names it)."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM audit_events WHERE workspace_id = $1 AND action = $2 "
            "AND memory_id IS NOT DISTINCT FROM $3 AND details->>'record_sha256' = $4)",
            workspace_id,
            action,
            memory_id,
            digest,
        )
    )


async def memory_place(conn: asyncpg.Connection, memory_id: uuid.UUID) -> str | None:
    """The workspace holding a memory with this id, here, or None."""
    return await conn.fetchval("SELECT workspace_id FROM memories WHERE id = $1", memory_id)


async def insert_restored(conn: asyncpg.Connection, memory: RestoredMemory) -> None:
    """The memory row, its versions and status spans (recorded times as exported) and derivations;
    then the pointer of any restored memory the open span says this one superseded."""
    row = memory.row
    columns = [
        ("id", "uuid"),
        ("workspace_id", "text"),
        ("kind", "text"),
        ("title", "text"),
        ("tags", "text[]"),
        ("metadata", "jsonb"),
        ("source_uri", "text"),
        ("idempotency_key", "text"),
        ("status", "text"),
        ("status_reason", "text"),
        ("trust", "real"),
        ("suspicious", "text[]"),
        ("author", "text"),
        ("provenance", "text"),
        ("version", "int"),
        ("content_hash", "text"),
        ("valid_from", "timestamptz"),
        ("valid_to", "timestamptz"),
        ("created_at", "timestamptz"),
        ("updated_at", "timestamptz"),
        ("deleted_at", "timestamptz"),
    ]
    names = ", ".join(name for name, _ in columns)
    values = ", ".join(f"${i}::{kind}" for i, (_, kind) in enumerate(columns, 1))
    n = len(columns) + 1
    # The successor may come later in the file (it is newer) or not at all (purged, or another
    # workspace's): the pointer waits for it, see the relinking below.
    await conn.execute(
        f"INSERT INTO memories ({names}, superseded_by) "
        f"VALUES ({values}, (SELECT id FROM memories WHERE id = ${n}::uuid))",
        *[row[name] for name, _ in columns],
        row["superseded_by"],
    )
    await conn.executemany(
        "INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author, "
        "recorded_from, recorded_to) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [
            (
                row["id"],
                v["version"],
                row["workspace_id"],
                v["title"],
                v["content"],
                v["content_hash"],
                v["author"],
                v["recorded_from"],
                v["recorded_to"],
            )
            for v in memory.versions
        ],
    )
    await conn.executemany(
        "INSERT INTO memory_states (memory_id, workspace_id, status, reason, principal, superseded_by, valid_from, "
        "valid_to, recorded_from, recorded_to) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        [
            (
                row["id"],
                row["workspace_id"],
                s["status"],
                s["reason"],
                s["principal"],
                s["superseded_by"],
                s["valid_from"],
                s["valid_to"],
                s["recorded_from"],
                s["recorded_to"],
            )
            for s in memory.states
        ],
    )
    if memory.derivations:
        await conn.executemany(
            "INSERT INTO derivations (workspace_id, source_uri, source_fingerprint, summarizer, prompt_version, "
            "memory_id, version, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            [
                (
                    row["workspace_id"],
                    d["source_uri"],
                    d["source_fingerprint"],
                    d["summarizer"],
                    d["prompt_version"],
                    row["id"],
                    d["version"],
                    d["created_at"],
                )
                for d in memory.derivations
            ],
        )
    await conn.execute(
        """
        UPDATE memories m SET superseded_by = $1
        FROM memory_states s
        WHERE s.memory_id = m.id AND s.recorded_to IS NULL AND s.superseded_by = $1
          AND m.superseded_by IS NULL AND m.status = 'superseded'
        """,
        row["id"],
    )


async def insert_tombstone(conn: asyncpg.Connection, row: dict[str, Any]) -> None:
    """A tombstone as exported: its key, snapshot (none once purged), reason, who and when."""
    await conn.execute(
        """
        INSERT INTO tombstones (workspace_id, memory_id, source_uri, source_fingerprint, snapshot, reason, principal,
                                created_at, restored_at, purged_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
        """,
        row["workspace_id"],
        row["memory_id"],
        row["source_uri"],
        row["source_fingerprint"],
        row["snapshot"],
        row["reason"],
        row["principal"],
        row["created_at"],
        row["restored_at"],
        row["purged_at"],
    )
