"""Per-request context for HTTP: a server span, a request id and the principal, for every route."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import Any, Protocol

import grpc
import structlog
from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.trace import SpanKind

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_gateway.errors import CallError
from mnemo_platform import CallContext, new_request_id, reset_call, set_call
from mnemo_platform.metrics import http_duration
from mnemo_platform.telemetry import entry_span

log = structlog.get_logger("mnemo.gateway")

_STATE_KEY = "mnemo"
_MAX_REQUEST_ID = 128


# Paths anyone may read without a token: liveness, readiness, metrics (counts and timings, no content)
# and the API's own description.
# Probes and scrapers: they read nothing, call by pod IP (any Host), and are never refused as busy.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
OPEN_PATHS = (*sorted(PROBE_PATHS), "/api/v1/openapi.json", "/api/v1/docs")

Authenticator = Callable[[str, str], Awaitable[CallContext]]

# The http_route of a request no route matched: one label value, not one per path a scanner tries.
UNMATCHED_ROUTE = "unmatched"
# Methods that get a label value of their own; any other is `_OTHER` (OpenTelemetry's convention).
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class SessionGate(Protocol):
    """What the web UI tells the middleware about its paths: which it serves, which need no session, the token a
    request's session cookie carries, and the answer to a request it cannot authenticate (a sign-in page, not JSON)."""

    def covers(self, path: str) -> bool: ...

    def is_open(self, path: str) -> bool: ...

    def token(self, headers: Mapping[str, str]) -> str: ...

    def refused(self, error: CallError, scope: MutableMapping[str, Any]) -> Any: ...


class TokenBuckets:
    """Per-token rate limits: `per_minute` requests a minute, in bursts of up to as many."""

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> float:
        """0 when the request may go ahead, else how many seconds until it may."""
        now = time.monotonic()
        tokens, stamp = self._buckets.get(key, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - stamp) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1, now)
        return 0.0


class RequestContextMiddleware:
    """Opens the HTTP server span, assigns a request id, authenticates, and logs one line per request.

    With an authenticator (MNEMO_AUTH=on) every request but OPEN_PATHS needs `Authorization:
    Bearer <token>`; the token is resolved once, here, and only the principal goes further. Under the web UI's
    paths the token comes from its signed session cookie instead (never from a header: the UI's forms are what
    its CSRF checks cover), and a request without a live one gets the UI's sign-in page.
    """

    def __init__(
        self,
        app: Any,
        authenticate: Authenticator | None = None,
        rate_per_minute: int = 0,
        ui: SessionGate | None = None,
        route_of: Callable[[MutableMapping[str, Any]], str] | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.ui = ui
        self.route_of = route_of or (lambda scope: UNMATCHED_ROUTE)
        self.buckets = TokenBuckets(rate_per_minute) if authenticate is not None and rate_per_minute else None

    async def _principal(self, headers: dict[str, str], request_id: str, path: str) -> CallContext | CallError:
        """The caller, or the error to refuse it with."""
        if self.authenticate is None:
            return CallContext(request_id=request_id)  # local mode: the single local user
        if self.ui is not None and self.ui.covers(path):
            scheme, token = "bearer", self.ui.token(headers)
        else:
            scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return CallError(
                grpc.StatusCode.UNAUTHENTICATED,
                "this Mnemo requires a token: send `Authorization: Bearer <token>`",
                reasons_pb.ERROR_REASON_UNAUTHENTICATED,
            )
        try:
            return await self.authenticate(token.strip(), request_id)
        except CallError as exc:
            return exc

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Matched before the app runs: the routes rewrite the scope as they go (a mount's path).
        route = self.route_of(scope)
        status = {"code": 500}

        async def send_with_status(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self._serve(scope, receive, send_with_status, route)
        finally:
            http_duration.record(
                time.perf_counter() - started,
                {
                    "http.route": route,
                    "http.request.method": method if (method := scope.get("method", "")) in _METHODS else "_OTHER",
                    "http.response.status_code": status["code"],
                },
            )

    async def _serve(self, scope: MutableMapping[str, Any], receive: Any, send: Any, route: str) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = headers.get("x-request-id", "")[:_MAX_REQUEST_ID] or new_request_id()
        path = scope.get("path", "")
        status = {"code": 500}
        ui_path = self.ui is not None and self.ui.covers(path)
        ui_open = self.ui is not None and ui_path and self.ui.is_open(path)
        if path in OPEN_PATHS or (self.authenticate is None) or ui_open:
            call: CallContext | CallError = CallContext(request_id=request_id)
        else:
            call = await self._principal(headers, request_id, path)
        if isinstance(call, CallError) and ui_path and self.ui is not None:
            log.info("ui_request_refused", path=path, status=call.http_status, request_id=request_id)
            await self.ui.refused(call, scope)(scope, receive, send)
            return
        if isinstance(call, CallError):
            log.info(
                "http_request_refused",
                path=path,
                status=call.http_status,
                reason=call.reason_name,
                message=call.message,
                request_id=request_id,
            )
            refused = {"x-request-id": request_id}
            if call.http_status == 401:
                refused["www-authenticate"] = 'Bearer realm="mnemo"'
            await call.response(headers=refused)(scope, receive, send)
            return
        if self.buckets is not None and call.token_id and (wait := self.buckets.take(call.token_id)) > 0:
            log.info("http_request_rate_limited", path=path, token=call.token_id, request_id=request_id)
            limited = CallError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"rate limit: this token may make {int(self.buckets.capacity)} requests a minute "
                "(MNEMO_RATE_LIMIT_PER_MIN); retry after the time in Retry-After",
                reasons_pb.ERROR_REASON_RATE_LIMITED,
            )
            headers = {"retry-after": str(max(1, math.ceil(wait))), "x-request-id": request_id}
            await limited.response(headers=headers)(scope, receive, send)
            return

        async def send_with_status(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode("latin-1")))
            await send(message)

        started = time.perf_counter()
        # A caller's W3C traceparent makes this span its child: the caller's trace goes on through
        # the services (the channels' interceptors carry it) down to their SQL statements.
        with entry_span(
            f"{scope.get('method', 'HTTP')} {route}",
            propagate.extract(headers),
            SpanKind.SERVER,
            {
                "http.request.method": scope.get("method", ""),
                "http.route": route,
                "url.path": path,
                "mnemo.request_id": request_id,
            },
        ) as span:
            scope.setdefault("state", {})[_STATE_KEY] = (call, otel_context.get_current())
            token = set_call(call)
            try:
                with structlog.contextvars.bound_contextvars(request_id=request_id, principal=call.principal):
                    await self.app(scope, receive, send_with_status)
            finally:
                reset_call(token)
                span.set_attribute("http.response.status_code", status["code"])
                log.info(
                    "http_request",
                    method=scope.get("method"),
                    path=path,
                    status=status["code"],
                    duration_ms=round((time.perf_counter() - started) * 1000, 2),
                    request_id=request_id,
                )


@contextlib.contextmanager
def restore_request_context(scope: MutableMapping[str, Any] | None) -> Iterator[None]:
    """Re-enters the request's span and call context where a library ran us in another task."""
    saved = (scope or {}).get("state", {}).get(_STATE_KEY)
    if saved is None:
        yield
        return
    call, ctx = saved
    otel_token = otel_context.attach(ctx)
    call_token = set_call(call)
    try:
        yield
    finally:
        reset_call(call_token)
        otel_context.detach(otel_token)
