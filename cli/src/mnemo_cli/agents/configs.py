"""Planned edits to agents' config files: read and check every file first, write only when all are sound.

JSON keeps its keys' order and the file's indentation; TOML goes through tomlkit, which keeps comments
and layout. Mnemo's own entries are recognised by name (the MCP server `mnemo`), by command (a hook
command whose program is `mnemo` and whose first argument is `hook`) or by a marker line (a plugin file
Mnemo wrote), so removing them never touches anything of the user's.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.exceptions import ParseError
from tomlkit.items import Table
from tomlkit.toml_document import TOMLDocument

SERVER = "mnemo"
# The first line of every file Mnemo writes whole (an agent's plugin or extension).
MARKER = "// Written by `mnemo init`: Mnemo's memory for this project. `mnemo init --remove` deletes this file."


class ConfigError(Exception):
    """An existing config file Mnemo cannot edit safely; the message names the file (and the line)."""


@dataclass(frozen=True)
class Change:
    """One file's content before and after (None: the file does not exist, or is to be deleted)."""

    path: Path
    before: str | None
    after: str | None

    @property
    def verb(self) -> str:
        if self.before == self.after:
            return "unchanged"
        if self.before is None:
            return "created"
        return "removed" if self.after is None else "updated"

    def diff(self) -> str:
        old = (self.before or "").splitlines(keepends=True)
        new = (self.after or "").splitlines(keepends=True)
        lines = difflib.unified_diff(
            old,
            new,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def apply(self) -> None:
        if self.before == self.after:
            return
        if self.after is None:
            self.path.unlink()
            return
        write_atomically(self.path, self.after)


def write_atomically(path: Path, text: str) -> None:
    """Replaces the file in one rename, keeping its permissions: an agent never reads half a config."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".mnemo-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); nothing was written") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); nothing was written") from None


# -- JSON -------------------------------------------------------------------------------------------


def load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno} column {exc.colno}: {exc.msg}; fix or move the file, nothing was written"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level is not a JSON object; nothing was written")
    return data


def dump_json(data: dict[str, Any], like: str | None) -> str:
    """The document in the indentation the file already uses (two spaces for a new file)."""
    indent: str | int = 2
    if like:
        found = re.search(r"^[{\[][ \t]*\r?\n([ \t]+)\S", like)
        if found:
            indent = found.group(1)
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def json_object(parent: dict[str, Any], key: str, path: Path, where: str) -> dict[str, Any]:
    """`parent[key]`, created when absent; a value of another type is an error naming where it is."""
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {where}{key} is not a JSON object; nothing was written")
    return value


def prune_empty(parent: dict[str, Any], *keys: str) -> None:
    """Drops `parent[keys[0]][keys[1]]…` bottom up while it is an empty object or list (Mnemo's removal emptied it)."""
    if not keys or keys[0] not in parent:
        return
    child = parent[keys[0]]
    if isinstance(child, dict) and len(keys) > 1:
        prune_empty(child, *keys[1:])
    if child in ({}, []):
        del parent[keys[0]]


def is_ours(command: Any) -> bool:
    """A hook command Mnemo wrote: the `mnemo` program (by any path) running `hook …`."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 2 and os.path.basename(words[0]) == "mnemo" and words[1] == "hook"


def set_hook(hooks: dict[str, Any], event: str, command: str, timeout: int, path: Path) -> None:
    """One Mnemo command hook for `event` in the Claude Code / Codex hooks layout
    (`{event: [{"matcher"?, "hooks": [{"type": "command", "command", "timeout"}]}]}`), others kept as they are."""
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise ConfigError(f"{path}: hooks.{event} is not a JSON list; nothing was written")
    entry = {"type": "command", "command": command, "timeout": timeout}
    placed = False
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            continue
        for i, handler in enumerate(handlers):
            if isinstance(handler, dict) and is_ours(handler.get("command")):
                if placed:
                    handlers[i] = None  # a duplicate of ours: one is enough
                else:
                    handlers[i] = {**handler, **entry}
                    placed = True
        handlers[:] = [h for h in handlers if h is not None]
    if not placed:
        groups.append({"hooks": [entry]})


def _ours(handler: Any) -> bool:
    return isinstance(handler, dict) and is_ours(handler.get("command"))


def remove_hooks(hooks: dict[str, Any]) -> None:
    """Takes out every Mnemo hook; groups and events left empty by that go too."""
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(handlers, list) and any(isinstance(h, dict) and is_ours(h.get("command")) for h in handlers):
                group = {
                    **group,
                    "hooks": [h for h in handlers if not (isinstance(h, dict) and is_ours(h.get("command")))],
                }
                if not group["hooks"]:
                    continue
            kept.append(group)
        hooks[event] = kept
        if not kept:
            del hooks[event]


# -- TOML -------------------------------------------------------------------------------------------


def load_toml(path: Path, text: str | None) -> TOMLDocument:
    try:
        return tomlkit.parse(text or "")
    except ParseError as exc:
        raise ConfigError(
            f"{path}: line {exc.line} column {exc.col}: {exc}; fix or move the file, nothing was written"
        ) from None


def set_toml_server(doc: TOMLDocument, path: Path, fields: dict[str, str]) -> None:
    """`[mcp_servers.mnemo]` with exactly `fields`; the other servers and everything else stay as written."""
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc.add("mcp_servers", servers)
    elif not isinstance(servers, Table | OutOfOrderTableProxy):
        raise ConfigError(f"{path}: mcp_servers is not a table; nothing was written")
    current = servers.get(SERVER)
    if current is not None and dict(current) == fields:
        return
    table = tomlkit.table()
    for key, value in fields.items():
        table.add(key, value)
    table.add(tomlkit.nl())
    servers[SERVER] = table


def remove_toml_server(doc: TOMLDocument) -> None:
    servers = doc.get("mcp_servers")
    if isinstance(servers, dict) and SERVER in servers:
        del servers[SERVER]
        if not servers:
            del doc["mcp_servers"]


def dump_toml(doc: TOMLDocument) -> str:
    return tomlkit.dumps(doc)
