"""Feedback with authentication on, over REST with real tokens: several principals move the ranking and
one cannot; a vote on a global memory stays in the voter's workspace; the workspace wall holds.

A stack of its own (its auth switch is process-wide; it also writes `global`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Postgres, start_stack, wait_posted

API = "/api/v1"
MISSING = str(uuid.UUID(int=13))
AGENTS = 5


@dataclass
class Walls:
    stack: Stack
    http: httpx.AsyncClient
    admin: str
    ws_a: str = ""
    ws_b: str = ""
    agents: list[str] = field(default_factory=list)
    """agents are the secrets of AGENTS agent tokens bound to ws_a (principals agent-a0, agent-a1, ...)."""
    outsider: str = ""
    """outsider is an agent token bound to ws_b (principal agent-b)."""

    async def post(self, token: str, path: str, body: Any) -> httpx.Response:
        return await self.http.post(f"{API}{path}", json=body, headers={"Authorization": f"Bearer {token}"})

    async def ok(self, token: str, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.http.request(
            method, f"{API}{path}", headers={"Authorization": f"Bearer {token}"}, **kwargs
        )
        assert response.status_code in (200, 201), (path, response.text)
        return response.json()

    async def vote(self, token: str, memory_id: str, vote: str, **body: Any) -> dict[str, Any]:
        response = await self.post(token, f"/memories/{memory_id}/feedback", {"vote": vote, **body})
        assert response.status_code == 200, response.text
        return response.json()

    async def rows(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.stack.dsn)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()


@pytest.fixture(scope="module")
async def walls(postgres: Postgres) -> AsyncIterator[Walls]:
    stack = await start_stack(await postgres.create_database("fbwalls"), HashEmbedder(64), MNEMO_AUTH="on")
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        w = Walls(stack, http, stack.bootstrap_token or "")
        w.ws_a = (await w.ok(w.admin, "POST", "/workspaces", json={"name": "fb-walls-a"}))["workspace"]["id"]
        w.ws_b = (await w.ok(w.admin, "POST", "/workspaces", json={"name": "fb-walls-b"}))["workspace"]["id"]
        for n in range(AGENTS):
            made = await w.ok(
                w.admin,
                "POST",
                "/tokens",
                json={"principal": f"agent-a{n}", "role": "agent", "workspaces": [w.ws_a]},
            )
            w.agents.append(made["secret"])
        made = await w.ok(
            w.admin, "POST", "/tokens", json={"principal": "agent-b", "role": "agent", "workspaces": [w.ws_b]}
        )
        w.outsider = made["secret"]
        yield w
    await stack.stop()


async def test_several_agents_lift_a_memory_one_agent_alone_cannot(walls: Walls) -> None:
    w = walls
    word = f"kestrel{uuid.uuid4().hex[:6]}"
    lower = await w.ok(w.agents[0], "POST", "/memories", json={"content": f"The {word} queue drains hourly."})
    upper = await w.ok(w.agents[0], "POST", "/memories", json={"content": f"The {word} queue drains daily."})
    lower_id, upper_id = lower["memory"]["id"], upper["memory"]["id"]
    await w.ok(w.admin, "POST", f"/memories/{upper_id}/confirm", json={"workspace": w.ws_a})
    await wait_posted(w.stack.dsn)

    async def ranked() -> list[dict[str, Any]]:
        body = {"query": word, "mode": "lexical", "explain": True}
        return (await w.ok(w.agents[0], "POST", "/search", json=body))["results"]

    before = await ranked()
    assert [r["id"] for r in before] == [upper_id, lower_id]  # positive control: confirmed (1.0) over active (0.85)
    for _ in range(30):
        alone = await w.vote(w.agents[1], lower_id, "useful")
    assert (alone["voters"], alone["feedback_factor"]) == (1, 1.05)
    after_one = await ranked()
    assert [r["id"] for r in after_one] == [upper_id, lower_id]
    assert after_one[1]["explanation"]["feedback_factor"] == pytest.approx(1.05)
    for token in w.agents[2:]:
        await w.vote(token, lower_id, "useful")
    after_many = await ranked()
    assert [r["id"] for r in after_many] == [lower_id, upper_id]
    assert after_many[0]["explanation"]["feedback_factor"] == pytest.approx(1 + 0.05 * (AGENTS - 1))
    votes = await w.rows("SELECT principal FROM feedback WHERE memory_id = $1 ORDER BY principal", uuid.UUID(lower_id))
    assert [v["principal"] for v in votes] == [f"agent-a{n}" for n in range(1, AGENTS)]


async def test_a_vote_on_a_global_memory_stays_in_the_voters_workspace(walls: Walls) -> None:
    w = walls
    shared = await w.ok(
        w.admin, "POST", "/memories", json={"workspace": "global", "content": "Every service logs in JSON."}
    )
    shared_id = shared["memory"]["id"]
    note = f"breaks the {uuid.uuid4().hex[:8]} parser"
    voted = await w.vote(w.agents[0], shared_id, "harmful", note=note)
    assert voted["feedback"]["workspace_id"] == w.ws_a and voted["proposal"]["created"]
    assert voted["memory"]["workspace_id"] == "global" and voted["feedback_factor"] == 0.9
    proposal = (await w.rows("SELECT * FROM proposals WHERE id = $1", uuid.UUID(voted["proposal"]["id"])))[0]
    assert (proposal["workspace_id"], proposal["kind"], proposal["source"]) == ("global", "retract", "feedback")
    assert proposal["proposed_by"] == "system:feedback" and note not in proposal["reason"]
    # Global's audit chain, read by every workspace, names neither the voter, nor its note, nor its workspace.
    chain = json.dumps(await w.ok(w.outsider, "GET", "/audit", params={"workspace": "global", "page_size": 100}))
    assert shared_id in chain  # positive control: the global note's events are there
    for marker in ("agent-a0", note, w.ws_a, "fb-walls-a"):
        assert marker not in chain, marker
    # The voter's own workspace holds the vote, note and all.
    own = await w.ok(w.agents[0], "GET", "/audit", params={"page_size": 100})
    assert [
        (e["action"], e["principal"], e["details"]["note"]) for e in own["events"] if e["memory_id"] == shared_id
    ] == [("feedback", "agent-a0", note)]
    # Voting from global itself is refused: it would be audited where everyone reads.
    from_global = await w.post(
        w.agents[0], f"/memories/{shared_id}/feedback", {"vote": "useful", "workspace": "global"}
    )
    assert from_global.status_code == 403, from_global.text
    # Positive control: the other workspace's agent votes on the same global memory from its own workspace.
    other = await w.vote(w.outsider, shared_id, "useful")
    assert (other["feedback"]["workspace_id"], other["voters"]) == (w.ws_b, 2)


async def test_the_wall_holds_for_votes(walls: Walls) -> None:
    w = walls
    mine = await w.ok(w.agents[0], "POST", "/memories", json={"content": "Workspace A's private convention."})
    memory_id = mine["memory"]["id"]
    before = await w.rows("SELECT (SELECT count(*) FROM feedback) AS f, (SELECT count(*) FROM audit_events) AS a")
    foreign = await w.post(w.outsider, f"/memories/{memory_id}/feedback", {"vote": "harmful"})
    unknown = await w.post(w.outsider, f"/memories/{MISSING}/feedback", {"vote": "harmful"})
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json()["error"]["message"].replace(memory_id, "<id>") == unknown.json()["error"]["message"].replace(
        MISSING, "<id>"
    )
    named = await w.post(w.outsider, f"/memories/{memory_id}/feedback", {"vote": "harmful", "workspace": w.ws_a})
    assert named.status_code == 403 and named.json()["error"]["reason"] == "OUTSIDE_WORKSPACE"
    after = await w.rows("SELECT (SELECT count(*) FROM feedback) AS f, (SELECT count(*) FROM audit_events) AS a")
    assert [tuple(r) for r in after] == [tuple(r) for r in before]
    assert (await w.rows("SELECT feedback_factor FROM memories WHERE id = $1", uuid.UUID(memory_id)))[0][0] == 1.0
    # Positive control: the workspace's own agent votes on it.
    assert (await w.vote(w.agents[0], memory_id, "harmful"))["feedback_factor"] == 0.9
