"""The gateway's settings: the public HTTP surface (MCP, REST, the web UI)."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_platform.config import DEFAULT_HTTP_PORT
from mnemo_platform.settings import parse_port, parse_positive_int, setting


@dataclass(frozen=True)
class GatewaySettings:
    """The public HTTP surface: MCP, REST and the CLI's endpoint."""

    host: str = setting("MNEMO_HTTP_HOST", "127.0.0.1", "Interface the gateway's HTTP server binds.")
    port: int = setting(
        "MNEMO_HTTP_PORT", DEFAULT_HTTP_PORT, "Port of the gateway's HTTP server; `0` picks a free port.", parse_port
    )
    default_workspace: str = setting(
        "MNEMO_DEFAULT_WORKSPACE",
        "default",
        "Workspace used when a request names none; registered on first use.",
    )
    max_body_bytes: int = setting(
        "MNEMO_HTTP_MAX_BODY_BYTES",
        4 * 1_048_576,
        "Largest MCP or REST request body accepted.",
        parse_positive_int,
    )
    max_concurrent_requests: int = setting(
        "MNEMO_HTTP_MAX_CONCURRENT_REQUESTS",
        256,
        "Most HTTP requests waiting for their answer at once; one more is refused at once with 503 (retry with "
        "backoff). Open MCP event streams and probes (`/healthz`, `/readyz`, `/metrics`) do not count.",
        parse_positive_int,
    )
    allowed_hosts: str = setting(
        "MNEMO_HTTP_ALLOWED_HOSTS",
        "",
        "Comma-separated extra `Host` names the gateway answers to, on `/mcp` and REST alike (DNS-rebinding "
        "protection; loopback and a specific bind address are always allowed): the names clients use.",
    )
    ui_session_key: str = setting(
        "MNEMO_UI_SESSION_KEY",
        "",
        "Key the web UI signs its session cookies (and derives their CSRF tokens) with; empty: a random key per "
        "process, so UI sessions end when the gateway restarts. Give every gateway replica the same key.",
    )
    ui_session_hours: int = setting(
        "MNEMO_UI_SESSION_HOURS",
        12,
        "How long a web UI sign-in lasts before the token must be entered again.",
        parse_positive_int,
    )
