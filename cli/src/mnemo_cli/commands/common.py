"""What the commands that talk to a running Mnemo share: the client, workspace references, query parameters."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo_cli.settings import ClientSettings
from mnemo_platform import load

if TYPE_CHECKING:
    from mnemo_cli.client import GatewayClient


def client() -> GatewayClient:
    # httpx is imported only by the commands that talk to a running Mnemo: `up` and `serve`
    # start faster without it, and the gateway's first MCP answer comes sooner.
    from mnemo_cli.client import GatewayClient

    settings = load(ClientSettings)
    return GatewayClient(settings.resolved_url(), token=settings.token)


def workspace_ref(value: str | None) -> str | None:
    """Paths are made absolute here: the server cannot know this shell's directory."""
    if not value:
        return None
    if value.startswith(("~", ".", "/")):
        return str(Path(value).expanduser().resolve())
    return value


def session_ref(value: str | None) -> str:
    """A session id as given; a session file's path made absolute (the harvester cannot know this shell's directory)."""
    if not value:
        return ""
    if "/" in value or value.startswith(("~", ".")):
        return os.path.abspath(os.path.expanduser(value))
    return value


def params(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """Query parameters, leaving out what the user did not give."""
    given = {"workspace": workspace_ref(args.workspace), **extra}
    return {key: value for key, value in given.items() if value not in (None, "", False)}


def content(args: argparse.Namespace) -> str:
    """The text argument; `-` or none reads stdin (so a long text can be piped in)."""
    return args.content if args.content not in (None, "-") else sys.stdin.read()
