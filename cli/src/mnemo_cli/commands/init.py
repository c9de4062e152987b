"""`mnemo init`: register this project as a workspace and wire the coding agents on this machine to it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mnemo_cli.agents import AGENTS
from mnemo_cli.agents.configs import Change, ConfigError
from mnemo_cli.agents.wiring import Setup, detected, mnemo_argv, plan
from mnemo_cli.errors import ClientError
from mnemo_cli.settings import ClientSettings
from mnemo_platform import load
from mnemo_platform.config import DEFAULT_HTTP_PORT


def cmd_init(args: argparse.Namespace) -> int:
    env = os.environ
    home = Path(env.get("HOME") or Path.home())
    project = Path(args.path or ".").expanduser().resolve()
    settings = load(ClientSettings)
    url = settings.resolved_url()
    setup = Setup(
        project=project,
        home=home,
        url=url,
        mnemo=mnemo_argv(env, sys.argv[0]),
        url_args=() if url == f"http://127.0.0.1:{DEFAULT_HTTP_PORT}" else ("--url", url),
        token=bool(settings.token),
    )
    agents = _chosen(args, home)
    if not agents:
        looked = ", ".join(f"{a}" for a in AGENTS)
        print(
            f"mnemo init: no coding agent found on this machine (looked for {looked} by their config directories "
            "under $HOME and their programs on PATH); name one with --agent",
            file=sys.stderr,
        )
        return 1

    # Every file is read and checked before any is written: one unparsable file stops everything.
    changes: list[tuple[str, Change]] = []
    problems: list[str] = []
    for agent, _ in agents:
        try:
            changes += [(agent, change) for change in plan(agent, setup, remove=args.remove)]
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        for problem in problems:
            print(f"mnemo init: {problem}", file=sys.stderr)
        return 1

    if args.dry_run:
        for _, change in changes:
            if change.verb != "unchanged":
                print(change.diff(), end="")
        for agent, change in changes:
            print(f"{_would(change.verb):<18} {change.path}  ({agent})")
        if not args.remove:
            print(f"would register     {project} as a workspace at {url}")
        print("dry run: nothing was written")
        return 0

    if not args.remove:
        _register(project)
    for _, change in changes:
        change.apply()
    for agent, change in changes:
        print(f"{change.verb:<10} {change.path}  ({agent})")
    reasons = ", ".join(f"{agent} ({why})" for agent, why in agents)
    if args.remove:
        print(f"unwired: {reasons}; the workspace and its memories stay (`mnemo workspace list`)")
    else:
        print(f"wired: {reasons}")
        if any(agent == "codex" for agent, _ in agents):
            print("Codex reads a project's .codex/ once you trust the project (it asks on first start).")
    return 0


def _chosen(args: argparse.Namespace, home: Path) -> list[tuple[str, str]]:
    """The agents to wire, each with why: named with --agent, else every agent found on this machine
    (--remove with no --agent unwires every agent, found or not: removing finds only Mnemo's own)."""
    if args.agent:
        return [(agent, "chosen") for agent in dict.fromkeys(args.agent)]
    if args.remove:
        return [(agent, "all") for agent in AGENTS]
    found = [(agent, detected(agent, home, os.environ)) for agent in AGENTS]
    return [(agent, f"found {why}") for agent, why in found if why]


def _register(project: Path) -> None:
    """Registers the workspace; Mnemo not running is no reason to stop (the MCP URL registers it on first use)."""
    from mnemo_cli.commands.common import client

    try:
        result = client().request("POST", "/workspaces", json={"path": str(project), "name": ""})
    except ClientError as exc:
        print(f"mnemo init: the workspace is not registered yet ({exc}); it will be on first use", file=sys.stderr)
        return
    ws = result["workspace"]
    verb = "registered" if result["created"] else "registered already"
    print(f"{verb:<10} workspace {ws['name']} (id {ws['id']}) at {ws['root_path']}")


def _would(verb: str) -> str:
    return {"created": "would create", "updated": "would update", "removed": "would remove"}.get(verb, verb)
