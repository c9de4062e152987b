"""The retry policy of every client channel comes from the idempotency each RPC declares in its proto."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import ServiceDescriptor

from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as ingest_grpc
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo.search.v1 import search_service_pb2_grpc as search_grpc
from mnemo_platform import open_channel, service_config

SEARCH = spb.DESCRIPTOR.services_by_name["SearchService"]
INGEST = ipb.DESCRIPTOR.services_by_name["IngestService"]
HARVEST = hpb.DESCRIPTOR.services_by_name["HarvestService"]


def entries(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each method's own methodConfig entry by method name; the service-wide default under ""."""
    by_name: dict[str, dict[str, Any]] = {}
    for entry in config["methodConfig"]:
        for name in entry["name"]:
            key = name.get("method", "")
            assert key not in by_name, f"{key!r} is named twice; gRPC rejects such a service config"
            by_name[key] = entry
    return by_name


def retried(service: ServiceDescriptor, **timeouts: float) -> set[str]:
    return {name for name, entry in entries(service_config(service, 5.0, timeouts)).items() if "retryPolicy" in entry}


def test_every_read_of_search_is_retried_and_write_memory_is_not() -> None:
    reads = {method.name for method in SEARCH.methods}
    assert len(reads) >= 11  # positive control: the descriptor lists the service's reads
    assert retried(SEARCH) == reads
    # The five reads the hand-kept list left out.
    assert {"GetHistory", "ListAuditEvents", "VerifyAudit", "Authenticate", "ListTokens"} <= retried(SEARCH)
    ingest = retried(INGEST)
    assert "WriteMemory" not in ingest and "CreateToken" not in ingest
    assert "AddWorkspace" in ingest  # positive control: a write declared IDEMPOTENT is retried
    assert retried(HARVEST) == {"Run", "Status", "ListSources"}


def test_retries_are_on_unavailable_only_and_every_method_has_a_deadline() -> None:
    config = service_config(INGEST, 5.0, {"RescanRedactions": 3600.0})
    by_name = entries(config)
    assert by_name[""] == {"name": [{"service": "mnemo.ingest.v1.IngestService"}], "timeout": "5.0s"}
    assert by_name["AddWorkspace"]["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    # A retried method with its own timeout has one entry carrying both.
    assert by_name["RescanRedactions"]["timeout"] == "3600.0s" and "retryPolicy" in by_name["RescanRedactions"]
    assert "WriteMemory" not in by_name  # it falls under the service's default: a deadline, no retries
    assert config["retryThrottling"] == {"maxTokens": 10, "tokenRatio": 0.1}
    json.dumps(config)  # what the channel option carries


def test_a_channel_for_keyed_writes_also_retries_write_memory() -> None:
    config = service_config(INGEST, 5.0, also_retried=["WriteMemory"])
    keyed = {name for name, entry in entries(config).items() if "retryPolicy" in entry}
    assert keyed == retried(INGEST) | {"WriteMemory"}
    assert "WriteMemory" not in retried(INGEST)  # control: the plain channel does not
    with pytest.raises(ValueError, match="has no method WriteMemorie"):
        service_config(INGEST, 5.0, also_retried=["WriteMemorie"])


def test_a_timeout_for_a_method_the_service_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="has no method Rescan"):
        service_config(INGEST, 5.0, {"Rescan": 60.0})


class FlakyOnce:
    """Answers every method UNAVAILABLE on its first attempt and OK afterwards, counting attempts."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()

    def handler(self, service: ServiceDescriptor, replies: dict[str, Any]) -> grpc.GenericRpcHandler:
        def method(name: str) -> grpc.RpcMethodHandler:
            async def handle(request: bytes, context: grpc.aio.ServicerContext) -> Any:
                self.attempts[name] += 1
                if self.attempts[name] == 1:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
                return replies[name]

            return grpc.unary_unary_rpc_method_handler(handle, response_serializer=lambda m: m.SerializeToString())

        return grpc.method_handlers_generic_handler(service.full_name, {name: method(name) for name in replies})


@pytest.fixture
async def flaky() -> AsyncIterator[tuple[FlakyOnce, str]]:
    flaky = FlakyOnce()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [
            flaky.handler(SEARCH, {"GetHistory": spb.GetHistoryResponse(), "Search": spb.SearchResponse()}),
            flaky.handler(
                INGEST, {"WriteMemory": ipb.WriteMemoryResponse(), "AddWorkspace": ipb.AddWorkspaceResponse()}
            ),
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield flaky, f"127.0.0.1:{port}"
    await server.stop(None)


async def test_a_channel_retries_what_the_proto_declares_safe_and_nothing_else(flaky: tuple[FlakyOnce, str]) -> None:
    server, target = flaky
    search_channel = open_channel(target, SEARCH, 5.0)
    ingest_channel = open_channel(target, INGEST, 5.0, method_timeouts={"RescanRedactions": 60.0})
    try:
        search = search_grpc.SearchServiceStub(search_channel)
        ingest = ingest_grpc.IngestServiceStub(ingest_channel)
        # A read the old hand-kept list never retried now survives one UNAVAILABLE.
        await search.GetHistory(spb.GetHistoryRequest())
        await search.Search(spb.SearchRequest())
        await ingest.AddWorkspace(ipb.AddWorkspaceRequest())
        assert server.attempts == {"GetHistory": 2, "Search": 2, "AddWorkspace": 2}
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await ingest.WriteMemory(ipb.WriteMemoryRequest())
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert server.attempts["WriteMemory"] == 1  # never repeated
        await ingest.WriteMemory(ipb.WriteMemoryRequest())  # control: the server answers a second call
    finally:
        await search_channel.close()
        await ingest_channel.close()
