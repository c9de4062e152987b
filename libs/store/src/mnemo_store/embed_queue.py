"""The embedding queue and the vectors it fills: what the workers claim, store, give back or give up on.

A chunk enters `embed_queue` in the statement that inserts it (memories.insert_chunks) and leaves
it in the transaction that stores its vector in `chunk_vectors`; the chunk row is never written
again (sql/0007_embed_queue_and_vectors.sql). A claim is a lease, not a lock: the rows' due time
moves past the lease in one short statement, so no row lock or transaction is held while the
model runs, and a worker that dies mid-batch leaves them due again when the lease ends.

`chunk_vectors.indexed` copies `chunks.indexed`, because the HNSW index is partial on it and a
partial index can only test its own table (and `chunk_vectors.tags` copies `chunks.tags`, which a
tag filter's own index reads: sql/0018_chunk_tags.sql). Two writers set the copies: the worker,
storing a vector (from the chunk's), and memories' reindexing, when a memory's version, status,
deletion or tags change (from the new values). They meet at the queue row. The worker deletes it
in the statement before the one that reads the chunk's values; reindexing locks it (FOR UPDATE) in
the statement that changes them, before the one that brings the copies in line (SYNC_VECTOR_COPIES).
So either the worker's transaction commits first, and that later statement sees its vector, or
reindexing's does, and the worker reads the new flag.

The worker never waits for a row lock (SKIP LOCKED everywhere): it can be no end of a deadlock,
and a write never waits for it longer than one short statement. A queue row that a writing
transaction holds is tried again a little later (store_vectors says which).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from pgvector import Vector

# Due rows, oldest first; rows another worker is claiming right now are skipped, not waited for.
_CLAIM = """
UPDATE embed_queue q SET embed_after = now() + make_interval(secs => $2), lease = $3
FROM chunks c
WHERE q.chunk_id IN (
    SELECT chunk_id FROM embed_queue
    WHERE NOT failed AND embed_after <= now()
    ORDER BY embed_after, chunk_id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
) AND c.id = q.chunk_id
RETURNING q.chunk_id AS id, c.context, c.text
"""

_RELEASE = """
UPDATE embed_queue SET embed_after = now()
WHERE chunk_id IN (
    SELECT chunk_id FROM embed_queue WHERE chunk_id = ANY($1::bigint[]) AND NOT failed FOR UPDATE SKIP LOCKED
)
"""

_RELEASE_LEASES = """
UPDATE embed_queue SET embed_after = now(), lease = NULL
WHERE chunk_id IN (
    SELECT chunk_id FROM embed_queue WHERE lease = ANY($1::uuid[]) AND NOT failed FOR UPDATE SKIP LOCKED
)
"""

# A chunk that gives up is `failed` from now on: its embed_after says since when (requeue_failed).
_FAIL = """
UPDATE embed_queue SET
    attempts = attempts + 1,
    error = $2,
    failed = attempts + 1 >= $3,
    embed_after = CASE WHEN attempts + 1 >= $3 THEN now()
                       ELSE now() + make_interval(secs => $4 * power(2, attempts)) END
WHERE chunk_id IN (SELECT chunk_id FROM embed_queue WHERE chunk_id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED)
"""

_DEFER = """
UPDATE embed_queue SET error = $2, embed_after = now() + make_interval(secs => $3)
WHERE chunk_id IN (
    SELECT chunk_id FROM embed_queue WHERE chunk_id = ANY($1::bigint[]) AND NOT failed FOR UPDATE SKIP LOCKED
)
"""

# Failed chunks (of the workspaces given, or all; failed for at least $2 seconds) due again at
# once, their attempts counted afresh. Rows a worker or a writer holds are not waited for.
_REQUEUE_FAILED = """
UPDATE embed_queue q SET failed = false, attempts = 0, embed_after = now()
WHERE q.chunk_id IN (
    SELECT e.chunk_id FROM embed_queue e JOIN chunks c ON c.id = e.chunk_id
    WHERE e.failed AND e.embed_after <= now() - make_interval(secs => $2)
      AND ($1::text[] IS NULL OR c.workspace_id = ANY($1::text[]))
    FOR UPDATE OF e SKIP LOCKED
)
"""

_DEQUEUE = """
DELETE FROM embed_queue q
USING (SELECT chunk_id FROM embed_queue WHERE chunk_id = ANY($1::bigint[]) FOR UPDATE SKIP LOCKED) AS free
WHERE q.chunk_id = free.chunk_id
RETURNING q.chunk_id
"""

# A separate statement from _DEQUEUE, so its snapshot is taken after the queue rows were won:
# `c.indexed` is then the flag of any reindexing that held them (see the module's docstring).
# A re-embedded chunk (queued again) has its vector replaced. The memory's kind is copied onto the
# vector by the database (sql/0020_vector_kinds.sql). `graphed` ($4) is false from the worker: the
# grapher lets the vector into the HNSW graph later (sql/0024_vector_graph.sql).
_STORE = """
INSERT INTO chunk_vectors (chunk_id, memory_id, version, workspace_id, indexed, tags, model, embedding, graphed)
SELECT c.id, c.memory_id, c.version, c.workspace_id, c.indexed, c.tags, $3, v.embedding, $4
FROM unnest($1::bigint[], $2::vector[]) AS v(chunk_id, embedding) JOIN chunks c ON c.id = v.chunk_id
ON CONFLICT (chunk_id) DO UPDATE SET
    embedding = excluded.embedding, model = excluded.model, indexed = excluded.indexed, tags = excluded.tags,
    graphed = excluded.graphed, embedded_at = now()
"""

_STILL_QUEUED = "SELECT chunk_id FROM embed_queue WHERE chunk_id = ANY($1::bigint[])"

SYNC_VECTOR_COPIES = """
UPDATE chunk_vectors v SET indexed = c.indexed, tags = c.tags
FROM chunks c
WHERE v.memory_id = $1 AND c.id = v.chunk_id AND (v.indexed <> c.indexed OR v.tags <> c.tags)
"""
"""SYNC_VECTOR_COPIES brings the vectors' copies of `indexed` and the tags in line with the chunks of memory $1."""


async def claim(pool: asyncpg.Pool, limit: int, lease_s: float, lease: uuid.UUID | None = None) -> list[asyncpg.Record]:
    """Leases up to `limit` due chunks for `lease_s` seconds, marked with `lease` when given
    (release_leases): their ids, contexts and texts."""
    return await pool.fetch(_CLAIM, limit, lease_s, lease)


async def release_leases(pool: asyncpg.Pool, leases: Sequence[uuid.UUID]) -> None:
    """Makes the chunks claims `leases` took due again at once: a claim whose answer was lost
    cannot name its chunks, only its lease."""
    await pool.execute(_RELEASE_LEASES, list(leases))


async def release(pool: asyncpg.Pool, chunk_ids: Sequence[int]) -> None:
    """Makes leased chunks due again at once (a stopping worker hands its claims back)."""
    await pool.execute(_RELEASE, list(chunk_ids))


async def record_failure(
    pool: asyncpg.Pool, chunk_ids: Sequence[int], error: str, max_attempts: int, backoff_s: float
) -> None:
    """Counts an attempt and keeps the error; the chunk is due again after an exponential backoff,
    or `failed` (no more retries) once it has had `max_attempts`."""
    await pool.execute(_FAIL, list(chunk_ids), error, max_attempts, backoff_s)


async def defer(pool: asyncpg.Pool, chunk_ids: Sequence[int], error: str, delay_s: float) -> None:
    """Makes chunks due again after `delay_s`, keeping the error, without counting an attempt: the
    embedder was unavailable, and nothing about the chunks was wrong."""
    await pool.execute(_DEFER, list(chunk_ids), error, delay_s)


async def requeue_failed(
    pool: asyncpg.Pool, workspace_ids: Sequence[str] | None = None, failed_for_s: float = 0.0
) -> int:
    """Queues `failed` chunks again (those of `workspace_ids`, or every one; failed at least
    `failed_for_s` seconds ago), with their attempts counted afresh; returns how many."""
    status = await pool.execute(_REQUEUE_FAILED, None if workspace_ids is None else list(workspace_ids), failed_for_s)
    return int(status.split()[-1])


@dataclass(frozen=True)
class Stored:
    """What store_vectors did: how many vectors it stored, and which chunks it left for later."""

    stored: int
    held: list[int]
    """held are the chunks whose queue rows a writing transaction holds: try them again shortly."""


async def store_vectors(
    pool: asyncpg.Pool, vectors: Sequence[tuple[int, Any]], model: str, graphed: bool = False
) -> Stored:
    """Stores the vectors of chunks and takes them out of the queue, in one transaction.

    A chunk no longer queued (deleted meanwhile, or stored by another worker after this lease
    ran out) is skipped: only a worker that took the queue row stores the vector. The vectors wait
    for the grapher to enter the HNSW graph (mnemo_store.vector_graph) unless `graphed`: a bulk
    fill that drops the index and builds it again after (bench/scale.py) stores them as in it.
    """
    ids = [chunk_id for chunk_id, _ in vectors]
    async with pool.acquire() as conn, conn.transaction():
        taken = {row["chunk_id"] for row in await conn.fetch(_DEQUEUE, ids)}
        if taken:
            mine = [(chunk_id, vector) for chunk_id, vector in vectors if chunk_id in taken]
            # Wrapped: a bare ndarray in a list would be taken for one more dimension of the array.
            await conn.execute(_STORE, [c for c, _ in mine], [Vector(v) for _, v in mine], model, graphed)
        if len(taken) == len(ids):
            return Stored(len(taken), [])
        rest = await conn.fetch(_STILL_QUEUED, [i for i in ids if i not in taken])
        return Stored(len(taken), [row["chunk_id"] for row in rest])


async def next_due_in(pool: asyncpg.Pool) -> float | None:
    """Seconds until the earliest queued chunk is due (negative when one is overdue); None when
    nothing waits."""
    seconds = await pool.fetchval(
        "SELECT EXTRACT(EPOCH FROM min(embed_after) - now()) FROM embed_queue WHERE NOT failed"
    )
    return None if seconds is None else float(seconds)


@dataclass(frozen=True)
class QueueStats:
    """What the queue holds: `pending` chunks (waiting for a vector), `failed` ones (given up on
    until requeued), and the age in seconds of the oldest pending one (0 when none waits)."""

    pending: int
    failed: int
    oldest_age_s: float


async def queue_stats(pool: asyncpg.Pool) -> QueueStats:
    """The queue's depth by state and the age of its oldest pending chunk, in one statement."""
    row = await pool.fetchrow(
        "SELECT count(*) FILTER (WHERE NOT failed) AS pending, count(*) FILTER (WHERE failed) AS failed, "
        "COALESCE(EXTRACT(EPOCH FROM now() - min(queued_at) FILTER (WHERE NOT failed)), 0) AS age "
        "FROM embed_queue"
    )
    return QueueStats(int(row["pending"]), int(row["failed"]), max(0.0, float(row["age"])))
