"""The ingest service as a component: database, embedder, queue workers and gRPC server."""

from __future__ import annotations

import asyncio

import asyncpg
import structlog

from mnemo.ingest.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from mnemo_embed import Embedder, build_embedder
from mnemo_embed.settings import EmbeddingSettings
from mnemo_ingest.activity import WriteActivity
from mnemo_ingest.consolidate import Consolidator
from mnemo_ingest.drafting import Drafter
from mnemo_ingest.graphing import VectorGrapher
from mnemo_ingest.posting import LexicalPoster
from mnemo_ingest.servicer import IngestServicer
from mnemo_ingest.settings import IngestSettings
from mnemo_ingest.worker import EmbeddingWorkers
from mnemo_ingest.writes import WRITE_SESSION
from mnemo_platform import GrpcApp, Registration
from mnemo_redact import warm_up
from mnemo_store import close_pool, open_pool, prepare_database, renew_connections, unready_reason
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings, TrustSettings

log = structlog.get_logger("mnemo.ingest")

BACKGROUND_STOP_TIMEOUT_S = 5.0

SERVICE_NAME = ingest_service_pb2.DESCRIPTOR.services_by_name["IngestService"].full_name


class IngestApp(GrpcApp):
    """Migrates and opens the database, serves IngestService, then starts the embedding workers, the
    grapher, the lexical poster and the consolidation job."""

    name = "ingest"

    def __init__(
        self,
        dsn: str,
        address: str,
        grace_s: float,
        database: DatabaseSettings,
        embedding: EmbeddingSettings,
        settings: IngestSettings,
        embedder: Embedder | None = None,
        trust: TrustSettings | None = None,
        content: ContentSettings | None = None,
    ) -> None:
        super().__init__(address, grace_s)
        self.trust = trust or TrustSettings()
        self.content = content or ContentSettings()
        self.dsn = dsn
        self.database = database
        self.embedding = embedding
        self.settings = settings
        self.embedder = embedder or build_embedder(embedding)
        self.pool: asyncpg.Pool | None = None
        self.write_pool: asyncpg.Pool | None = None
        self.workers: EmbeddingWorkers | None = None
        self.grapher: VectorGrapher | None = None
        self.poster: LexicalPoster | None = None
        self.consolidator: Consolidator | None = None
        self._warming: asyncio.Task[None] | None = None

    async def open(self) -> list[Registration]:
        self.pool = await prepare_database(
            self.dsn,
            self.database,
            self.embedder.model,
            self.embedder.dimension,
            migrate=True,  # ingest owns the schema (see docs/architecture.md)
        )
        # The workers give way to this process's writes (mnemo_ingest.activity).
        activity = WriteActivity()
        self.workers = EmbeddingWorkers(
            self.pool, self.dsn, self.embedder, self.settings, self.embedding.batch_size, activity
        )
        self.grapher = VectorGrapher(self.pool, self.settings, activity, self.workers)
        self.poster = LexicalPoster(self.pool, self.settings, activity)
        self.consolidator = Consolidator(self.pool, self.settings, self.trust, Drafter.from_settings(self.settings))
        self.write_pool = await open_pool(
            self.dsn, 1, self.database.pool_max, {**self.database.session_limits(), **WRITE_SESSION}
        )
        servicer = IngestServicer(
            self.pool, self.embedder, self.trust, self.content, activity, self.consolidator, self.write_pool
        )
        return [Registration(ingest_service_pb2_grpc.add_IngestServiceServicer_to_server, servicer, SERVICE_NAME)]

    async def after_start(self) -> None:
        self.embedder.start()
        self._warming = asyncio.create_task(asyncio.to_thread(warm_up), name="redaction-warm-up")
        assert self.workers is not None
        await self.workers.start()
        assert self.grapher is not None
        await self.grapher.start()
        assert self.poster is not None
        await self.poster.start()
        assert self.consolidator is not None
        await self.consolidator.start()

    async def unready_reason(self) -> str | None:
        return await unready_reason(self.pool)

    async def renew_connections(self) -> None:
        for pool in (self.pool, self.write_pool):
            await renew_connections(pool)

    async def close(self) -> None:
        if self._warming is not None:
            # Its failure, if any, is met again by the first write that needs detect-secrets.
            await asyncio.gather(self._warming, return_exceptions=True)
        # The background loops are cancelled, but a statement on a connection whose network path
        # died silently does not return to a cancellation (asyncpg waits for the server to
        # acknowledge it): they get a bounded wait, then the pool is terminated under them, which
        # wakes them, and only then are they waited for.
        loops = [c.stop() for c in (self.workers, self.grapher, self.poster, self.consolidator) if c is not None]
        stopping = asyncio.ensure_future(asyncio.gather(*loops))
        await asyncio.wait({stopping}, timeout=BACKGROUND_STOP_TIMEOUT_S)
        if self.pool is not None:
            if stopping.done():
                await close_pool(self.pool)
            else:
                log.warning("background_stop_timed_out", timeout_s=BACKGROUND_STOP_TIMEOUT_S)
                self.pool.terminate()
        await stopping
        if self.write_pool is not None:
            await close_pool(self.write_pool)
