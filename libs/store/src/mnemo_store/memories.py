"""Memories and what hangs off them (versions, status spans, chunks): each statement once, typed.

The tables are defined in sql/0001_core.sql and sql/0002_corrections.sql. Callers hold the
transaction; nothing here decides who may do what (that is the access module and the services).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from mnemo.common.v1 import errors_pb2 as reasons_pb

# The columns a memory row is read with (of `memories m`, or of the as-of relation of the same
# shape); `embedding_state` sums up the chunks of the version read. Add `v.content` with CONTENT_JOIN.
MEMORY_COLUMNS = """
    m.id, m.workspace_id, m.kind, m.title, m.tags, m.metadata, m.source_uri, m.status,
    m.provenance, m.author, m.version, m.content_hash, m.created_at, m.updated_at,
    m.superseded_by, m.valid_from, m.valid_to, m.status_reason, m.trust, m.suspicious, m.deleted_at,
    (SELECT CASE WHEN bool_or(c.embed_status = 'failed') THEN 'failed'
                 WHEN bool_or(c.embed_status = 'pending') THEN 'pending'
                 ELSE 'embedded' END
       FROM chunks c WHERE c.memory_id = m.id AND c.version = m.version) AS embedding_state
"""
# Joins the version being read, for reads that need the content (`v.content`).
CONTENT_JOIN = "JOIN memory_versions v ON v.memory_id = m.id AND v.version = m.version"

# Closes a memory's open span ($1 is the memory id) at now(), or just after its start if that is
# later: spans stay contiguous and ordered even when a transaction that started earlier (an
# earlier now()) commits its change after another one.
_CLOSE_SPAN = """
    UPDATE {table} SET recorded_to = greatest(now(), recorded_from + interval '1 microsecond')
    WHERE memory_id = $1 AND recorded_to IS NULL
    RETURNING recorded_to
"""


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be inserted: its first version, its first status span and its chunks."""

    workspace_id: str
    kind: str
    title: str
    content: str
    content_hash: str
    tags: list[str]
    metadata: dict[str, Any]
    source_uri: str | None
    idempotency_key: str | None
    status: str
    author: str
    provenance: str
    valid_from: datetime | None
    valid_to: datetime | None
    suspicious: tuple[str, ...]
    trust: float
    """trust is the memory's own factor (lowered while its text is flagged suspicious)."""


@dataclass(frozen=True)
class NewVersion:
    """The next version of a memory: its text and the fields that change with it."""

    title: str
    content: str
    content_hash: str
    tags: list[str]
    metadata: dict[str, Any]
    author: str
    suspicious: tuple[str, ...]
    trust: float


@dataclass(frozen=True)
class ChunkRow:
    """One searchable piece of a version: the text, its context (the title) and the compound-token parts."""

    ordinal: int
    context: str
    text: str
    parts: str


async def lock_memory(conn: asyncpg.Connection, memory_id: uuid.UUID, workspace_id: str) -> asyncpg.Record | None:
    """The memory in this workspace, locked for the rest of the transaction; None if it is not there."""
    return await conn.fetchrow(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1 AND m.workspace_id = $2 FOR UPDATE OF m",
        memory_id,
        workspace_id,
    )


async def fetch_memory(conn: asyncpg.Connection | asyncpg.Pool, memory_id: uuid.UUID) -> asyncpg.Record:
    """The memory with the content of its current version (deleted or not: the caller has located it)."""
    return await conn.fetchrow(
        f"SELECT {MEMORY_COLUMNS}, v.content FROM memories m {CONTENT_JOIN} WHERE m.id = $1", memory_id
    )


async def memory_workspace(conn: asyncpg.Connection, memory_id: uuid.UUID) -> str | None:
    """The workspace a memory is in, locking it (None once purged)."""
    return await conn.fetchval("SELECT workspace_id FROM memories WHERE id = $1 FOR UPDATE", memory_id)


async def memory_is_in(conn: asyncpg.Connection | asyncpg.Pool, memory_id: uuid.UUID, workspace_id: str) -> bool:
    return bool(
        await conn.fetchval("SELECT 1 FROM memories WHERE id = $1 AND workspace_id = $2", memory_id, workspace_id)
    )


async def find_by_idempotency_key(conn: asyncpg.Connection, workspace_id: str, key: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT id, content_hash FROM memories WHERE workspace_id = $1 AND idempotency_key = $2", workspace_id, key
    )


async def lock_by_source(conn: asyncpg.Connection, workspace_id: str, source_uri: str) -> asyncpg.Record | None:
    """The memory holding this source in the workspace, locked; None if the source has none yet."""
    return await conn.fetchrow(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.workspace_id = $1 AND m.source_uri = $2 FOR UPDATE OF m",
        workspace_id,
        source_uri,
    )


async def version_content(conn: asyncpg.Connection, memory_id: uuid.UUID, version: int) -> str:
    return await conn.fetchval(
        "SELECT content FROM memory_versions WHERE memory_id = $1 AND version = $2", memory_id, version
    )


async def insert_memory(conn: asyncpg.Connection, new: NewMemory) -> uuid.UUID:
    """The memory, its first version, its first status span and its chunks' rows (no chunks, no audit event)."""
    memory_id = uuid.uuid4()
    await conn.execute(
        """
        INSERT INTO memories (id, workspace_id, kind, title, tags, metadata, source_uri, idempotency_key,
                              status, author, provenance, version, content_hash, valid_from, valid_to,
                              suspicious, trust)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12, $13, $14, $15, $16)
        """,
        memory_id,
        new.workspace_id,
        new.kind,
        new.title,
        new.tags,
        new.metadata,
        new.source_uri,
        new.idempotency_key,
        new.status,
        new.author,
        new.provenance,
        new.content_hash,
        new.valid_from,
        new.valid_to,
        list(new.suspicious),
        new.trust,
    )
    await conn.execute(
        """
        INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author)
        VALUES ($1, 1, $2, $3, $4, $5, $6)
        """,
        memory_id,
        new.workspace_id,
        new.title,
        new.content,
        new.content_hash,
        new.author,
    )
    await open_state(
        conn, memory_id, new.workspace_id, new.status, None, new.author, None, new.valid_from, new.valid_to
    )
    return memory_id


async def insert_version(
    conn: asyncpg.Connection, memory_id: uuid.UUID, workspace_id: str, version: int, new: NewVersion
) -> None:
    """Closes the open version and opens `version` with the new text, updating the memory to match."""
    await conn.execute(
        f"""
        WITH closed AS ({_CLOSE_SPAN.format(table="memory_versions")})
        INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author,
                                     recorded_from)
        VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce((SELECT recorded_to FROM closed), now()))
        """,
        memory_id,
        version,
        workspace_id,
        new.title,
        new.content,
        new.content_hash,
        new.author,
    )
    await conn.execute(
        """
        UPDATE memories SET version = $2, title = $3, tags = $4, metadata = $5, content_hash = $6,
                            updated_at = now(), suspicious = $7, trust = $8
        WHERE id = $1
        """,
        memory_id,
        version,
        new.title,
        new.tags,
        new.metadata,
        new.content_hash,
        list(new.suspicious),
        new.trust,
    )


async def set_provenance(conn: asyncpg.Connection, memory_id: uuid.UUID, provenance: str) -> None:
    await conn.execute("UPDATE memories SET provenance = $2 WHERE id = $1 AND provenance <> $2", memory_id, provenance)


async def set_status(
    conn: asyncpg.Connection,
    row: asyncpg.Record,
    status: str,
    reason: str | None,
    principal: str,
    superseded_by: uuid.UUID | None = None,
    valid_to: datetime | None = None,
) -> None:
    """Changes the status (and valid time) of a located memory, closing its open span so as-of reads see the old one."""
    valid_to = valid_to if valid_to is not None else row["valid_to"]
    await conn.execute(
        "UPDATE memories SET status = $2, status_reason = $3, superseded_by = $4, valid_to = $5 WHERE id = $1",
        row["id"],
        status,
        reason,
        superseded_by,
        valid_to,
    )
    await open_state(
        conn, row["id"], row["workspace_id"], status, reason, principal, superseded_by, row["valid_from"], valid_to
    )


async def open_state(
    conn: asyncpg.Connection,
    memory_id: uuid.UUID,
    workspace_id: str,
    status: str,
    reason: str | None,
    principal: str,
    superseded_by: uuid.UUID | None,
    valid_from: datetime | None,
    valid_to: datetime | None,
) -> None:
    """Closes the memory's open status span and opens the next one where it ended, never before it."""
    await conn.execute(
        f"""
        WITH closed AS ({_CLOSE_SPAN.format(table="memory_states")})
        INSERT INTO memory_states (memory_id, workspace_id, status, reason, principal, superseded_by,
                                   valid_from, valid_to, recorded_from)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce((SELECT recorded_to FROM closed), now()))
        """,
        memory_id,
        workspace_id,
        status,
        reason,
        principal,
        superseded_by,
        valid_from,
        valid_to,
    )


EMBED_CHANNEL = "mnemo_embed"
"""EMBED_CHANNEL is the NOTIFY channel that wakes the embedding workers when chunks are written."""


@dataclass(frozen=True)
class VersionChunks:
    """The chunks of one version of one memory, as insert_chunks takes them."""

    memory_id: uuid.UUID
    version: int
    workspace_id: str
    chunks: Sequence[ChunkRow]


async def insert_chunks(conn: asyncpg.Connection, versions: Sequence[VersionChunks]) -> None:
    """The chunks of any number of versions (pending embedding), and a NOTIFY delivered on commit,
    in one statement.

    The NOTIFY wakes the embedding workers of every ingest replica. Its payload is constant: the
    workers read the queue, not the message, and PostgreSQL folds identical notifications of one
    transaction into one, so a batch of writes wakes them once.
    """
    rows = [(v, c) for v in versions for c in v.chunks]
    await conn.execute(
        """
        WITH inserted AS (
            INSERT INTO chunks (memory_id, version, workspace_id, ordinal, context, text, parts)
            SELECT u.memory_id, u.version, u.workspace_id, u.ordinal, u.context, u.text, u.parts
            FROM unnest($1::uuid[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[])
                 AS u(memory_id, version, workspace_id, ordinal, context, text, parts)
            RETURNING 1
        )
        SELECT pg_notify($8, 'chunks') FROM (SELECT count(*) AS n FROM inserted) AS c WHERE c.n > 0
        """,
        [v.memory_id for v, _ in rows],
        [v.version for v, _ in rows],
        [v.workspace_id for v, _ in rows],
        [c.ordinal for _, c in rows],
        [c.context for _, c in rows],
        [c.text for _, c in rows],
        [c.parts for _, c in rows],
        EMBED_CHANNEL,
    )


async def delete_chunks(conn: asyncpg.Connection, memory_id: uuid.UUID, version: int) -> None:
    await conn.execute("DELETE FROM chunks WHERE memory_id = $1 AND version = $2", memory_id, version)


async def mark_deleted(conn: asyncpg.Connection, memory_id: uuid.UUID, deleted: bool) -> None:
    """Takes the memory off every read path (deleted) or puts it back (restored)."""
    await conn.execute("UPDATE memories SET deleted_at = CASE WHEN $2 THEN now() END WHERE id = $1", memory_id, deleted)


async def erase_memory(conn: asyncpg.Connection, memory_id: uuid.UUID) -> None:
    """Erases a memory for good: its chunks, versions, status spans, derivations and the row itself.

    Derived rows go first (foreign keys); other memories keep their own status but lose the
    pointer to this one.
    """
    await conn.execute("DELETE FROM chunks WHERE memory_id = $1", memory_id)
    await conn.execute("DELETE FROM memory_versions WHERE memory_id = $1", memory_id)
    await conn.execute("DELETE FROM memory_states WHERE memory_id = $1", memory_id)
    await conn.execute("DELETE FROM derivations WHERE memory_id = $1", memory_id)
    await conn.execute("UPDATE memories SET superseded_by = NULL WHERE superseded_by = $1", memory_id)
    await conn.execute("DELETE FROM memories WHERE id = $1", memory_id)


async def memory_ids(conn: asyncpg.Connection | asyncpg.Pool, where: str, values: list[Any]) -> list[uuid.UUID]:
    """The ids of memories matching `where` (a workspace condition from the access module), oldest first."""
    rows = await conn.fetch(f"SELECT id FROM memories m WHERE {where} ORDER BY created_at, id", *values)
    return [r["id"] for r in rows]


async def versions_of(conn: asyncpg.Connection, memory_id: uuid.UUID) -> list[asyncpg.Record]:
    """Every version of a memory (all columns), oldest first."""
    return await conn.fetch("SELECT * FROM memory_versions WHERE memory_id = $1 ORDER BY version", memory_id)


async def states_of(conn: asyncpg.Connection, memory_id: uuid.UUID) -> list[asyncpg.Record]:
    """Every status span of a memory, oldest first."""
    return await conn.fetch("SELECT * FROM memory_states WHERE memory_id = $1 ORDER BY recorded_from", memory_id)


async def rewrite_version(
    conn: asyncpg.Connection, memory_id: uuid.UUID, version: int, title: str, content: str, content_hash: str
) -> None:
    """Rewrites a recorded version in place: only for redaction, because history must not keep a secret either."""
    await conn.execute(
        "UPDATE memory_versions SET title = $3, content = $4, content_hash = $5 WHERE memory_id = $1 AND version = $2",
        memory_id,
        version,
        title,
        content,
        content_hash,
    )


async def rewrite_fields(
    conn: asyncpg.Connection,
    memory_id: uuid.UUID,
    title: str,
    tags: list[str],
    metadata: dict[str, Any],
    source_uri: str | None,
    status_reason: str | None,
    content_hash: str | None,
) -> None:
    """Rewrites a memory's own fields in place (redaction); `content_hash` None keeps the current one."""
    await conn.execute(
        """
        UPDATE memories SET title = $2, tags = $3, metadata = $4, source_uri = $5, status_reason = $6,
                            content_hash = coalesce($7, content_hash)
        WHERE id = $1
        """,
        memory_id,
        title,
        tags,
        metadata,
        source_uri,
        status_reason,
        content_hash,
    )


def status_reason(row: Any) -> int:
    """The ErrorReason for a memory whose status stops a read or a change: SUPERSEDED or STATUS_FORBIDS."""
    if row["status"] == "superseded":
        return reasons_pb.ERROR_REASON_SUPERSEDED
    return reasons_pb.ERROR_REASON_STATUS_FORBIDS


def status_phrase(row: Any) -> str:
    """What a memory's status says when it stops a read or a change: "is superseded by <id>", "is retracted"."""
    by = f" by {row['superseded_by']}" if row["superseded_by"] else ""
    return f"is {row['status']}{by}"
