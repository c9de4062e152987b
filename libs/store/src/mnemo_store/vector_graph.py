"""The vectors waiting to enter the HNSW graph, and letting them in (sql/0024_vector_graph.sql).

The worker stores a vector with `graphed` false, which keeps it out of the graph's index; setting
it rewrites the row, and PostgreSQL inserts the new row into the graph. Only vectors a default
read may return (`indexed`) are let in: the others stay out of the graph as they always did, and
one whose chunk is indexed again later (a restore) is ungraphed and indexed, so it is let in then.
"""

from __future__ import annotations

import asyncpg

from mnemo_store.reads import Reader

# Rows locked by a writer (a correction moving the chunk out of the indexes, a re-embedding) are
# skipped, not waited for: they come back in a later batch.
_GRAPH = """
UPDATE chunk_vectors SET graphed = true
WHERE chunk_id IN (
    SELECT chunk_id FROM chunk_vectors WHERE indexed AND NOT graphed LIMIT $1 FOR UPDATE SKIP LOCKED
)
"""


async def graph(pool: asyncpg.Pool, limit: int) -> int:
    """Lets up to `limit` waiting vectors into the graph, in one transaction; how many it let in."""
    status = await pool.execute(_GRAPH, limit)
    return int(status.split()[-1])


async def waiting(conn: Reader) -> int:
    """How many vectors wait for the graph (answered from their partial index)."""
    return int(await conn.fetchval("SELECT count(*) FROM chunk_vectors WHERE indexed AND NOT graphed"))
