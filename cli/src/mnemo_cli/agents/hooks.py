"""`mnemo hook session-start|session-end`: what an agent runs at the start and end of a session.

A hook never blocks or breaks the agent: whatever goes wrong (Mnemo down or slow, bad input), it
exits 0 within about two seconds and prints nothing. It imports neither protobuf nor gRPC, so it
starts quickly with every session.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
from typing import Any

# Connecting to a local gateway takes milliseconds; the packet is one query. Beyond this, the agent
# starts without it rather than wait.
CONNECT_TIMEOUT_S = 0.5
READ_TIMEOUT_S = 1.5
# Claude Code and Codex write the payload and close stdin at once; an agent that sends none (a
# terminal, a plugin that forgot) must not hold the hook.
STDIN_WAIT_S = 1.0


def cmd_hook(args: argparse.Namespace) -> int:
    try:
        if args.hook_event == "session-start":
            session_start(args)
        else:
            session_end(args)
    except Exception:  # noqa: S110 - a hook must never fail the agent: no failure here is worth a broken session
        pass
    return 0


def payload() -> dict[str, Any]:
    """The JSON object the agent sent on stdin (Claude Code: session_id, transcript_path, cwd, …), or {}."""
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    ready, _, _ = select.select([sys.stdin], [], [], STDIN_WAIT_S)
    if not ready:
        return {}
    try:
        data = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _base_url(args: argparse.Namespace) -> str:
    from mnemo_cli.settings import ClientSettings
    from mnemo_platform import load

    return (args.url or load(ClientSettings).resolved_url()).rstrip("/")


def session_start(args: argparse.Namespace) -> None:
    """Prints the wake-up packet of the session's workspace in the form the agent injects, or nothing."""
    import httpx

    data = payload()
    cwd = str(data.get("cwd") or os.getcwd())
    token = os.environ.get("MNEMO_TOKEN", "")
    response = httpx.get(
        f"{_base_url(args)}/api/v1/context",
        params={"workspace": cwd},
        headers={"Authorization": f"Bearer {token}"} if token else {},
        timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
    )
    # 404: no wake-up packet here (an older gateway, or nothing to say); any other failure: say nothing.
    if response.status_code != 200:
        return
    text = response.json().get("text") or ""
    if not text.strip():
        return
    if args.agent in ("claude-code", "codex"):
        # Both read this JSON from a SessionStart hook and add additionalContext to the model's context.
        out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def session_end(args: argparse.Namespace) -> None:
    """Asks for this one session to be harvested now, in a process of its own, and returns at once.

    The harvest may take longer than an agent lets a hook run (a summary by an LLM, a long
    session), so it is handed to a detached `mnemo harvest run --session` that outlives the hook
    and the agent.
    """
    data = payload()
    session = str(data.get("transcript_path") or data.get("session_id") or "")
    if not session:
        return
    env = {**os.environ, "MNEMO_URL": _base_url(args)}
    subprocess.Popen(  # noqa: S603 - our own CLI, arguments as a list
        [sys.executable, "-m", "mnemo_cli.main", "harvest", "run", "--session", session, "--agent", args.agent],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=str(data.get("cwd") or os.getcwd()) if os.path.isdir(str(data.get("cwd") or "")) else None,
        start_new_session=True,
    )
