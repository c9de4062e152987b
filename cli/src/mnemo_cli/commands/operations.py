"""Operating Mnemo on a machine: `backup`, `restore` (a memory by id, or the database from a backup file), `service`."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from mnemo_cli.commands import memory
from mnemo_cli.commands.running import require_server
from mnemo_cli.errors import ClientError
from mnemo_cli.output import progress_bar


class ProgressPrinter:
    """Shows long work on stderr: a bar redrawn in place on a terminal, one line per step otherwise
    (a log or a pipe gets a readable record rather than carriage returns)."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.tty = sys.stderr.isatty()
        self._phase = ""

    def __call__(self, step: Any) -> None:
        if self.tty:
            if step.phase != self._phase and self._phase:
                print(file=sys.stderr)
            # The bar's tally is empty here; the table or index at hand takes its place.
            bar = progress_bar(step.done, step.total, step.phase, {}).rstrip(" ·")
            print(f"{bar} {step.item[:50]:<50}", end="", file=sys.stderr, flush=True)
        else:
            if step.done == 0 and step.total > 1:
                print(f"mnemo {self.command}: {step.phase} ({step.total})", file=sys.stderr, flush=True)
                self._phase = step.phase
                return
            item = f" {step.item}" if step.item else ""
            count = f" {step.done}/{step.total}" if step.total > 1 else ""
            print(f"mnemo {self.command}: {step.phase}{count}{item}", file=sys.stderr, flush=True)
        self._phase = step.phase

    def close(self) -> None:
        if self.tty and self._phase:
            print(file=sys.stderr)
        self._phase = ""


def _failed(command: str, exc: Exception) -> ClientError:
    return ClientError(f"{command}: {exc}")


def cmd_backup(args: argparse.Namespace) -> int:
    require_server()
    from mnemo_server.backup import BackupError, run_backup

    progress = ProgressPrinter("backup")
    try:
        target, contents, source = run_backup(args.file, args.force, progress)
    except BackupError as exc:
        raise _failed("backup", exc) from None
    finally:
        progress.close()
    size = target.stat().st_size
    print(f"backed up {source}: {contents.describe()}")
    print(f"  {target}  ({size / 1e6:.1f} MB; restore with: mnemo restore {target})")
    return 0


def is_memory_id(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def cmd_restore(args: argparse.Namespace) -> int:
    """`mnemo restore ID` undoes a deletion (the older meaning, kept); anything that is not a memory id
    (a memory id is a UUID, a backup is a file name) is a backup file to restore the database from."""
    if is_memory_id(args.target):
        if args.force:
            raise ClientError("--force applies to restoring a backup file, not a memory")
        args.id = args.target
        return memory.cmd_restore(args)
    if args.workspace or args.json:
        raise ClientError("--workspace and --json apply to restoring a memory (by id), not a backup file")
    return restore_backup(args.target, args.force)


def restore_backup(file: str, force: bool) -> int:
    require_server()
    from mnemo_server.backup import BackupError, run_restore

    progress = ProgressPrinter("restore")
    try:
        data_dir, result = run_restore(file, force, progress)
    except BackupError as exc:
        raise _failed("restore", exc) from None
    finally:
        progress.close()
    print(f"restored {file} into {data_dir}: {result.contents.describe()}")
    chains = result.chains
    if chains.ok:
        print(f"  audit chains verified: {chains.events_checked} events in {chains.workspaces_checked} chains")
    else:
        # The backup is restored as it was made: a chain broken before the backup stays broken, and says so.
        print(f"  WARNING: the audit chain of {chains.broken_workspace_id} is broken: {chains.problem}")
    if result.pending_migrations:
        print(f"  `mnemo up` will bring its schema up to date ({len(result.pending_migrations)} migrations)")
    if result.previous is not None:
        print(f"  the database it replaced is kept in {result.previous} until the next restore; delete it when done")
    print("Start Mnemo on it with: mnemo up")
    return 0 if chains.ok else 3


# -- mnemo service -----------------------------------------------------------------------------


def _service(args: argparse.Namespace) -> tuple[Any, Any]:
    from mnemo_cli import service as svc

    try:
        platform = args.platform or svc.host_platform()
        built = svc.build_service(platform, Path.home(), os.environ)
    except svc.ServiceError as exc:
        raise ClientError(f"service: {exc}") from None
    return svc, built


def cmd_service_install(args: argparse.Namespace) -> int:
    # The service runs `mnemo up`: an environment without the server would install a unit that fails.
    require_server()
    svc, service = _service(args)
    if args.dry_run:
        print(f"# {service.path}")
        print(service.render(), end="")
        return 0
    try:
        svc.write_service(service)
    except (svc.ServiceError, OSError) as exc:
        raise ClientError(f"service: {exc}") from None
    print(f"wrote {service.path}")
    print(f"  runs: {' '.join(service.program)}")
    manager = svc.Manager.find(service.platform)
    commands = manager.start_commands(service)
    if args.no_start or not manager.reachable:
        why = "as asked (--no-start)" if args.no_start else f"because {manager.why_not}"
        print(f"It was not started {why}. To start it (and at every login):")
        print(f"  {svc.shell_line(commands)}")
        print("or run `mnemo up` in a terminal.")
        return 0
    manager.unload_quietly()
    ok, problem = manager.run(commands)
    if not ok:
        raise ClientError(f"service: wrote {service.path}, but starting it failed: {problem}")
    logs = (
        f"journalctl --user -u {svc.UNIT_NAME} -f"
        if service.platform == "linux"
        else f"tail -f {service.log_dir}/mnemo.err.log"
    )
    print(f"enabled and started; logs: {logs}")
    if service.platform == "linux":
        print("To keep it running while you are logged out: loginctl enable-linger $USER")
    return 0


def cmd_service_status(args: argparse.Namespace) -> int:
    svc, service = _service(args)
    if not service.path.exists():
        print(f"not installed ({service.path} does not exist); install with: mnemo service install")
        return 3
    print(f"installed: {service.path}{'' if svc.is_ours(service.path) else ' (not written by mnemo service install)'}")
    manager = svc.Manager.find(service.platform)
    if manager.reachable:
        running, report = manager.status()
        print(f"service manager: {'running' if running else 'not running'}")
        for line in report.splitlines()[:12]:
            print(f"  {line}")
    else:
        print(f"service manager: not reachable ({manager.why_not})")
    url = _gateway_url()
    answering = _answers(url)
    print(f"Mnemo at {url}: {'answering' if answering else 'not answering'}")
    return 0


def _gateway_url() -> str:
    from mnemo_cli.settings import ClientSettings
    from mnemo_platform import load

    return load(ClientSettings).resolved_url()


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def cmd_service_uninstall(args: argparse.Namespace) -> int:
    svc, service = _service(args)
    if not service.path.exists():
        print(f"nothing to do: {service.path} does not exist")
        return 0
    if not svc.is_ours(service.path):
        raise ClientError(f"service: {service.path} was not written by `mnemo service install`; left as it is")
    manager = svc.Manager.find(service.platform)
    if manager.reachable:
        # Stopping may fail because it was never started; the file goes either way.
        ok, problem = manager.run(manager.stop_commands())
        if not ok:
            print(f"note: {problem}", file=sys.stderr)
    service.path.unlink()
    if manager.reachable and service.platform == "linux":
        manager.run([["systemctl", "--user", "daemon-reload"]])
    print(f"removed {service.path}")
    if not manager.reachable:
        print(f"(the service manager is not reachable: {manager.why_not}; nothing was stopped)")
    return 0
