"""All of Mnemo in one process: embedded (or given) PostgreSQL, ingest, search and gateway."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from mnemo_embed import Embedder, build_embedder
from mnemo_gateway import GatewayApp
from mnemo_ingest import IngestApp
from mnemo_platform import Component, load
from mnemo_platform.config import (
    DatabaseSettings,
    EmbeddingSettings,
    GatewaySettings,
    IngestSettings,
    SearchSettings,
    ServiceAddresses,
)
from mnemo_search import SearchApp
from mnemo_store import EmbeddedPostgres

log = structlog.get_logger("mnemo.up")

FREE_PORT = "127.0.0.1:0"


@dataclass
class StackConfig:
    """Everything `mnemo up` reads from the environment, with ports left free unless set."""

    database: DatabaseSettings
    embedding: EmbeddingSettings
    ingest: IngestSettings
    search: SearchSettings
    addresses: ServiceAddresses
    gateway: GatewaySettings
    ingest_addr: str = FREE_PORT
    search_addr: str = FREE_PORT
    gateway_grpc_addr: str = FREE_PORT

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StackConfig:
        addresses = load(ServiceAddresses, environ)
        return cls(
            database=load(DatabaseSettings, environ),
            embedding=load(EmbeddingSettings, environ),
            ingest=load(IngestSettings, environ),
            search=load(SearchSettings, environ),
            addresses=addresses,
            gateway=load(GatewaySettings, environ),
            # Under `mnemo up` the gRPC servers are internal: any free loopback port unless set.
            ingest_addr=addresses.ingest if "MNEMO_INGEST_ADDR" in environ else FREE_PORT,
            search_addr=addresses.search if "MNEMO_SEARCH_ADDR" in environ else FREE_PORT,
            gateway_grpc_addr=addresses.gateway_grpc if "MNEMO_GATEWAY_GRPC_ADDR" in environ else FREE_PORT,
        )


@dataclass
class Stack:
    """A supervisor component: starts the parts in dependency order, stops them in reverse."""

    config: StackConfig
    embedder: Embedder | None = None
    name: str = "mnemo"
    postgres: EmbeddedPostgres | None = None
    ingest: IngestApp | None = None
    search: SearchApp | None = None
    gateway: GatewayApp | None = None
    dsn: str = ""
    _started: list[Component] = field(default_factory=list)

    async def _start(self, component: Component) -> None:
        await component.start()
        self._started.append(component)

    async def start(self) -> None:
        cfg = self.config
        self.dsn = cfg.database.url
        if not self.dsn:
            self.postgres = EmbeddedPostgres(cfg.database.resolved_data_dir)
            await self._start(self.postgres)
            self.dsn = self.postgres.uri
        embedder = self.embedder or build_embedder(cfg.embedding)
        grace = cfg.addresses.grace_s
        try:
            self.ingest = IngestApp(self.dsn, cfg.ingest_addr, grace, cfg.database, cfg.embedding, cfg.ingest, embedder)
            await self._start(self.ingest)
            self.search = SearchApp(self.dsn, cfg.search_addr, grace, cfg.database, cfg.embedding, cfg.search, embedder)
            await self._start(self.search)
            self.gateway = GatewayApp(
                cfg.gateway,
                cfg.gateway_grpc_addr,
                grace,
                self.ingest.target,
                self.search.target,
                cfg.addresses.call_timeout_s,
            )
            await self._start(self.gateway)
        except BaseException:
            await self.stop()
            raise

    async def after_start(self) -> None:
        for component in self._started:
            hook = getattr(component, "after_start", None)
            if hook is not None:
                await hook()

    async def stop(self) -> None:
        while self._started:
            component = self._started.pop()
            try:
                await component.stop()
            except Exception:
                log.exception("component_stop_failed", component=component.name)

    @property
    def base_url(self) -> str:
        assert self.gateway is not None
        return self.gateway.base_url
