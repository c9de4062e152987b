"""Every service, not only the gateway, refuses to listen beyond loopback with authentication off:
in local mode an unsigned gRPC call is the local admin."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.helpers import MNEMO

# A database nobody listens on: a service that gets past the exposure check fails on it instead.
NOWHERE = "postgresql://mnemo@127.0.0.1:9/mnemo"


async def serve(service: str, **env: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        MNEMO,
        "serve",
        service,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "MNEMO_DATABASE_URL": NOWHERE, "MNEMO_DB_WAIT_S": "1", "MNEMO_AUTH": "off", **env},
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode()


@pytest.mark.parametrize("service", ["ingest", "search", "harvest"])
async def test_a_service_on_every_interface_with_auth_off_is_refused(service: str) -> None:
    code, out = await serve(service, MNEMO_GRPC_HOST="0.0.0.0")
    assert code == 2, out
    assert f"refusing to serve {service} on 0.0.0.0:" in out and "MNEMO_AUTH=on" in out
    # Positive control: on loopback the same command gets past the check and fails on the database.
    code, out = await serve(service, MNEMO_GRPC_HOST="127.0.0.1")
    assert code != 0 and "refusing to serve" not in out
    assert "PostgreSQL" in out or "database" in out.lower(), out


async def test_unsafe_no_auth_lets_it_through() -> None:
    code, out = await serve("ingest", MNEMO_GRPC_HOST="0.0.0.0", MNEMO_UNSAFE_NO_AUTH="true")
    assert "refusing to serve" not in out
    assert code != 0 and ("PostgreSQL" in out or "database" in out.lower()), out
