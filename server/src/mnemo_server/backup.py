"""`mnemo backup` and `mnemo restore FILE`: which database they act on, from the same settings as `mnemo up`."""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, datetime
from pathlib import Path

from mnemo_platform import configure_logging, load
from mnemo_store.backup import (
    BackupError,
    Contents,
    Progress,
    ProgressFn,
    RestoreResult,
    backup_embedded,
    dump_database,
    restore_embedded,
)
from mnemo_store.settings import DatabaseSettings

__all__ = ["BackupError", "Contents", "Progress", "RestoreResult", "default_backup_name", "run_backup", "run_restore"]


def default_backup_name(now: datetime | None = None) -> Path:
    return Path(f"mnemo-backup-{(now or datetime.now(UTC)).strftime('%Y%m%d-%H%M%S')}.dump")


def _quiet() -> None:
    # The command prints its own progress; the store's and the embedded server's info lines
    # (PostgreSQL starting and stopping) would only bury it. Warnings and errors still show.
    configure_logging("warning", "console")
    # platformdirs warns about XDG_RUNTIME_DIR when the embedded server's package is imported; the
    # server finds its socket directory either way, and the warning would read like a failure.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")


def run_backup(file: str | None, force: bool, progress: ProgressFn) -> tuple[Path, Contents, str]:
    """Backs up the configured database to `file` (default: a dated name here); the file, its contents
    and where they came from."""
    _quiet()
    database = load(DatabaseSettings)
    target = Path(file).expanduser().absolute() if file else default_backup_name().absolute()
    if database.url:
        contents = asyncio.run(dump_database(database.url, target, force, progress))
        return target, contents, "MNEMO_DATABASE_URL"
    data_dir = database.resolved_data_dir
    contents = asyncio.run(backup_embedded(data_dir, target, force, progress))
    return target, contents, f"the embedded PostgreSQL in {data_dir}"


def run_restore(file: str, force: bool, progress: ProgressFn) -> tuple[Path, RestoreResult]:
    """Restores `file` into the embedded database of MNEMO_DATA_DIR; the data directory and the outcome."""
    _quiet()
    database = load(DatabaseSettings)
    if database.url:
        raise BackupError(
            "MNEMO_DATABASE_URL is set: `mnemo restore` replaces only the embedded database. Restore into your "
            f"PostgreSQL with its own tools: createdb mnemo_restored && pg_restore --no-owner --dbname=mnemo_restored "
            f"{file}, then point MNEMO_DATABASE_URL at it (README: Running it for real)"
        )
    data_dir = database.resolved_data_dir
    return data_dir, asyncio.run(restore_embedded(data_dir, Path(file).expanduser().absolute(), force, progress))
