"""Typed SQL of consolidation: which memories changed since a workspace's last pass, their nearest
neighbours through the HNSW index, what a pass needs to know of each memory, and the marks.

The consolidation job itself (grouping, choosing the kept memory, opening merge proposals) is the
ingest service's (services/ingest/src/mnemo_ingest/consolidate.py; docs/consolidation.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

# A vector stored by a transaction that began before a pass but committed after it read the
# vectors has an earlier embedded_at than the pass's start: the mark trails the start by this much,
# so such a vector is compared on the next pass rather than never.
SETTLE_MARGIN = "1 minute"


@dataclass(frozen=True)
class Neighbour:
    """A memory near another: the best cosine similarity between any chunk of each."""

    a: uuid.UUID
    b: uuid.UUID
    cosine: float


async def read_mark(conn: asyncpg.Connection | asyncpg.Pool, workspace_id: str) -> datetime | None:
    """Vectors embedded after this were not compared yet (None: the workspace was never consolidated)."""
    mark: datetime | None = await conn.fetchval(
        "SELECT scanned_to FROM consolidation_marks WHERE workspace_id = $1", workspace_id
    )
    return mark


async def pass_start(conn: asyncpg.Connection) -> datetime:
    """The mark a pass starting now will leave: the clock less the settle margin."""
    start: datetime = await conn.fetchval(f"SELECT clock_timestamp() - interval '{SETTLE_MARGIN}'")
    return start


async def write_mark(
    conn: asyncpg.Connection, workspace_id: str, scanned_to: datetime, compared: int, pairs: int, proposed: int
) -> None:
    """Records a finished pass; the mark never moves back."""
    await conn.execute(
        """
        INSERT INTO consolidation_marks AS c (workspace_id, scanned_to, compared, pairs, proposed)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (workspace_id) DO UPDATE SET
            scanned_to = greatest(c.scanned_to, excluded.scanned_to), last_run_at = now(),
            compared = excluded.compared, pairs = excluded.pairs, proposed = excluded.proposed
        """,
        workspace_id,
        scanned_to,
        compared,
        pairs,
        proposed,
    )


async def changed_chunks(
    conn: asyncpg.Connection | asyncpg.Pool, workspace_id: str, since: datetime | None
) -> list[asyncpg.Record]:
    """The indexed vectors (current versions of visible, undeleted memories) of the workspace
    embedded after `since` (every one when None): (chunk_id, memory_id)."""
    return await conn.fetch(
        """
        SELECT chunk_id, memory_id FROM chunk_vectors
        WHERE indexed AND workspace_id = $1 AND ($2::timestamptz IS NULL OR embedded_at > $2)
        ORDER BY chunk_id
        """,
        workspace_id,
        since,
    )


# One HNSW index scan per changed chunk (a nested loop over them), filtered to the workspace; the
# vectors waiting for the grapher (sql/0024_vector_graph.sql) are compared exactly beside it.
NEIGHBOURS_SQL = """
    SELECT q.memory_id AS a, n.memory_id AS b, max(1 - n.distance) AS cosine
    FROM chunk_vectors q
    CROSS JOIN LATERAL (
        SELECT * FROM (
            (SELECT v.memory_id, v.embedding <=> q.embedding AS distance
             FROM chunk_vectors v
             WHERE v.indexed AND v.graphed AND v.workspace_id = $2
             ORDER BY v.embedding <=> q.embedding
             LIMIT $3)
            UNION ALL
            (SELECT v.memory_id, v.embedding <=> q.embedding AS distance
             FROM chunk_vectors v
             WHERE v.indexed AND NOT v.graphed AND v.workspace_id = $2
             ORDER BY v.embedding <=> q.embedding
             LIMIT $3)
        ) u
        ORDER BY distance
        LIMIT $3
    ) n
    WHERE q.chunk_id = ANY($1::bigint[]) AND q.workspace_id = $2 AND n.memory_id <> q.memory_id
    GROUP BY 1, 2
    HAVING max(1 - n.distance) >= $4
"""


async def scan_settings(conn: asyncpg.Connection, k: int) -> None:
    """The HNSW scan settings of the neighbour statement, for the caller's transaction."""
    await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    await conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, 4 * int(k))}")


async def nearest_neighbours(
    conn: asyncpg.Connection, workspace_id: str, chunk_ids: Sequence[int], k: int, min_cosine: float = 0.0
) -> list[Neighbour]:
    """For each chunk, the `k` nearest indexed chunks of other memories in the same workspace,
    through the HNSW index (one index scan per chunk, never a scan of every pair); one row per
    pair of memories with their best similarity, if it reaches `min_cosine` (the rest never leave
    the database: a full pass over 100k memories finds a million neighbour pairs). Runs in the
    caller's transaction, which it gives an iterative scan: HNSW filters by workspace after the
    index scan, and without one a small workspace in a large database would come back short."""
    await scan_settings(conn, k)
    # The chunk finds itself first (and its memory's other chunks): ask for a few more.
    rows = await conn.fetch(NEIGHBOURS_SQL, list(chunk_ids), workspace_id, int(k) + 2, float(min_cosine))
    return [Neighbour(r["a"], r["b"], float(r["cosine"])) for r in rows]


async def memory_facts(
    conn: asyncpg.Connection | asyncpg.Pool, workspace_id: str, ids: Sequence[uuid.UUID]
) -> list[asyncpg.Record]:
    """What a pass weighs of each memory, if it is still visible in the workspace: status,
    provenance, version, content hash, update time, title and current content."""
    return await conn.fetch(
        """
        SELECT m.id, m.status, m.provenance, m.version, m.content_hash, m.updated_at, m.title, v.content
        FROM memories m JOIN memory_versions v ON v.memory_id = m.id AND v.version = m.version
        WHERE m.id = ANY($1::uuid[]) AND m.workspace_id = $2 AND m.deleted_at IS NULL
          AND m.status IN ('candidate', 'active', 'confirmed')
        """,
        list(ids),
        workspace_id,
    )


async def known_dedupe_keys(
    conn: asyncpg.Connection | asyncpg.Pool, workspace_id: str, keys: Sequence[str]
) -> set[str]:
    """Which of the keys a proposal in the workspace already carries (in any state)."""
    rows = await conn.fetch(
        "SELECT dedupe_key FROM proposals WHERE workspace_id = $1 AND dedupe_key = ANY($2::text[])",
        workspace_id,
        list(keys),
    )
    return {r["dedupe_key"] for r in rows}


async def lock_workspace(conn: asyncpg.Connection, workspace_id: str) -> None:
    """Holds the workspace's consolidation lock until the session's unlock: two passes over one
    workspace (two replicas, or the job and `mnemo consolidate --now`) take turns."""
    await conn.execute("SELECT pg_advisory_lock(hashtextextended('mnemo.consolidate:' || $1, 0))", workspace_id)


async def unlock_workspace(conn: asyncpg.Connection, workspace_id: str) -> None:
    await conn.execute("SELECT pg_advisory_unlock(hashtextextended('mnemo.consolidate:' || $1, 0))", workspace_id)
