"""The gateway as a component: channels to the services, the HTTP server, and a gRPC health port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import structlog
import uvicorn

from mnemo_gateway.backends import Backends
from mnemo_gateway.http import build_http_app
from mnemo_gateway.operations import Operations
from mnemo_platform import GrpcApp, Registration
from mnemo_platform.config import GatewaySettings

log = structlog.get_logger("mnemo.gateway")


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the process runner owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class GatewayApp(GrpcApp):
    """Serves MCP and REST over HTTP; its gRPC server carries only health and reflection."""

    name = "gateway"

    def __init__(
        self,
        settings: GatewaySettings,
        grpc_address: str,
        grace_s: float,
        ingest_target: str,
        search_target: str,
        call_timeout_s: float,
        harvest_target: str = "",
    ) -> None:
        super().__init__(grpc_address, grace_s)
        self.harvest_target = harvest_target
        self.settings = settings
        self.ingest_target = ingest_target
        self.search_target = search_target
        self.call_timeout_s = call_timeout_s
        self.backends: Backends | None = None
        self._http: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.http_port = 0

    @property
    def base_url(self) -> str:
        host = self.settings.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{shown}:{self.http_port}"

    async def open(self) -> list[Registration]:
        self.backends = Backends(self.ingest_target, self.search_target, self.call_timeout_s, self.harvest_target)
        asgi = build_http_app(Operations(self.backends, self.settings.default_workspace), self.settings)
        config = uvicorn.Config(
            asgi,
            host=self.settings.host,
            port=self.settings.port,
            lifespan="on",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=max(1, int(self.grace_s)),
        )
        self._http = _Server(config)
        self._task = asyncio.create_task(self._http.serve(), name="gateway-http")
        while not self._http.started:
            if self._task.done():
                # uvicorn logs the reason (usually the port is taken) and exits via SystemExit.
                with contextlib.suppress(BaseException):
                    self._task.result()
                raise OSError(f"gateway: cannot serve HTTP on {self.settings.host}:{self.settings.port}")
            await asyncio.sleep(0.01)
        self.http_port = self._http.servers[0].sockets[0].getsockname()[1]
        log.info("gateway_listening", mcp=f"{self.base_url}/mcp", rest=f"{self.base_url}/api/v1")
        return []

    async def close(self) -> None:
        if self._http is not None and self._task is not None:
            self._http.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.backends is not None:
            await self.backends.close()
