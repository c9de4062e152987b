"""How long gRPC connections live and how often clients ping them: one policy servers and clients share."""

from __future__ import annotations

from dataclasses import dataclass

# Clients ping a connection every KEEPALIVE_S (mnemo_platform.channels), also during a stream that
# is silent for minutes (a harvest run waiting on its summarizer), so a dead peer is noticed within
# seconds (tests/faults/test_network_faults.py). A server counts a ping that comes sooner than its
# minimum interval (gRPC's default: 5 minutes) as a strike and, after two, closes the connection with
# GOAWAY `too_many_pings`: so the servers accept one every MIN_PING_S, and strike none
# (grpc_server.SERVER_KEEPALIVE_OPTIONS).
KEEPALIVE_S = 5.0
MIN_PING_S = 2.5


@dataclass(frozen=True)
class ConnectionPolicy:
    """How long a server keeps a client's connection, and how often it lets the client ping it."""

    max_age_s: float = 300.0
    """max_age_s: after this a connection is told to go away (GOAWAY), so new calls reach new replicas."""
    max_age_grace_s: float = 0.0
    """max_age_grace_s: how long calls already running on an aged connection may go on; 0 is as long
    as they last (a harvest run or a redaction rescan streams for as long as it takes)."""
    min_ping_s: float = MIN_PING_S
    """min_ping_s: the shortest interval between a client's keepalive pings the server accepts."""

    def options(self) -> list[tuple[str, int]]:
        options = [
            ("grpc.max_connection_age_ms", int(self.max_age_s * 1000)),
            ("grpc.http2.min_ping_interval_without_data_ms", int(self.min_ping_s * 1000)),
        ]
        if self.max_age_grace_s > 0:
            options.append(("grpc.max_connection_age_grace_ms", int(self.max_age_grace_s * 1000)))
        return options
