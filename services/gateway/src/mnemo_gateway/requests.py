"""Per-request context for HTTP: a server span, a request id and the principal, for every route."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from mnemo_platform import CallContext, new_request_id, reset_call, set_call
from mnemo_platform.telemetry import tracer

log = structlog.get_logger("mnemo.gateway")

_STATE_KEY = "mnemo"
_MAX_REQUEST_ID = 128


class RequestContextMiddleware:
    """Opens the HTTP server span, assigns a request id, and logs one line per request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = headers.get("x-request-id", "")[:_MAX_REQUEST_ID] or new_request_id()
        # No authentication yet: every HTTP caller is the local user (tokens come with roles).
        call = CallContext(request_id=request_id)
        status = {"code": 500}

        async def send_with_status(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode("latin-1")))
            await send(message)

        started = time.perf_counter()
        path = scope.get("path", "")
        with tracer.start_as_current_span(
            f"{scope.get('method', 'HTTP')} {path}",
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": scope.get("method", ""),
                "url.path": path,
                "mnemo.request_id": request_id,
            },
        ) as span:
            scope.setdefault("state", {})[_STATE_KEY] = (call, otel_context.get_current())
            token = set_call(call)
            try:
                with structlog.contextvars.bound_contextvars(request_id=request_id):
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
