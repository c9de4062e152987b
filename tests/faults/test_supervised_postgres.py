"""The embedded PostgreSQL under `mnemo up` is supervised: a postmaster that dies is restarted
(crash recovery included) while `mnemo up` keeps serving, and after `mnemo up` itself is SIGKILLed
the next `mnemo up` on the same data directory adopts the server left running, or cleans up after
a dead one (its stale postmaster.pid), with nothing acknowledged lost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import psutil

from mnemo_store.embedded import server_processes
from tests.e2e.test_processes import MNEMO, LineReader, clean_env
from tests.helpers import eventually

WORKSPACE = "supervised"


RECOVERY_S = 12


def slow_next_recovery(pgdata: Path, seconds: int) -> None:
    """Makes the server's next start an archive recovery that takes at least `seconds`: its
    restore_command sleeps once (a marker file in the data directory remembers it did), then finds
    nothing, so recovery replays pg_wal and ends as after any crash."""
    restore = f"test -f slow-recovery.done || {{ touch slow-recovery.done; sleep {seconds}; }}; false"
    with (pgdata / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"restore_command = '{restore}'\nhot_standby = off\n")
    (pgdata / "recovery.signal").touch()
    shutil.chown(pgdata / "recovery.signal", *owner(pgdata))


def owner(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_uid, stat.st_gid


def postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


@dataclass
class Up:
    """A running `mnemo up` on a data directory, its output and its REST base."""

    process: asyncio.subprocess.Process
    reader: LineReader
    rest: str


async def start_up(data_dir: Path) -> Up:
    env = clean_env(MNEMO_DATA_DIR=str(data_dir), MNEMO_HTTP_PORT="0", MNEMO_EMBEDDER="hash")
    with (data_dir.parent / "stderr.log").open("ab") as err:
        process = await asyncio.create_subprocess_exec(MNEMO, "up", env=env, stdout=asyncio.subprocess.PIPE, stderr=err)
    reader = LineReader(process.stdout)  # type: ignore[arg-type]
    try:
        listening = await reader.wait_for_event("gateway_listening", timeout=120)
        await reader.wait_for("MCP:", timeout=120)  # the banner: PostgreSQL and every service are up
    except AssertionError as exc:
        stderr = (data_dir.parent / "stderr.log").read_text(errors="replace")[-3000:]
        pg_log = data_dir / "pg" / "log"
        pg = pg_log.read_text(errors="replace")[-2000:] if pg_log.exists() else ""
        lines = "\n".join(reader.lines[-40:])
        raise AssertionError(f"{exc}\n{lines}\n--- stderr ---\n{stderr}\n--- PostgreSQL ---\n{pg}") from None
    return Up(process, reader, listening["rest"])


async def write(up: Up, key: str, budget_s: float = 60.0) -> float:
    """Writes one keyed note through REST, retrying 503s and dropped connections as a client must;
    the seconds it took."""
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=up.rest, timeout=10) as http:
        while True:
            with contextlib.suppress(httpx.TransportError):
                response = await http.post(
                    "/memories", json={"workspace": WORKSPACE, "content": f"note {key}", "idempotency_key": key}
                )
                if response.status_code in (200, 201):
                    return time.perf_counter() - started
                assert response.status_code == 503, response.text
            assert time.perf_counter() - started < budget_s, f"write {key} not accepted within {budget_s} s"
            await asyncio.sleep(0.2)


async def stored_keys(pgdata: Path) -> list[str]:
    socket_dir = (pgdata / "postmaster.pid").read_text().splitlines()[4]
    conn = await asyncpg.connect(f"postgresql://postgres:@/postgres?host={socket_dir}")
    try:
        rows = await conn.fetch("SELECT idempotency_key FROM memories WHERE idempotency_key IS NOT NULL")
    finally:
        await conn.close()
    return sorted(r["idempotency_key"] for r in rows)


async def stop(up: Up) -> int:
    up.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(up.process.wait(), timeout=60)
    await up.reader.close()
    return code


async def kill(up: Up) -> None:
    with contextlib.suppress(ProcessLookupError):
        up.process.kill()
    await up.process.wait()
    await up.reader.close()


@dataclass
class Site:
    """A data directory of a drill's own, and every `mnemo up` started on it."""

    root: Path
    ups: list[Up]

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def pgdata(self) -> Path:
        return self.root / "data" / "pg"

    async def up(self) -> Up:
        self.ups.append(up := await start_up(self.data_dir))
        return up


@contextlib.asynccontextmanager
async def site() -> AsyncIterator[Site]:
    """A fresh data directory; whatever the drill leaves running on it is killed, then it is removed."""
    here = Site(Path(tempfile.mkdtemp(prefix="mnemo-sup-")), [])
    try:
        yield here
    finally:
        for up in here.ups:
            await kill(up)
        for leftover in server_processes(here.pgdata):
            with contextlib.suppress(psutil.Error):
                leftover.kill()
        shutil.rmtree(here.root, ignore_errors=True)


async def assert_stops_clean(up: Up, pgdata: Path) -> None:
    """SIGTERM: exit 0, and no PostgreSQL process or postmaster.pid left behind."""
    assert await stop(up) == 0
    assert not server_processes(pgdata), "PostgreSQL left running after mnemo up stopped"
    assert not (pgdata / "postmaster.pid").exists()


async def test_a_postmaster_killed_under_mnemo_up_is_restarted_and_nothing_is_lost() -> None:
    async with site() as here:
        pgdata = here.pgdata
        up = await here.up()
        async with httpx.AsyncClient(base_url=up.rest, timeout=10) as http:
            assert (await http.post("/workspaces", json={"name": WORKSPACE})).status_code in (200, 201)
        await write(up, "before")
        first = postmaster_pid(pgdata)

        os.kill(first, signal.SIGKILL)
        killed = time.perf_counter()
        restarted = await up.reader.wait_for_event("embedded_postgres_restarted", timeout=120)
        await write(up, "after")
        writable_s = time.perf_counter() - killed
        print(f"\npostmaster SIGKILLed: restarted after {restarted['after_s']} s, writes back after {writable_s:.2f} s")

        second = postmaster_pid(pgdata)
        assert second != first and psutil.pid_exists(second)  # a new postmaster, running
        assert up.reader.events("embedded_postgres_died")
        # The first try worked: the dead postmaster's lock files did not stand in the way.
        assert not up.reader.events("embedded_postgres_restart_failed")
        assert up.process.returncode is None  # mnemo up kept serving
        assert await stored_keys(pgdata) == ["after", "before"]

        # A crash recovery longer than embedded-postgres's own 10 s wait for a start: the next start
        # is an archive recovery whose restore_command sleeps 12 s once, with no hot standby, so
        # the server refuses connections ("starting up") all that time.
        slow_next_recovery(pgdata, RECOVERY_S)
        os.kill(second, signal.SIGKILL)
        killed = time.perf_counter()

        async def restarted_twice() -> bool:
            return len(up.reader.events("embedded_postgres_restarted")) == 2

        await eventually(restarted_twice, timeout=120, interval=0.2)
        slow = up.reader.events("embedded_postgres_restarted")[1]
        await write(up, "after-slow-recovery")
        writable_s = time.perf_counter() - killed
        print(f"a {RECOVERY_S} s recovery: restarted after {slow['after_s']} s, writes back after {writable_s:.2f} s")
        assert slow["after_s"] >= RECOVERY_S  # the control: the recovery really took that long
        assert not up.reader.events("embedded_postgres_restart_failed")  # waited out, not given up on
        assert up.process.returncode is None
        assert await stored_keys(pgdata) == ["after", "after-slow-recovery", "before"]

        await assert_stops_clean(up, pgdata)


async def test_after_mnemo_up_is_sigkilled_the_next_one_adopts_or_restarts_its_postgres() -> None:
    async with site() as here:
        pgdata = here.pgdata
        up = await here.up()
        async with httpx.AsyncClient(base_url=up.rest, timeout=10) as http:
            assert (await http.post("/workspaces", json={"name": WORKSPACE})).status_code in (200, 201)
        await write(up, "first")
        orphan = postmaster_pid(pgdata)
        await kill(up)
        # Positive control: the kill left PostgreSQL running, unsupervised.
        assert psutil.pid_exists(orphan) and server_processes(pgdata)

        # The next mnemo up adopts the server left running.
        started = time.perf_counter()
        up = await here.up()
        print(f"\nmnemo up after a SIGKILL, server left running: serving in {time.perf_counter() - started:.2f} s")
        found = up.reader.events("embedded_postgres_found")
        assert found and found[0]["state"] == "adopted", found
        assert postmaster_pid(pgdata) == orphan
        await write(up, "second")
        assert await stored_keys(pgdata) == ["first", "second"]

        # Killed together with its postmaster: a stale postmaster.pid and a dead server.
        dead = postmaster_pid(pgdata)
        await kill(up)
        os.kill(dead, signal.SIGKILL)
        assert (pgdata / "postmaster.pid").exists()
        started = time.perf_counter()
        up = await here.up()
        print(f"mnemo up after a SIGKILL of it and its postmaster: serving in {time.perf_counter() - started:.2f} s")
        found = up.reader.events("embedded_postgres_found")
        assert found and found[0]["state"] in ("stale_pid_file", "stopped"), found
        assert postmaster_pid(pgdata) != dead
        await write(up, "third")
        assert await stored_keys(pgdata) == ["first", "second", "third"]

        # This one stops its server when asked: nothing left behind.
        await assert_stops_clean(up, pgdata)


async def test_a_second_mnemo_up_on_the_same_data_directory_refuses_to_start() -> None:
    async with site() as here:
        up = await here.up()
        env = clean_env(MNEMO_DATA_DIR=str(here.data_dir), MNEMO_HTTP_PORT="0", MNEMO_EMBEDDER="hash")
        second = await asyncio.create_subprocess_exec(
            MNEMO, "up", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        try:
            _, err = await asyncio.wait_for(second.communicate(), timeout=120)
        finally:
            if second.returncode is None:
                second.kill()
                await second.wait()
        assert second.returncode not in (0, None), err
        assert "another `mnemo up` is running" in err.decode(), err
        # Positive control: the first one still serves, on its own PostgreSQL.
        async with httpx.AsyncClient(base_url=up.rest, timeout=10) as http:
            assert (await http.get("/status")).status_code == 200
        assert up.process.returncode is None and server_processes(here.pgdata)
        assert await stop(up) == 0


async def test_a_postmaster_that_cannot_be_restarted_stops_mnemo_up_with_one_clear_line() -> None:
    async with site() as here:
        pgdata = here.pgdata
        up = await here.up()
        # A setting PostgreSQL refuses at start: every restart fails until an operator fixes it.
        with (pgdata / "postgresql.conf").open("a") as conf:
            conf.write("\nmnemo_drill_not_a_setting = on\n")
        os.kill(postmaster_pid(pgdata), signal.SIGKILL)
        code = await asyncio.wait_for(up.process.wait(), timeout=120)
        await up.reader.close()
        stderr = (here.root / "stderr.log").read_text(errors="replace")
        lines = [line for line in stderr.splitlines() if "could not be restarted" in line]
        assert code == 1, stderr[-2000:]
        assert len(lines) == 1 and str(pgdata) in lines[0] and "stopping" in lines[0], stderr[-2000:]
        assert len(up.reader.events("embedded_postgres_restart_failed")) == 3
        # It stopped cleanly: the services drained, nothing of PostgreSQL left running.
        assert up.reader.events("shutdown_requested") and "Traceback" not in stderr
        assert not server_processes(pgdata)
