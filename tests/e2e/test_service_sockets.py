"""A stack's services listen on Unix sockets of its own when no address is set (the gateway dials
them there), on the address set otherwise; the sockets' directory goes when the stack stops."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mnemo_embed import HashEmbedder
from mnemo_server.stack import SOCKETS_PREFIX
from tests.e2e.test_processes import free_port
from tests.helpers import Postgres, start_stack


async def serving(target: str) -> bool:
    async with grpc.aio.insecure_channel(target) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    return reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_services_listen_on_unix_sockets_unless_an_address_is_set(postgres: Postgres) -> None:
    ingest_port = free_port()
    stack = await start_stack(
        await postgres.create_database("sockets"), HashEmbedder(64), MNEMO_INGEST_ADDR=f"127.0.0.1:{ingest_port}"
    )
    try:
        targets = {"search": stack.search.target, "harvest": stack.harvest.target}
        sockets = {name: Path(target.removeprefix("unix:")) for name, target in targets.items()}
        assert all(target.startswith("unix:") for target in targets.values()), targets
        assert all(path.is_socket() for path in sockets.values()), sockets
        assert [await serving(target) for target in targets.values()] == [True, True]
        # The address set is kept: ingest is on its TCP port.
        assert stack.ingest.target == f"127.0.0.1:{ingest_port}" and await serving(stack.ingest.target)
        # The gateway reaches both: a write goes to ingest, a search to search.
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            written = await http.post("/api/v1/memories", json={"content": "over a unix socket"})
            found = await http.post("/api/v1/search", json={"query": "unix socket", "mode": "lexical"})
        assert written.status_code == 201, written.text
        assert found.status_code == 200 and found.json()["results"], found.text
        directory = sockets["search"].parent
        assert directory == sockets["harvest"].parent and directory.is_dir()
    finally:
        await stack.stop()
    assert not directory.exists()


async def test_a_killed_stacks_sockets_are_swept_by_the_next(postgres: Postgres) -> None:
    gone = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await gone.wait()  # a process id nobody holds now
    left = Path(tempfile.gettempdir()) / f"{SOCKETS_PREFIX}{gone.pid}-left"
    running = Path(tempfile.mkdtemp(prefix=f"{SOCKETS_PREFIX}{os.getpid()}-"))  # this process's: alive
    left.mkdir()
    (left / "ingest.sock").touch()
    try:
        stack = await start_stack(await postgres.create_database("sweep"), HashEmbedder(64))
        await stack.stop()
        assert not left.exists()
        assert running.is_dir()
    finally:
        shutil.rmtree(left, ignore_errors=True)
        shutil.rmtree(running, ignore_errors=True)
