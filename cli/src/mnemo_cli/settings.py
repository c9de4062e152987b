"""How the `mnemo` CLI reaches the gateway."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from mnemo_platform.config import DEFAULT_HTTP_PORT
from mnemo_platform.settings import parse_port, setting


@dataclass(frozen=True)
class ClientSettings:
    """How the `mnemo` CLI reaches the gateway."""

    url: str = setting(
        "MNEMO_URL",
        "",
        "Gateway base URL for CLI commands.",
        shown_default="`http://127.0.0.1:$MNEMO_HTTP_PORT`",
    )
    token: str = setting("MNEMO_TOKEN", "", "Bearer token the CLI sends (needed when the gateway has `MNEMO_AUTH=on`).")

    def resolved_url(self, environ: Mapping[str, str] | None = None) -> str:
        """MNEMO_URL, or the local gateway on MNEMO_HTTP_PORT (the gateway's own setting, read here without
        importing the gateway: the CLI as a client installs without any service)."""
        if self.url:
            return self.url.rstrip("/")
        env = os.environ if environ is None else environ
        try:
            port = parse_port(env.get("MNEMO_HTTP_PORT", str(DEFAULT_HTTP_PORT)))
        except ValueError:
            port = DEFAULT_HTTP_PORT
        return f"http://127.0.0.1:{port}"
