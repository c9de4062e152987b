"""The gateway's one channel to each service, and the call wrappers that turn failures into CallError."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mnemo.harvest.v1 import harvest_service_pb2, harvest_service_pb2_grpc
from mnemo.ingest.v1 import ingest_service_pb2, ingest_service_pb2_grpc
from mnemo.search.v1 import search_service_pb2, search_service_pb2_grpc
from mnemo_gateway.errors import CallError
from mnemo_platform import open_channel

T = TypeVar("T")

# Which calls a channel retries on UNAVAILABLE is what each RPC declares in its proto.
INGEST = ingest_service_pb2.DESCRIPTOR.services_by_name["IngestService"]
SEARCH = search_service_pb2.DESCRIPTOR.services_by_name["SearchService"]
HARVEST = harvest_service_pb2.DESCRIPTOR.services_by_name["HarvestService"]
# A first harvest of a machine with thousands of sessions, a redaction rescan of every memory, or
# an export of them all, takes a while; each streams. A restore call writes up to 1,000 records,
# each with its whole history, in a transaction of its own. A full consolidation pass at 100k
# notes takes minutes.
LONG_RUN_TIMEOUT_S = 3600.0
# The writes retried on the keyed channel: only ever sent there with an idempotency key.
KEYED_WRITES = ("WriteMemory",)
# How long the status waits for each service's health before naming it down.
HEALTH_TIMEOUT_S = 1.0


class Backends:
    """Channels and stubs to ingest, search and (optionally) harvest, opened at start-up and closed
    at shutdown."""

    def __init__(self, ingest_target: str, search_target: str, timeout_s: float, harvest_target: str = "") -> None:
        self.targets = {"ingest": ingest_target, "search": search_target}
        # Harvest is optional (a gateway in front of ingest and search only still works).
        if harvest_target:
            self.targets["harvest"] = harvest_target
        self._openers: dict[str, Callable[[], grpc.aio.Channel]] = {
            "ingest": lambda: open_channel(
                ingest_target,
                INGEST,
                timeout_s,
                method_timeouts={
                    "RescanRedactions": LONG_RUN_TIMEOUT_S,
                    "RestoreMemories": LONG_RUN_TIMEOUT_S,
                    "Consolidate": LONG_RUN_TIMEOUT_S,
                },
            ),
            # A write with an idempotency key is stored once however often it is sent (a repeat
            # answers `replayed`), so it goes over a channel of its own that also retries
            # WriteMemory on UNAVAILABLE: a keyed write cut by a lost ingest replica lands on
            # another, unseen by the client. A write without a key is never repeated (it could be
            # stored twice).
            "keyed": lambda: open_channel(ingest_target, INGEST, timeout_s, also_retried=KEYED_WRITES),
            "search": lambda: open_channel(
                search_target, SEARCH, timeout_s, method_timeouts={"ExportMemories": LONG_RUN_TIMEOUT_S}
            ),
        }
        if harvest_target:
            self._openers["harvest"] = lambda: open_channel(
                harvest_target, HARVEST, timeout_s, method_timeouts={"Run": LONG_RUN_TIMEOUT_S}
            )
        self._channels = {name: opener() for name, opener in self._openers.items()}
        self._retired: list[grpc.aio.Channel] = []
        self._stubs()

    def _stubs(self) -> None:
        self._ingest_channel = self._channels["ingest"]
        self._search_channel = self._channels["search"]
        self._harvest_channel = self._channels.get("harvest")
        self.ingest = ingest_service_pb2_grpc.IngestServiceStub(self._ingest_channel)
        self.keyed = ingest_service_pb2_grpc.IngestServiceStub(self._channels["keyed"])
        self.search = search_service_pb2_grpc.SearchServiceStub(self._search_channel)
        self.harvest = (
            harvest_service_pb2_grpc.HarvestServiceStub(self._harvest_channel) if self._harvest_channel else None
        )

    async def connect(self, timeout_s: float) -> list[str]:
        """Connects every channel now, within `timeout_s`; returns the names of those that could not.

        A channel that was refused (its service not listening yet: `mnemo up` starts the gateway
        first) waits out gRPC's reconnect backoff, up to 5 s (mnemo_platform.channels), before it
        tries again, and fails every call meanwhile. So a channel in that state is replaced by a
        new one, which dials at once: once the services have started, the first call reaches them."""
        for name, channel in list(self._channels.items()):
            if channel.get_state() == grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                self._channels[name] = self._openers[name]()
                # Closed only at shutdown: a call still on it (a keyed write waiting out its retries)
                # ends on its own, answered or failed. Closing it now cancelled such a call, and
                # the caller got a bare 500 instead of a 503 to retry.
                self._retired.append(channel)
        self._stubs()

        async def ready(channel: grpc.aio.Channel) -> bool:
            try:
                await asyncio.wait_for(channel.channel_ready(), timeout_s)
            except TimeoutError:
                return False
            return True

        states = await asyncio.gather(*(ready(channel) for channel in self._channels.values()))
        return [name for name, up in zip(self._channels, states, strict=True) if not up]

    def search_failing(self) -> bool:
        """Whether the channel to search has failed to connect and not yet reconnected."""
        return self._search_channel.get_state() == grpc.ChannelConnectivity.TRANSIENT_FAILURE

    async def down(self) -> list[str]:
        """The services that do not answer a health check within HEALTH_TIMEOUT_S, by name."""
        channels = {"ingest": self._ingest_channel, "search": self._search_channel}
        if self._harvest_channel is not None:
            channels["harvest"] = self._harvest_channel

        async def answers(channel: grpc.aio.Channel) -> bool:
            try:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S
                )
            except grpc.aio.AioRpcError:
                return False
            return reply.status == health_pb2.HealthCheckResponse.SERVING

        states = await asyncio.gather(*(answers(channel) for channel in channels.values()))
        return [name for name, up in zip(channels, states, strict=True) if not up]

    async def readiness(self) -> dict[str, str]:
        """Each service's readiness by name: the health of its named service (which follows its
        database, mnemo_platform.GrpcApp.unready_reason), asked with a HEALTH_TIMEOUT_S deadline.

        A state is SERVING, NOT_SERVING, or `unreachable: <gRPC code>` when nothing answered."""
        channels = {"ingest": (self._ingest_channel, INGEST), "search": (self._search_channel, SEARCH)}
        if self._harvest_channel is not None:
            channels["harvest"] = (self._harvest_channel, HARVEST)

        async def state(channel: grpc.aio.Channel, service: ServiceDescriptor) -> str:
            try:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=service.full_name), timeout=HEALTH_TIMEOUT_S
                )
            except grpc.aio.AioRpcError as exc:
                return f"unreachable: {exc.code().name}"
            return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

        states = await asyncio.gather(*(state(channel, service) for channel, service in channels.values()))
        return dict(zip(channels, states, strict=True))

    async def close(self) -> None:
        for channel in [*self._channels.values(), *self._retired]:
            await channel.close()


def service_of(method: Any) -> str:
    """The short name of the service a stub's method calls (`search` for
    `/mnemo.search.v1.SearchService/Search`), or "" if it cannot be told."""
    # grpc.aio keeps a multicallable's full method name in `_method` (grpcio 1.x); without it the
    # error simply names no service.
    full = getattr(method, "_method", b"")
    parts = full.decode(errors="replace").split(".") if isinstance(full, bytes) else []
    return parts[1] if len(parts) > 2 and parts[0] == "/mnemo" else ""


async def call(method: Callable[[Any], Awaitable[T]], request: Any) -> T:
    """Makes one gRPC call; a failed call becomes a CallError with the service's message and reason."""
    try:
        return await method(request)
    except grpc.aio.AioRpcError as exc:
        raise CallError.of_rpc(exc, service_of(method)) from None


async def streamed(stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A server-streaming call's messages; its failure, before or during the stream, a CallError."""
    try:
        async for message in stream:
            yield message
    except grpc.aio.AioRpcError as exc:
        raise CallError.of_rpc(exc) from None
