"""The harvest service as a component: its database state, channels to ingest and search, the poller."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import structlog

from mnemo.harvest.v1 import harvest_service_pb2, harvest_service_pb2_grpc
from mnemo.ingest.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from mnemo.search.v1 import search_service_pb2, search_service_pb2_grpc
from mnemo_harvest.archive import Archive
from mnemo_harvest.engine import HarvestEngine
from mnemo_harvest.readers import build_readers
from mnemo_harvest.servicer import HarvestServicer
from mnemo_harvest.settings import HarvestSettings, SummarizerSettings
from mnemo_harvest.sources import DatabaseSources
from mnemo_harvest.summarize import Summarizer
from mnemo_platform import GrpcApp, Registration, open_channel
from mnemo_platform.telemetry import background_span
from mnemo_store import close_pool, prepare_database, renew_connections, unready_reason
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings

log = structlog.get_logger("mnemo.harvest")

SERVICE_NAME = harvest_service_pb2.DESCRIPTOR.services_by_name["HarvestService"].full_name
# The channels retry what the protos declare safe to repeat. WriteMemory is not among them: a
# failed write is retried by the next run instead, where ingest's derivations make a repeat safe.
INGEST = ingest_service_pb2.DESCRIPTOR.services_by_name["IngestService"]
SEARCH = search_service_pb2.DESCRIPTOR.services_by_name["SearchService"]


class HarvestApp(GrpcApp):
    """Serves HarvestService and runs a harvest every MNEMO_HARVEST_INTERVAL_S."""

    name = "harvest"

    def __init__(
        self,
        dsn: str,
        address: str,
        grace_s: float,
        database: DatabaseSettings,
        settings: HarvestSettings,
        summarizer: SummarizerSettings,
        ingest_target: str,
        search_target: str,
        call_timeout_s: float,
        max_content_bytes: int = ContentSettings().max_content_bytes,
    ) -> None:
        super().__init__(address, grace_s)
        self.dsn = dsn
        self.database = database
        self.settings = settings
        self.summarizer_settings = summarizer
        self.ingest_target = ingest_target
        self.search_target = search_target
        self.call_timeout_s = call_timeout_s
        self.max_content_bytes = max_content_bytes
        self.pool: asyncpg.Pool | None = None
        self.engine: HarvestEngine | None = None
        self._channels: list = []
        self._poller: asyncio.Task[None] | None = None

    async def open(self) -> list[Registration]:
        # No model: harvest never touches vectors, so the embedding space is not its to check.
        self.pool = await prepare_database(self.dsn, self.database)
        ingest = open_channel(self.ingest_target, INGEST, self.call_timeout_s)
        search = open_channel(self.search_target, SEARCH, self.call_timeout_s)
        self._channels = [ingest, search]
        data_dir = self.database.resolved_data_dir
        self.engine = HarvestEngine(
            DatabaseSources(self.pool),
            build_readers(self.settings),
            ingest_service_pb2_grpc.IngestServiceStub(ingest),
            search_service_pb2_grpc.SearchServiceStub(search),
            self.settings,
            data_dir,
            self.max_content_bytes,
            summarizer=Summarizer(self.summarizer_settings) if self.summarizer_settings.url else None,
            archive=(
                Archive(data_dir / "archive", self.settings.archive_max_bytes, self.settings.archive_retention_days)
                if self.settings.archive
                else None
            ),
        )
        servicer = HarvestServicer(self.engine, self.pool)
        return [Registration(harvest_service_pb2_grpc.add_HarvestServiceServicer_to_server, servicer, SERVICE_NAME)]

    async def after_start(self) -> None:
        if self.engine is not None and self.engine.readers:
            self._poller = asyncio.create_task(self._poll(), name="harvest-poller")

    async def _poll(self) -> None:
        assert self.engine is not None
        while True:
            try:
                with background_span("harvest.tick"):
                    async for _ in self.engine.run():
                        pass
            except asyncio.CancelledError:
                raise
            except Exception:
                # ingest or search down, say: try again next tick rather than stop harvesting.
                log.exception("harvest_tick_failed")
            await asyncio.sleep(self.settings.interval_s)

    async def unready_reason(self) -> str | None:
        return await unready_reason(self.pool)

    async def renew_connections(self) -> None:
        await renew_connections(self.pool)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for channel in self._channels:
            await channel.close()
        if self.engine is not None and self.engine.summarizer is not None:
            await self.engine.summarizer.aclose()
        if self.pool is not None:
            await close_pool(self.pool)
