"""Drill 10: an attacker with the database alone cuts the end off a workspace's audit chain (or
rewrites its anchor), and `mnemo audit verify` reports it; untouched chains still verify."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from mnemo_store import anchor_key_path, configure_anchor_key, open_pool, verify_chains
from tests.helpers import Postgres, mnemo, start_stack

# Workspaces of this test's own database.
VICTIM = "faults-audit-victim"
BYSTANDER = "faults-audit-bystander"


@pytest.fixture
async def stack(postgres: Postgres) -> AsyncIterator[Stack]:
    stack = await start_stack(await postgres.create_database("audit_tail"), HashEmbedder(64))
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        for name in (VICTIM, BYSTANDER):
            assert (await http.post("/api/v1/workspaces", json={"name": name})).status_code == 201
            for i in range(4):
                written = await http.post(
                    "/api/v1/memories", json={"workspace": name, "content": f"decision {i} of {name}"}
                )
                assert written.status_code == 201, written.text
    yield stack
    await stack.stop()


async def verify(stack: Stack, workspace: str) -> dict:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        answer = await http.get("/api/v1/audit/verify", params={"workspace": workspace})
    assert answer.status_code == 200, answer.text
    return answer.json()


async def as_attacker(stack: Stack, *statements: str) -> None:
    """SQL as someone who owns the database: the append-only triggers are no obstacle to them."""
    conn = await asyncpg.connect(stack.dsn)
    try:
        async with conn.transaction():
            await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER USER")
            for statement in statements:
                await conn.execute(statement)
            await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER USER")
    finally:
        await conn.close()


CUT_TAIL = (
    f"DELETE FROM audit_events WHERE id IN (SELECT e.id FROM audit_events e JOIN workspaces w "
    f"ON w.id = e.workspace_id WHERE w.name = '{VICTIM}' ORDER BY e.id DESC LIMIT 2)"
)


async def test_a_cut_off_tail_is_reported_and_untouched_chains_verify(stack: Stack) -> None:
    assert anchor_key_path(), "the stack's services anchor their chains"
    # Positive control: both chains verify, against their anchors, before the attack.
    for name in (VICTIM, BYSTANDER):
        result = await verify(stack, name)
        assert result["ok"] and result.get("anchored"), result

    await as_attacker(stack, CUT_TAIL)

    result = await verify(stack, VICTIM)
    assert not result["ok"]
    assert "removed from its end" in result["problem"] and "signed anchor says" in result["problem"], result
    code, out, _ = await mnemo(stack, "audit", "verify", "--workspace", VICTIM)
    assert code == 3 and "BROKEN" in out and "removed from its end" in out, out
    # The bystander's chain is untouched and still verifies (the control beside the refusal).
    assert (await verify(stack, BYSTANDER))["ok"]
    code, out, _ = await mnemo(stack, "audit", "verify", "--workspace", BYSTANDER)
    assert code == 0 and "match their signed anchors" in out, out

    # What the hash links alone say: the shorter chain is consistent, which is why the anchor exists.
    # (A pool as the services open it: the hashes cover jsonb details decoded by its codec.)
    pool = await open_pool(stack.dsn, 1, 1)
    key = anchor_key_path()
    try:
        configure_anchor_key(None)
        async with pool.acquire() as conn:
            assert (await verify_chains(conn)).ok
    finally:
        configure_anchor_key(key)
        await pool.close()

    # The next honest write does not sign over the damage.
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        written = await http.post("/api/v1/memories", json={"workspace": VICTIM, "content": "after the attack"})
        assert written.status_code == 201, written.text
    assert not (await verify(stack, VICTIM))["ok"]


async def test_an_anchor_rewritten_or_deleted_without_the_key_is_reported(stack: Stack) -> None:
    # Rolled back to fit the shortened chain, but signed with a key the attacker guessed.
    await as_attacker(
        stack,
        CUT_TAIL,
        f"""UPDATE audit_anchors a SET events = a.events - 2,
                   head_hash = (SELECT hash FROM audit_events WHERE workspace_id = a.workspace_id ORDER BY id DESC
                                LIMIT 1 OFFSET 0),
                   signature = repeat('0', 64)
            FROM workspaces w WHERE w.id = a.workspace_id AND w.name = '{VICTIM}'""",
    )
    result = await verify(stack, VICTIM)
    assert not result["ok"] and "not signed by the anchor key" in result["problem"], result
    # Deleting the anchor as well leaves a chain without one: reported too.
    await as_attacker(
        stack,
        f"DELETE FROM audit_anchors a USING workspaces w WHERE w.id = a.workspace_id AND w.name = '{VICTIM}'",
    )
    result = await verify(stack, VICTIM)
    assert not result["ok"] and "has no anchor" in result["problem"], result
    assert (await verify(stack, BYSTANDER))["ok"]
