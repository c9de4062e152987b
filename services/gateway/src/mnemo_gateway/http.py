"""The gateway's ASGI app: MCP at /mcp, REST at /api/v1 and the web UI at /ui in one app; every error in the one JSON
body, or, under /ui, on an HTML error page."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import grpc
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_gateway.errors import CallError, error_response
from mnemo_gateway.mcp_tools import build_mcp
from mnemo_gateway.operations import Operations
from mnemo_gateway.requests import PROBE_PATHS, UNMATCHED_ROUTE, RequestContextMiddleware
from mnemo_gateway.rest import build_router
from mnemo_gateway.settings import GatewaySettings
from mnemo_gateway.ui import Sessions, WebUI, build_ui_router, static_files
from mnemo_platform import MnemoError
from mnemo_platform.config import AuthSettings
from mnemo_platform.metrics import PROMETHEUS_CONTENT_TYPE, prometheus_text

log = structlog.get_logger("mnemo.gateway")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class BodyLimitMiddleware:
    """Refuses bodies over the limit with 413 and a JSON message, by header or while streaming."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._too_large()(scope, receive, send)
                return
        received = 0
        started = False

        async def limited_receive() -> MutableMapping[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await self._too_large()(scope, receive, send)

    def _too_large(self) -> Response:
        # Made when needed: a response made for every request in case it is refused was a fortieth of
        # a single write's CPU (profile, 2026-12-05).
        return error_response(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            reasons_pb.ERROR_REASON_TOO_LARGE,
            f"request body exceeds {self.max_bytes} bytes (MNEMO_HTTP_MAX_BODY_BYTES)",
            status=413,
        )


class _BodyTooLarge(Exception):
    pass


# What the MCP SDK's header refusals mean, by the status it gives them: code, reason, message, and the
# header whose value was refused (named in the message, with the setting that would allow it).
_HEADER_REFUSALS: dict[int, tuple[grpc.StatusCode, int, str, str]] = {
    400: (
        grpc.StatusCode.INVALID_ARGUMENT,
        reasons_pb.ERROR_REASON_INVALID_ARGUMENT,
        "Content-Type must be application/json",
        "",
    ),
    403: (
        grpc.StatusCode.PERMISSION_DENIED,
        reasons_pb.ERROR_REASON_UNSPECIFIED,
        "the Origin header is not allowed (DNS-rebinding protection)",
        "origin",
    ),
    421: (
        grpc.StatusCode.PERMISSION_DENIED,
        reasons_pb.ERROR_REASON_UNSPECIFIED,
        "the Host header is not allowed (DNS-rebinding protection)",
        "host",
    ),
}
_REFUSED = (grpc.StatusCode.INVALID_ARGUMENT, reasons_pb.ERROR_REASON_UNSPECIFIED, "the request was refused", "")
# The services without which the gateway can serve nothing: readiness requires them. Harvest is
# reported but not required (memory reads and writes work without it).
REQUIRED_BACKENDS = ("ingest", "search")


class HostCheck:
    """The MCP SDK's Host and Origin checks on every path (and its Content-Type check on /mcp), answered in the
    one JSON error shape.

    In local mode nothing but the Host header tells a page that rebound its own name to 127.0.0.1 from a real
    client, so REST needs the check as much as /mcp. The SDK's transport applies the same settings to /mcp again,
    but answers in plain text; this runs first.
    """

    def __init__(self, app: Any, settings: TransportSecuritySettings) -> None:
        self.app = app
        self.check = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in PROBE_PATHS:
            request = Request(scope)
            is_mcp_post = request.method == "POST" and scope["path"].rstrip("/") == "/mcp"
            refused = await self.check.validate_request(request, is_post=is_mcp_post)
            if refused is not None:
                code, reason, message, header = _HEADER_REFUSALS.get(refused.status_code, _REFUSED)
                if header:
                    seen = request.headers.get(header, "")
                    message = f"{message}: {seen!r}; add the name to MNEMO_HTTP_ALLOWED_HOSTS"
                response = error_response(code, reason, message, status=refused.status_code)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


# Refusals Starlette makes itself (no route, no such method on it, an undecodable body), as gRPC codes.
_HTTP_REFUSALS: dict[int, tuple[grpc.StatusCode, int]] = {
    400: (grpc.StatusCode.INVALID_ARGUMENT, reasons_pb.ERROR_REASON_INVALID_ARGUMENT),
    404: (grpc.StatusCode.NOT_FOUND, reasons_pb.ERROR_REASON_UNSPECIFIED),
    405: (grpc.StatusCode.UNIMPLEMENTED, reasons_pb.ERROR_REASON_UNSPECIFIED),
}
_OTHER_HTTP_REFUSAL = (grpc.StatusCode.UNKNOWN, reasons_pb.ERROR_REASON_UNSPECIFIED)


def _problem(error: dict[str, Any]) -> dict[str, str]:
    """One validation problem as {field, message}; a JSON syntax error names its position."""
    loc = [str(part) for part in error.get("loc", ()) if part != "body"]
    if error.get("type") == "json_invalid":
        reason = (error.get("ctx") or {}).get("error", "invalid JSON")
        where = f" at character {loc[0]}" if loc else ""
        return {"field": "body", "message": f"body is not valid JSON ({reason}{where})"}
    return {"field": ".".join(loc), "message": error.get("msg", "")}


# The most paths build_http_app's route_of remembers the route template of.
ROUTE_MEMO = 4096


def route_template(routes: Any, scope: MutableMapping[str, Any]) -> str | None:
    """The path template of the route among `routes` that takes `scope`: the first that matches it
    fully, else the first that matches its path but not its method (a 405), else None."""
    partial = None
    for route in routes:
        # FastAPI (0.16x) keeps an included router whole rather than copying its routes up.
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found = route_template(inner.routes, scope)
            if found is not None:
                return found
            continue
        path = getattr(route, "path", None)
        if path is None:
            continue
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(path)
        if match == Match.PARTIAL and partial is None:
            partial = str(path)
    return partial


def build_http_app(operations: Operations, settings: GatewaySettings, auth: AuthSettings | None = None) -> Any:
    mcp = build_mcp(operations)
    allowed_hosts = [f"{h}:*" for h in LOOPBACK_HOSTS]
    allowed_origins = [f"http://{h}:*" for h in LOOPBACK_HOSTS]
    extra = [h.strip() for h in settings.allowed_hosts.split(",") if h.strip()]
    if settings.host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        extra.append(settings.host)
    for host in extra:
        allowed_hosts += [host, f"{host}:*"]
        allowed_origins += [f"http://{host}:*", f"https://{host}:*", f"http://{host}", f"https://{host}"]
    transport_security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins
    )
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.max_body_bytes,
        transport_security=transport_security,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Stateless MCP still needs the session manager's task group running.
        async with mcp.session_manager.run():
            yield

    api = FastAPI(
        title="Mnemo",
        version="0.1.0",
        summary="Long-term memory for AI coding agents.",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
        lifespan=lifespan,
        # RequestContextMiddleware owns the server span, the request's duration metric and its log
        # line. FastAPI's own span would start a second trace (it ignores the span already open) and
        # record the query string, which may hold user text; its metrics would repeat ours under
        # other names at a tenth of a write's CPU (profile of single writes, 2026-12-05).
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    api.include_router(build_router(operations))
    auth = auth or AuthSettings()
    ui = WebUI(operations, Sessions(settings.ui_session_key, settings.ui_session_hours * 3600), auth.enabled)
    api.include_router(build_ui_router(ui))
    api.mount("/ui/static", static_files(), name="ui-static")
    api.router.routes.extend(mcp_app.routes)

    @api.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers. It never asks the services (a restart would not help them)."""
        return {"status": "ok"}

    @api.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        """Prometheus text: every metric of this process (under `mnemo up`, the services' too)."""
        return Response(prometheus_text(), media_type=PROMETHEUS_CONTENT_TYPE)

    @api.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        """Readiness: ingest and search answer their readiness health (their database answers them)."""
        states = await operations.backends.readiness()
        down = [name for name in REQUIRED_BACKENDS if states.get(name) != "SERVING"]
        body = {"status": "unavailable" if down else "ok", "backends": states, "down": down}
        return JSONResponse(body, status_code=503 if down else 200)

    @api.exception_handler(CallError)
    async def call_error(request: Request, exc: CallError) -> Response:
        if ui.covers(request.url.path):
            return ui.call_error_page(request, exc)
        return exc.response()

    @api.exception_handler(MnemoError)
    async def mnemo_error(request: Request, exc: MnemoError) -> Response:
        if ui.covers(request.url.path):
            return ui.call_error_page(request, CallError.of(exc))
        return CallError.of(exc).response()

    @api.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        problems = [_problem(e) for e in exc.errors()]
        summary = "; ".join(f"{p['field'] or 'body'}: {p['message']}" for p in problems)
        if ui.covers(request.url.path):
            return ui.error_page(request, 400, f"invalid request: {summary}")
        return CallError.invalid(f"invalid request: {summary}").response(problems=problems)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if ui.covers(request.url.path):
            return ui.error_page(request, exc.status_code, str(exc.detail))
        code, reason = _HTTP_REFUSALS.get(exc.status_code, _OTHER_HTTP_REFUSAL)
        message = str(exc.detail)
        if exc.status_code == 400:
            # Starlette's only 400 here is a body it could not decode (bad UTF-8, absurd nesting).
            message = f"{message}: the body must be UTF-8 JSON of a reasonable depth"
        # Starlette's own status stays (405 with its Allow header, say): it is finer than the table's.
        return error_response(code, reason, message, status=exc.status_code, headers=exc.headers)

    @api.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("http_unhandled_error")
        if ui.covers(request.url.path):
            return ui.error_page(request, 500, "internal error in Mnemo; the gateway log has the details")
        return error_response(
            grpc.StatusCode.INTERNAL,
            reasons_pb.ERROR_REASON_UNSPECIFIED,
            "internal error in Mnemo; the gateway log has the details",
        )

    templates: dict[tuple[str, str, str, str], str] = {}

    def route_of(scope: MutableMapping[str, Any]) -> str:
        """The template of the route that serves `scope` (`/api/v1/memories/{memory_id}`), the label of
        its metrics and the name of its span; a path no route takes is UNMATCHED_ROUTE.

        Remembered per path: matching walks the routes in Python, a tenth of a millisecond of a
        single write's 3.3 of CPU (profile, 2026-12-05). No route here turns on anything but the
        request's type, method and path. Paths that carry ids fill the memo, so it empties when full."""
        key = (scope["type"], scope.get("method", ""), scope.get("root_path", ""), scope["path"])
        template = templates.get(key)
        if template is None:
            if len(templates) >= ROUTE_MEMO:
                templates.clear()
            template = templates[key] = route_template(api.router.routes, dict(scope)) or UNMATCHED_ROUTE
        return template

    authenticate = operations.authenticate if auth.enabled else None
    return BodyLimitMiddleware(
        RequestContextMiddleware(
            HostCheck(api, transport_security), authenticate, auth.rate_per_minute, ui, route_of=route_of
        ),
        settings.max_body_bytes,
    )
