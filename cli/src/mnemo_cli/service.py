"""`mnemo service`: `mnemo up` as a user-level service, a systemd user unit on Linux or a launchd agent on macOS.

The service runs the absolute path of this environment's `mnemo` entry point, not `uv run`: it
needs no shell, no PATH and no uv at start-up, never re-syncs or downloads anything when the
machine boots, and starts as fast as `mnemo up` does. The price is that it names this environment:
after moving or recreating it, run `mnemo service install` again.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

UNIT_NAME = "mnemo.service"
LABEL = "dev.mnemo.up"
MARKER = "Written by `mnemo service install`; `mnemo service uninstall` removes it."
PLATFORMS = ("linux", "macos")
# The CLI's own settings: where a client finds the gateway, not how the server runs.
CLIENT_ONLY = frozenset({"MNEMO_URL", "MNEMO_TOKEN"})
# platformdirs derives the default data and cache directories from these; the service manager's
# environment may lack what this shell has, so they are carried over when set.
XDG_DIRS = ("XDG_DATA_HOME", "XDG_CACHE_HOME")


class ServiceError(Exception):
    """A service operation that could not be done; the message is for the user."""


def host_platform() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform == "darwin":
        return "macos"
    raise ServiceError(f"`mnemo service` supports Linux (systemd) and macOS (launchd), not {sys.platform}")


def mnemo_executable() -> Path:
    """This environment's `mnemo` entry point, as an absolute path (see the module's docstring)."""
    beside = Path(sys.executable).parent / "mnemo"
    if beside.is_file():
        return beside.absolute()
    found = shutil.which("mnemo")
    if found:
        return Path(found).absolute()
    raise ServiceError("cannot find the `mnemo` entry point of this environment to run as a service")


def service_environment(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """What the service runs with: this shell's Mnemo settings, so it serves the same data as `mnemo up` here."""
    env = {k: v for k, v in environ.items() if k.startswith("MNEMO_") and k not in CLIENT_ONLY}
    env.update({k: environ[k] for k in XDG_DIRS if environ.get(k)})
    if env.get("MNEMO_DATA_DIR"):
        # A relative directory would be resolved against the service manager's working directory.
        env["MNEMO_DATA_DIR"] = str(Path(env["MNEMO_DATA_DIR"]).expanduser().absolute())
    # Log lines reach the journal (or the log file) as they are written, not when a buffer fills.
    env["PYTHONUNBUFFERED"] = "1"
    return dict(sorted(env.items()))


@dataclass(frozen=True)
class Service:
    """The service definition for one platform, rendered for one home directory."""

    platform: str
    home: Path
    program: list[str]
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        if self.platform == "linux":
            return self.home / ".config" / "systemd" / "user" / UNIT_NAME
        return self.home / "Library" / "LaunchAgents" / f"{LABEL}.plist"

    @property
    def log_dir(self) -> Path:
        return self.home / "Library" / "Logs" / "mnemo"

    def render(self) -> str:
        return self._systemd_unit() if self.platform == "linux" else self._launchd_plist()

    def _systemd_unit(self) -> str:
        environment = "".join(f"Environment={_unit_quote(f'{k}={v}')}\n" for k, v in self.environment.items())
        command = " ".join(_unit_quote(arg, expand=True) for arg in self.program)
        return f"""# {MARKER}
# Logs: journalctl --user -u {UNIT_NAME}
[Unit]
Description=Mnemo, long-term memory for AI coding agents (mnemo up)

[Service]
Type=exec
ExecStart={command}
{environment}# mnemo up drains its services and stops PostgreSQL cleanly on SIGTERM; a crash is restarted.
KillSignal=SIGTERM
TimeoutStopSec=60
Restart=on-failure
RestartSec=5

[Install]
WantedBy=default.target
"""

    def _launchd_plist(self) -> str:
        agent = {
            "Label": LABEL,
            "ProgramArguments": self.program,
            "EnvironmentVariables": self.environment,
            "RunAtLoad": True,
            # Restarted after a crash, not after a clean stop.
            "KeepAlive": {"SuccessfulExit": False},
            "ExitTimeOut": 60,
            "StandardOutPath": str(self.log_dir / "mnemo.out.log"),
            "StandardErrorPath": str(self.log_dir / "mnemo.err.log"),
        }
        xml = plistlib.dumps(agent).decode()
        head, _, rest = xml.partition("<plist")
        return f"{head}<!-- {MARKER} -->\n<plist{rest}"


def _unit_quote(value: str, expand: bool = False) -> str:
    """A double-quoted systemd unit word: backslash and quote escaped, `%` specifiers (and, in
    ExecStart, `$` variables) doubled so a path holding them is taken literally."""
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if expand:
        quoted = quoted.replace("$", "$$")
    return f'"{quoted}"'


def build_service(platform: str, home: Path, environ: dict[str, str] | os._Environ[str]) -> Service:
    return Service(platform, home, [str(mnemo_executable()), "up"], service_environment(environ))


def is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(errors="replace")
    except OSError:
        return False


def write_service(service: Service) -> None:
    """Writes the file whole (a temporary file renamed into place), readable only by its owner:
    it may carry secrets from MNEMO_* settings (a database password, the internal secret)."""
    if service.path.exists() and not is_ours(service.path):
        raise ServiceError(f"{service.path} exists and was not written by `mnemo service install`; move it away first")
    service.path.parent.mkdir(parents=True, exist_ok=True)
    if service.platform == "macos":
        service.log_dir.mkdir(parents=True, exist_ok=True)
    partial = service.path.with_name(f".{service.path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(service.render())
        partial.replace(service.path)
    finally:
        partial.unlink(missing_ok=True)


# -- the service managers ----------------------------------------------------------------------


def _run(args: list[str]) -> tuple[int, str]:
    try:
        # Only the fixed systemctl and launchctl command lines of this module, never user input.
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


@dataclass(frozen=True)
class Manager:
    """systemctl --user or launchctl, when this machine has one that answers; otherwise why not."""

    platform: str
    reachable: bool
    why_not: str = ""

    @classmethod
    def find(cls, platform: str) -> Manager:
        if platform != host_platform():
            return cls(platform, False, f"this machine is not {platform}")
        tool = "systemctl" if platform == "linux" else "launchctl"
        if shutil.which(tool) is None:
            return cls(platform, False, f"{tool} is not installed")
        if platform == "linux":
            code, out = _run(["systemctl", "--user", "show-environment"])
            if code:
                # Typically a container or an SSH session without a user bus (no `loginctl enable-linger`).
                return cls(platform, False, f"systemctl --user cannot reach a user service manager ({out})")
        return cls(platform, True)

    def start_commands(self, service: Service) -> list[list[str]]:
        # restart, not start: a re-install with a new environment must take effect.
        if self.platform == "linux":
            return [
                ["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", UNIT_NAME],
                ["systemctl", "--user", "restart", UNIT_NAME],
            ]
        return [["launchctl", "bootstrap", f"gui/{os.getuid()}", str(service.path)]]

    def unload_quietly(self) -> None:
        """launchctl refuses to bootstrap a loaded agent: a re-install unloads the old one first."""
        if self.platform == "macos":
            _run(["launchctl", "bootout", f"gui/{os.getuid()}/{LABEL}"])

    def stop_commands(self) -> list[list[str]]:
        if self.platform == "linux":
            return [["systemctl", "--user", "disable", "--now", UNIT_NAME]]
        return [["launchctl", "bootout", f"gui/{os.getuid()}/{LABEL}"]]

    def status_command(self) -> list[str]:
        if self.platform == "linux":
            return ["systemctl", "--user", "status", "--no-pager", "--lines=5", UNIT_NAME]
        return ["launchctl", "print", f"gui/{os.getuid()}/{LABEL}"]

    def run(self, commands: list[list[str]]) -> tuple[bool, str]:
        for command in commands:
            code, out = _run(command)
            if code:
                return False, f"`{' '.join(command)}` failed: {out}"
        return True, ""

    def status(self) -> tuple[bool, str]:
        code, out = _run(self.status_command())
        return code == 0, out


def shell_line(commands: list[list[str]]) -> str:
    return " && ".join(" ".join(command) for command in commands)
