"""What `mnemo init` writes for each agent, and how it finds the agents on this machine.

Every file is project-scoped (the MCP URL names this project's workspace, and the hooks live with it):
- Claude Code: `.mcp.json` (server `mnemo`, type http) and hooks in `.claude/settings.json`
  (SessionStart → the wake-up packet, SessionEnd → harvest this session).
- Codex CLI: `.codex/config.toml` (`[mcp_servers.mnemo]`, streamable HTTP `url`) and `.codex/hooks.json`
  (SessionStart → the packet, Stop → harvest); Codex reads a project's `.codex/` once it trusts the project.
- OpenCode: `opencode.json` (`mcp.mnemo`, type remote) and the plugin `.opencode/plugins/mnemo.js`.
- Pi: no MCP; the extension `.pi/extensions/mnemo.ts` alone.
The formats and where they were checked are in docs/agents.md.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from mnemo_cli.agents import AGENTS
from mnemo_cli.agents.configs import (
    MARKER,
    SERVER,
    Change,
    ConfigError,
    dump_json,
    dump_toml,
    json_object,
    load_json,
    load_toml,
    prune_empty,
    read_text,
    remove_hooks,
    remove_toml_server,
    set_hook,
    set_toml_server,
)

# A hook gives up on Mnemo within about two seconds; the agent's own limit is only a backstop.
HOOK_TIMEOUT_S = 10
OPENCODE_SCHEMA = "https://opencode.ai/config.json"


@dataclass(frozen=True)
class Setup:
    """Where init works and what it points the agents at."""

    project: Path
    home: Path
    url: str
    """url is the gateway's base URL."""
    mnemo: tuple[str, ...]
    """mnemo is the argv that runs this `mnemo` (the bare name when it is on PATH)."""
    url_args: tuple[str, ...]
    """url_args is `--url URL` when the gateway is not at the default address, else nothing."""
    token: bool
    """token says whether MNEMO_TOKEN is set: the MCP entries then send it (by reference, never the secret)."""

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp?workspace={quote(str(self.project), safe='/')}"

    def hook(self, event: str, agent: str) -> str:
        return shlex.join([*self.mnemo, "hook", event, "--agent", agent, *self.url_args])


def detected(agent: str, home: Path, env: Mapping[str, str]) -> str | None:
    """Why `agent` counts as installed (its config directory or its program), or None."""
    path = env.get("PATH", "")
    found: dict[str, tuple[list[Path], str]] = {
        "claude-code": (
            [Path(env["CLAUDE_CONFIG_DIR"])] if env.get("CLAUDE_CONFIG_DIR") else [home / ".claude"],
            "claude",
        ),
        "codex": ([Path(env.get("CODEX_HOME") or home / ".codex")], "codex"),
        "opencode": (
            [Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode", home / ".local/share/opencode"],
            "opencode",
        ),
        "pi": ([Path(env.get("PI_CODING_AGENT_DIR") or home / ".pi")], "pi"),
    }
    dirs, program = found[agent]
    for directory in dirs:
        if directory.is_dir():
            return str(directory)
    which = shutil.which(program, path=path)
    return which


def plan(agent: str, setup: Setup, remove: bool = False) -> list[Change]:
    """The changes wiring (or unwiring) `agent` makes; every file read and checked, nothing written."""
    return PLANS[agent](setup, remove)


# -- Claude Code ------------------------------------------------------------------------------------


def _claude(setup: Setup, remove: bool) -> list[Change]:
    entry: dict[str, object] = {"type": "http", "url": setup.mcp_url}
    if setup.token:
        entry["headers"] = {"Authorization": "Bearer ${MNEMO_TOKEN}"}
    mcp = _json_server(setup.project / ".mcp.json", ("mcpServers",), entry, remove)
    hooks = _json_hooks(
        setup.project / ".claude" / "settings.json",
        {
            "SessionStart": setup.hook("session-start", "claude-code"),
            "SessionEnd": setup.hook("session-end", "claude-code"),
        },
        remove,
    )
    return [mcp, hooks]


# -- Codex CLI --------------------------------------------------------------------------------------


def _codex(setup: Setup, remove: bool) -> list[Change]:
    path = setup.project / ".codex" / "config.toml"
    before = read_text(path)
    doc = load_toml(path, before)
    if remove:
        remove_toml_server(doc)
    else:
        fields = {"url": setup.mcp_url}
        if setup.token:
            fields["bearer_token_env_var"] = "MNEMO_TOKEN"  # noqa: S105 - the variable's name, not a secret
        set_toml_server(doc, path, fields)
    after: str | None = dump_toml(doc)
    if remove and not (after or "").strip():
        after = None  # only Mnemo's server was in it (or there was no file)
    elif before is None and after is not None:
        after = after.rstrip("\n") + "\n"  # the blank line that separates tables is not needed at the end
    config = Change(path, before, after)
    # Stop ends every turn (Codex has no session-end event to rely on): each harvests the session so far,
    # and a later turn makes a new version of the same memory.
    hooks = _json_hooks(
        setup.project / ".codex" / "hooks.json",
        {"SessionStart": setup.hook("session-start", "codex"), "Stop": setup.hook("session-end", "codex")},
        remove,
    )
    return [config, hooks]


# -- OpenCode ---------------------------------------------------------------------------------------


def _opencode(setup: Setup, remove: bool) -> list[Change]:
    entry: dict[str, object] = {"type": "remote", "url": setup.mcp_url, "enabled": True}
    if setup.token:
        entry["headers"] = {"Authorization": "Bearer {env:MNEMO_TOKEN}"}
    config = _json_server(setup.project / "opencode.json", ("mcp",), entry, remove, schema=OPENCODE_SCHEMA)
    plugin = _whole_file(setup.project / ".opencode" / "plugins" / "mnemo.js", "opencode-plugin.js", setup, remove)
    return [config, plugin]


# -- Pi ---------------------------------------------------------------------------------------------


def _pi(setup: Setup, remove: bool) -> list[Change]:
    return [_whole_file(setup.project / ".pi" / "extensions" / "mnemo.ts", "pi-extension.ts", setup, remove)]


PLANS: dict[str, Callable[[Setup, bool], list[Change]]] = {
    "claude-code": _claude,
    "codex": _codex,
    "opencode": _opencode,
    "pi": _pi,
}
assert tuple(PLANS) == AGENTS


# -- the shapes shared by several agents --------------------------------------------------------------


def _json_server(
    path: Path, parents: tuple[str, ...], entry: dict[str, object], remove: bool, schema: str = ""
) -> Change:
    """An MCP server `mnemo` under `parents` in a JSON config; the other servers and keys stay in order."""
    before = read_text(path)
    doc = load_json(path, before)
    if remove:
        container: object = doc
        for key in parents:
            container = container.get(key) if isinstance(container, dict) else None
        if not isinstance(container, dict) or SERVER not in container:
            return Change(path, before, before)
        del container[SERVER]
        prune_empty(doc, *parents)
        if not doc or (schema and doc == {"$schema": schema}):
            return Change(path, before, None)
        return Change(path, before, dump_json(doc, before))
    if before is None and schema:
        doc["$schema"] = schema
    container = doc
    where = ""
    for key in parents:
        container = json_object(container, key, path, where)
        where += f"{key}."
    if container.get(SERVER) == entry:
        return Change(path, before, before)
    container[SERVER] = entry
    return Change(path, before, dump_json(doc, before))


def _json_hooks(path: Path, commands: dict[str, str], remove: bool) -> Change:
    """Mnemo's command hooks in a Claude Code or Codex hooks file (`{"hooks": {event: [groups]}}`)."""
    before = read_text(path)
    doc = load_json(path, before)
    if remove:
        hooks = doc.get("hooks")
        if not isinstance(hooks, dict):
            return Change(path, before, before)
        unwired = {event: list(groups) if isinstance(groups, list) else groups for event, groups in hooks.items()}
        remove_hooks(unwired)
        if unwired == hooks:
            return Change(path, before, before)  # none of Mnemo's: not even an empty "hooks" is touched
        doc["hooks"] = unwired
        prune_empty(doc, "hooks")
        return Change(path, before, dump_json(doc, before) if doc else None)
    hooks = json_object(doc, "hooks", path, "")
    for event, command in commands.items():
        set_hook(hooks, event, command, HOOK_TIMEOUT_S, path)
    if before is not None and load_json(path, before) == doc:
        return Change(path, before, before)
    return Change(path, before, dump_json(doc, before))


def _whole_file(path: Path, template: str, setup: Setup, remove: bool) -> Change:
    """A file Mnemo writes whole; one without Mnemo's marker line is the user's and is never touched."""
    before = read_text(path)
    if before is not None and not before.startswith(MARKER):
        if remove:
            return Change(path, before, before)
        raise ConfigError(f"{path}: exists and was not written by `mnemo init`; move it aside; nothing was written")
    if remove:
        return Change(path, before, None) if before is not None else Change(path, None, None)
    text = resources.files("mnemo_cli.agents").joinpath("templates", template).read_text(encoding="utf-8")
    text = text.replace("__MNEMO_ARGV__", json.dumps(list(setup.mnemo))).replace(
        "__URL_ARGS__", json.dumps(list(setup.url_args))
    )
    return Change(path, before, text)


def mnemo_argv(env: Mapping[str, str], argv0: str) -> tuple[str, ...]:
    """How an agent runs this `mnemo`: by name when PATH finds this same program, else by its absolute path."""
    mine = shutil.which(argv0, path=env.get("PATH", "")) if os.sep not in argv0 else argv0
    on_path = shutil.which("mnemo", path=env.get("PATH", ""))
    if mine and on_path and os.path.realpath(on_path) == os.path.realpath(mine):
        return ("mnemo",)
    return (os.path.abspath(mine or argv0),)
