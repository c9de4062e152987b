"""`mnemo serve SERVICE`: one service alone, configured by environment (a pod runs exactly this)."""

from __future__ import annotations

import importlib

SERVICES = ("ingest", "search", "harvest", "gateway")


def serve(service: str) -> None:
    """Runs `service` until SIGTERM; each service's own `main` reads its settings and exits with its code."""
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}; one of {', '.join(SERVICES)}")
    importlib.import_module(f"mnemo_{service}.main").main()
