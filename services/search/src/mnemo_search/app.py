"""The search service as a component: database, query embedder and gRPC server."""

from __future__ import annotations

import asyncio

import asyncpg

from mnemo.search.v1 import search_service_pb2, search_service_pb2_grpc
from mnemo_embed import Embedder, build_embedder
from mnemo_embed.settings import EmbeddingSettings
from mnemo_platform import GrpcApp, Registration
from mnemo_search.engine import LEXICAL_SESSION, session_settings
from mnemo_search.servicer import SearchServicer
from mnemo_search.settings import SearchSettings
from mnemo_store import close_pool, open_pool, prepare_database, renew_connections, unready_reason
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import TrustSettings

SERVICE_NAME = search_service_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name


class SearchApp(GrpcApp):
    """Checks the database's embedding space, serves SearchService, then loads the query embedder."""

    name = "search"

    def __init__(
        self,
        dsn: str,
        address: str,
        grace_s: float,
        database: DatabaseSettings,
        embedding: EmbeddingSettings,
        settings: SearchSettings,
        embedder: Embedder | None = None,
        trust: TrustSettings | None = None,
    ) -> None:
        super().__init__(address, grace_s)
        self.trust = trust or TrustSettings()
        self.dsn = dsn
        self.database = database
        self.settings = settings
        self.embedder = embedder or build_embedder(embedding)
        self.pool: asyncpg.Pool | None = None
        self.lexical_pool: asyncpg.Pool | None = None

    async def open(self) -> list[Registration]:
        self.pool = await prepare_database(
            self.dsn,
            self.database,
            self.embedder.model,
            self.embedder.dimension,
            session=session_settings(self.settings),
        )
        # The lexical leg's statements reuse their plans (engine.LEXICAL_SESSION); the rest plan per call.
        self.lexical_pool = await open_pool(
            self.dsn, 1, self.database.pool_max, {**self.database.session_limits(), **LEXICAL_SESSION}
        )
        servicer = SearchServicer(self.pool, self.embedder, self.settings, self.trust, self.lexical_pool)
        return [Registration(search_service_pb2_grpc.add_SearchServiceServicer_to_server, servicer, SERVICE_NAME)]

    async def after_start(self) -> None:
        self.embedder.start()

    async def unready_reason(self) -> str | None:
        return await unready_reason(self.pool)

    async def renew_connections(self) -> None:
        for pool in (self.pool, self.lexical_pool):
            await renew_connections(pool)

    async def close(self) -> None:
        await asyncio.gather(*(close_pool(pool) for pool in (self.lexical_pool, self.pool) if pool is not None))
