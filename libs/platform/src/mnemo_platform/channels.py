"""Client channels: one per downstream, deadlines on every call, retries for idempotent calls."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from mnemo_platform.context import current_call


class _CallDefaults:
    """Adds the default deadline when a call sets none, and the caller's (signed) principal and request id."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def details(self, client_call_details: Any, timeout_s: float | None) -> Any:
        metadata = list(client_call_details.metadata or [])
        present = {key for key, _ in metadata}
        metadata.extend(item for item in current_call().metadata() if item[0] not in present)
        return client_call_details._replace(
            timeout=client_call_details.timeout if client_call_details.timeout is not None else timeout_s,
            metadata=grpc.aio.Metadata(*metadata),
        )


class _UnaryDefaults(_CallDefaults, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(self.details(client_call_details, self.timeout_s), request)


class _StreamDefaults(_CallDefaults, grpc.aio.UnaryStreamClientInterceptor):
    # Streamed replies (a harvest run, a redaction rescan) need the principal just the same; their
    # deadline is the service config's per-method one (they run long), not the unary default.
    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(self.details(client_call_details, None), request)


def service_config(
    service: str,
    idempotent_methods: Sequence[str],
    timeout_s: float,
    method_timeouts: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Retry policy for the idempotent methods only; every method gets the default timeout.

    A service-config timeout caps any deadline a call asks for, so a long-running method (a
    streamed harvest run) needs its own entry in `method_timeouts`.
    """
    config: dict[str, Any] = {
        "methodConfig": [
            {"name": [{"service": service}], "timeout": f"{timeout_s}s"},
            *(
                {"name": [{"service": service, "method": method}], "timeout": f"{seconds}s"}
                for method, seconds in (method_timeouts or {}).items()
            ),
        ],
        "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
    }
    if idempotent_methods:
        config["methodConfig"].insert(
            0,
            {
                "name": [{"service": service, "method": m} for m in idempotent_methods],
                "timeout": f"{timeout_s}s",
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.1s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            },
        )
    return config


def open_channel(
    target: str,
    service: str,
    idempotent_methods: Sequence[str],
    timeout_s: float,
    method_timeouts: Mapping[str, float] | None = None,
) -> grpc.aio.Channel:
    """Opens the one channel a process keeps to a downstream service."""
    return grpc.aio.insecure_channel(
        target,
        options=[
            ("grpc.enable_retries", 1),
            (
                "grpc.service_config",
                json.dumps(service_config(service, idempotent_methods, timeout_s, method_timeouts)),
            ),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.max_receive_message_length", 16 * 1024 * 1024),
        ],
        interceptors=[*aio_client_interceptors(), _UnaryDefaults(timeout_s), _StreamDefaults(timeout_s)],
    )
