"""The vectors' dimension and model, recorded once and checked at every start."""

from __future__ import annotations

import asyncpg
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import FailedPrecondition
from mnemo_store.migrations import MIGRATION_LOCK_KEY

log = structlog.get_logger("mnemo.store")


class EmbeddingSpaceMismatch(FailedPrecondition):
    """The database's vectors come from another model or dimension than the one configured."""

    default_reason = reasons_pb.ERROR_REASON_EMBEDDING_SPACE_MISMATCH


# Only the vectors a default read may return are in the index (sql/0007_embed_queue_and_vectors.sql),
# once the grapher has let them in (sql/0024_vector_graph.sql): the semantic leg says
# `WHERE v.indexed AND v.graphed` for the graph and compares the rest exactly.
_HNSW_INDEX = (
    "CREATE INDEX chunk_vectors_embedding ON chunk_vectors USING hnsw (embedding vector_cosine_ops) "
    "WHERE indexed AND graphed"
)


async def ensure_embedding_space(conn: asyncpg.Connection, model: str, dimension: int) -> None:
    """Gives the vectors their dimension and HNSW index on first start; refuses a different model later.

    The index is also built when it is missing on a later start: a database migrated from before
    chunk_vectors gets it here, after its vectors were copied (one bulk build, not one insert each).
    """
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        row = await conn.fetchrow("SELECT model, dimension FROM embedding_space")
        if row is None:
            async with conn.transaction():
                await conn.execute(f"ALTER TABLE chunk_vectors ALTER COLUMN embedding TYPE vector({int(dimension)})")
                await conn.execute(_HNSW_INDEX)
                await conn.execute("INSERT INTO embedding_space (model, dimension) VALUES ($1, $2)", model, dimension)
            log.info("embedding_space_created", model=model, dimension=dimension)
            return
        _check_same(row, model, dimension)
        if await conn.fetchval("SELECT to_regclass('chunk_vectors_embedding') IS NULL"):
            await conn.execute(_HNSW_INDEX)
            log.info("vector_index_built", model=model, dimension=dimension)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)


def _check_same(row: asyncpg.Record, model: str, dimension: int) -> None:
    if row["dimension"] != dimension or row["model"] != model:
        raise EmbeddingSpaceMismatch(
            f"this database was built with embedding model {row['model']!r} "
            f"({row['dimension']} dimensions), but the configured embedder is {model!r} "
            f"({dimension} dimensions); vectors of different models cannot be compared. "
            "Configure the original model (MNEMO_EMBEDDER, MNEMO_EMBED_MODEL), "
            "or use a new database (MNEMO_DATA_DIR or MNEMO_DATABASE_URL)"
        )


async def check_embedding_space(conn: asyncpg.Connection, model: str, dimension: int) -> bool:
    """Whether the embedding space is recorded yet (refusing a different one), without creating it."""
    row = await conn.fetchrow("SELECT model, dimension FROM embedding_space")
    if row is None:
        return False
    _check_same(row, model, dimension)
    return True


async def read_embedding_space(conn: asyncpg.Connection | asyncpg.Pool) -> tuple[str, int] | None:
    row = await conn.fetchrow("SELECT model, dimension FROM embedding_space")
    return (row["model"], row["dimension"]) if row else None
