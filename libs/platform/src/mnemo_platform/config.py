"""The infrastructure's settings: service addresses, authentication between services, logging.

Each library and service owns the settings of its own concern (mnemo_store.settings,
mnemo_ingest.settings, ...); the composition root lists them all for the README's table."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mnemo_platform.connections import ConnectionPolicy
from mnemo_platform.settings import (
    SettingsError,
    one_of,
    parse_bool,
    parse_non_negative_float,
    parse_positive_float,
    parse_positive_int,
    setting,
)

DEFAULT_HTTP_PORT = 8420
DEFAULT_INGEST_ADDR = "127.0.0.1:50051"
DEFAULT_SEARCH_ADDR = "127.0.0.1:50052"
DEFAULT_GATEWAY_GRPC_ADDR = "127.0.0.1:50053"
DEFAULT_HARVEST_ADDR = "127.0.0.1:50054"


@dataclass(frozen=True)
class ServiceAddresses:
    """Where each gRPC service listens (when run alone) and where clients reach it."""

    grpc_host: str = setting(
        "MNEMO_GRPC_HOST",
        "127.0.0.1",
        "Interface a service started by `mnemo serve` binds its gRPC port on (`0.0.0.0` in a pod).",
    )
    ingest: str = setting(
        "MNEMO_INGEST_ADDR",
        DEFAULT_INGEST_ADDR,
        "host:port of the ingest service. Under `mnemo up`, unset means a Unix socket of its own.",
    )
    search: str = setting(
        "MNEMO_SEARCH_ADDR",
        DEFAULT_SEARCH_ADDR,
        "host:port of the search service. Under `mnemo up`, unset means a Unix socket of its own.",
    )
    harvest: str = setting(
        "MNEMO_HARVEST_ADDR",
        DEFAULT_HARVEST_ADDR,
        "host:port of the harvest service. Under `mnemo up`, unset means a Unix socket of its own.",
    )
    gateway_grpc: str = setting(
        "MNEMO_GATEWAY_GRPC_ADDR",
        DEFAULT_GATEWAY_GRPC_ADDR,
        "host:port of the gateway's gRPC health endpoint. Under `mnemo up`, unset means any free port.",
    )
    grace_s: float = setting(
        "MNEMO_GRPC_GRACE_S",
        5.0,
        "Grace period for in-flight RPCs on SIGTERM before the server stops.",
        parse_non_negative_float,
    )
    call_timeout_s: float = setting(
        "MNEMO_GRPC_TIMEOUT_S", 15.0, "Deadline of every gRPC call between services.", parse_positive_float
    )
    max_concurrent_rpcs: int = setting(
        "MNEMO_GRPC_MAX_CONCURRENT_RPCS",
        256,
        "Calls each gRPC server runs at once; beyond it a call is refused at once with UNAVAILABLE "
        "(HTTP 503), before anything is done, for the client to retry with backoff.",
        parse_positive_int,
    )
    max_connection_age_s: float = setting(
        "MNEMO_GRPC_MAX_CONNECTION_AGE_S",
        300.0,
        "A server asks a client to reconnect after this (so new replicas get calls); calls under way go on.",
        parse_positive_float,
    )
    max_connection_age_grace_s: float = setting(
        "MNEMO_GRPC_MAX_CONNECTION_AGE_GRACE_S",
        0.0,
        "How long calls may go on over a connection past its age; 0 is as long as they last (a harvest run, "
        "a redaction rescan).",
        parse_non_negative_float,
    )

    def connection_policy(self) -> ConnectionPolicy:
        """What each gRPC server does with aged connections and keepalive pings."""
        return ConnectionPolicy(self.max_connection_age_s, self.max_connection_age_grace_s)

    def listen(self, target: str) -> str:
        """What a service started alone binds: MNEMO_GRPC_HOST on the port of its own address."""
        return f"{self.grpc_host}:{target.rsplit(':', 1)[-1]}"


@dataclass(frozen=True)
class AuthSettings:
    """Who may call: bearer tokens bound to roles and workspaces, and the secret the services share."""

    mode: str = setting(
        "MNEMO_AUTH",
        "off",
        "`on`: every MCP and REST request needs a bearer token, and every gRPC call a signed principal. "
        "`off`: single-user local mode, allowed on loopback only.",
        one_of("on", "off"),
    )
    internal_secret: str = setting(
        "MNEMO_INTERNAL_SECRET",
        "",
        "Secret the services sign and check the caller's principal with; required with `MNEMO_AUTH=on` "
        "(`mnemo up` generates one for its own services).",
    )
    unsafe_no_auth: bool = setting(
        "MNEMO_UNSAFE_NO_AUTH",
        False,
        "Let the gateway and the gRPC services listen on a non-loopback address with `MNEMO_AUTH=off` "
        "(the gateway logs a loud warning).",
        parse_bool,
    )
    rate_per_minute: int = setting(
        "MNEMO_RATE_LIMIT_PER_MIN",
        600,
        "Requests per minute each token may make (a token bucket; bursts up to this many); `429` beyond.",
        parse_positive_int,
    )

    @property
    def enabled(self) -> bool:
        return self.mode == "on"


def parse_port(raw: str) -> int:
    port = int(raw)
    if not 0 <= port <= 65535:
        raise ValueError(f"must be a port number from 0 to 65535, got {raw!r}")
    return port


@dataclass(frozen=True)
class TelemetrySettings:
    """Where a process serves its metrics (traces and OTLP export use OpenTelemetry's own OTEL_* variables)."""

    metrics_port: int = setting(
        "MNEMO_METRICS_PORT",
        0,
        "Port a process serves Prometheus metrics on at `/metrics`, bound on `MNEMO_GRPC_HOST`; 0 is none "
        "(the gateway serves them on its HTTP port anyway). The Kubernetes manifests set 9464.",
        parse_port,
    )


@dataclass(frozen=True)
class LogSettings:
    """How services log."""

    level: str = setting("MNEMO_LOG_LEVEL", "info", "Log level.", one_of("debug", "info", "warning", "error"))
    format: str = setting(
        "MNEMO_LOG_FORMAT",
        "auto",
        "`json`, `console`, or `auto` (console on a terminal, JSON otherwise).",
        one_of("auto", "json", "console"),
    )


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is this machine only."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_auth_beyond_loopback(service: str, address: str, auth: AuthSettings) -> None:
    """Refuses to serve a gRPC service beyond loopback with authentication off: in local mode a
    service trusts an unsigned call as the local admin, so anyone who could reach the port would be
    admin over every workspace. MNEMO_UNSAFE_NO_AUTH=true allows it (the network is the wall)."""
    host = address.rsplit(":", 1)[0]
    if auth.enabled or auth.unsafe_no_auth or is_loopback(host):
        return
    raise SettingsError(
        f"refusing to serve {service} on {address} with MNEMO_AUTH=off: in local mode a service takes an "
        "unsigned call as the local admin, so anyone who can reach it could read, write and purge every "
        "workspace. Set MNEMO_AUTH=on with the same MNEMO_INTERNAL_SECRET on every service, or bind to "
        "127.0.0.1 (MNEMO_GRPC_HOST), or set MNEMO_UNSAFE_NO_AUTH=true if the network alone is the wall"
    )
