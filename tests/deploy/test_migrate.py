"""`mnemo migrate` (what the Kubernetes Job runs) on the real PostgreSQL: migrates, is idempotent, fails clearly."""

from __future__ import annotations

import asyncio

import asyncpg

from mnemo_embed.local import BUNDLED_MODEL_NAME
from mnemo_store import admin_token_exists, authenticate, load_migrations
from mnemo_store.embedding_space import read_embedding_space
from mnemo_store.migrations import pending_migrations
from tests.e2e.test_processes import MNEMO, clean_env
from tests.helpers import Postgres, scratch_dir


async def run_migrate(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        MNEMO, "migrate", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


def migrate_env(dsn: str, **overrides: str) -> dict[str, str]:
    key_dir = scratch_dir("key-")
    return clean_env(
        MNEMO_DATABASE_URL=dsn, MNEMO_AUDIT_KEY_FILE=f"{key_dir}/audit.key", MNEMO_LOG_FORMAT="json", **overrides
    )


async def test_migrate_brings_an_empty_database_to_the_schema_and_a_second_run_changes_nothing(
    postgres: Postgres,
) -> None:
    dsn = await postgres.create_database("migrate")
    names = [m.name for m in load_migrations()]
    conn = await asyncpg.connect(dsn)
    try:
        assert await pending_migrations(conn) == names  # control: an empty database lacks every migration
        assert await conn.fetchval("SELECT to_regclass('embedding_space')") is None

        env = migrate_env(dsn)
        code, out, err = await run_migrate(env)
        assert code == 0, err
        assert f"applied {len(names)} migration(s)" in out and names[-1] in out
        assert await pending_migrations(conn) == []
        # What a starting ingest records besides the schema: the bundled model's embedding space.
        assert await read_embedding_space(conn) == (BUNDLED_MODEL_NAME, 384)
        applied_at = await conn.fetchval("SELECT max(applied_at) FROM schema_migrations")

        code, out, err = await run_migrate(env)
        assert code == 0, err
        assert "already at this version's schema" in out
        assert await conn.fetchval("SELECT max(applied_at) FROM schema_migrations") == applied_at
    finally:
        await conn.close()


async def test_migrate_exits_nonzero_in_one_line_when_postgres_cannot_be_reached(postgres: Postgres) -> None:
    # Nothing listens on a port just released; MNEMO_DB_WAIT_S bounds the wait a Job would make.
    code, out, err = await run_migrate(migrate_env("postgresql://mnemo@127.0.0.1:9/mnemo", MNEMO_DB_WAIT_S="0.5"))
    assert code == 1
    assert err.strip().splitlines() == [err.strip()] and "cannot connect to PostgreSQL" in err
    assert "Traceback" not in err and out == ""

    code, _, err = await run_migrate(clean_env())
    assert code == 2 and "MNEMO_DATABASE_URL is required for `mnemo migrate`" in err

    # Positive control: the same command against a database that answers succeeds.
    code, _, err = await run_migrate(migrate_env(await postgres.create_database("migrate")))
    assert code == 0, err


async def test_migrate_admin_token_mints_the_first_admin_token_once(postgres: Postgres) -> None:
    dsn = await postgres.create_database("migrate")
    env = migrate_env(dsn, MNEMO_AUTH="on", MNEMO_INTERNAL_SECRET="s" * 32)
    # Control: the Job's plain run creates no token (nothing secret in its logs).
    code, out, err = await run_migrate(env)
    assert code == 0, err
    assert "MNEMO_TOKEN=" not in out
    conn = await asyncpg.connect(dsn)
    try:
        assert await admin_token_exists(conn) is False
        code, out, err = await run_migrate(env, "--admin-token")
        assert code == 0, err
        secret = out.split("MNEMO_TOKEN=", 1)[1].split()[0]
        token = await authenticate(conn, secret)
        assert token is not None and token.role == "admin"
        assert await admin_token_exists(conn) is True

        code, out, err = await run_migrate(env, "--admin-token")
        assert code == 0, err
        assert "MNEMO_TOKEN=" not in out and "a live admin token exists already" in out
    finally:
        await conn.close()
