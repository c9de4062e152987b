"""Memories and what hangs off them (versions, status spans, chunks): each statement once, typed.

The tables are defined in sql/0001_core.sql, sql/0002_corrections.sql and (the embedding queue,
the vectors, which chunks are indexed) sql/0007_embed_queue_and_vectors.sql. Callers hold the
transaction; nothing here decides who may do what (that is the access module and the services).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_store.audit import CHAIN_LOCK, Append
from mnemo_store.embed_queue import SYNC_VECTOR_COPIES
from mnemo_store.predicates import VISIBLE_STATUSES

# A memory row's own columns, as every read returns them.
MEMORY_FIELDS = (
    "id, workspace_id, kind, title, tags, metadata, source_uri, status, provenance, author, version, content_hash, "
    "created_at, updated_at, superseded_by, valid_from, valid_to, status_reason, trust, suspicious, deleted_at, "
    "feedback_factor"
)
# The columns a memory row is read with (of `memories m`, or of the as-of relation of the same
# shape); `embedding_state` sums up the chunks of the version read (a chunk still in the queue is
# pending, or failed). Add `v.content` with CONTENT_JOIN.
MEMORY_COLUMNS = (
    ", ".join(f"m.{name.strip()}" for name in MEMORY_FIELDS.split(","))
    + """,
    (SELECT CASE WHEN bool_or(q.failed) THEN 'failed'
                 WHEN count(*) > 0 THEN 'pending'
                 ELSE 'embedded' END
       FROM chunks c JOIN embed_queue q ON q.chunk_id = c.id
       WHERE c.memory_id = m.id AND c.version = m.version) AS embedding_state
"""
)
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

# Whether chunk `c` of memory `m` belongs in the search indexes: a default read may return it
# (its version is the memory's current one, the memory is visible and not deleted). Only these
# chunks are in the full-text and vector indexes; as-of and history reads scan beyond them.
_INDEXED = "(c.version = m.version AND m.deleted_at IS NULL AND m.status IN ({}))".format(
    ", ".join(f"'{status}'" for status in VISIBLE_STATUSES)
)

# Runs after the CTE `m` (the memory just updated, RETURNING id, version, status, deleted_at,
# tags): sets `indexed` on its chunks, copies its tags onto them (sql/0018_chunk_tags.sql), and
# locks, in chunk order, the queue rows of the chunks it changed. That lock is what keeps a
# vector's copies of the flag and the tags right (see mnemo_store.embed_queue): a worker storing
# one of those vectors either committed before it (SYNC_VECTOR_COPIES, a later statement, sees its
# vector) or dequeues after this transaction and reads the new values.
_REINDEX = f"""
    , flipped AS (
        UPDATE chunks c SET indexed = {_INDEXED}, tags = m.tags
        FROM m WHERE c.memory_id = m.id AND (c.indexed <> {_INDEXED} OR c.tags <> m.tags)
        RETURNING c.id
    ),
    locked AS (
        SELECT q.chunk_id FROM embed_queue q JOIN flipped f ON f.id = q.chunk_id
        ORDER BY q.chunk_id FOR UPDATE OF q
    )
    SELECT (SELECT count(*) FROM flipped) AS flipped, (SELECT count(*) FROM locked) AS locked
"""


async def _update_reindexed(conn: asyncpg.Connection, update: str, *args: Any) -> None:
    """Runs `update` (an UPDATE of the memory whose id is $1, RETURNING id, version, status,
    deleted_at, tags), moving its chunks in or out of the search indexes and giving them its tags
    to match; the vectors' copies follow in a second statement, only when a chunk changed."""
    row = await conn.fetchrow(f"WITH m AS ({update}) {_REINDEX}", *args)
    if row is not None and row["flipped"]:
        await conn.execute(SYNC_VECTOR_COPIES, args[0])


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be inserted: its first version, its first status span and its chunks."""

    id: uuid.UUID
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
    chunks: Sequence[ChunkRow]
    import_batch: uuid.UUID | None = None
    """import_batch is the import batch (import_batches) the memory came in with, if any."""


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
    return (await fetch_memories(conn, [memory_id]))[memory_id]


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


async def fetch_memories(
    conn: asyncpg.Connection | asyncpg.Pool, memory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, asyncpg.Record]:
    """Memories with the content of their current version, by id."""
    if not memory_ids:
        return {}
    rows = await conn.fetch(
        f"SELECT {MEMORY_COLUMNS}, v.content FROM memories m {CONTENT_JOIN} WHERE m.id = ANY($1::uuid[])",
        list(memory_ids),
    )
    return {r["id"]: r for r in rows}


@dataclass(frozen=True)
class Taken:
    """What a batch of writes would collide with: idempotency keys in use, and sources that have a
    memory, a standing tombstone or a derivation, each keyed by (workspace id, value)."""

    keys: dict[tuple[str, str], asyncpg.Record]
    """keys maps to the memory holding the key (its id and content_hash)."""
    sources: set[tuple[str, str]]


async def find_taken(
    conn: asyncpg.Connection, keys: Sequence[tuple[str, str]], sources: Sequence[tuple[str, str]]
) -> Taken:
    """One statement for a batch: which of these idempotency keys and source uris are already taken."""
    if not keys and not sources:
        return Taken({}, set())
    key_rows = await conn.fetch(
        """
        SELECT 'key' AS what, m.workspace_id, m.idempotency_key AS value, m.id, m.content_hash
        FROM memories m JOIN unnest($1::text[], $2::text[]) AS k(w, v)
             ON m.workspace_id = k.w AND m.idempotency_key = k.v
        UNION ALL
        SELECT 'source', m.workspace_id, m.source_uri, NULL, NULL
        FROM memories m JOIN unnest($3::text[], $4::text[]) AS s(w, v) ON m.workspace_id = s.w AND m.source_uri = s.v
        UNION ALL
        SELECT 'source', t.workspace_id, t.source_uri, NULL, NULL
        FROM tombstones t JOIN unnest($3::text[], $4::text[]) AS s(w, v)
             ON t.workspace_id = s.w AND t.source_uri = s.v AND t.restored_at IS NULL
        UNION ALL
        SELECT 'source', d.workspace_id, d.source_uri, NULL, NULL
        FROM derivations d JOIN unnest($3::text[], $4::text[]) AS s(w, v) ON d.workspace_id = s.w AND d.source_uri = s.v
        """,
        [w for w, _ in keys],
        [v for _, v in keys],
        [w for w, _ in sources],
        [v for _, v in sources],
    )
    return Taken(
        {(r["workspace_id"], r["value"]): r for r in key_rows if r["what"] == "key"},
        {(r["workspace_id"], r["value"]) for r in key_rows if r["what"] == "source"},
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


# The unique index of a workspace's idempotency keys (sql/0001_core.sql): a write that fails on it
# reused a key (a retry, or another writer took it meanwhile).
KEY_INDEX = "memories_idempotency_key"


def key_taken(exc: BaseException) -> bool:
    """Whether an insert failed because one of its idempotency keys is already taken."""
    return isinstance(exc, asyncpg.UniqueViolationError) and exc.constraint_name == KEY_INDEX


async def insert_memories(
    conn: asyncpg.Connection, news: Sequence[NewMemory], audit: Append | None = None
) -> dict[uuid.UUID, asyncpg.Record]:
    """Any number of new memories, each with its first version, its first status span and its
    chunks (with their queue rows and NOTIFY, as insert_chunks writes them), in one statement of
    multi-row inserts; returns each as fetch_memory would read it.

    The statement also takes the audit chain locks of the memories' workspaces (audit.CHAIN_LOCK),
    so the events that follow need no statement of their own to take them. With `audit`, their
    events are linked in the same statement, against the heads they were made for: the statement
    fails whole if a chain has moved on (audit.chain_moved tells), and on its own it needs no
    transaction.
    """
    if not news:
        return {}
    chunk_values = _chunk_values([VersionChunks(n.id, 1, n.workspace_id, n.chunks) for n in news])
    audit_ctes, audit_values = audit.guarded_ctes(19 + len(chunk_values)) if audit else ("", [])
    rows = await conn.fetch(
        f"""
        WITH u AS (
            SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[],
                                 $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                                 $13::timestamptz[], $14::timestamptz[], $15::text[], $16::real[], $17::text[],
                                 $18::uuid[])
                AS u(id, workspace_id, kind, title, tags, metadata, source_uri, idempotency_key, status, author,
                     provenance, content_hash, valid_from, valid_to, suspicious, trust, content, import_batch)
        ), locked AS (
            SELECT count({CHAIN_LOCK.format(workspace="w")}) AS n
            FROM (SELECT DISTINCT workspace_id AS w FROM u ORDER BY 1) AS ws
        ), memory AS (
            INSERT INTO memories (id, workspace_id, kind, title, tags, metadata, source_uri, idempotency_key,
                                  status, author, provenance, version, content_hash, valid_from, valid_to,
                                  suspicious, trust, import_batch)
            SELECT id, workspace_id, kind, title, ARRAY(SELECT jsonb_array_elements_text(tags::jsonb)), metadata,
                   source_uri, idempotency_key, status, author, provenance, 1, content_hash, valid_from, valid_to,
                   ARRAY(SELECT jsonb_array_elements_text(suspicious::jsonb)), trust, import_batch
            FROM u, locked
            RETURNING {MEMORY_FIELDS}
        ), version AS (
            INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author)
            SELECT id, 1, workspace_id, title, content, content_hash, author FROM u
            RETURNING memory_id, content
        ), state AS (
            INSERT INTO memory_states (memory_id, workspace_id, status, reason, principal, superseded_by,
                                       valid_from, valid_to)
            SELECT id, workspace_id, status, NULL, author, NULL, valid_from, valid_to FROM u
        ),
        -- The chunks read their memory from `memory`: the rows a statement inserts are not yet in
        -- `memories` for the rest of it (the foreign key is checked at its end).
        {_chunk_ctes(19, "memory")}{", " + audit_ctes if audit_ctes else ""}
        -- Every new memory has chunks (content is never blank), none embedded yet.
        SELECT memory.*, 'pending' AS embedding_state, version.content
        FROM memory JOIN version ON version.memory_id = memory.id, notified
        """,
        [n.id for n in news],
        [n.workspace_id for n in news],
        [n.kind for n in news],
        [n.title for n in news],
        # Lists of differing lengths do not make an array of arrays: each goes as its JSON text.
        [json.dumps(n.tags) for n in news],
        [n.metadata for n in news],
        [n.source_uri for n in news],
        [n.idempotency_key for n in news],
        [n.status for n in news],
        [n.author for n in news],
        [n.provenance for n in news],
        [n.content_hash for n in news],
        [n.valid_from for n in news],
        [n.valid_to for n in news],
        [json.dumps(list(n.suspicious)) for n in news],
        [n.trust for n in news],
        [n.content for n in news],
        [n.import_batch for n in news],
        *chunk_values,
        *audit_values,
    )
    return {r["id"]: r for r in rows}


async def insert_version(
    conn: asyncpg.Connection, memory_id: uuid.UUID, workspace_id: str, version: int, new: NewVersion
) -> None:
    """Closes the open version and opens `version` with the new text, updating the memory to match
    and taking the old version's chunks out of the search indexes."""
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
    # The old version's chunks leave the indexes here; the new version's enter them as they are
    # inserted (insert_chunks reads the version this sets).
    await _update_reindexed(
        conn,
        """
        UPDATE memories SET version = $2, title = $3, tags = $4, metadata = $5, content_hash = $6,
                            updated_at = now(), suspicious = $7, trust = $8
        WHERE id = $1
        RETURNING id, version, status, deleted_at, tags
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
    await put_status(
        conn, row, status, reason, principal, superseded_by, valid_to if valid_to is not None else row["valid_to"]
    )


async def put_status(
    conn: asyncpg.Connection,
    row: asyncpg.Record,
    status: str,
    reason: str | None,
    principal: str,
    superseded_by: uuid.UUID | None,
    valid_to: datetime | None,
) -> None:
    """Puts a located memory's status, successor and end of valid time exactly as given (None clears
    them), as a new status span: how a reversed decision puts a memory back without rewriting history."""
    await _update_reindexed(
        conn,
        """
        UPDATE memories SET status = $2, status_reason = $3, superseded_by = $4, valid_to = $5 WHERE id = $1
        RETURNING id, version, status, deleted_at, tags
        """,
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


def _chunk_ctes(first: int, memories: str) -> str:
    """The WITH items inserting chunks (parameters $first to $first+6, as _chunk_values gives them)
    with their rows in the embedding queue, and `notified`: one row, whose evaluation sends the
    NOTIFY (channel $first+7) if any chunk was queued. `memories` is the relation their memory rows
    are read from (`memories`, or a WITH item of the same statement inserting them)."""
    # A missing memory gives `indexed` false here and the foreign key's error, not a silent skip.
    return f"""
        inserted AS (
            INSERT INTO chunks (memory_id, version, workspace_id, ordinal, context, text, parts, indexed, tags)
            SELECT c.memory_id, c.version, c.workspace_id, c.ordinal, c.context, c.text, c.parts,
                   coalesce({_INDEXED}, false), coalesce(m.tags, '{{}}')
            FROM unnest(${first}::uuid[], ${first + 1}::int[], ${first + 2}::text[], ${first + 3}::int[],
                        ${first + 4}::text[], ${first + 5}::text[], ${first + 6}::text[])
                 AS c(memory_id, version, workspace_id, ordinal, context, text, parts)
            LEFT JOIN {memories} m ON m.id = c.memory_id
            RETURNING id
        ),
        queued AS (
            INSERT INTO embed_queue (chunk_id) SELECT id FROM inserted RETURNING 1
        ),
        notified AS (
            SELECT count(pg_notify(${first + 7}, 'chunks')) AS n FROM (SELECT 1 FROM queued LIMIT 1) AS q
        )
    """


def _chunk_values(versions: Sequence[VersionChunks]) -> list[Any]:
    rows = [(v, c) for v in versions for c in v.chunks]
    return [
        [v.memory_id for v, _ in rows],
        [v.version for v, _ in rows],
        [v.workspace_id for v, _ in rows],
        [c.ordinal for _, c in rows],
        [c.context for _, c in rows],
        [c.text for _, c in rows],
        [c.parts for _, c in rows],
        EMBED_CHANNEL,
    ]


async def insert_chunks(conn: asyncpg.Connection, versions: Sequence[VersionChunks]) -> None:
    """The chunks of any number of versions, each with its row in the embedding queue, and a
    NOTIFY delivered on commit, in one statement (insert_memories has them in its own).

    Each chunk enters the search indexes (`indexed`) if a default read may return it: read from
    the memory row, so a memory's row (and the version its chunks belong to) must be written
    first. The NOTIFY wakes the embedding workers of every ingest replica. Its payload is
    constant: the workers read the queue, not the message, and PostgreSQL folds identical
    notifications of one transaction into one, so a batch of writes wakes them once.
    """
    await conn.execute(f"WITH {_chunk_ctes(1, 'memories')} SELECT n FROM notified", *_chunk_values(versions))


async def delete_chunks(conn: asyncpg.Connection, memory_id: uuid.UUID, version: int) -> None:
    """Deletes a version's chunks, and with them (ON DELETE CASCADE) their queue rows and vectors."""
    await conn.execute("DELETE FROM chunks WHERE memory_id = $1 AND version = $2", memory_id, version)


async def mark_deleted(conn: asyncpg.Connection, memory_id: uuid.UUID, deleted: bool) -> None:
    """Takes the memory off every read path (deleted) or puts it back (restored), and its chunks
    out of the search indexes or back in."""
    await _update_reindexed(
        conn,
        """
        UPDATE memories SET deleted_at = CASE WHEN $2 THEN now() END WHERE id = $1
        RETURNING id, version, status, deleted_at, tags
        """,
        memory_id,
        deleted,
    )


async def erase_memory(conn: asyncpg.Connection, memory_id: uuid.UUID) -> None:
    """Erases a memory for good: its chunks, versions, status spans, derivations and the row itself.

    Derived rows go first (foreign keys; the chunks take their queue rows and vectors with them);
    other memories keep their own status but lose the pointer to this one.
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


async def versions_page(
    conn: asyncpg.Connection, memory_id: uuid.UUID, after: int, limit: int, max_bytes: int
) -> tuple[list[asyncpg.Record], bool]:
    """The versions after `after`, oldest first: at most `limit`, and no more once `max_bytes` of
    title and content are in (always one); and whether more follow."""
    rows = await conn.fetch(
        """
        SELECT * FROM (
            SELECT v.*, count(*) OVER () AS fetched,
                   sum(octet_length(v.title) + octet_length(v.content)) OVER (ORDER BY v.version)
                       - (octet_length(v.title) + octet_length(v.content)) AS bytes_before
            FROM (SELECT * FROM memory_versions WHERE memory_id = $1 AND version > $2 ORDER BY version LIMIT $3)
                AS v
        ) AS page
        WHERE bytes_before < $4 OR bytes_before = 0
        ORDER BY version
        """,
        memory_id,
        after,
        limit + 1,
        max_bytes,
    )
    page = rows[:limit]
    return page, bool(rows) and rows[0]["fetched"] > len(page)


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
    """Rewrites a memory's own fields in place (redaction); `content_hash` None keeps the current one.
    Its chunks and vectors take the new tags (_update_reindexed)."""
    await _update_reindexed(
        conn,
        """
        UPDATE memories SET title = $2, tags = $3, metadata = $4, source_uri = $5, status_reason = $6,
                            content_hash = coalesce($7, content_hash)
        WHERE id = $1
        RETURNING id, version, status, deleted_at, tags
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
