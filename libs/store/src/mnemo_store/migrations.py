"""Numbered SQL migrations, applied at start-up under an advisory lock and checksummed."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import asyncpg
import structlog

from mnemo_platform import FailedPrecondition

log = structlog.get_logger("mnemo.store")

# Any constant will do as long as every Mnemo process uses the same one.
MIGRATION_LOCK_KEY = 0x6D6E656D6F  # "mnemo"

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class MigrationError(FailedPrecondition):
    """The database's applied migrations disagree with the files on disk."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """The migration files in version order; a gap or a duplicate number is an error."""
    if directory is None:
        files = [
            (f.name, f.read_text(encoding="utf-8"))
            for f in resources.files("mnemo_store.sql").iterdir()
            if f.name.endswith(".sql")
        ]
    else:
        files = [(f.name, f.read_text(encoding="utf-8")) for f in directory.glob("*.sql")]
    migrations = []
    for name, sql in sorted(files):
        match = _NAME.match(name)
        if not match:
            raise MigrationError(f"migration file {name} is not named NNNN_description.sql")
        migrations.append(Migration(version=int(match.group(1)), name=name, sql=sql))
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise MigrationError(f"migration {migration.name} is out of sequence: expected {expected:04d}")
    return migrations


def _check_applied(rows: list[asyncpg.Record], migrations: list[Migration]) -> None:
    """Refuses a database whose applied migrations this version does not have, or has edited since."""
    on_disk = {m.version: m for m in migrations}
    for row in rows:
        migration = on_disk.get(row["version"])
        if migration is None:
            raise MigrationError(
                f"the database has migration {row['name']} applied, which this version of Mnemo "
                "does not have; upgrade Mnemo or use another database"
            )
        if migration.checksum != row["checksum"]:
            raise MigrationError(
                f"migration {migration.name} was edited after it was applied "
                f"(checksum {row['checksum'][:12]} in the database, {migration.checksum[:12]} on disk); "
                "restore the original file and put the change in a new migration"
            )


async def pending_migrations(conn: asyncpg.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """The migrations not yet applied, without applying any (for the services that do not migrate)."""
    migrations = load_migrations() if migrations is None else migrations
    if not await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        return [m.name for m in migrations]
    rows = await conn.fetch("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    _check_applied(rows, migrations)
    done = {row["version"] for row in rows}
    return [m.name for m in migrations if m.version not in done]


async def apply_migrations(conn: asyncpg.Connection, migrations: list[Migration] | None = None) -> list[str]:
    """Applies pending migrations in order; returns the names applied. Safe to run concurrently."""
    migrations = load_migrations() if migrations is None else migrations
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version     integer PRIMARY KEY,
                name        text NOT NULL,
                checksum    text NOT NULL,
                applied_at  timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        rows = await conn.fetch("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        _check_applied(rows, migrations)
        done = {row["version"] for row in rows}
        for migration in migrations:
            if migration.version in done:
                continue
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            log.info("migration_applied", migration=migration.name)
            applied_now.append(migration.name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied_now
