"""`mnemo review list|show|accept|reject|reverse` and `mnemo propose` against a running gateway."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from mnemo_server.stack import Stack
from tests.e2e.test_cli_corrections import fails, ok, together, written

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_propose_list_show_accept_reverse_reject(hash_stack: Stack) -> None:
    ws = f"cli-review-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as http:
        assert (await http.post("/api/v1/workspaces", json={"name": ws})).status_code == 201
    memory = await written(hash_stack, ws, "The billing service retries webhooks five times.")
    other = await written(hash_stack, ws, "Webhooks are retried 5 times by billing.")
    proposed = json.loads(
        await ok(hash_stack, "propose", "confirm", memory["id"], "--reason", "checked", "-w", ws, "--json")
    )
    proposal = proposed["proposal"]
    assert proposal["source"] == "human" and proposal["state"] == "open"
    merge = json.loads(
        await ok(hash_stack, "propose", "merge", memory["id"], other["id"], "--reason", "dupes", "-w", ws, "--json")
    )["proposal"]

    listed, shown = await together(
        hash_stack, ("review", "list", "-w", ws, "--state", "open"), ("review", "show", proposal["id"], "-w", ws)
    )
    assert listed[0] == 0 and proposal["id"] in listed[1] and merge["id"] in listed[1], listed
    assert shown[0] == 0 and memory["id"] in shown[1] and "checked" in shown[1], shown

    out = await ok(hash_stack, "review", "accept", proposal["id"])
    assert "applied" in out and "confirmed" in out
    err = await fails(hash_stack, "review", "accept", proposal["id"])
    assert "applied" in err
    out = await ok(hash_stack, "review", "reverse", proposal["id"], "--reason", "not yet")
    assert "reversed" in out and "active" in out
    # A memory of the merge is edited: the merge is stale, refused, then rejected.
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as http:
        edited = await http.patch(
            f"/api/v1/memories/{other['id']}", json={"workspace": ws, "content": "Billing retries webhooks 6 times."}
        )
        assert edited.status_code == 200, edited.text
    err = await fails(hash_stack, "review", "accept", merge["id"])
    assert "stale" in err, err
    out = await ok(hash_stack, "review", "reject", merge["id"], "--reason", "stale")
    assert "rejected" in out
    err = await fails(hash_stack, "review", "accept", str(uuid.uuid4()))
    assert "no proposal" in err
    code, _, err = (await together(hash_stack, ("review", "reject", merge["id"])))[0]
    assert code == 2 and "--reason" in err  # required by the parser
    listed_out = await ok(hash_stack, "review", "list", "-w", ws, "--kind", "merge", "--json")
    assert [p["state"] for p in json.loads(listed_out)["proposals"]] == ["rejected"]
