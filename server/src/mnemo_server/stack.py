"""All of Mnemo in one process: the gateway first, then PostgreSQL, ingest, search and harvest."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from mnemo_embed.settings import EmbeddingSettings
from mnemo_gateway import GatewayApp
from mnemo_gateway.app import check_exposure
from mnemo_gateway.settings import GatewaySettings
from mnemo_harvest.settings import HarvestSettings, SummarizerSettings
from mnemo_ingest.settings import IngestSettings
from mnemo_platform import Component, load_all
from mnemo_platform.config import AuthSettings, ServiceAddresses
from mnemo_platform.context import auth_state, configure_auth
from mnemo_platform.grpc_server import GrpcApp
from mnemo_search.settings import SearchSettings
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings, TrustSettings

log = structlog.get_logger("mnemo.up")

FREE_PORT = "127.0.0.1:0"
# How long `mnemo up` waits, once its services have started, for the gateway to reach each of them.
CONNECT_TIMEOUT_S = 5.0


SOCKETS_PREFIX = "mnemo-grpc-"


def _sweep_sockets() -> None:
    """Removes the socket directories of processes that are gone: a stack killed outright (SIGKILL,
    the OOM killer) never removed its own."""
    for directory in Path(tempfile.gettempdir()).glob(f"{SOCKETS_PREFIX}*-*"):
        pid = directory.name.removeprefix(SOCKETS_PREFIX).partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


class ServiceSockets:
    """Where the services of one stack listen when no address is set: Unix sockets in a directory
    of their own, which the stack removes when it stops.

    They share a machine (a process, under `mnemo up`) with the gateway that dials them, and a
    call over a Unix socket costs grpc about 0.12 ms less than over loopback TCP (each end in one
    process: 0.66-0.70 against 0.76-0.87 ms, 2026-12-05). The paths are known before the servers
    start, so the gateway can dial them early, and no other bind can take them meanwhile.
    """

    def __init__(self) -> None:
        _sweep_sockets()
        # Short: a socket's path must fit in 104 bytes (macOS; 108 on Linux). Made for this process
        # only (mkdtemp: mode 0700), where loopback ports were open to every local user.
        self.directory = Path(tempfile.mkdtemp(prefix=f"{SOCKETS_PREFIX}{os.getpid()}-"))

    def address(self, name: str) -> str:
        return f"unix:{self.directory / name}.sock"

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _load_backends() -> dict[str, Any]:
    """Imports the database-backed services (numpy, asyncpg, tokenizers...), off the event loop."""
    from mnemo_embed import build_embedder
    from mnemo_harvest.app import HarvestApp
    from mnemo_ingest import IngestApp
    from mnemo_search import SearchApp
    from mnemo_store import EmbeddedPostgres, bootstrap_admin_token

    return {
        "bootstrap_admin_token": bootstrap_admin_token,
        "build_embedder": build_embedder,
        "IngestApp": IngestApp,
        "SearchApp": SearchApp,
        "HarvestApp": HarvestApp,
        "EmbeddedPostgres": EmbeddedPostgres,
    }


@dataclass
class StackConfig:
    """Everything `mnemo up` reads from the environment; a service whose address is not set listens on
    a Unix socket of the stack's own (ServiceSockets)."""

    database: DatabaseSettings
    embedding: EmbeddingSettings
    ingest: IngestSettings
    search: SearchSettings
    addresses: ServiceAddresses
    gateway: GatewaySettings
    trust: TrustSettings
    harvest: HarvestSettings
    summarizer: SummarizerSettings
    auth: AuthSettings = field(default_factory=AuthSettings)
    content: ContentSettings = field(default_factory=ContentSettings)
    # Empty: the service listens on a Unix socket of the stack's own (ServiceSockets).
    ingest_addr: str = ""
    search_addr: str = ""
    harvest_addr: str = ""
    gateway_grpc_addr: str = FREE_PORT

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StackConfig:
        # Every class at once, so a misconfigured machine hears of every bad variable in one go.
        (database, embedding, content, ingest, search, addresses, gateway, auth, trust, harvest, summarizer) = load_all(
            (
                DatabaseSettings,
                EmbeddingSettings,
                ContentSettings,
                IngestSettings,
                SearchSettings,
                ServiceAddresses,
                GatewaySettings,
                AuthSettings,
                TrustSettings,
                HarvestSettings,
                SummarizerSettings,
            ),
            environ,
        )
        check_exposure(gateway, auth)
        return cls(
            database=database,
            embedding=embedding,
            ingest=ingest,
            search=search,
            addresses=addresses,
            gateway=gateway,
            auth=auth,
            content=content,
            trust=trust,
            harvest=harvest,
            summarizer=summarizer,
            # Under `mnemo up` the gRPC servers are internal: any free loopback port unless set.
            ingest_addr=addresses.ingest if "MNEMO_INGEST_ADDR" in environ else "",
            search_addr=addresses.search if "MNEMO_SEARCH_ADDR" in environ else "",
            harvest_addr=addresses.harvest if "MNEMO_HARVEST_ADDR" in environ else "",
            gateway_grpc_addr=addresses.gateway_grpc if "MNEMO_GATEWAY_GRPC_ADDR" in environ else FREE_PORT,
        )


@dataclass
class Stack:
    """A supervisor component: starts the parts in dependency order and stops them in reverse.

    The gateway starts first, on addresses reserved for ingest and search, so an agent's MCP
    `initialize` is answered while PostgreSQL, the services and the model are still starting;
    a tool called in that window gets a clear UNAVAILABLE error rather than a hang. Once the
    services have started, the gateway connects to each (Backends.connect), so a call made after
    start() returns reaches them.
    """

    config: StackConfig
    embedder: Any = None
    name: str = "mnemo"
    postgres: Any = None
    ingest: Any = None
    search: Any = None
    harvest: Any = None
    gateway: GatewayApp | None = None
    dsn: str = ""
    bootstrap_token: str = ""
    """bootstrap_token is the admin token `mnemo up` created (auth on, no admin yet), to print once."""
    _started: list[Component] = field(default_factory=list)
    _auth_before: tuple[str, bool] | None = None
    _sockets: ServiceSockets | None = None

    async def _start(self, component: Component) -> None:
        if isinstance(component, GrpcApp):
            component.connection = self.config.addresses.connection_policy()
            component.max_concurrent_rpcs = self.config.addresses.max_concurrent_rpcs
        await component.start()
        self._started.append(component)

    async def start(self) -> None:
        cfg = self.config
        grace = cfg.addresses.grace_s
        if self._sockets is None:
            self._sockets = ServiceSockets()
        ingest_addr = cfg.ingest_addr or self._sockets.address("ingest")
        search_addr = cfg.search_addr or self._sockets.address("search")
        harvest_addr = cfg.harvest_addr or self._sockets.address("harvest")
        # The services of one `mnemo up` share a process, hence one secret: generated unless given.
        self._auth_before = auth_state()
        secret = cfg.auth.internal_secret or (secrets.token_hex(32) if cfg.auth.enabled else "")
        configure_auth(secret, required=cfg.auth.enabled)
        try:
            self.gateway = GatewayApp(
                cfg.gateway,
                cfg.gateway_grpc_addr,
                grace,
                ingest_addr,
                search_addr,
                cfg.addresses.call_timeout_s,
                harvest_target=harvest_addr,
                auth=cfg.auth,
            )
            await self._start(self.gateway)
            parts = await asyncio.to_thread(_load_backends)
            embedder = self.embedder or parts["build_embedder"](cfg.embedding)
            # The gateway is serving already, so the model loads now, in its own thread, while
            # PostgreSQL and the services start (their own start() of it then does nothing).
            embedder.start()
            self.dsn = cfg.database.url
            if not self.dsn:
                self.postgres = parts["EmbeddedPostgres"](
                    cfg.database.resolved_data_dir, supervise=True, start_timeout_s=cfg.database.start_timeout_s
                )
                await self._start(self.postgres)
                self.dsn = self.postgres.uri
            self.ingest = parts["IngestApp"](
                self.dsn, ingest_addr, grace, cfg.database, cfg.embedding, cfg.ingest, embedder, cfg.trust, cfg.content
            )
            await self._start(self.ingest)
            self.search = parts["SearchApp"](
                self.dsn, search_addr, grace, cfg.database, cfg.embedding, cfg.search, embedder, cfg.trust
            )
            await self._start(self.search)
            self.harvest = parts["HarvestApp"](
                self.dsn,
                harvest_addr,
                grace,
                cfg.database,
                cfg.harvest,
                cfg.summarizer,
                ingest_addr,
                search_addr,
                cfg.addresses.call_timeout_s,
                cfg.content.max_content_bytes,
            )
            await self._start(self.harvest)
            if cfg.auth.enabled:
                self.bootstrap_token = await parts["bootstrap_admin_token"](self.dsn)
            # A call in the start-up window left its channel refused and waiting out gRPC's
            # reconnect backoff: without this, a write right after the banner failed for up to a
            # few seconds ("ingest is unavailable") though ingest was serving.
            assert self.gateway.backends is not None
            unreached = await self.gateway.backends.connect(CONNECT_TIMEOUT_S)
            if unreached:
                log.warning("gateway_services_unreached", channels=unreached, timeout_s=CONNECT_TIMEOUT_S)
        except BaseException:
            await self.stop()
            raise

    async def after_start(self) -> None:
        for component in self._started:
            hook = getattr(component, "after_start", None)
            if hook is not None:
                await hook()

    async def stop(self) -> None:
        # The public surface closes first so no request arrives at a service that is going away.
        order = sorted(self._started, key=lambda c: c is not self.gateway)
        order = order[:1] + list(reversed(order[1:])) if order and order[0] is self.gateway else list(reversed(order))
        self._started.clear()
        for component in order:
            try:
                await component.stop()
            except Exception:
                log.exception("component_stop_failed", component=component.name)
        if self._auth_before is not None:
            configure_auth(*self._auth_before)
            self._auth_before = None
        if self._sockets is not None:
            self._sockets.remove()
            self._sockets = None

    @property
    def failed(self) -> bool:
        """Whether a part failed for good while running (its PostgreSQL died and would not restart)."""
        return bool(self.postgres is not None and self.postgres.failed)

    @property
    def base_url(self) -> str:
        assert self.gateway is not None
        return self.gateway.base_url
