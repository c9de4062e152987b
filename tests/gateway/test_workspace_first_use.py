"""A project directory named by its absolute path (`?workspace=/path` on the MCP URL that `mnemo init`
writes, or a REST `workspace`) is registered on first use: by anyone in local mode, only by an admin
token with authentication on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Postgres, mcp_client, start_stack, table_counts, tool_json

API = "/api/v1"


async def _workspaces(http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> dict[str, dict]:
    listed = await http.get(f"{API}/workspaces", headers=headers or {})
    assert listed.status_code == 200, listed.text
    return {ws["root_path"] or ws["name"]: ws for ws in listed.json()["workspaces"]}


async def test_local_mode_registers_a_project_path_on_first_mcp_use(hash_stack: Stack, tmp_path: Path) -> None:
    project = str(tmp_path / f"proj-{uuid.uuid4().hex[:6]}")
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as http:
        assert project not in await _workspaces(http)
        async with mcp_client(hash_stack, project) as client:
            written = tool_json(
                await client.call_tool("memory_write", {"content": "The nightly build runs on the spare runner."})
            )
            found = tool_json(await client.call_tool("memory_search", {"query": "nightly runner", "mode": "lexical"}))
        ws = (await _workspaces(http))[project]
        assert written["memory"]["workspace_id"] == ws["id"]
        assert [hit["id"] for hit in found["results"]] == [written["memory"]["id"]]
        # Audited: the registration is the first event of the workspace's chain.
        audit = await http.get(f"{API}/audit", params={"workspace": ws["id"], "page_size": 50})
        assert audit.status_code == 200, audit.text
        assert [e["action"] for e in audit.json()["events"]][-1] == "workspace_add"


async def test_local_mode_registers_a_project_path_on_first_rest_use(hash_stack: Stack, tmp_path: Path) -> None:
    project = str(tmp_path / f"rest-{uuid.uuid4().hex[:6]}")
    name = f"no-such-name-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as http:
        before = await table_counts(hash_stack.dsn)
        # A name is not a path: nothing is registered for it (only the default workspace is, by name).
        refused = await http.get(f"{API}/memories", params={"workspace": name})
        assert refused.status_code == 404 and refused.json()["error"]["reason"] == "WORKSPACE_NOT_FOUND"
        assert await table_counts(hash_stack.dsn) == before
        # Positive control: the absolute path is registered and the same call answers.
        listed = await http.get(f"{API}/memories", params={"workspace": project})
        assert listed.status_code == 200, listed.text
        assert listed.json()["memories"] == []
        assert project in await _workspaces(http)
        # A sub-directory of it later resolves to it, with no second registration.
        again = await http.get(f"{API}/memories", params={"workspace": f"{project}/src"})
        assert again.status_code == 200 and f"{project}/src" not in await _workspaces(http)


async def test_a_call_about_a_memory_in_a_new_project_registers_nothing(hash_stack: Stack, tmp_path: Path) -> None:
    project = str(tmp_path / f"memory-{uuid.uuid4().hex[:6]}")
    missing = str(uuid.uuid4())
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as http:
        before = await table_counts(hash_stack.dsn)
        # No memory is in a workspace not yet made: refused as it is, and nothing is left behind.
        deleted = await http.delete(f"{API}/memories/{missing}", params={"workspace": project, "reason": "x"})
        retracted = await http.post(f"{API}/memories/{missing}/retract", json={"workspace": project, "reason": "x"})
        got = await http.get(f"{API}/memories/{missing}", params={"workspace": project})
        for refused in (deleted, retracted, got):
            assert refused.status_code == 404 and refused.json()["error"]["reason"] == "WORKSPACE_NOT_FOUND"
        assert await table_counts(hash_stack.dsn) == before
        # Positive control: a write to the same path registers it.
        written = await http.post(f"{API}/memories", json={"workspace": project, "content": "First note here."})
        assert written.status_code == 201, written.text
        assert project in await _workspaces(http)


@pytest.fixture(scope="module")
async def secured(postgres: Postgres) -> AsyncIterator[Stack]:
    stack = await start_stack(await postgres.create_database("firstuse"), HashEmbedder(64), MNEMO_AUTH="on")
    yield stack
    await stack.stop()


async def test_with_auth_only_an_admin_token_registers_a_path(secured: Stack, tmp_path: Path) -> None:
    admin = {"Authorization": f"Bearer {secured.bootstrap_token}"}
    async with httpx.AsyncClient(base_url=secured.base_url, timeout=30) as http:
        made = await http.post(f"{API}/workspaces", json={"name": "alpha"}, headers=admin)
        assert made.status_code == 201, made.text
        created = await http.post(
            f"{API}/tokens", json={"principal": "writer-bot", "role": "agent", "workspaces": ["alpha"]}, headers=admin
        )
        writer = {"Authorization": f"Bearer {created.json()['secret']}"}
        project = str(tmp_path / "secured-project")
        before = await table_counts(secured.dsn)

        refused = await http.post(
            f"{API}/memories", json={"workspace": project, "content": "a note for a new project"}, headers=writer
        )
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "PERMISSION_DENIED"
        assert "registered only with an admin token" in error["message"]
        async with mcp_client(secured, project, token=created.json()["secret"]) as client:
            result = await client.call_tool("memory_search", {"query": "anything"})
        assert result.is_error and "PERMISSION_DENIED" in result.content[0].text
        assert await table_counts(secured.dsn) == before
        assert project not in await _workspaces(http, admin)
        # Positive control: the writer writes its own workspace, and an admin's first use registers the path.
        own = await http.post(f"{API}/memories", json={"workspace": "alpha", "content": "alpha note"}, headers=writer)
        assert own.status_code == 201, own.text
        by_admin = await http.post(
            f"{API}/memories", json={"workspace": project, "content": "a note for a new project"}, headers=admin
        )
        assert by_admin.status_code == 201, by_admin.text
        assert project in await _workspaces(http, admin)
