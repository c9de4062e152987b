"""The one server interceptor that enforces each method's declared least role, and fails closed.

A probe service, declared here and added to the default descriptor pool the way generated code adds
itself, has one method at each kind of declaration; a real GrpcServer serves it."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from mnemo.common.v1 import options_pb2
from mnemo.search.v1 import search_service_pb2  # noqa: F401  (puts SearchService in the pool)
from mnemo_platform import ROLES, CallContext, Registration, enum_labels
from mnemo_platform.context import auth_state, configure_auth
from mnemo_platform.contract import LeastRole, declared_least_role
from mnemo_platform.grpc_server import GrpcServer

PACKAGE = "mnemo.testprobe.v1"
PROBE = f"{PACKAGE}.Probe"
# name -> (least role, or None for no option; whether the requests stream)
METHODS: dict[str, tuple[int | None, bool]] = {
    "Undeclared": (None, False),
    "ForAgents": (options_pb2.ROLE_AGENT, False),
    "ForAdmins": (options_pb2.ROLE_ADMIN, False),
    "ForAnyone": (options_pb2.ROLE_UNSPECIFIED, False),
    "Uploads": (options_pb2.ROLE_AGENT, True),
}


def _add_probe_to_pool() -> None:
    proto = descriptor_pb2.FileDescriptorProto(
        name="mnemo/testprobe/v1/probe.proto",
        package=PACKAGE,
        syntax="proto3",
        dependency=["google/protobuf/empty.proto", "mnemo/common/v1/options.proto"],
    )
    service = proto.service.add(name="Probe")
    for name, (role, streams) in METHODS.items():
        method = service.method.add(
            name=name,
            input_type=".google.protobuf.Empty",
            output_type=".google.protobuf.Empty",
            client_streaming=streams,
        )
        if role is not None:
            method.options.Extensions[options_pb2.least_role] = role
            method.options.Extensions[options_pb2.action] = f"probing {name}"
    descriptor_pool.Default().AddSerializedFile(proto.SerializeToString())


_add_probe_to_pool()


@dataclass
class Probe:
    target: str
    reached: Counter[str]

    async def call(self, method: str, role: str, service: str = PROBE) -> tuple[grpc.StatusCode, str]:
        caller = CallContext(f"{role}-bot", uuid.uuid4().hex, role, ("*",), "")
        path = f"/{service}/{method}"
        async with grpc.aio.insecure_channel(self.target) as channel:
            try:
                if METHODS.get(method, (None, False))[1]:
                    upload = channel.stream_unary(
                        path, request_serializer=empty_pb2.Empty.SerializeToString, response_deserializer=bytes
                    )
                    await upload(iter([empty_pb2.Empty()]), metadata=caller.metadata(), timeout=10)
                else:
                    unary = channel.unary_unary(
                        path, request_serializer=empty_pb2.Empty.SerializeToString, response_deserializer=bytes
                    )
                    await unary(empty_pb2.Empty(), metadata=caller.metadata(), timeout=10)
            except grpc.aio.AioRpcError as error:
                return error.code(), error.details() or ""
        return grpc.StatusCode.OK, ""


def _handlers(service: str, names: list[str], reached: Counter[str]) -> grpc.GenericRpcHandler:
    def unary(name: str) -> Any:
        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            reached[name] += 1
            return b""

        return handle

    def upload(name: str) -> Any:
        async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
            reached[name] += 1
            return b""

        return handle

    return grpc.method_handlers_generic_handler(
        service,
        {
            name: (
                grpc.stream_unary_rpc_method_handler(upload(name))
                if METHODS.get(name, (None, False))[1]
                else grpc.unary_unary_rpc_method_handler(unary(name))
            )
            for name in names
        },
    )


@pytest.fixture(scope="module")
async def probe() -> AsyncIterator[Probe]:
    secret, required = auth_state()
    configure_auth("", False)  # principals taken as sent: the role is what this test says it is
    reached: Counter[str] = Counter()

    def add(handlers: list[grpc.GenericRpcHandler]) -> Any:
        return lambda servicer, server: server.add_generic_rpc_handlers(handlers)

    server = GrpcServer(
        "probe",
        "127.0.0.1:0",
        [
            Registration(add([_handlers(PROBE, list(METHODS), reached)]), None, PROBE),
            # Served, but described by no proto in the pool: nothing declares its least role.
            Registration(add([_handlers(f"{PACKAGE}.Ghost", ["Call"], reached)]), None, f"{PACKAGE}.Ghost"),
        ],
        grace_s=0,
    )
    await server.start()
    try:
        yield Probe(server.target, reached)
    finally:
        await server.stop()
        configure_auth(secret, required)


def test_the_proto_roles_are_the_call_context_roles() -> None:
    assert enum_labels(options_pb2.Role) == list(ROLES)


def test_the_declared_least_role_is_read_from_the_pool() -> None:
    assert declared_least_role("/mnemo.search.v1.SearchService/ListTokens") == LeastRole("admin", "listing tokens")
    assert declared_least_role("/mnemo.search.v1.SearchService/Search") == LeastRole("agent", "searching memories")
    assert declared_least_role(f"/{PROBE}/ForAnyone") == LeastRole("", "probing ForAnyone")
    for path in (f"/{PROBE}/Undeclared", f"/{PACKAGE}.Ghost/Call", "/nonsense", ""):
        assert declared_least_role(path) is None, path


async def test_a_role_below_the_declared_least_is_refused_before_the_handler_runs(probe: Probe) -> None:
    for role in ("agent", "reviewer"):
        code, details = await probe.call("ForAdmins", role)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (role, code, details)
        assert details.startswith(f"probing ForAdmins needs the admin role; this token is {role}"), details
    assert probe.reached["ForAdmins"] == 0
    # Positive control: the declared role itself reaches the handler.
    assert await probe.call("ForAdmins", "admin") == (grpc.StatusCode.OK, "")
    assert probe.reached["ForAdmins"] == 1


async def test_an_agent_reaches_what_agents_may_call(probe: Probe) -> None:
    assert await probe.call("ForAgents", "agent") == (grpc.StatusCode.OK, "")
    # ROLE_UNSPECIFIED, declared explicitly, means any authenticated caller (options.proto).
    assert await probe.call("ForAnyone", "agent") == (grpc.StatusCode.OK, "")


@pytest.mark.parametrize(("service", "method"), [(PROBE, "Undeclared"), (f"{PACKAGE}.Ghost", "Call")])
async def test_a_method_without_a_least_role_is_refused_even_to_an_admin(
    probe: Probe, service: str, method: str
) -> None:
    code, details = await probe.call(method, "admin", service)
    assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
    assert "declares no least role" in details, details
    assert probe.reached[method] == 0
    # Positive control: the same caller, on the same server, reaches a method that declares one.
    assert await probe.call("ForAdmins", "admin") == (grpc.StatusCode.OK, "")


async def test_a_method_whose_requests_stream_is_refused_even_to_an_admin(probe: Probe) -> None:
    # It declares agent, but no caller is set for a streamed request, so its role cannot be checked.
    code, details = await probe.call("Uploads", "admin")
    assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
    assert probe.reached["Uploads"] == 0


async def test_health_and_reflection_need_no_least_role(probe: Probe) -> None:
    async with grpc.aio.insecure_channel(probe.target) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=PROBE))
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        stream = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        listed = [service.name async for reply in stream for service in reply.list_services_response.service]
    assert PROBE in listed
