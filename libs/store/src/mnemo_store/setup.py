"""Bringing a database to the state a service needs: reachable, migrated, in the right vector space."""

from __future__ import annotations

import asyncpg
import structlog
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

from mnemo_platform import Unavailable
from mnemo_store.database import check_server_version, open_pool
from mnemo_store.embedding_space import ensure_embedding_space
from mnemo_store.migrations import apply_migrations

log = structlog.get_logger("mnemo.store")


async def _connect(dsn: str, wait_s: float) -> asyncpg.Connection:
    # A pod may start before its database; wait a while rather than crash-loop at once.
    async for attempt in AsyncRetrying(
        stop=stop_after_delay(wait_s),
        wait=wait_random_exponential(multiplier=0.2, max=3),
        retry=retry_if_exception_type(OSError),
        reraise=True,
    ):
        with attempt:
            return await asyncpg.connect(dsn)
    raise AssertionError("unreachable")


async def prepare_database(
    dsn: str,
    embed_model: str | None,
    embed_dimension: int | None,
    pool_min: int = 1,
    pool_max: int = 10,
    wait_s: float = 30.0,
) -> asyncpg.Pool:
    """Migrates the database, checks its embedding space (if given), and opens the service's pool."""
    try:
        conn = await _connect(dsn, wait_s)
    except (OSError, asyncpg.PostgresError) as exc:
        raise Unavailable(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        await check_server_version(conn)  # type: ignore[arg-type]
        await apply_migrations(conn)
        # Services that never touch vectors (harvest) pass no model and skip the check.
        if embed_model is not None and embed_dimension is not None:
            await ensure_embedding_space(conn, embed_model, embed_dimension)
    finally:
        await conn.close()
    return await open_pool(dsn, pool_min, pool_max)
