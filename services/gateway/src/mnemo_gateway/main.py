"""`mnemo serve gateway` / `mnemo-gateway`: the gateway alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from mnemo_gateway.app import GatewayApp, check_exposure
from mnemo_gateway.settings import GatewaySettings
from mnemo_platform import Component, load_all
from mnemo_platform.config import AuthSettings, ServiceAddresses
from mnemo_platform.process import run_process


def build(environ: Mapping[str, str] | None = None) -> GatewayApp:
    addresses, settings, auth = load_all((ServiceAddresses, GatewaySettings, AuthSettings), environ)
    check_exposure(settings, auth)
    return GatewayApp(
        settings=settings,
        grpc_address=addresses.listen(addresses.gateway_grpc),
        grace_s=addresses.grace_s,
        ingest_target=addresses.ingest,
        search_target=addresses.search,
        call_timeout_s=addresses.call_timeout_s,
        harvest_target=addresses.harvest,
        auth=auth,
    )


def announce(components: Sequence[Component]) -> None:
    gateway = components[-1]
    assert isinstance(gateway, GatewayApp)
    print(f"Mnemo gateway ready\n  MCP:  {gateway.base_url}/mcp\n  REST: {gateway.base_url}/api/v1", flush=True)


def main() -> None:
    sys.exit(run_process("gateway", lambda: [build()], on_ready=announce))
