"""The gateway as a component: channels to the services, the HTTP server, and a gRPC health port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import httptools  # noqa: F401 (named below as uvicorn's parser; missing, the import fails here, not a request)
import structlog
import uvicorn
from opentelemetry import context as otel_context

from mnemo_gateway.backends import Backends
from mnemo_gateway.draining import Draining
from mnemo_gateway.http import build_http_app
from mnemo_gateway.operations import Operations
from mnemo_gateway.settings import GatewaySettings
from mnemo_platform import GrpcApp, Registration, SettingsError
from mnemo_platform.config import AuthSettings, is_loopback

log = structlog.get_logger("mnemo.gateway")


def check_exposure(settings: GatewaySettings, auth: AuthSettings) -> None:
    """Refuses to serve without authentication beyond loopback (unless explicitly made unsafe)."""
    if settings.host in ("0.0.0.0", "::") and not settings.allowed_hosts.strip():
        log.warning(
            "no_allowed_hosts",
            host=settings.host,
            warning="only loopback Host names are served (DNS-rebinding protection); set MNEMO_HTTP_ALLOWED_HOSTS "
            "to the names clients reach this gateway by",
        )
    if auth.enabled or is_loopback(settings.host):
        if not auth.enabled:
            log.info("auth_off_local_mode", host=settings.host, note="single-user local mode: no tokens")
        return
    if not auth.unsafe_no_auth:
        raise SettingsError(
            f"refusing to serve on {settings.host} without authentication: anyone who can reach it "
            "could read and write every workspace. Set MNEMO_AUTH=on (and MNEMO_INTERNAL_SECRET; create "
            "tokens with `mnemo token create`), or bind to 127.0.0.1, or set MNEMO_UNSAFE_NO_AUTH=true "
            "if something in front of Mnemo authenticates"
        )
    log.warning(
        "auth_off_on_network",
        host=settings.host,
        warning="MNEMO_UNSAFE_NO_AUTH: every caller that can reach this address has full access",
    )


KEEP_ALIVE_S = 75


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
        auth: AuthSettings | None = None,
    ) -> None:
        super().__init__(grpc_address, grace_s)
        self.auth = auth or AuthSettings()
        self.harvest_target = harvest_target
        self.settings = settings
        self.ingest_target = ingest_target
        self.search_target = search_target
        self.call_timeout_s = call_timeout_s
        self.backends: Backends | None = None
        self._http: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._draining: Draining | None = None
        self.http_port = 0

    @property
    def base_url(self) -> str:
        host = self.settings.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{shown}:{self.http_port}"

    async def open(self) -> list[Registration]:
        check_exposure(self.settings, self.auth)
        self.backends = Backends(self.ingest_target, self.search_target, self.call_timeout_s, self.harvest_target)
        asgi = build_http_app(Operations(self.backends, self.settings.default_workspace), self.settings, self.auth)
        self._draining = Draining(asgi, self.settings.max_concurrent_requests)
        config = uvicorn.Config(
            self._draining,
            host=self.settings.host,
            port=self.settings.port,
            lifespan="on",
            # C, where h11 is pure Python: 0.1-0.3 ms less a request here (bench/README.md).
            http="httptools",
            log_config=None,
            access_log=False,
            # Past the grace, Draining answers what is left 503; uvicorn's own cut (which closes the
            # connections unanswered) comes only after that.
            timeout_graceful_shutdown=int(self.grace_s) + 2,
            # Longer than clients keep idle connections (httpx: 5 s, uvicorn's own default): a
            # server closing first races a client reusing the connection, which then fails a
            # request it never delivered.
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        self._http = _Server(config)
        # Outside the start-up span (GrpcApp.start): uvicorn's task, and each request's task it
        # starts, would otherwise carry it as their current span.
        token = otel_context.attach(otel_context.Context())
        try:
            self._task = asyncio.create_task(self._http.serve(), name="gateway-http")
        finally:
            otel_context.detach(token)
        while not self._http.started:
            if self._task.done():
                # uvicorn logs the reason (usually the port is taken) and exits via SystemExit.
                with contextlib.suppress(BaseException):
                    self._task.result()
                raise OSError(f"gateway: cannot serve HTTP on {self.settings.host}:{self.settings.port}")
            await asyncio.sleep(0.01)
        self.http_port = self._http.servers[0].sockets[0].getsockname()[1]
        log.info(
            "gateway_listening", mcp=f"{self.base_url}/mcp", rest=f"{self.base_url}/api/v1", ui=f"{self.base_url}/ui"
        )
        return []

    async def close(self) -> None:
        if self._http is not None and self._task is not None:
            self._http.should_exit = True
            if self._draining is not None:
                cut = await self._draining.drain(self.grace_s)
                if cut:
                    log.warning("http_requests_cut_at_shutdown", requests=cut, grace_s=self.grace_s)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.backends is not None:
            await self.backends.close()
