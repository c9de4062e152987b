"""Drill 9: with authentication on and the search service down, writes through the gateway go on
(ingest answers Authenticate), bad and revoked tokens are still refused, and the status names
what is down."""

from __future__ import annotations

import time

import httpx

from mnemo_embed import HashEmbedder
from tests.helpers import Postgres, start_stack

WORKSPACE = "faults-search-down"


async def test_writes_survive_a_search_outage_and_bad_tokens_are_still_refused(postgres: Postgres) -> None:
    stack = await start_stack(await postgres.create_database("search_down"), HashEmbedder(64), MNEMO_AUTH="on")
    try:
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            admin = {"Authorization": f"Bearer {stack.bootstrap_token}"}
            assert (await http.post("/api/v1/workspaces", json={"name": WORKSPACE}, headers=admin)).status_code == 201

            async def token(principal: str) -> tuple[str, str]:
                made = await http.post(
                    "/api/v1/tokens",
                    json={"principal": principal, "role": "agent", "workspaces": [WORKSPACE]},
                    headers=admin,
                )
                assert made.status_code == 201, made.text
                return made.json()["secret"], made.json()["token"]["id"]

            (agent, _), (revoked_before, before_id), (revoked_during, during_id) = [
                await token(name) for name in ("agent-up", "agent-revoked-before", "agent-revoked-during")
            ]
            assert (await http.delete(f"/api/v1/tokens/{before_id}", headers=admin)).status_code == 200

            def write(secret: str, text: str) -> httpx.Response:
                return http.post(  # type: ignore[return-value]
                    "/api/v1/memories",
                    json={"workspace": WORKSPACE, "content": text},
                    headers={"Authorization": f"Bearer {secret}"},
                )

            # With search up: the agent writes, the revoked token is refused.
            assert (await write(agent, "before the outage")).status_code == 201
            assert (await write(revoked_before, "revoked")).status_code == 401
            status = await http.get("/api/v1/status", headers=admin)
            assert status.status_code == 200 and status.json()["services_down"] == [], status.text

            assert stack.search is not None
            await stack.search.stop()

            started = time.perf_counter()
            during = await write(agent, "written while search is down")
            elapsed = time.perf_counter() - started
            assert during.status_code == 201, during.text
            print(f"first write with search down: {elapsed * 1000:.0f} ms")
            assert elapsed < 3.0
            started = time.perf_counter()
            assert (await write(agent, "a second one")).status_code == 201
            print(f"next write with search down: {(time.perf_counter() - started) * 1000:.0f} ms")
            assert (await write(revoked_during, "still live")).status_code == 201
            # Negative controls, during the outage: a made-up token and one revoked before it.
            for bad in ("mnemo_aaaaaaaaaaaa_" + "x" * 43, revoked_before):
                refused = await write(bad, "must not land")
                assert refused.status_code == 401, refused.text
                assert refused.json()["error"]["code"] == "UNAUTHENTICATED"
            # Revoking (a write, through ingest) takes effect at once, outage or not.
            assert (await http.delete(f"/api/v1/tokens/{during_id}", headers=admin)).status_code == 200
            assert (await write(revoked_during, "after revocation")).status_code == 401

            # Reads need search: they fail as unavailable, and the status says what is down.
            assert (
                await http.get("/api/v1/memories", params={"workspace": WORKSPACE}, headers=admin)
            ).status_code == 503
            status = await http.get("/api/v1/status", headers=admin)
            assert status.status_code == 503, status.text
            message = status.json()["error"]["message"]
            assert "down: search" in message and "answering: ingest" in message, message

        # What landed: the good writes and the one before revocation; nothing refused did.
        assert stack.ingest is not None
        async with stack.ingest.pool.acquire() as conn:  # type: ignore[union-attr]
            contents = {
                r["content"]
                for r in await conn.fetch(
                    "SELECT v.content FROM memories m JOIN workspaces w ON w.id = m.workspace_id "
                    "JOIN memory_versions v ON v.memory_id = m.id WHERE w.name = $1",
                    WORKSPACE,
                )
            }
        assert contents == {"before the outage", "written while search is down", "a second one", "still live"}
    finally:
        await stack.stop()
