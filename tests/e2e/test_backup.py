"""`mnemo backup` and `mnemo restore FILE` as real processes: a backup taken while `mnemo up` serves is
restored into a fresh data directory, and `mnemo up` on it gives the same answers; a restore that fails
leaves the old database as it was; bad input is refused in one line and writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from mnemo_embed import HashEmbedder
from mnemo_store import CONTENT_JOIN, open_pool, verify_chains
from mnemo_store.backup import PREVIOUS, RESTORING
from mnemo_store.embedded import DataDirLock, postgres_tool
from tests.e2e.test_processes import MNEMO, LineReader, clean_env, free_port, postgres_processes, wait_exit
from tests.helpers import Postgres, insert_note, migrate

EMBED = {"MNEMO_EMBEDDER": "hash"}


async def run_mnemo(*args: str, env: dict[str, str], cwd: Path | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        MNEMO, *args, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert "Traceback" not in out.decode() + err.decode(), err.decode()
    return process.returncode or 0, out.decode(), err.decode()


def assert_one_error_line(err: str, prefix: str) -> None:
    """The failure is one last line; any before it are the command's own progress lines."""
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(prefix), err
    assert all(line.startswith(("mnemo backup: ", "mnemo restore: ")) for line in lines[:-1]), err


def data_dir() -> Path:
    # Short: the embedded server's Unix socket lives in its data directory.
    return Path(tempfile.mkdtemp(prefix="mnemo-bk-"))


@contextlib.asynccontextmanager
async def mnemo_up(directory: Path) -> AsyncIterator[str]:
    """`mnemo up` on `directory` until the block ends (then SIGTERM and a clean exit); its REST base URL."""
    port = free_port()
    env = clean_env(MNEMO_DATA_DIR=str(directory), MNEMO_HTTP_PORT=str(port), **EMBED)
    process = await asyncio.create_subprocess_exec(
        MNEMO, "up", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    reader = LineReader(process.stdout)  # type: ignore[arg-type]
    try:
        await reader.wait_for("MCP:", timeout=120)
        yield f"http://127.0.0.1:{port}/api/v1"
        process.send_signal(signal.SIGTERM)
        assert await wait_exit(process, 120), "mnemo up did not exit after SIGTERM"
        await reader.close()
        assert process.returncode == 0, "\n".join(reader.lines[-40:])
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for leftover in postgres_processes(directory / "pg"):
            with contextlib.suppress(Exception):
                leftover.kill()


def hit_ids(found: dict[str, Any]) -> list[str]:
    return [hit["id"] for hit in found["results"]]


async def answers(http: httpx.AsyncClient, base: str, memories: dict[str, str]) -> dict[str, Any]:
    """What Mnemo says about the memories: searches, gets, histories and the audit chains."""
    seen: dict[str, Any] = {}
    for word in ("zanzibarite", "quokkaflux", "marmoset", "plumbago", "axolotl"):
        for history in (False, True):
            response = await http.post(
                f"{base}/search", json={"query": word, "mode": "lexical", "include_history": history}
            )
            assert response.status_code == 200, response.text
            seen[f"search {word} history={history}"] = hit_ids(response.json())
    for name, memory_id in memories.items():
        got = await http.get(f"{base}/memories/{memory_id}")
        seen[f"get {name}"] = (got.status_code, got.json().get("content") or got.json()["error"]["reason"])
        story = await http.get(f"{base}/memories/{memory_id}/history")
        body = story.json()
        seen[f"history {name}"] = (
            story.status_code,
            [(v["version"], v["content"]) for v in body.get("versions", [])],
            [e["action"] for e in body.get("events", [])],
        )
    verified = (await http.get(f"{base}/audit/verify")).json()
    seen["audit verify"] = (verified["ok"], verified["events_checked"], verified["workspaces_checked"])
    seen["audit log"] = [
        (e["id"], e["action"], e["memory_id"]) for e in (await http.get(f"{base}/audit")).json()["events"]
    ]
    return seen


async def test_a_backup_taken_while_up_runs_restores_into_a_fresh_data_dir_with_the_same_answers() -> None:
    source, fresh = data_dir(), data_dir()
    backup = source.parent / f"{source.name}.dump"
    try:
        async with mnemo_up(source) as base, httpx.AsyncClient(timeout=30) as http:

            async def write(content: str) -> str:
                response = await http.post(f"{base}/memories", json={"content": content, "title": content[:20]})
                assert response.status_code == 201, response.text
                return str(response.json()["memory"]["id"])

            kept = await write("The zanzibarite runbook lives in the ops repository.")
            old = await write("Deploys go through the quokkaflux pipeline.")
            superseded = await http.post(
                f"{base}/memories/{old}/supersede",
                json={"content": "Deploys go through the marmoset pipeline now.", "reason": "pipeline moved"},
            )
            assert superseded.status_code == 201, superseded.text
            successor = superseded.json()["successor"]["id"]
            updated = await http.patch(
                f"{base}/memories/{kept}", json={"content": "The zanzibarite runbook lives in the ops wiki."}
            )
            assert updated.status_code == 200, updated.text
            deleted = await write("The plumbago staging account is shared by the whole team.")
            response = await http.delete(f"{base}/memories/{deleted}", params={"reason": "should not be kept"})
            assert response.status_code == 200, response.text
            memories = {"kept": kept, "superseded": old, "successor": successor, "deleted": deleted}
            before = await answers(http, base, memories)

            env = clean_env(MNEMO_DATA_DIR=str(source))
            code, out, err = await run_mnemo("backup", str(backup), env=env)
            assert code == 0, err
            assert "4 memories in 1 workspace" in out and str(backup) in out, out
            assert "backing up tables" in err, err
            # Written after the backup: the restored database must not have it.
            later = await write("The axolotl cache was added after the backup.")

            # Mnemo is running on the data directory: restore refuses, and the server goes on serving.
            code, _, err = await run_mnemo("restore", "--force", str(backup), env=env)
            assert code == 1 and "Mnemo is running against" in err and "stop it" in err, err
            assert not (source / RESTORING).exists() and not (source / PREVIOUS).exists()
            still = await http.post(f"{base}/search", json={"query": "axolotl", "mode": "lexical"})
            assert hit_ids(still.json()) == [later]

        # Stopped, but the database holds memories: only --force replaces it.
        code, _, err = await run_mnemo("restore", str(backup), env=clean_env(MNEMO_DATA_DIR=str(source)))
        assert code == 1 and "is not empty (5 memories in 1 workspace" in err and "--force" in err, err
        assert not (source / PREVIOUS).exists()

        code, out, err = await run_mnemo("restore", str(backup), env=clean_env(MNEMO_DATA_DIR=str(fresh)))
        assert code == 0, err
        assert "4 memories in 1 workspace" in out and "audit chains verified" in out, out
        assert "restoring data" in err and "building indexes and constraints" in err, err
        assert not (fresh / RESTORING).exists() and not (fresh / PREVIOUS).exists()

        async with mnemo_up(fresh) as base, httpx.AsyncClient(timeout=30) as http:
            after = await answers(http, base, memories)
            assert after == before
            # The same answers, spelled out: the deleted stays gone while its neighbours are there,
            # the superseded one is history and its successor current, and the chain verifies.
            assert after["get deleted"] == (404, "MEMORY_DELETED")
            assert after["get kept"] == (200, "The zanzibarite runbook lives in the ops wiki.")
            assert after["search plumbago history=True"] == [] and after["search zanzibarite history=False"] == [kept]
            assert after["search quokkaflux history=False"] == [] and after["search quokkaflux history=True"] == [old]
            assert after["search marmoset history=False"] == [successor]
            assert [version for version, _ in after["history kept"][1]] == [1, 2]
            assert after["audit verify"][0] is True and after["audit verify"][1] >= 6
            # What was written after the backup is not in it (and before the restore it was found).
            assert before["search axolotl history=False"] == [] and after["search axolotl history=False"] == []
            assert (await http.get(f"{base}/memories/{later}")).status_code == 404
            code, out, err = await run_mnemo("audit", "verify", env=clean_env(MNEMO_URL=base.removesuffix("/api/v1")))
            assert code == 0 and out.startswith("ok: "), out + err

        # --force replaces the stopped source with the backup, keeping the old cluster aside.
        code, out, err = await run_mnemo("restore", "--force", str(backup), env=clean_env(MNEMO_DATA_DIR=str(source)))
        assert code == 0 and str(source / PREVIOUS) in out, out + err
        assert (source / "pg" / "PG_VERSION").exists() and (source / PREVIOUS / "PG_VERSION").exists()
    finally:
        backup.unlink(missing_ok=True)
        shutil.rmtree(source, ignore_errors=True)
        shutil.rmtree(fresh, ignore_errors=True)


# -- backups of an external database, and a restore that fails -------------------------------------------


async def external_backup(postgres: Postgres, tmp_path: Path, name: str, notes: list[str], extra_sql: str = "") -> Path:
    """`mnemo backup` of a database of the session's PostgreSQL, as for MNEMO_DATABASE_URL."""
    dsn = await postgres.create_database("bk")
    await migrate(dsn, HashEmbedder(64))
    pool = await open_pool(dsn)
    try:
        for note in notes:
            await insert_note(pool, note)
        if extra_sql:
            await pool.execute(extra_sql)
    finally:
        await pool.close()
    target = tmp_path / name
    code, out, err = await run_mnemo("backup", str(target), env=clean_env(MNEMO_DATABASE_URL=dsn))
    assert code == 0, err
    assert f"{len(notes)} memor" in out and "MNEMO_DATABASE_URL" in out, out
    return target


async def memory_contents(pgdata: Path) -> tuple[list[str], bool]:
    """The memories' contents in the cluster at `pgdata` and whether its audit chains verify (read directly)."""
    from mnemo_store.embedded import open_server

    server = await asyncio.to_thread(open_server, pgdata, cleanup_mode="stop")
    try:
        pool = await open_pool(server.get_uri(), 1, 1)
        try:
            async with pool.acquire() as conn:
                rows = await conn.fetch(f"SELECT v.content FROM memories m {CONTENT_JOIN} ORDER BY v.content")
                return [r["content"] for r in rows], (await verify_chains(conn)).ok
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(server.cleanup)


# An index on a function that reads a setting which only the creating session had: the index builds
# where it was made, and fails when pg_restore rebuilds it in the fresh cluster, after the data
# has been loaded there (a real backup that cannot be restored; PostgreSQL 17+ builds indexes with a
# safe search_path, so a function reading a table by an unqualified name no longer fails this way).
UNRESTORABLE = """
SET mnemo.trap = '1';
CREATE TABLE restore_trap (n integer);
INSERT INTO restore_trap VALUES (1);
CREATE FUNCTION trap(integer) RETURNS integer LANGUAGE sql IMMUTABLE
    AS 'SELECT $1 + current_setting(''mnemo.trap'')::integer';
CREATE INDEX restore_trap_idx ON restore_trap (trap(n));
"""


async def test_a_failed_restore_leaves_the_old_database_as_it_was(postgres: Postgres, tmp_path: Path) -> None:
    good = await external_backup(postgres, tmp_path, "good.dump", ["The heliotrope note.", "The lantana note."])
    bad = await external_backup(postgres, tmp_path, "bad.dump", ["The verbena note."], UNRESTORABLE)
    directory = data_dir()
    env = clean_env(MNEMO_DATA_DIR=str(directory))
    try:
        code, out, err = await run_mnemo("restore", str(good), env=env)
        assert code == 0 and "2 memories" in out, out + err
        assert await memory_contents(directory / "pg") == (["The heliotrope note.", "The lantana note."], True)

        code, out, err = await run_mnemo("restore", "--force", str(bad), env=env)
        assert code == 1, out + err
        assert_one_error_line(err, "mnemo: restore: pg_restore failed")
        assert "mnemo.trap" in err, err
        # The old database, untouched, and no trace of the attempt.
        assert not (directory / RESTORING).exists() and not (directory / PREVIOUS).exists()
        assert await memory_contents(directory / "pg") == (["The heliotrope note.", "The lantana note."], True)

        # Into a data directory that did not exist: it is gone again, as if nothing had been tried.
        fresh = directory.parent / f"{directory.name}-fresh"
        code, out, err = await run_mnemo("restore", str(bad), env=clean_env(MNEMO_DATA_DIR=str(fresh)))
        assert code == 1 and "pg_restore failed" in err, out + err
        assert not fresh.exists()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def test_bad_input_is_refused_in_one_line_and_writes_nothing(postgres: Postgres, tmp_path: Path) -> None:
    good = await external_backup(postgres, tmp_path, "good.dump", ["The hellebore note."])
    empty = tmp_path / "nothing-here"
    env = clean_env(MNEMO_DATA_DIR=str(empty))

    async def refused(*args: str, says: str, environ: dict[str, str] = env) -> None:
        code, out, err = await run_mnemo(*args, env=environ, cwd=tmp_path)
        assert code == 1 and out == "", out + err
        assert_one_error_line(err, "mnemo: ")
        assert says in err, err

    # restore: a missing file, a file that is not a backup, a backup of another database.
    await refused("restore", str(tmp_path / "missing.dump"), says="no such file")
    (tmp_path / "notes.txt").write_text("not a backup\n")
    await refused("restore", str(tmp_path / "notes.txt"), says="not a pg_dump custom-format archive")
    other = await postgres.create_database("other")
    conn = await asyncpg.connect(other)
    await conn.execute("CREATE TABLE ledger (n integer); INSERT INTO ledger VALUES (1)")
    await conn.close()
    foreign = tmp_path / "foreign.dump"
    dumped = await asyncio.create_subprocess_exec(str(postgres_tool("pg_dump")), "-Fc", "-f", str(foreign), other)
    assert await dumped.wait() == 0
    await refused("restore", str(foreign), says="not of a Mnemo database")
    damaged = tmp_path / "damaged.dump"
    damaged.write_bytes(good.read_bytes()[:2000])
    await refused("restore", str(damaged), says="cannot be read as a backup")
    # Against an external PostgreSQL, restore says how to do it there.
    await refused(
        "restore", str(good), says="pg_restore --no-owner", environ=clean_env(MNEMO_DATABASE_URL=postgres.uri)
    )
    assert not empty.exists(), "a refused restore created the data directory"

    # backup: no embedded database yet, a directory that does not exist, a file that exists.
    await refused("backup", str(tmp_path / "new.dump"), says="no embedded database")
    assert not empty.exists() and not (tmp_path / "new.dump").exists()
    await refused("backup", str(tmp_path / "no" / "such" / "x.dump"), says="does not exist")
    unmigrated = await postgres.create_database("bare")
    await refused(
        "backup", str(tmp_path / "bare.dump"), says="no Mnemo schema", environ=clean_env(MNEMO_DATABASE_URL=unmigrated)
    )
    assert not (tmp_path / "bare.dump").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], "a partial file was left"

    # The positive controls: a restore that creates the data directory, then backups of it.
    code, out, err = await run_mnemo("restore", str(good), env=env)
    assert code == 0 and empty.is_dir(), out + err
    again = tmp_path / "again.dump"
    again.write_text("keep me")
    await refused("backup", str(again), says="exists; pass --force")
    assert again.read_text() == "keep me"
    code, out, err = await run_mnemo("backup", "--force", str(again), env=env)
    assert code == 0 and again.read_bytes().startswith(b"PGDMP"), out + err
    code, out, err = await run_mnemo("backup", env=env, cwd=tmp_path)
    assert code == 0 and len(list(tmp_path.glob("mnemo-backup-*.dump"))) == 1, out + err

    # While a restore holds the data directory, neither a backup nor `mnemo up` starts on it.
    lock = DataDirLock(empty)
    assert lock.acquire(exclusive=True)
    try:
        await refused("backup", "--force", str(again), says="a restore into")
        code, out, err = await run_mnemo("up", env=clean_env(MNEMO_DATA_DIR=str(empty), MNEMO_HTTP_PORT="0", **EMBED))
        assert code == 1 and "a restore into" in err, out + err
    finally:
        lock.release()
    code, out, err = await run_mnemo("backup", "--force", str(again), env=env)
    assert code == 0, out + err
    shutil.rmtree(empty, ignore_errors=True)


async def test_restore_tells_a_memory_id_from_a_backup_file(tmp_path: Path) -> None:
    # A UUID is a memory: restoring its deletion goes to the gateway (nothing listens here, and the
    # error says how to start Mnemo); --force belongs to backup files only.
    memory_id = "0b8f6c1e-2a57-4f0e-9b51-8f7f1f0e9d11"
    env = clean_env(MNEMO_URL="http://127.0.0.1:9")
    code, _, err = await run_mnemo("restore", memory_id, env=env, cwd=tmp_path)
    assert code == 1 and "mnemo up" in err and "backup" not in err, err
    code, _, err = await run_mnemo("restore", memory_id, "--force", env=env, cwd=tmp_path)
    assert code == 1 and "--force applies to restoring a backup file" in err, err
    code, _, err = await run_mnemo("restore", "backup.dump", "--json", env=env, cwd=tmp_path)
    assert code == 1 and "apply to restoring a memory" in err, err
