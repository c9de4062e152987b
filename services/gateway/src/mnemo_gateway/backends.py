"""The gateway's one channel to each service, and the call wrappers that turn failures into CallError."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

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


class Backends:
    """Channels and stubs to ingest and search, opened at start-up and closed at shutdown."""

    def __init__(self, ingest_target: str, search_target: str, timeout_s: float, harvest_target: str = "") -> None:
        self._ingest_channel = open_channel(
            ingest_target,
            INGEST,
            timeout_s,
            method_timeouts={
                "RescanRedactions": LONG_RUN_TIMEOUT_S,
                "RestoreMemories": LONG_RUN_TIMEOUT_S,
                "Consolidate": LONG_RUN_TIMEOUT_S,
            },
        )
        self._search_channel = open_channel(
            search_target, SEARCH, timeout_s, method_timeouts={"ExportMemories": LONG_RUN_TIMEOUT_S}
        )
        self.ingest = ingest_service_pb2_grpc.IngestServiceStub(self._ingest_channel)
        self.search = search_service_pb2_grpc.SearchServiceStub(self._search_channel)
        self.targets = {"ingest": ingest_target, "search": search_target}
        # Harvest is optional (a gateway in front of ingest and search only still works).
        self._harvest_channel = (
            open_channel(harvest_target, HARVEST, timeout_s, method_timeouts={"Run": LONG_RUN_TIMEOUT_S})
            if harvest_target
            else None
        )
        self.harvest = (
            harvest_service_pb2_grpc.HarvestServiceStub(self._harvest_channel) if self._harvest_channel else None
        )
        if harvest_target:
            self.targets["harvest"] = harvest_target

    async def close(self) -> None:
        await self._ingest_channel.close()
        await self._search_channel.close()
        if self._harvest_channel is not None:
            await self._harvest_channel.close()


async def call(method: Callable[[Any], Awaitable[T]], request: Any) -> T:
    """Makes one gRPC call; a failed call becomes a CallError with the service's message and reason."""
    try:
        return await method(request)
    except grpc.aio.AioRpcError as exc:
        raise CallError.of_rpc(exc) from None


async def streamed(stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A server-streaming call's messages; its failure, before or during the stream, a CallError."""
    try:
        async for message in stream:
            yield message
    except grpc.aio.AioRpcError as exc:
        raise CallError.of_rpc(exc) from None
