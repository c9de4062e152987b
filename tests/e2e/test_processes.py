"""Real `mnemo` processes: SIGTERM drains (health NOT_SERVING, clean exit), bad config fails in one line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from mcp.client.client import Client

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo_embed import HashEmbedder
from tests.harvest.agents import conversation
from tests.helpers import Clients, Postgres, migrate, scratch_dir, start_stack, tool_json

MNEMO = str(Path(sys.executable).parent / "mnemo")
GRACE_S = 2.0
# Python start-up, closing the pool and flushing traces on top of the drain itself.
EXIT_MARGIN_S = 8.0

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

INGEST_SERVICE = "mnemo.ingest.v1.IngestService"
SEARCH_SERVICE = "mnemo.search.v1.SearchService"
HARVEST_SERVICE = "mnemo.harvest.v1.HarvestService"
HEALTH_SERVICE = "grpc.health.v1.Health"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**overrides: str) -> dict[str, str]:
    """This test process's environment without any MNEMO_/OTEL_ setting, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMO_", "OTEL_"))}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # Never harvest the real agent homes of the machine running the tests.
    env["MNEMO_HARVEST_AGENTS"] = ""
    env.update(overrides)
    return env


@dataclass
class Proc:
    """A `mnemo` subprocess whose output goes to files (a full pipe would block it)."""

    process: asyncio.subprocess.Process
    out_path: Path
    err_path: Path
    started: float = field(default_factory=time.perf_counter)

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def output(self) -> str:
        return f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"

    async def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()


async def spawn(args: list[str], env: dict[str, str], logs: Path) -> Proc:
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / "stdout.log", logs / "stderr.log"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = await asyncio.create_subprocess_exec(MNEMO, *args, env=env, stdout=out, stderr=err)
    return Proc(process, out_path, err_path)


@contextlib.asynccontextmanager
async def running(args: list[str], env: dict[str, str], logs: Path) -> AsyncIterator[Proc]:
    proc = await spawn(args, env, logs)
    try:
        yield proc
    finally:
        await proc.kill()


async def wait_serving(proc: Proc, target: str, timeout: float = 60.0) -> None:
    """Polls the standard health check until SERVING; fails at once if the process exits."""
    deadline = time.perf_counter() + timeout
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            if proc.process.returncode is not None:
                raise AssertionError(f"process exited with {proc.process.returncode} before serving\n{proc.output()}")
            with contextlib.suppress(grpc.aio.AioRpcError):
                response = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
                if response.status == SERVING:
                    return
            if time.perf_counter() > deadline:
                raise AssertionError(f"{target} not SERVING after {timeout} s\n{proc.output()}")
            await asyncio.sleep(0.1)


async def reflected_services(target: str) -> list[str]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = stub.ServerReflectionInfo(timeout=5.0)
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        await call.done_writing()
        response = await call.read()
        return [s.name for s in response.list_services_response.service]


async def statuses_through_sigterm(proc: Proc, target: str) -> list[int]:
    """Watches health, sends SIGTERM once SERVING was seen, returns every status the stream delivered."""
    seen: list[int] = []
    async with grpc.aio.insecure_channel(target) as channel:
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30.0)
        try:
            first = await call.read()
            assert first is not grpc.aio.EOF, "the Watch stream ended before its first status"
            seen.append(first.status)
            assert first.status == SERVING
            proc.process.send_signal(signal.SIGTERM)
            while NOT_SERVING not in seen:
                try:
                    message = await call.read()
                except grpc.aio.AioRpcError:
                    break  # the server went away: the assertion on `seen` decides
                if message is grpc.aio.EOF:
                    break
                seen.append(message.status)
        finally:
            # Holding the stream open would keep the server draining for the whole grace period.
            call.cancel()
    return seen


def assert_no_traceback(proc: Proc) -> None:
    combined = proc.stdout + proc.stderr
    # Positive control: the files are the process's real output (it logged its start).
    assert "grpc_server_started" in proc.stdout, proc.output()
    assert "Traceback" not in combined, proc.output()
    assert '"level": "error"' not in proc.stdout, proc.output()


SERVICES = {
    "ingest": ("MNEMO_INGEST_ADDR", INGEST_SERVICE, SEARCH_SERVICE),
    "search": ("MNEMO_SEARCH_ADDR", SEARCH_SERVICE, INGEST_SERVICE),
    "gateway": ("MNEMO_GATEWAY_GRPC_ADDR", None, INGEST_SERVICE),
    "harvest": ("MNEMO_HARVEST_ADDR", HARVEST_SERVICE, INGEST_SERVICE),
}


@pytest.mark.parametrize("service", ["ingest", "search", "gateway", "harvest"])
async def test_sigterm_reports_not_serving_then_exits_cleanly_within_the_grace(
    service: str, postgres: Postgres, tmp_path: Path
) -> None:
    addr_var, own_service, foreign_service = SERVICES[service]
    target = f"127.0.0.1:{free_port()}"
    env = clean_env(MNEMO_EMBEDDER="hash", MNEMO_GRPC_GRACE_S=str(GRACE_S), **{addr_var: target})
    if service == "gateway":
        # Its downstream services need not run for its own health; they are dialled lazily.
        env["MNEMO_HTTP_PORT"] = "0"
    else:
        env["MNEMO_DATABASE_URL"] = await postgres.create_database(service)
        if service != "ingest":
            # Ingest owns the schema; the others find it migrated (as under `mnemo up` or after ingest's rollout).
            await migrate(env["MNEMO_DATABASE_URL"], HashEmbedder(64))

    async with running(["serve", service], env, tmp_path) as proc:
        await wait_serving(proc, target)

        services = await reflected_services(target)
        assert HEALTH_SERVICE in services  # positive control: reflection answers at all
        if own_service is not None:
            assert own_service in services, services
        # The right server: the other service is not registered here (the gateway carries none).
        assert foreign_service not in services, services

        seen = await statuses_through_sigterm(proc, target)
        signalled = time.perf_counter()
        assert seen[0] == SERVING and NOT_SERVING in seen, seen
        try:
            code = await asyncio.wait_for(proc.process.wait(), timeout=GRACE_S + EXIT_MARGIN_S)
        except TimeoutError:
            raise AssertionError(f"{service} still running {GRACE_S + EXIT_MARGIN_S} s after SIGTERM") from None
        print(f"{service}: exited {time.perf_counter() - signalled:.2f} s after SIGTERM")
        assert code == 0, proc.output()
        assert_no_traceback(proc)
        assert "shutdown_requested" in proc.stdout and "grpc_server_stopped" in proc.stdout, proc.output()
        # Every service runs on uvloop (libs/platform's run_process).
        started = [line for line in log_lines(proc) if line.get("event") == "process_started"]
        assert [(line["service"], line["loop"]) for line in started] == [(service, "uvloop")], proc.output()


def log_lines(proc: Proc) -> list[dict]:
    """The process's JSON log lines."""
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


async def run_to_exit(args: list[str], env: dict[str, str], logs: Path, timeout: float = 60.0) -> Proc:
    async with running(args, env, logs) as proc:
        await asyncio.wait_for(proc.process.wait(), timeout=timeout)
        return proc


async def test_serve_ingest_without_a_database_url_fails_with_one_clear_line(tmp_path: Path) -> None:
    proc = await run_to_exit(["serve", "ingest"], clean_env(MNEMO_EMBEDDER="hash"), tmp_path)
    assert proc.process.returncode not in (0, None), proc.output()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.output()
    assert "MNEMO_DATABASE_URL" in lines[0] and "required" in lines[0], proc.output()
    assert "Traceback" not in proc.stdout + proc.stderr, proc.output()
    # Positive control: it never got as far as listening.
    assert "grpc_server_started" not in proc.stdout


@pytest.mark.parametrize("service", ["search", "harvest"])
async def test_a_reader_on_an_unmigrated_database_waits_then_names_ingest(
    service: str, postgres: Postgres, tmp_path: Path
) -> None:
    dsn = await postgres.create_database(f"{service}_unmigrated")
    env = clean_env(MNEMO_EMBEDDER="hash", MNEMO_DATABASE_URL=dsn, MNEMO_DB_WAIT_S="1")
    env["MNEMO_SEARCH_ADDR" if service == "search" else "MNEMO_HARVEST_ADDR"] = f"127.0.0.1:{free_port()}"
    proc = await run_to_exit(["serve", service], env, tmp_path)
    assert proc.process.returncode not in (0, None), proc.output()
    assert "not ready" in proc.output() and "ingest" in proc.output(), proc.output()
    assert "grpc_server_started" not in proc.stdout
    conn = await asyncpg.connect(dsn)
    try:
        # It changed nothing: the schema is ingest's to create.
        assert not await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    finally:
        await conn.close()
    # Positive control: once ingest has migrated, the same service starts (see the SIGTERM test above).
    await migrate(dsn, HashEmbedder(64))
    async with running(["serve", service], env, tmp_path / "again") as again:
        await wait_serving(again, env["MNEMO_SEARCH_ADDR" if service == "search" else "MNEMO_HARVEST_ADDR"])


async def test_serve_gateway_with_a_malformed_http_port_fails_naming_the_variable(tmp_path: Path) -> None:
    env = clean_env(MNEMO_HTTP_PORT="abc", MNEMO_GATEWAY_GRPC_ADDR=f"127.0.0.1:{free_port()}")
    proc = await run_to_exit(["serve", "gateway"], env, tmp_path)
    assert proc.process.returncode not in (0, None), proc.output()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.output()
    assert "MNEMO_HTTP_PORT" in lines[0] and "abc" in lines[0], proc.output()
    assert "Traceback" not in proc.stdout + proc.stderr, proc.output()
    assert "grpc_server_started" not in proc.stdout


# -- mnemo up ------------------------------------------------------------------------------


class LineReader:
    """Drains a pipe into a list of lines in the background, so the process never blocks on it."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._new = asyncio.Event()
        self._task = asyncio.create_task(self._drain(stream))

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace").rstrip("\n"))
            self._new.set()
        self._new.set()

    async def wait_for(self, prefix: str, timeout: float) -> str:
        deadline = time.perf_counter() + timeout
        checked = 0
        while True:
            for line in self.lines[checked:]:
                if line.strip().startswith(prefix):
                    return line.strip()
            checked = len(self.lines)
            if self._task.done():
                raise AssertionError(f"output ended without a {prefix!r} line")
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise AssertionError(f"no {prefix!r} line after {timeout} s")
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), timeout=remaining)

    async def wait_for_event(self, name: str, timeout: float) -> dict[str, Any]:
        deadline = time.perf_counter() + timeout
        while not (found := self.events(name)):
            if self._task.done():
                raise AssertionError(f"output ended without a {name!r} event")
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise AssertionError(f"no {name!r} event after {timeout} s")
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), timeout=remaining)
        return found[0]

    def events(self, name: str) -> list[dict[str, Any]]:
        found = []
        for line in self.lines:
            if line.startswith("{") and f'"{name}"' in line:
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line)
                    if event.get("event") == name:
                        found.append(event)
        return found

    async def close(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, timeout=10)


def postgres_processes(pgdata: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if str(pgdata) in " ".join(process.info["cmdline"] or []):
                found.append(process)
    return found


UP_EXIT_LIMIT_S = 30.0


async def wait_exit(process: asyncio.subprocess.Process, timeout: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), timeout=timeout)
    except TimeoutError:
        return False
    return True


async def test_up_answers_mcp_before_the_model_loads_and_stops_everything_on_sigterm() -> None:
    data_dir = scratch_dir("up-")
    pgdata = data_dir / "pg"
    # The default embedder (the real model) with an empty graph cache: the first start of a fresh
    # install, which builds the graph while it already answers. (The build now usually ends before
    # the services have started, so SIGTERM seldom lands in it; the exit join in mnemo_embed.local
    # still guards a slower load.)
    env = clean_env(MNEMO_DATA_DIR=str(data_dir), MNEMO_HTTP_PORT="0", MNEMO_EMBED_CACHE_DIR=str(data_dir / "onnx"))
    err_path = data_dir / "stderr.log"
    started = time.perf_counter()
    with err_path.open("wb") as err:
        process = await asyncio.create_subprocess_exec(MNEMO, "up", env=env, stdout=asyncio.subprocess.PIPE, stderr=err)
    reader = LineReader(process.stdout)  # type: ignore[arg-type]
    try:
        # The gateway says where it listens before anything else starts: initialize at once.
        listening = await reader.wait_for_event("gateway_listening", timeout=120)

        # mode="legacy" forces the initialize handshake.
        async with Client(listening["mcp"], mode="legacy") as client:
            initialized = time.perf_counter()
            initialized_at = datetime.now(UTC)
            print(f"\nmnemo up: process start to first MCP initialize: {initialized - started:.2f} s")
            assert not reader.events("embedder_ready"), "the model was ready before MCP initialize was answered"
            await reader.wait_for("MCP:", timeout=120)  # the banner: PostgreSQL and every service are up
            status = tool_json(await client.call_tool("memory_status", {}))
            # The model starts loading only after the gateway is serving (it takes about a second
            # here): initialize was answered before it was ready, whether or not it is by now.
            if status["embedder_state"] != "loading":
                ready = reader.events("embedder_ready")
                assert ready, f"embedder is {status['embedder_state']!r} but never logged embedder_ready"
                ready_at = datetime.fromisoformat(ready[0]["timestamp"].replace("Z", "+00:00"))
                assert ready_at > initialized_at, (status, ready_at, initialized_at)
            assert status["embedder_ready"] == (status["embedder_state"] == "ready"), status

            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"memory_write", "memory_search", "memory_status"} <= tools, tools

            written = tool_json(
                await client.call_tool(
                    "memory_write",
                    {"content": "The quarterly zanzibarite migration runs from the ops runbook.", "title": "Ops"},
                )
            )
            memory_id = written["memory"]["id"]
            found = tool_json(await client.call_tool("memory_search", {"query": "zanzibarite", "mode": "lexical"}))
            assert [hit["id"] for hit in found["results"]] == [memory_id], found
            missing = tool_json(await client.call_tool("memory_search", {"query": "quokkaflux", "mode": "lexical"}))
            assert missing["results"] == [], missing

        # Positive control for the check after exit: the postmaster of this data dir is running now.
        postmaster_pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        assert psutil.pid_exists(postmaster_pid)
        assert postgres_processes(pgdata), "no postgres process found for the data dir while running"

        process.send_signal(signal.SIGTERM)
        signalled = time.perf_counter()
        # The drain itself is bounded by MNEMO_GRPC_GRACE_S (5 s by default) plus stopping PostgreSQL;
        # 30 s is also Kubernetes' default termination grace, after which a process is SIGKILLed.
        # It is given longer than that to exit, so the checks below still say what state it left.
        exited = await wait_exit(process, 6 * UP_EXIT_LIMIT_S)
        took = time.perf_counter() - signalled
        print(f"mnemo up: exited {took:.2f} s after SIGTERM")
        assert exited, f"mnemo up still running {6 * UP_EXIT_LIMIT_S} s after SIGTERM"
        code = process.returncode
        await reader.close()
        output = "\n".join(reader.lines[-60:]) + "\n--- stderr ---\n" + err_path.read_text(errors="replace")[-3000:]
        assert code == 0, output
        assert "Traceback" not in "\n".join(reader.lines) + err_path.read_text(errors="replace"), output
        assert reader.events("embedded_postgres_stopped"), output
        assert not postgres_processes(pgdata), [p.info for p in postgres_processes(pgdata)]
        assert not (pgdata / "postmaster.pid").exists()
        assert took <= UP_EXIT_LIMIT_S, f"mnemo up took {took:.1f} s to exit after SIGTERM"
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        for leftover in postgres_processes(pgdata):
            with contextlib.suppress(psutil.Error):
                leftover.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


# -- harvest killed mid-run ---------------------------------------------------------------------------------

KILL_SESSIONS = 120


async def _harvest_counts(conn: asyncpg.Connection) -> dict[str, int]:
    row = await conn.fetchrow(
        """
        SELECT (SELECT count(*) FROM memories WHERE kind = 'session') AS sessions,
               (SELECT count(DISTINCT source_uri) FROM memories WHERE kind = 'session') AS session_sources,
               (SELECT count(*) FROM memories WHERE kind IN ('decision', 'lesson')) AS extracted,
               (SELECT count(*) FROM memory_versions) AS versions,
               (SELECT count(*) FROM memories) AS memories,
               (SELECT count(*) FROM derivations) AS derivations,
               (SELECT count(*) FROM harvest_sources WHERE state = 'harvested') AS harvested
        """
    )
    return dict(row)


async def test_harvest_killed_mid_run_duplicates_nothing_and_loses_nothing(postgres: Postgres, tmp_path: Path) -> None:
    stack = await start_stack(await postgres.create_database("harvest_kill"), HashEmbedder(64))
    clients = Clients(stack)
    conn = await asyncpg.connect(stack.dsn)
    try:
        await clients.ingest.AddWorkspace(ipb.AddWorkspaceRequest(root_path="/work/kill"))
        projects = tmp_path / "claude" / "projects"
        for i in range(KILL_SESSIONS):
            conversation(projects, f"/work/kill/app{i % 7}", f"topic{i}x").write()
        target = f"127.0.0.1:{free_port()}"
        env = clean_env(
            MNEMO_DATABASE_URL=stack.dsn,
            MNEMO_INGEST_ADDR=stack.ingest.target,
            MNEMO_SEARCH_ADDR=stack.search.target,
            MNEMO_HARVEST_ADDR=target,
            MNEMO_HARVEST_AGENTS="claude-code",
            MNEMO_HARVEST_CLAUDE_DIR=str(projects),
            MNEMO_HARVEST_INTERVAL_S="3600",
            MNEMO_DATA_DIR=str(tmp_path / "data"),
        )
        # The service's first tick starts the run by itself; SIGKILL it once a quarter has landed.
        async with running(["serve", "harvest"], env, tmp_path / "first") as proc:
            deadline = time.perf_counter() + 120
            while (at_kill := await _harvest_counts(conn))["sessions"] < KILL_SESSIONS // 4:
                assert proc.process.returncode is None, proc.output()
                assert time.perf_counter() < deadline, f"harvest too slow: {at_kill}\n{proc.output()}"
                await asyncio.sleep(0.02)
            proc.process.kill()
            assert await proc.process.wait() == -signal.SIGKILL
        at_kill = await _harvest_counts(conn)
        # Positive control: the kill really landed mid-run.
        assert 0 < at_kill["sessions"] < KILL_SESSIONS, at_kill

        async with running(["serve", "harvest"], env, tmp_path / "second") as proc:
            await wait_serving(proc, target)
            async with grpc.aio.insecure_channel(target) as channel:
                # Runs are serialised: this one starts after the start-up tick and finds nothing left.
                progress = [p async for p in hgrpc.HarvestServiceStub(channel).Run(hpb.RunRequest(), timeout=300)]
            done = progress[-1]
            assert done.done and done.total == KILL_SESSIONS and done.failed == 0, done
            assert_no_traceback(proc)
        after = await _harvest_counts(conn)
        assert after == {
            "sessions": KILL_SESSIONS,
            "session_sources": KILL_SESSIONS,
            "extracted": 2 * KILL_SESSIONS,
            "versions": 3 * KILL_SESSIONS,
            "memories": 3 * KILL_SESSIONS,
            "derivations": KILL_SESSIONS,
            "harvested": KILL_SESSIONS,
        }, (at_kill, after)
        # Every session is findable after the restart, the ones harvested before the kill included.
        found = await clients.find("/work/kill", "topic0x job mondays", mode="lexical")
        assert len(found.hits) >= 1 and found.hits[0].memory.kind == common_pb2.MEMORY_KIND_SESSION
        last = await clients.find("/work/kill", f"topic{KILL_SESSIONS - 1}x job mondays", mode="lexical")
        assert len(last.hits) >= 1 and last.hits[0].memory.kind == common_pb2.MEMORY_KIND_SESSION
    finally:
        await conn.close()
        await clients.close()
        await stack.stop()
