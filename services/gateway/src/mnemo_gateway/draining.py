"""The gateway's HTTP requests in flight: a cap on those waiting for an answer, and the ones the
shutdown's grace leaves running answered 503 rather than dropped with the connection."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_gateway.errors import error_response
from mnemo_gateway.requests import PROBE_PATHS

log = structlog.get_logger("mnemo.gateway")

Scope = dict[str, Any]


class Draining:
    """ASGI middleware: counts the HTTP requests in flight; once `cut()` is called, a request that
    has not started its response is cancelled where it waits (its gRPC call with it, which the
    service then rolls back) and answered 503, which clients retry. uvicorn's own end of the
    grace would instead close the connection with no answer at all.

    At most `limit` requests may be waiting for their answer at once (MNEMO_HTTP_MAX_CONCURRENT_REQUESTS);
    one more is answered 503 at once, before anything is done, like a gRPC server's cap. A response
    already streaming (an MCP session's event stream) no longer counts: it holds a connection, not
    work. Probes and scrapes are never refused.
    """

    def __init__(self, app: Any, limit: int = 0) -> None:
        self.app = app
        self.limit = limit
        self.waiting = 0
        self._running: dict[asyncio.Task[None], list[bool]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._cut = False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.limit and self.waiting >= self.limit and scope.get("path") not in PROBE_PATHS:
            log.warning("http_request_refused_busy", path=scope.get("path", ""), limit=self.limit)
            busy = error_response(
                grpc.StatusCode.UNAVAILABLE,
                reasons_pb.ERROR_REASON_UNAVAILABLE,
                f"the gateway is busy: {self.limit} requests are waiting for their answer "
                "(MNEMO_HTTP_MAX_CONCURRENT_REQUESTS); this one was not started: retry with backoff",
                headers={"Retry-After": "1"},
            )
            await busy(scope, receive, send)
            return
        started = [False]
        self.waiting += 1

        async def tracked_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and not started[0]:
                started[0] = True
                self.waiting -= 1
            await send(message)

        task = asyncio.current_task()
        assert task is not None
        self._running[task] = started
        self._idle.clear()
        try:
            await self.app(scope, receive, tracked_send)
        except asyncio.CancelledError:
            if not self._cut or started[0]:
                raise
            log.warning("http_request_cut_at_shutdown", path=scope.get("path", ""))
            response = error_response(
                grpc.StatusCode.UNAVAILABLE,
                reasons_pb.ERROR_REASON_UNAVAILABLE,
                "Mnemo stopped before the request finished; it was rolled back: retry",
            )
            await response(scope, receive, send)
        finally:
            if not started[0]:
                self.waiting -= 1
            del self._running[task]
            if not self._running:
                self._idle.set()

    async def drain(self, grace_s: float) -> int:
        """Waits up to `grace_s` for the requests in flight, then cuts the rest; how many were cut."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout=grace_s)
        self._cut = True
        cut = [task for task, started in self._running.items() if not started[0]]
        for task in cut:
            task.cancel()
        if cut:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), timeout=5)
        return len(cut)
