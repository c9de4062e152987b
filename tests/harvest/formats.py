"""One agent-neutral conversation written in every agent's own format: Claude Code, Codex CLI, OpenCode and pi.

A `Script` is a title and a list of messages and tool calls (each with the output it printed);
the writers lay it out as each agent does on disk (docs/session-formats.md), including the places
where agents keep tool output a second time (Claude `toolUseResult`, Codex `exec_command_end`,
OpenCode `state.metadata`), so a test can plant text anywhere a real session holds it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from tests.harvest import opencode_fixtures as oc
from tests.harvest.agents import claude_dir_name

START = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class Say:
    """A message of the conversation."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class Call:
    """A tool call and the output it printed; `by_user` is the user's own `!cmd` where the agent has one."""

    tool: Literal["shell", "http"]
    """tool is `shell` (args: command) or `http`, an MCP-style request tool with any arguments."""
    args: dict[str, str]
    output: str
    by_user: bool = False


@dataclass
class Script:
    """A whole session: where it ran, the agent's own title for it, and what happened."""

    cwd: str
    title: str
    events: list[Say | Call] = field(default_factory=list)


def _iso(n: int) -> str:
    return (START + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")


def _ms(n: int) -> int:
    return int((START + timedelta(seconds=n)).timestamp() * 1000)


def _dump(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# -- Claude Code ------------------------------------------------------------------------------------


def write_claude(projects: Path, script: Script) -> str:
    """`<projects>/<enc-cwd>/<sessionId>.jsonl`; returns the session id."""
    session_id = str(uuid.uuid4())
    records: list[dict[str, Any]] = []
    parent: list[str | None] = [None]

    def line(kind: str, message: dict[str, Any], n: int, **extra: Any) -> None:
        uid = str(uuid.uuid4())
        records.append(
            {
                "type": kind,
                "uuid": uid,
                "parentUuid": parent[0],
                "isSidechain": False,
                "userType": "external",
                "cwd": script.cwd,
                "sessionId": session_id,
                "version": "2.1.173",
                "gitBranch": "main",
                "timestamp": _iso(n),
                "message": message,
                **extra,
            }
        )
        parent[0] = uid

    def reply(content: list[dict[str, Any]], stop: str, n: int) -> None:
        message = {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 1200, "output_tokens": 80},
        }
        line("assistant", message, n, requestId=f"req_{uuid.uuid4().hex[:12]}")

    for n, event in enumerate(script.events):
        if isinstance(event, Say) and event.role == "user":
            line("user", {"role": "user", "content": event.text}, n)
        elif isinstance(event, Say):
            reply([{"type": "text", "text": event.text}], "end_turn", n)
        elif event.by_user:
            line("user", {"role": "user", "content": f"<bash-input>{event.args['command']}</bash-input>"}, n)
            stdout = f"<bash-stdout>{event.output}</bash-stdout><bash-stderr></bash-stderr>"
            line("user", {"role": "user", "content": stdout}, n)
        else:
            call_id = f"toolu_{uuid.uuid4().hex[:20]}"
            name = "Bash" if event.tool == "shell" else "mcp__http__request"
            reply([{"type": "tool_use", "id": call_id, "name": name, "input": event.args}], "tool_use", n)
            result = {"type": "tool_result", "tool_use_id": call_id, "content": event.output, "is_error": False}
            structured = {"stdout": event.output, "stderr": "", "interrupted": False, "isImage": False}
            line("user", {"role": "user", "content": [result]}, n, toolUseResult=structured)
    records.append({"type": "custom-title", "customTitle": script.title, "sessionId": session_id})
    _dump(projects / claude_dir_name(script.cwd) / f"{session_id}.jsonl", records)
    return session_id


# -- Codex CLI --------------------------------------------------------------------------------------


def write_codex(home: Path, script: Script) -> str:
    """`<home>/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` plus its name in `session_index.jsonl`."""
    thread_id = str(uuid.uuid4())
    records: list[dict[str, Any]] = []

    def rec(kind: str, n: int, **payload: Any) -> None:
        records.append({"timestamp": _iso(n), "type": kind, "payload": payload})

    rec(
        "session_meta",
        0,
        id=thread_id,
        timestamp=_iso(0),
        cwd=script.cwd,
        originator="codex_cli_rs",
        cli_version="0.104.0",
        source="cli",
        model_provider="openai",
        git={"branch": "main", "commit_hash": "3f6c2a9e1b7d4c8a0e5f2b6d9c1a7e3f4b8d0c2a"},
    )
    context = f"<environment_context>\n  <cwd>{script.cwd}</cwd>\n  <shell>bash</shell>\n</environment_context>"
    rec("response_item", 0, type="message", role="user", content=[{"type": "input_text", "text": context}])
    turn_open = False
    for n, event in enumerate(script.events, start=1):
        if isinstance(event, Say) and event.role == "user":
            if turn_open:
                rec("event_msg", n, type="task_complete", turn_id=f"turn-{n}")
            rec("event_msg", n, type="task_started", turn_id=f"turn-{n}")
            rec("turn_context", n, cwd=script.cwd, model="gpt-5.3-codex", approval_policy="on-request")
            rec("event_msg", n, type="user_message", message=event.text, images=[])
            rec("response_item", n, type="message", role="user", content=[{"type": "input_text", "text": event.text}])
            turn_open = True
        elif isinstance(event, Say):
            rec(
                "response_item",
                n,
                type="message",
                role="assistant",
                content=[{"type": "output_text", "text": event.text}],
            )
            rec("event_msg", n, type="agent_message", message=event.text)
        else:
            call_id = f"call_{uuid.uuid4().hex[:20]}"
            if event.tool == "shell":
                arguments = {"cmd": event.args["command"], "workdir": script.cwd, "yield_time_ms": 10000}
                rec(
                    "response_item",
                    n,
                    type="function_call",
                    name="exec_command",
                    arguments=json.dumps(arguments),
                    call_id=call_id,
                )
                rec(
                    "event_msg",
                    n,
                    type="exec_command_end",
                    call_id=call_id,
                    command=["bash", "-lc", event.args["command"]],
                    stdout=event.output,
                    stderr="",
                    aggregated_output=event.output,
                    formatted_output=event.output,
                    exit_code=0,
                )
            else:
                rec(
                    "response_item",
                    n,
                    type="function_call",
                    name="mcp__http__request",
                    arguments=json.dumps(event.args),
                    call_id=call_id,
                )
            rec("response_item", n, type="function_call_output", call_id=call_id, output=event.output)
    rec("event_msg", len(script.events) + 1, type="task_complete", turn_id="last")
    _dump(home / "sessions" / "2026" / "01" / "05" / f"rollout-2026-01-05T10-00-00-{thread_id}.jsonl", records)
    with (home / "session_index.jsonl").open("a") as index:
        index.write(json.dumps({"id": thread_id, "thread_name": script.title, "updated_at": _iso(0)}) + "\n")
    return thread_id


# -- OpenCode ---------------------------------------------------------------------------------------


def opencode_session(session_id: str, script: Script) -> oc.OcSession:
    """The script as an OpenCode session, for `opencode_fixtures.write_db` or `write_json_tree`."""
    session = oc.OcSession(session_id, script.title, oc.T0, directory=script.cwd)
    last_user, key = "", session_id.removeprefix("ses_")
    for n, event in enumerate(script.events, start=1):
        # OpenCode's message and part ids are unique across sessions, and sort in creation order.
        mid, pid, at = f"msg_{key}_{n:05d}", f"prt_{key}_{n:05d}", oc.T0 + n * 1_000
        if isinstance(event, Say) and event.role == "user":
            session.messages.append(oc.user(mid, at, oc.text(pid, event.text)))
            last_user = mid
        elif isinstance(event, Say):
            session.messages.append(oc.assistant(mid, at, last_user, oc.text(pid, event.text)))
        else:
            name = "bash" if event.tool == "shell" else "http_request"
            args = {**event.args, "description": "Runs the command"} if event.tool == "shell" else event.args
            part = oc.tool(pid, name, args, output=event.output)
            part.data["state"]["metadata"] = {"output": event.output, "exit": 0, "description": "Runs the command"}
            session.messages.append(oc.assistant(mid, at, last_user, part))
    return session


# -- pi ---------------------------------------------------------------------------------------------


def write_pi(sessions: Path, script: Script) -> str:
    """`<sessions>/--<enc-cwd>--/<ts>_<uuid>.jsonl` in format v3 (entries in one parentId chain)."""
    session_id = str(uuid.uuid4())
    records: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": session_id, "timestamp": _iso(0), "cwd": script.cwd}
    ]
    parent: list[str | None] = [None]

    def entry(n: int, kind: str, **fields: Any) -> None:
        eid = uuid.uuid4().hex[:8]
        records.append({"type": kind, "id": eid, "parentId": parent[0], "timestamp": _iso(n), **fields})
        parent[0] = eid

    def reply(n: int, content: list[dict[str, Any]], stop: str) -> None:
        message = {
            "role": "assistant",
            "content": content,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": MODEL,
            "usage": {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280},
            "stopReason": stop,
            "timestamp": _ms(n),
        }
        entry(n, "message", message=message)

    entry(0, "model_change", provider="anthropic", modelId=MODEL)
    entry(0, "session_info", name=script.title)
    for n, event in enumerate(script.events, start=1):
        if isinstance(event, Say) and event.role == "user":
            entry(
                n,
                "message",
                message={"role": "user", "content": [{"type": "text", "text": event.text}], "timestamp": _ms(n)},
            )
        elif isinstance(event, Say):
            reply(n, [{"type": "text", "text": event.text}], "stop")
        elif event.by_user:
            run = {"command": event.args["command"], "output": event.output, "exitCode": 0, "cancelled": False}
            entry(n, "message", message={"role": "bashExecution", **run, "truncated": False, "timestamp": _ms(n)})
        else:
            call_id = f"toolu_{uuid.uuid4().hex[:20]}"
            name = "bash" if event.tool == "shell" else "http_request"
            reply(n, [{"type": "toolCall", "id": call_id, "name": name, "arguments": event.args}], "toolUse")
            result = {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": event.output}],
                "isError": False,
                "timestamp": _ms(n),
            }
            entry(n, "message", message=result)
    folder = "--" + script.cwd.strip("/").replace("/", "-") + "--"
    _dump(sessions / folder / f"2026-01-05T10-00-00-000Z_{session_id}.jsonl", records)
    return session_id
