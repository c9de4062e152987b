"""`mnemo init` as a user runs it: a subprocess in a project directory, with HOME a temporary directory
holding (or not) each agent's config directory, against existing config files of the user's own
(tests/fixtures/agent_configs/, see its README)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import httpx
import tomlkit

from mnemo_server.stack import Stack
from tests.helpers import MNEMO

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent_configs"
# PATH with this `mnemo` on it and no agent's program: detection sees only what a test puts in HOME.
BIN = str(Path(sys.executable).parent)
DEAD_URL = "http://127.0.0.1:9"  # nothing listens on the discard port


async def run_init(project: Path, home: Path, *args: str, url: str = DEAD_URL, token: str = "") -> tuple[int, str, str]:
    env = {
        "HOME": str(home),
        "PATH": f"{BIN}:/usr/bin:/bin",
        "MNEMO_URL": url,
        "MNEMO_TOKEN": token,
        "PYTHONUNBUFFERED": "1",
    }
    process = await asyncio.create_subprocess_exec(
        MNEMO,
        "init",
        *args,
        cwd=str(project),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root`, by relative path: what init may or may not have changed."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def a_project(tmp_path: Path, *fixtures: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name in fixtures:
        shutil.copytree(FIXTURES / name, project, dirs_exist_ok=True)
    return project


def ordered(value: object) -> object:
    """A JSON value with its keys' order made visible (dict equality ignores order)."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


async def test_init_wires_only_the_agents_found_in_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".pi").mkdir()
    project = a_project(tmp_path)
    code, out, err = await run_init(project, home)
    assert code == 0, err
    assert sorted(snapshot(project)) == [".claude/settings.json", ".mcp.json", ".pi/extensions/mnemo.ts"]
    assert "claude-code (found" in out and "pi (found" in out and "codex" not in out
    # Mnemo is not running: the files are written anyway, and it says the workspace registers on first use.
    assert "registered yet" in err and "first use" in err
    # Positive control for detection: a HOME with no agent at all wires nothing and says what it looked for.
    empty = tmp_path / "empty-home"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    code, _, err = await run_init(other, empty)
    assert code == 1 and "no coding agent found" in err and "--agent" in err
    assert snapshot(other) == {}


async def test_init_merges_keeps_the_users_settings_and_is_idempotent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = a_project(tmp_path, "claude-code", "codex", "opencode")
    original = snapshot(project)
    agents = ["--agent", "claude-code", "--agent", "codex", "--agent", "opencode", "--agent", "pi"]
    code, out, err = await run_init(project, home, *agents)
    assert code == 0, err
    url = f"{DEAD_URL}/mcp?workspace={project}"

    mcp = json.loads((project / ".mcp.json").read_text())
    assert list(mcp["mcpServers"]) == ["github", "db", "mnemo"]
    assert mcp["mcpServers"]["mnemo"] == {"type": "http", "url": url}
    assert mcp["mcpServers"]["db"]["args"][-1] == "${DATABASE_URL}"

    settings_text = (project / ".claude/settings.json").read_text()
    assert settings_text.startswith('{\n    "permissions"')  # the file's four-space indentation is kept
    settings = json.loads(settings_text)
    assert list(settings) == ["permissions", "hooks", "model"]
    start = settings["hooks"]["SessionStart"]
    assert start[0]["hooks"][0]["command"] == "cat .claude/session-context.md"  # the user's hook stays first
    assert start[1]["hooks"][0]["command"].endswith("hook session-start --agent claude-code --url " + DEAD_URL)
    assert settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"].split()[1:4] == [
        "hook",
        "session-end",
        "--agent",
    ]
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Bash"

    toml_text = (project / ".codex/config.toml").read_text()
    original_toml = original[".codex/config.toml"].decode()
    for line in original_toml.splitlines():
        assert line in toml_text  # every comment and setting of the user's, as written
    codex = tomlkit.parse(toml_text)
    assert dict(codex["mcp_servers"]["mnemo"]) == {"url": url}
    assert list(codex["mcp_servers"]) == ["docs", "tracker", "mnemo"]
    codex_hooks = json.loads((project / ".codex/hooks.json").read_text())["hooks"]
    assert codex_hooks["Stop"][0]["hooks"][0]["command"] == "python3 .codex/hooks/notify.py"
    assert "hook session-end --agent codex" in codex_hooks["Stop"][1]["hooks"][0]["command"]
    assert "hook session-start --agent codex" in codex_hooks["SessionStart"][0]["hooks"][0]["command"]

    opencode = json.loads((project / "opencode.json").read_text())
    assert list(opencode) == ["$schema", "theme", "model", "mcp", "plugin"]
    assert opencode["mcp"]["mnemo"] == {"type": "remote", "url": url, "enabled": True}
    assert opencode["mcp"]["jira"]["headers"] == {"Authorization": "Bearer {env:JIRA_TOKEN}"}
    plugin = (project / ".opencode/plugins/mnemo.js").read_text()
    assert plugin.startswith("// Written by `mnemo init`") and '"session.idle"' in plugin
    assert f'const URL_ARGS = ["--url", "{DEAD_URL}"]' in plugin
    extension = (project / ".pi/extensions/mnemo.ts").read_text()
    assert '"session_shutdown"' in extension and '"--agent", "pi"' in extension

    # A second run changes nothing and says so.
    wired = snapshot(project)
    code, out, err = await run_init(project, home, *agents)
    assert code == 0, err
    assert snapshot(project) == wired
    assert out.count("unchanged") == 7 and "updated" not in out and "created" not in out


async def test_dry_run_shows_diffs_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    project = a_project(tmp_path, "codex")
    before = snapshot(project)
    code, out, err = await run_init(project, home, "--dry-run")
    assert code == 0, err
    assert snapshot(project) == before
    assert f"+++ {project}/.codex/config.toml" in out and "+[mcp_servers.mnemo]" in out
    assert "dry run: nothing was written" in out
    # Positive control: the same run without --dry-run makes exactly the change it showed.
    code, out, err = await run_init(project, home)
    assert code == 0, err
    assert "[mcp_servers.mnemo]" in (project / ".codex/config.toml").read_text()


async def test_remove_takes_out_exactly_what_init_added(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = a_project(tmp_path, "claude-code", "codex", "opencode")
    original = snapshot(project)
    agents = ["--agent", "claude-code", "--agent", "codex", "--agent", "opencode", "--agent", "pi"]
    code, _, err = await run_init(project, home, *agents)
    assert code == 0, err
    assert snapshot(project) != original  # positive control: there was something to remove
    # A file of the user's that looks like a plugin but is not Mnemo's stays.
    own = project / ".opencode/plugins/theirs.js"
    own.write_text("export const Theirs = async () => ({})\n")

    code, out, err = await run_init(project, home, "--remove")
    assert code == 0, err
    after = snapshot(project)
    assert after.pop(".opencode/plugins/theirs.js") == own.read_bytes()
    assert sorted(after) == sorted(original)
    assert after[".codex/config.toml"] == original[".codex/config.toml"]  # TOML: byte for byte
    for name in (".mcp.json", ".claude/settings.json", ".codex/hooks.json", "opencode.json"):
        assert ordered(json.loads(after[name])) == ordered(json.loads(original[name])), name
    assert "the workspace and its memories stay" in out
    # Removing again finds nothing of Mnemo's and changes nothing.
    code, out, err = await run_init(project, home, "--remove")
    assert code == 0, err
    assert snapshot(project) == {**after, ".opencode/plugins/theirs.js": own.read_bytes()}
    assert "removed" not in out and "updated" not in out


async def test_an_unparsable_config_stops_everything_before_any_write(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    agents = ["--agent", "claude-code", "--agent", "codex", "--agent", "opencode"]
    cases = (("broken-json", ".claude/settings.json", "line 5"), ("broken-toml", ".codex/config.toml", "line 3"))
    for broken, name, line in cases:
        project = tmp_path / broken
        project.mkdir()
        shutil.copytree(FIXTURES / broken, project, dirs_exist_ok=True)
        before = snapshot(project)
        code, out, err = await run_init(project, home, *agents)
        assert code == 1, (out, err)
        assert f"{project}/{name}: {line}" in err and "nothing was written" in err
        assert snapshot(project) == before  # not even the files of the other agents
        # Positive control: the same run wires everything once the file is fixed (here: moved aside).
        (project / name).rename(project / f"{name}.bak")
        code, _, err = await run_init(project, home, *agents)
        assert code == 0, err
        assert (project / ".mcp.json").exists() and (project / "opencode.json").exists()


async def test_init_registers_the_project_with_a_running_mnemo(hash_stack: Stack, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    project = a_project(tmp_path)
    code, out, err = await run_init(project, home, url=hash_stack.base_url)
    assert code == 0, err
    assert "registered workspace project (id " in out and str(project) in out
    async with httpx.AsyncClient(base_url=hash_stack.base_url) as http:
        roots = [ws["root_path"] for ws in (await http.get("/api/v1/workspaces")).json()["workspaces"]]
    assert str(project) in roots
    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["mnemo"]["url"] == f"{hash_stack.base_url}/mcp?workspace={project}"
    # Run again: registered already, files unchanged.
    code, out, err = await run_init(project, home, url=hash_stack.base_url)
    assert code == 0 and "registered already" in out and "unchanged" in out, (out, err)
    assert os.environ.get("HOME") != str(home)  # the test never touched the real HOME


async def test_with_a_token_the_mcp_entries_name_the_variable_never_the_secret(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = a_project(tmp_path)
    secret = "mnemo_abcdefabcdef_" + "s" * 43
    code, _, err = await run_init(
        project, home, "--agent", "claude-code", "--agent", "codex", "--agent", "opencode", token=secret
    )
    assert code == 0, err
    files = snapshot(project)
    assert not [name for name, data in files.items() if secret.encode() in data]
    assert json.loads(files[".mcp.json"])["mcpServers"]["mnemo"]["headers"] == {
        "Authorization": "Bearer ${MNEMO_TOKEN}"
    }
    assert tomlkit.parse(files[".codex/config.toml"].decode())["mcp_servers"]["mnemo"]["bearer_token_env_var"] == (
        "MNEMO_TOKEN"
    )
    opencode = json.loads(files["opencode.json"])["mcp"]["mnemo"]
    assert opencode["headers"] == {"Authorization": "Bearer {env:MNEMO_TOKEN}"}
    # Positive control: without a token the entries carry no headers at all.
    other = tmp_path / "other"
    other.mkdir()
    code, _, err = await run_init(other, home, "--agent", "claude-code")
    assert code == 0, err
    assert "headers" not in json.loads((other / ".mcp.json").read_text())["mcpServers"]["mnemo"]
