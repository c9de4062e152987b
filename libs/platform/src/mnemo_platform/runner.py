"""Runs a set of components until SIGTERM/SIGINT, then stops them in reverse order."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from mnemo_platform.telemetry import shutdown_tracing

log = structlog.get_logger("mnemo.runner")


class Component(Protocol):
    """Anything with an async start and stop: a gRPC service, the gateway, the embedded database."""

    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def _after_start(components: Sequence[Component]) -> None:
    # Background work (loading the embedding model, queue workers) begins only once every
    # component is serving, so the gateway answers its first request without waiting on the model.
    # (`mnemo up`'s stack starts the model earlier, as soon as its gateway is serving.)
    for component in components:
        hook = getattr(component, "after_start", None)
        if hook is not None:
            await hook()


async def run_until_signalled(
    components: Sequence[Component],
    on_ready: Callable[[], None] | None = None,
    stop_event: asyncio.Event | None = None,
) -> None:
    """Starts components in order, waits for a signal (or `stop_event`), stops them in reverse."""
    stop = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    started: list[Component] = []
    try:
        for component in components:
            await component.start()
            started.append(component)
        if on_ready is not None:
            on_ready()
        await _after_start(started)
        await stop.wait()
        log.info("shutdown_requested")
    finally:
        for component in reversed(started):
            try:
                await component.stop()
            except Exception:
                log.exception("component_stop_failed", component=component.name)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        shutdown_tracing()
