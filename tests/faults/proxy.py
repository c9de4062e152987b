"""A TCP fault proxy for the drills: added latency, connections reset at random, and blackholes.

It forwards one listening port to a TCP address or a Unix socket. `latency_s` delays every chunk
in both directions (in order, without limiting throughput); `reset_fraction` of the chunks (exactly:
every 1/fraction-th, counted over both directions of every connection), instead of being
forwarded, reset their connection (RST to the client, the upstream closed);
`blackhole(seconds)` makes every connection open at its start a dead flow for good (nothing more
is forwarded either way, nothing is closed: a peer gone or a NAT entry lost), and holds
connections accepted meanwhile without forwarding until it ends. `die_after(pattern)` kills the
next connection whose client sends `pattern` the same way, right after forwarding that chunk: the
server acts on it, and its answer never comes back (a COMMIT that lands unheard).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from dataclasses import dataclass, field


@dataclass
class _Flow:
    """One client connection and its upstream."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    dead: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class FaultProxy:
    """Listens on 127.0.0.1 (port 0) and forwards to `target`: "host:port" or a Unix socket path."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.latency_s = 0.0
        self.reset_fraction = 0.0
        self.chunks = 0
        self.port = 0
        self.accepted = 0
        self.upstream_connects = 0
        self.resets = 0
        self._blackhole_until = 0.0
        self._die_after: bytes | None = None
        self.died_after = 0
        self._flows: list[_Flow] = []
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for flow in self._flows:
            for task in flow.tasks:
                task.cancel()
            for writer in (flow.client, flow.upstream):
                if writer is not None:
                    writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def blackhole(self, seconds: float) -> None:
        """From now for `seconds`: open connections die silently, new ones are held."""
        self._blackhole_until = time.monotonic() + seconds
        for flow in self._flows:
            flow.dead = True

    def die_after(self, pattern: bytes) -> None:
        """Once: the next connection whose client sends `pattern` dies silently right after it."""
        self._die_after = pattern

    @property
    def blackholed(self) -> bool:
        return time.monotonic() < self._blackhole_until

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if ":" in self.target and not self.target.startswith(("/", "unix:")):
            host, port = self.target.rsplit(":", 1)
            return await asyncio.open_connection(host, int(port))
        # A Unix socket: PostgreSQL's, or a service's in a stack (gRPC's "unix:" target).
        return await asyncio.open_unix_connection(self.target.removeprefix("unix:"))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        flow = _Flow(writer)
        self._flows.append(flow)
        if (held := self._blackhole_until - time.monotonic()) > 0:
            await asyncio.sleep(held)  # accepted, never answered, until the blackhole ends
        try:
            up_reader, up_writer = await self._open_upstream()
        except OSError:
            writer.close()
            return
        self.upstream_connects += 1
        flow.upstream = up_writer
        flow.tasks = [
            asyncio.create_task(self._pipe(flow, reader, up_writer)),
            asyncio.create_task(self._pipe(flow, up_reader, writer)),
        ]
        await asyncio.gather(*flow.tasks, return_exceptions=True)

    async def _pipe(self, flow: _Flow, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                if flow.dead:
                    continue
                if not chunk:  # the sender closed its side: pass it on after the data before it
                    writer.close()
                    return
                writer.write(chunk)
                await writer.drain()
                if chunk is dying:
                    flow.dead = True
                    self.died_after += 1

        dying: bytes | None = None
        sender = asyncio.create_task(deliver())
        try:
            while chunk := await reader.read(65536):
                if flow.dead:
                    continue  # a dead flow swallows everything, closes nothing
                if self._die_after is not None and writer is flow.upstream and self._die_after in chunk:
                    self._die_after, dying = None, chunk
                self.chunks += 1
                if self._reset_due():
                    self.resets += 1
                    self._reset(flow)
                    return
                queue.put_nowait((time.monotonic() + self.latency_s, chunk))
            queue.put_nowait((time.monotonic() + self.latency_s, b""))
            await sender
        except (ConnectionError, OSError):
            self._reset(flow)
        finally:
            if flow.dead:
                await asyncio.Event().wait()  # hold the dead flow open until stop()
            sender.cancel()

    def _reset_due(self) -> bool:
        """Whether this chunk is one of the `reset_fraction` that reset their connection."""
        return bool(self.reset_fraction) and int(self.chunks * self.reset_fraction) > int(
            (self.chunks - 1) * self.reset_fraction
        )

    def _reset(self, flow: _Flow) -> None:
        """RST to the client (SO_LINGER 0), the upstream closed."""
        sock = flow.client.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        flow.client.close()
        if flow.upstream is not None:
            flow.upstream.close()
