"""`mnemo up`: everything on embedded defaults, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
from collections.abc import Sequence

from mnemo_platform import Component
from mnemo_platform.process import run_process
from mnemo_server.stack import Stack, StackConfig


def announce(components: Sequence[Component]) -> None:
    stack = components[0]
    assert isinstance(stack, Stack)
    base = stack.base_url
    where = "embedded PostgreSQL in " + str(stack.postgres.data_dir) if stack.postgres else "MNEMO_DATABASE_URL"
    print(
        f"""
Mnemo is ready ({where}).
  MCP:  {base}/mcp
  REST: {base}/api/v1   (OpenAPI: {base}/api/v1/openapi.json)
  UI:   {base}/ui

Connect the coding agents of a project to its memory: run `mnemo init` in the project
(or by hand, e.g. claude mcp add --transport http mnemo "{base}/mcp?workspace=$(pwd)").
The embedding model loads in the background; lexical search works at once.
Stop with Ctrl-C.
""",
        flush=True,
    )
    if stack.bootstrap_token:
        print(
            f"""Authentication is on and there was no admin token, so one was created. It is shown only now:
  MNEMO_TOKEN={stack.bootstrap_token}
Create agent tokens with it: MNEMO_TOKEN=… mnemo token create --role agent --workspace PATH
""",
            flush=True,
        )


def run_up() -> int:
    return run_process("up", lambda: [Stack(StackConfig.from_env(os.environ))], on_ready=announce, configures_auth=True)
