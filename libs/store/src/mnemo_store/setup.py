"""Bringing a database to the state a service needs: reachable, migrated, in the right vector space."""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg
import structlog
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import Unavailable
from mnemo_store.audit import anchor_key_path, anchor_unanchored_chains, configure_anchor_key
from mnemo_store.database import check_server_version, open_pool
from mnemo_store.embedding_space import check_embedding_space, ensure_embedding_space
from mnemo_store.migrations import apply_migrations, pending_migrations
from mnemo_store.settings import DatabaseSettings

log = structlog.get_logger("mnemo.store")


def _patiently(wait_s: float, condition: type[Exception]) -> AsyncRetrying:
    """Retries while `condition` is raised, backing off, for up to wait_s seconds; then re-raises it."""
    return AsyncRetrying(
        stop=stop_after_delay(wait_s),
        wait=wait_random_exponential(multiplier=0.2, max=3),
        retry=retry_if_exception_type(condition),
        reraise=True,
    )


async def _connect(dsn: str, wait_s: float) -> asyncpg.Connection:
    # A pod may start before its database; wait a while rather than crash-loop at once.
    async for attempt in _patiently(wait_s, OSError):
        with attempt:
            return await asyncpg.connect(dsn)
    raise AssertionError("unreachable")


class _SchemaBehind(Exception):
    """The database is not yet at this version's schema (or embedding space): its owner has not started."""


async def _wait_for_schema(
    conn: asyncpg.Connection, embed_model: str | None, embed_dimension: int | None, wait_s: float
) -> None:
    """Waits until the owner (ingest) has migrated the database and recorded its embedding space."""

    async def ready() -> None:
        pending = await pending_migrations(conn)
        if pending:
            raise _SchemaBehind(f"{len(pending)} migration(s) not applied yet ({', '.join(pending)})")
        vectors = embed_model is not None and embed_dimension is not None
        if vectors and not await check_embedding_space(conn, embed_model, embed_dimension):  # type: ignore[arg-type]
            raise _SchemaBehind("the embedding space is not recorded yet")

    try:
        async for attempt in _patiently(wait_s, _SchemaBehind):
            with attempt:
                await ready()
    except _SchemaBehind as exc:
        raise Unavailable(
            f"the database is not ready for this service: {exc}. `mnemo migrate` or the ingest service migrates "
            "the database; run one of them first (`mnemo up` starts ingest before the others)",
            reasons_pb.ERROR_REASON_NOT_MIGRATED,
        ) from exc


async def _connect_checked(dsn: str, wait_s: float) -> asyncpg.Connection:
    """A connection to a PostgreSQL this version runs on, waiting up to wait_s for it to answer."""
    try:
        conn = await _connect(dsn, wait_s)
    except (OSError, asyncpg.PostgresError) as exc:
        raise Unavailable(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        await check_server_version(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


async def _migrate(
    conn: asyncpg.Connection, database: DatabaseSettings, embed_model: str | None, embed_dimension: int | None
) -> list[str]:
    """Applies the migrations, makes the audit anchor key if missing and records the embedding space."""
    applied = await apply_migrations(conn)
    if configure_anchor_key(database.audit_key_path, create=True):
        # A key made just now: the chains written before it are trusted as they stand.
        anchored = await anchor_unanchored_chains(conn)
        log.info("audit_anchor_key_created", path=anchor_key_path(), chains=anchored)
    if embed_model is not None and embed_dimension is not None:
        await ensure_embedding_space(conn, embed_model, embed_dimension)
    return applied


async def migrate_database(
    dsn: str, database: DatabaseSettings, embed_model: str | None = None, embed_dimension: int | None = None
) -> list[str]:
    """What a starting ingest does to the database, and nothing else (`mnemo migrate`, a Kubernetes Job):
    returns the migrations applied now. Waits up to `database.wait_s` for PostgreSQL to answer."""
    conn = await _connect_checked(dsn, database.wait_s)
    try:
        return await _migrate(conn, database, embed_model, embed_dimension)
    finally:
        await conn.close()


async def prepare_database(
    dsn: str,
    database: DatabaseSettings,
    embed_model: str | None = None,
    embed_dimension: int | None = None,
    migrate: bool = False,
    session: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """Opens the service's pool on a database at this version's schema, in the right embedding space.

    One service owns the schema: ingest (`migrate=True`) applies the migrations and records the
    embedding space, because it is the one that writes. Search and harvest only check, waiting up
    to `database.wait_s` for ingest to have done so, so no reader ever changes the schema under a writer.
    A service that passes no model (harvest) never touches vectors and skips that check.
    `session` is the settings every pooled connection starts with (see `open_pool`), besides the
    database settings' timeouts (`DatabaseSettings.session_limits`).
    """
    conn = await _connect_checked(dsn, database.wait_s)
    try:
        if migrate:
            await _migrate(conn, database, embed_model, embed_dimension)
        else:
            await _wait_for_schema(conn, embed_model, embed_dimension, database.wait_s)
            configure_anchor_key(database.audit_key_path)
    finally:
        await conn.close()
    return await open_pool(dsn, database.pool_min, database.pool_max, {**database.session_limits(), **(session or {})})
