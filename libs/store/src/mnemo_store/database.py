"""The asyncpg pool every database-backed service opens, with the pgvector and jsonb codecs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import asyncpg
import structlog
from pgvector import Vector

from mnemo_platform import Unavailable, treat_as_unavailable
from mnemo_platform.errors import treat_as_invalid_input, treat_as_resource_exhausted
from mnemo_platform.telemetry import exporting

log = structlog.get_logger("mnemo.store")

# What a caller should retry is UNAVAILABLE, not a bug: a lost or refused connection; a server
# shutting down, crashing, starting or cancelling the statement (SQLSTATE class 57: an immediate
# restart, pg_terminate_backend, statement_timeout); a read-only server (a failover under way); a
# transaction rolled back by a serialization failure or a deadlock (class 40).
treat_as_unavailable(
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.TooManyConnectionsError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.ReadOnlySQLTransactionError,
    asyncpg.exceptions.TransactionRollbackError,
    # A pooled connection the server ended a moment ago, before asyncpg saw the socket close: its
    # protocol is stuck mid-error and refuses the next statement in these words (measured under a
    # pg_terminate_backend storm, tests/faults/test_database_faults.py). The pool replaces it.
    asyncpg.InternalClientError,
)
# A full disk or exhausted memory (class 53) waits for an operator: RESOURCE_EXHAUSTED.
treat_as_resource_exhausted(asyncpg.exceptions.InsufficientResourcesError)
# A NUL (or an untranslatable character) that a field check missed is the caller's input, not a bug.
treat_as_invalid_input(asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError)

_instrumented = False


def instrument_asyncpg() -> None:
    """Records a span per statement, never with its parameters (they hold user content).

    Only once spans are exported: the wrapper costs about a twentieth of a single write's CPU
    even when the span it starts is not recorded. Tracing is configured before pools open."""
    global _instrumented
    if not _instrumented and exporting():
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

        AsyncPGInstrumentor(capture_parameters=False).instrument()
        _instrumented = True


async def _init_connection(conn: asyncpg.Connection) -> None:
    """The codecs, in as few round trips as asyncpg allows: jsonb is built in (none), the vector
    type is looked up once (two: its lookup statement is prepared, then run). A connection opened
    across a slow link must be ready well inside a request's deadline, or the request that opened
    it is cancelled first and the next one starts over: at +200 ms each way to PostgreSQL, the
    eleven round trips this took before (a check that the type exists, and pgvector's registration
    of three types: 4.4 s, against 0.8 s now) never fitted a write's, and writes failed until the
    link got faster (tests/faults/test_network_faults.py)."""
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        try:
            await conn.set_type_codec(
                "vector",
                schema="public",
                encoder=lambda v: (v if isinstance(v, Vector) else Vector(v)).to_binary(),
                decoder=Vector.from_binary,
                format="binary",
            )
        except ValueError as exc:
            # The type exists only after migration 0001; a pool opened before it still works for
            # the migration itself, and is reopened afterwards (see open_pool's caller).
            if not str(exc).startswith("unknown type"):
                raise
    except asyncpg.InternalClientError as exc:
        # The server ended the connection while it was being set up (a restart, a terminated
        # backend): asyncpg's protocol is left mid-operation and says so in its own terms. The
        # connection is useless; what the caller meets is a lost connection, to retry.
        conn.terminate()
        raise asyncpg.ConnectionDoesNotExistError(f"connection lost while it was being set up: {exc}") from exc


async def _keep_session(conn: asyncpg.Connection) -> None:
    """A released connection keeps its session: asyncpg has already rolled back any open
    transaction, and no pooled connection changes its session state (settings are SET LOCAL or
    given once at connection start, locks are transaction locks, LISTEN and session locks use
    connections of their own). The default reset (UNLISTEN, RESET ALL, unlock all, CLOSE ALL)
    would cost a round trip per acquire, and RESET ALL would drop the start-up settings."""


async def open_pool(
    dsn: str, min_size: int = 1, max_size: int = 10, session: Mapping[str, str] | None = None
) -> asyncpg.Pool:
    """Opens the pool; a database that cannot be reached is UNAVAILABLE with the reason.

    `session` holds settings every connection starts with (sent in the start-up packet, so they
    cost no statement), for a service whose every query wants them.
    """
    instrument_asyncpg()
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            reset=_keep_session,
            command_timeout=60,
            server_settings={"application_name": "mnemo", **(session or {})},
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise Unavailable(f"cannot connect to PostgreSQL: {exc}") from exc
    assert pool is not None
    return pool


POOL_CLOSE_TIMEOUT_S = 5.0


async def close_pool(pool: asyncpg.Pool, timeout_s: float = POOL_CLOSE_TIMEOUT_S) -> None:
    """Closes `pool` gracefully, for at most `timeout_s`, then terminates what is left.

    A graceful close waits for every connection to be released and then for the server to see it
    go. A connection whose network path died silently (a partition, a lost NAT entry) answers
    neither, and `Pool.close` has no timeout of its own: without this a service's stop waited
    minutes for its statements' `command_timeout` and then for ever on the close.
    """
    try:
        await asyncio.wait_for(pool.close(), timeout_s)
    except TimeoutError:
        # wait_for cancelled close(), which terminates the pool's connections when cancelled.
        log.warning("pool_close_timed_out", timeout_s=timeout_s)
        pool.terminate()


async def renew_connections(pool: asyncpg.Pool | None) -> None:
    """Replaces every pooled connection at its next use: the answer to a failed readiness probe.

    A database that stopped answering may be a dead network path rather than a dead server, and a
    connection on a path that died silently stays open for ever (asyncpg has no keepalive; a
    statement on it waits for `command_timeout`). A call that times out drops its own connection,
    but idle ones would each cost a later call its deadline once the path is back.
    """
    if pool is not None and not pool.is_closing():
        await pool.expire_connections()


async def unready_reason(pool: asyncpg.Pool | None) -> str | None:
    """Why a service on `pool` cannot serve (its database does not answer a trivial statement), or
    None: the readiness a database-backed GrpcApp reports (GrpcApp.unready_reason)."""
    if pool is None:
        return "not started"
    try:
        # A simple query (no arguments): one round trip, where a prepared one takes two on a fresh
        # connection. The probe is often what opens a connection again after a reset, and across a
        # slow link opening it and two round trips more did not fit the probe's time
        # (READINESS_TIMEOUT_S); a probe that gets no answer renews every connection of the pool
        # (mnemo_platform.grpc_server), so it must not run out of time where the link only is slow.
        async with pool.acquire() as conn:
            await conn.execute("SELECT 1")
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"PostgreSQL does not answer: {type(exc).__name__}"
    return None


async def check_server_version(pool: asyncpg.Pool) -> None:
    """Mnemo needs PostgreSQL 15 or newer (NULLS NOT DISTINCT, MERGE) with pgvector available."""
    version = await pool.fetchval("SHOW server_version_num")
    if int(version) < 150000:
        raise Unavailable(f"PostgreSQL {version} is too old: Mnemo needs 15 or newer")
    has_vector = await pool.fetchval("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')")
    if not has_vector:
        raise Unavailable("the pgvector extension is not available on this PostgreSQL server")
