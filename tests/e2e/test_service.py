"""`mnemo service` renders a systemd user unit and a launchd agent that really run Mnemo, installs and removes
exactly its own file; `mnemo --version` comes from the package metadata."""

from __future__ import annotations

import asyncio
import contextlib
import plistlib
import re
import shlex
import signal
import stat
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_backup import run_mnemo
from tests.e2e.test_processes import LineReader, clean_env, free_port, postgres_processes, wait_exit

# launchd's default PATH, and within systemd's: the service must not depend on this shell's.
SERVICE_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"


def unit_fields(unit: str) -> tuple[list[str], dict[str, str]]:
    """ExecStart's words and the Environment of a rendered unit, unquoted the way systemd does it."""
    command: list[str] = []
    environment: dict[str, str] = {}
    for line in unit.splitlines():
        key, _, value = line.partition("=")
        if key == "ExecStart":
            command = [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(value)]
        elif key == "Environment":
            name, _, setting = shlex.split(value)[0].replace("%%", "%").partition("=")
            environment[name] = setting
    return command, environment


def install_env(home: Path, data_dir: Path, port: int) -> dict[str, str]:
    """The shell `mnemo service install` runs in: its Mnemo settings go into the unit, the client's do not."""
    return clean_env(
        HOME=str(home),
        MNEMO_DATA_DIR=str(data_dir),
        MNEMO_HTTP_PORT=str(port),
        MNEMO_EMBEDDER="hash",
        MNEMO_URL="http://127.0.0.1:9",
        MNEMO_TOKEN="client-only-token",
    )


async def rendered(platform: str, env: dict[str, str]) -> str:
    code, out, err = await run_mnemo("service", "install", "--dry-run", "--platform", platform, env=env)
    assert code == 0, err
    return out


@pytest.mark.parametrize("platform", ["linux", "macos"])
async def test_the_rendered_service_runs_mnemo_up_outside_this_shell(platform: str, tmp_path: Path) -> None:
    home, data_dir, port = tmp_path / "home", tmp_path / "data", free_port()
    home.mkdir()
    out = await rendered(platform, install_env(home, data_dir, port))
    first, _, body = out.partition("\n")
    if platform == "linux":
        assert first == f"# {home}/.config/systemd/user/mnemo.service"
        command, environment = unit_fields(body)
        assert "WantedBy=default.target" in body and "Restart=on-failure" in body
    else:
        assert first == f"# {home}/Library/LaunchAgents/dev.mnemo.up.plist"
        agent = plistlib.loads(body.encode())
        command, environment = agent["ProgramArguments"], agent["EnvironmentVariables"]
        assert agent["Label"] == "dev.mnemo.up" and agent["RunAtLoad"] is True
        assert agent["StandardErrorPath"] == f"{home}/Library/Logs/mnemo/mnemo.err.log"
    assert Path(command[0]).is_absolute() and Path(command[0]).name == "mnemo" and command[1:] == ["up"]
    # The server's settings from the installing shell, made absolute; never the CLI's token or URL.
    assert environment["MNEMO_DATA_DIR"] == str(data_dir) and environment["MNEMO_HTTP_PORT"] == str(port)
    assert "MNEMO_TOKEN" not in environment and "MNEMO_URL" not in environment
    # --dry-run writes nothing.
    assert list(home.iterdir()) == []

    # Run it as the service manager would: that command, that environment, no shell, another PATH.
    env = {"HOME": str(home), "PATH": SERVICE_PATH, **environment}
    process = await asyncio.create_subprocess_exec(
        *command, env=env, cwd="/", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    reader = LineReader(process.stdout)  # type: ignore[arg-type]
    try:
        await reader.wait_for("MCP:", timeout=120)
        async with httpx.AsyncClient(timeout=10) as http:
            status = await http.get(f"http://127.0.0.1:{port}/api/v1/status")
            assert status.status_code == 200, status.text
            assert "memories" in status.text
        assert (data_dir / "pg" / "PG_VERSION").exists()
        process.send_signal(signal.SIGTERM)
        assert await wait_exit(process, 120), "the service's mnemo up did not exit after SIGTERM"
        await reader.close()
        assert process.returncode == 0, "\n".join(reader.lines[-40:])
        assert "Traceback" not in "\n".join(reader.lines)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for leftover in postgres_processes(data_dir / "pg"):
            with contextlib.suppress(Exception):
                leftover.kill()


@pytest.mark.parametrize("platform", ["linux", "macos"])
async def test_install_status_uninstall_touch_exactly_the_service_file(platform: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = install_env(home, tmp_path / "data", free_port())
    unit = (
        home / ".config/systemd/user/mnemo.service"
        if platform == "linux"
        else home / "Library/LaunchAgents/dev.mnemo.up.plist"
    )
    neighbour = unit.parent / "someone-else.service"

    code, out, err = await run_mnemo("service", "status", "--platform", platform, env=env)
    assert code == 3 and "not installed" in out, out + err

    # --no-start: the file only (this machine's service manager is never touched by the tests).
    code, out, err = await run_mnemo("service", "install", "--no-start", "--platform", platform, env=env)
    assert code == 0 and f"wrote {unit}" in out and "not started" in out, out + err
    assert unit.read_text() == (await rendered(platform, env)).partition("\n")[2]
    # It may carry secrets from MNEMO_* settings: its owner's alone.
    assert stat.S_IMODE(unit.stat().st_mode) == 0o600
    neighbour.write_text("not ours\n")

    code, out, err = await run_mnemo("service", "status", "--platform", platform, env=env)
    assert code == 0 and f"installed: {unit}" in out and "not answering" in out, out + err

    code, out, err = await run_mnemo("service", "uninstall", "--platform", platform, env=env)
    assert code == 0 and f"removed {unit}" in out, out + err
    assert not unit.exists() and neighbour.read_text() == "not ours\n"
    code, out, _ = await run_mnemo("service", "uninstall", "--platform", platform, env=env)
    assert code == 0 and "nothing to do" in out

    # A file at that path that install did not write is neither overwritten nor removed.
    unit.write_text("# hand-written\n")
    for action in ("install", "uninstall"):
        args = ["service", action, "--platform", platform] + (["--no-start"] if action == "install" else [])
        code, _, err = await run_mnemo(*args, env=env)
        assert code == 1 and "not written by `mnemo service install`" in err, err
        assert unit.read_text() == "# hand-written\n"


async def test_install_says_what_to_run_when_no_user_service_manager_answers(tmp_path: Path) -> None:
    # This machine is a container: systemctl exists but there is no user bus (the README's case).
    home = tmp_path / "home"
    home.mkdir()
    env = install_env(home, tmp_path / "data", free_port())
    env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={tmp_path}/no-bus"
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "no-runtime")
    code, out, err = await run_mnemo("service", "install", "--platform", "linux", env=env)
    assert code == 0, out + err
    assert "It was not started because" in out and "systemctl --user" in out, out
    assert "systemctl --user daemon-reload && systemctl --user enable mnemo.service" in out, out
    assert (home / ".config/systemd/user/mnemo.service").exists()


async def test_version_comes_from_the_package_metadata() -> None:
    code, out, err = await run_mnemo("--version", env=clean_env())
    assert code == 0, err
    assert re.fullmatch(r"mnemo \d+\.\d+\S*\n", out) and out == f"mnemo {version('mnemo-cli')}\n", out
