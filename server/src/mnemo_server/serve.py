"""`mnemo serve SERVICE`: one service alone, configured by environment (a pod runs exactly this)."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

SERVICES = ("ingest", "search", "harvest", "gateway")


def serve(service: str) -> None:
    """Runs `service` until SIGTERM; each service's own `main` reads its settings and exits with its code."""
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}; one of {', '.join(SERVICES)}")
    importlib.import_module(f"mnemo_{service}.main").main()


def remote_harvest_url(given: str = "") -> str:
    """The gateway a remote harvester writes through: `--remote`, else MNEMO_HARVEST_REMOTE_URL ("" for none)."""
    from mnemo_harvest.main import remote_url

    return remote_url(given)


def run_remote_harvest(url: str, token: str, once: bool, ignore_idle: bool, session: str = "") -> list[Any]:
    """Harvests this machine's sessions through the gateway at `url` with `token` (a harvester's): until SIGTERM,
    or with `once` one pass (over the one `session` names, when given), whose RunProgress messages (the totals
    last) it returns."""
    from mnemo_harvest.remote import build_remote, serve_remote

    harvester = build_remote(url, token)
    if not once:
        asyncio.run(serve_remote(harvester))
        return []

    async def one_pass() -> list[Any]:
        try:
            return [p async for p in harvester.run(ignore_idle=ignore_idle, session=session)]
        finally:
            await harvester.aclose()

    return asyncio.run(one_pass())
