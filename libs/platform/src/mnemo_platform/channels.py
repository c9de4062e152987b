"""Client channels: one per downstream, deadlines on every call, retries for the calls the protos declare safe."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from opentelemetry import propagate
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from mnemo_platform.connections import KEEPALIVE_S
from mnemo_platform.context import current_call
from mnemo_platform.contract import retry_safe_methods
from mnemo_platform.telemetry import exporting


def _traced(kind: type) -> Any:
    """OpenTelemetry's client interceptor for calls of `kind`."""
    return next(i for i in aio_client_interceptors() if isinstance(i, kind))


class _CallDefaults:
    """Adds the default deadline when a call sets none, the caller's (signed) principal and request
    id, and the trace context.

    While spans are recorded, OpenTelemetry's interceptor makes the call's client span and carries
    its context; while none is (nothing exports them), the current context is carried as it is:
    the trace id still reaches the service's logs and audit events, and OpenTelemetry's wrapper,
    about a tenth of a single write's CPU, is skipped."""

    def __init__(self, timeout_s: float, traced: Any) -> None:
        self.timeout_s = timeout_s
        self.traced = traced

    def details(self, client_call_details: Any, timeout_s: float | None) -> Any:
        metadata = list(client_call_details.metadata or [])
        present = {key for key, _ in metadata}
        metadata.extend(item for item in current_call().metadata() if item[0] not in present)
        if not exporting():
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            metadata.extend(item for item in carrier.items() if item[0] not in present)
        return client_call_details._replace(
            timeout=client_call_details.timeout if client_call_details.timeout is not None else timeout_s,
            metadata=grpc.aio.Metadata(*metadata),
        )


class _UnaryDefaults(_CallDefaults, grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, timeout_s: float) -> None:
        super().__init__(timeout_s, _traced(grpc.aio.UnaryUnaryClientInterceptor))

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        details = self.details(client_call_details, self.timeout_s)
        if exporting():
            return await self.traced.intercept_unary_unary(continuation, details, request)
        return await continuation(details, request)


class _StreamDefaults(_CallDefaults, grpc.aio.UnaryStreamClientInterceptor):
    # Streamed replies (a harvest run, a redaction rescan) need the principal just the same; their
    # deadline is the service config's per-method one (they run long), not the unary default.
    def __init__(self, timeout_s: float) -> None:
        super().__init__(timeout_s, _traced(grpc.aio.UnaryStreamClientInterceptor))

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        details = self.details(client_call_details, None)
        if exporting():
            return await self.traced.intercept_unary_stream(continuation, details, request)
        return await continuation(details, request)


# How a retry-safe call is retried: on UNAVAILABLE only, within the call's deadline (which covers
# every attempt), and never more than the channel's throttle allows.
RETRY_POLICY: dict[str, Any] = {
    "maxAttempts": 4,
    "initialBackoff": "0.1s",
    "maxBackoff": "2s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}


# A connection that went silent (a peer gone, a NAT entry lost, a partition) is noticed within
# keepalive_s + KEEPALIVE_TIMEOUT_MS, idle or not, through a silent stream too, and replaced; without
# this a call's deadline passes on the dead connection and the next call takes it again
# (tests/faults/test_network_faults.py). Servers accept a ping every MIN_PING_S
# (mnemo_platform.connections) and never strike one, so there is no too_many_pings.
KEEPALIVE_TIMEOUT_MS = 5_000


def keepalive_options(keepalive_s: float) -> list[tuple[str, int]]:
    """A client channel's keepalive: a ping every `keepalive_s`, with or without calls, through a
    silent stream too (gRPC would stop after two pings without data), and a connection whose ping
    gets no answer in KEEPALIVE_TIMEOUT_MS dropped."""
    return [
        ("grpc.keepalive_time_ms", int(keepalive_s * 1000)),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        # gRPC 1.85 waits for a ping's ack this long (default a minute) whatever keepalive_timeout_ms
        # says: without it an unanswered keepalive never ends the connection (found by the drill).
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_time_between_pings_ms", int(keepalive_s * 1000)),
        # A new connection that does not complete its handshake in 5 s is abandoned and tried again,
        # and reconnection waits at most 5 s (gRPC's defaults: 20 s and 120 s), so service comes back
        # within seconds of the network.
        ("grpc.min_reconnect_backoff_ms", 5_000),
        ("grpc.max_reconnect_backoff_ms", 5_000),
    ]


def service_config(
    service: ServiceDescriptor,
    timeout_s: float,
    method_timeouts: Mapping[str, float] | None = None,
    also_retried: Collection[str] = (),
) -> dict[str, Any]:
    """The service config of a channel to `service`: every method gets the default timeout, and the
    methods whose proto declares NO_SIDE_EFFECTS or IDEMPOTENT get the retry policy, as do
    `also_retried` (a channel that only ever carries calls made safe to repeat: keyed writes).

    A service-config timeout caps any deadline a call asks for, so a long-running method (a
    streamed harvest run) needs its own entry in `method_timeouts`.
    """
    timeouts = dict(method_timeouts or {})
    unknown = sorted((set(timeouts) | set(also_retried)) - set(service.methods_by_name))
    if unknown:
        raise ValueError(f"{service.full_name} has no method {', '.join(unknown)}")
    retried = [*retry_safe_methods(service), *also_retried]
    # gRPC takes each method name once in a service config, so a method both retried and given
    # its own timeout has a single entry with both.
    methods = [m.name for m in service.methods if m.name in retried or m.name in timeouts]
    return {
        "methodConfig": [
            {"name": [{"service": service.full_name}], "timeout": f"{timeout_s}s"},
            *(
                {
                    "name": [{"service": service.full_name, "method": name}],
                    "timeout": f"{timeouts.get(name, timeout_s)}s",
                    **({"retryPolicy": RETRY_POLICY} if name in retried else {}),
                }
                for name in methods
            ),
        ],
        "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
    }


def open_channel(
    target: str,
    service: ServiceDescriptor,
    timeout_s: float,
    method_timeouts: Mapping[str, float] | None = None,
    keepalive_s: float = KEEPALIVE_S,
    also_retried: Collection[str] = (),
) -> grpc.aio.Channel:
    """Opens the one channel a process keeps to a downstream service; its retries follow the service's protos."""
    return grpc.aio.insecure_channel(
        target,
        options=[
            ("grpc.enable_retries", 1),
            ("grpc.service_config", json.dumps(service_config(service, timeout_s, method_timeouts, also_retried))),
            *keepalive_options(keepalive_s),
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
        ],
        # Mnemo's services make no client-streaming calls (CallInterceptor refuses them).
        interceptors=[_UnaryDefaults(timeout_s), _StreamDefaults(timeout_s)],
    )
