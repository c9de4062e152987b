"""HTTP requests the shutdown's grace leaves running are answered 503, not dropped with the connection."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import grpc
import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_gateway.errors import error_response

log = structlog.get_logger("mnemo.gateway")

Scope = dict[str, Any]


class Draining:
    """ASGI middleware: counts the HTTP requests in flight; once `cut()` is called, a request that
    has not started its response is cancelled where it waits (its gRPC call with it, which the
    service then rolls back) and answered 503, which clients retry. uvicorn's own end of the
    grace would instead close the connection with no answer at all."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._running: dict[asyncio.Task[None], list[bool]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._cut = False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = [False]

        async def tracked_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
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
