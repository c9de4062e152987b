"""The plugin `mnemo init` writes for OpenCode, run under node as OpenCode loads it: its system-prompt
hook puts the wake-up packet of the project's workspace in, and says nothing when Mnemo is down."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import httpx

from mnemo_server.stack import Stack
from tests.e2e.test_init import BIN, DEAD_URL, run_init

# OpenCode's plugin API (opencode.ai/docs/plugins): a module exporting async plugin functions that
# get {directory, ...} and return their hooks; a system-prompt hook gets (input, output) and
# pushes onto output.system.
DRIVER = """
import { pathToFileURL } from "node:url"
const [plugin, directory] = process.argv.slice(2)
const { MnemoPlugin } = await import(pathToFileURL(plugin).href)
const hooks = await MnemoPlugin({ directory })
const output = { system: [] }
await hooks["experimental.chat.system.transform"]({ sessionID: "session-1" }, output)
console.log(JSON.stringify(output.system))
"""


async def system_prompt(project: Path, driver: Path) -> list[str]:
    node = shutil.which("node")
    assert node, "node runs the OpenCode plugin here: install it (apt-get install nodejs)"
    plugin = project / ".opencode" / "plugins" / "mnemo.js"
    process = await asyncio.create_subprocess_exec(
        node,
        str(driver),
        str(plugin),
        str(project),
        env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project.parent / "home")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


async def test_the_opencode_plugin_puts_the_packet_in_the_system_prompt(hash_stack: Stack, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A name of its own: the shared stack's workspaces are named after their directories.
    project = tmp_path / "opencode-project"
    project.mkdir()
    code, _, err = await run_init(project, home, "--agent", "opencode", url=hash_stack.base_url)
    assert code == 0, err
    driver = tmp_path / "drive.mjs"
    driver.write_text(DRIVER)
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30, trust_env=False) as client:
        body = {
            "workspace": str(project),
            "content": "Releases of the wallaby app are cut on Thursdays.",
            "kind": "decision",
        }
        kept = (await client.post("/api/v1/memories", json=body)).json()["memory"]["id"]
        confirmed = await client.post(f"/api/v1/memories/{kept}/confirm", json={"workspace": str(project)})
        assert confirmed.status_code == 200, confirmed.text
        body = {
            "workspace": str(project),
            "content": "Releases of the wallaby app need a signed tag.",
            "kind": "decision",
        }
        dropped = (await client.post("/api/v1/memories", json=body)).json()["memory"]["id"]
        gone = await client.delete(f"/api/v1/memories/{dropped}", params={"workspace": str(project), "reason": "wrong"})
        assert gone.status_code == 200, gone.text

    [packet] = await system_prompt(project, driver)
    assert "wallaby app are cut on Thursdays" in packet and kept in packet
    assert "signed tag" not in packet and dropped not in packet


async def test_the_opencode_plugin_adds_nothing_when_mnemo_is_down(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "opencode-project"
    project.mkdir()
    code, _, err = await run_init(project, home, "--agent", "opencode", url=DEAD_URL)
    assert code == 0, err
    driver = tmp_path / "drive.mjs"
    driver.write_text(DRIVER)
    # Mnemo down: the system prompt is left as it was, and OpenCode goes on.
    assert await system_prompt(project, driver) == []
