"""Tokens bound to roles and workspaces, enforced at the gateway and again by every service."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mnemo.search.v1 import search_service_pb2 as spb
from mnemo.search.v1 import search_service_pb2_grpc as sgrpc
from mnemo_embed import HashEmbedder
from mnemo_platform import SettingsError
from mnemo_platform.grpc_server import EXTRA_INTERCEPTORS
from mnemo_server.stack import Stack, StackConfig
from tests.helpers import Postgres, mcp_client, mnemo, stack_env, start_stack, tool_json


class MetadataRecorder(grpc.aio.ServerInterceptor):
    """Keeps the metadata of every call a service receives."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[override]
        self.seen.append({k: v for k, v in handler_call_details.invocation_metadata if isinstance(v, str)})
        return await continuation(handler_call_details)


@dataclass
class Secured:
    stack: Stack
    http: httpx.AsyncClient
    admin: str
    recorder: MetadataRecorder

    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async def token(self, role: str, *workspaces: str, principal: str = "") -> str:
        created = await self.http.post(
            "/api/v1/tokens",
            json={"principal": principal or f"{role}-bot", "role": role, "workspaces": list(workspaces)},
            headers=self.headers(self.admin),
        )
        assert created.status_code == 201, created.text
        return created.json()["secret"]


@pytest.fixture
async def secured(postgres: Postgres) -> AsyncIterator[Secured]:
    recorder = MetadataRecorder()
    EXTRA_INTERCEPTORS.append(recorder)
    try:
        stack = await start_stack(await postgres.create_database("auth"), HashEmbedder(64), MNEMO_AUTH="on")
    finally:
        EXTRA_INTERCEPTORS.remove(recorder)
    assert stack.bootstrap_token.startswith("mnemo_")
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        s = Secured(stack, http, stack.bootstrap_token, recorder)
        for name in ("alpha", "beta"):
            made = await http.post("/api/v1/workspaces", json={"name": name}, headers=s.headers(s.admin))
            assert made.status_code == 201, made.text
        yield s
    await stack.stop()


async def test_requests_without_a_live_token_are_refused(secured: Secured) -> None:
    s = secured
    missing = await s.http.get("/api/v1/workspaces")
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["error"]["code"] == "UNAUTHENTICATED"
    for bad in ("nonsense", "mnemo_aaaaaaaaaaaa_" + "x" * 43, s.admin[:-1] + ("A" if s.admin[-1] != "A" else "B")):
        refused = await s.http.get("/api/v1/workspaces", headers=s.headers(bad))
        assert refused.status_code == 401, bad
    mcp = await s.http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert mcp.status_code == 401
    # Positive control: the admin token works, and open paths need none.
    assert (await s.http.get("/api/v1/workspaces", headers=s.headers(s.admin))).status_code == 200
    for open_path in ("/healthz", "/readyz", "/metrics", "/api/v1/openapi.json"):
        assert (await s.http.get(open_path)).status_code == 200, open_path


async def test_an_agent_token_reaches_its_workspace_and_global_only(secured: Secured) -> None:
    s = secured
    agent = await s.token("agent", "alpha")
    admin = s.headers(s.admin)
    shared = await s.http.post(
        "/api/v1/memories",
        json={"workspace": "global", "content": "Shared convention: kingfisher naming."},
        headers=admin,
    )
    assert shared.status_code == 201, shared.text
    foreign = await s.http.post(
        "/api/v1/memories", json={"workspace": "beta", "content": "Beta secret plan: kingfisher launch."}, headers=admin
    )
    assert foreign.status_code == 201
    mine = await s.http.post(
        "/api/v1/memories", json={"content": "Alpha note: kingfisher tests."}, headers=s.headers(agent)
    )
    assert mine.status_code == 201 and mine.json()["memory"]["workspace_id"] == "alpha"  # its only workspace
    found = await s.http.post(
        "/api/v1/search", json={"query": "kingfisher", "mode": "lexical"}, headers=s.headers(agent)
    )
    assert found.status_code == 200
    assert {h["workspace_id"] for h in found.json()["results"]} == {"alpha", "global"}
    for method, path, body in (
        ("POST", "/api/v1/search", {"query": "kingfisher", "workspace": "beta"}),
        ("GET", f"/api/v1/memories/{foreign.json()['memory']['id']}?workspace=beta", None),
        ("GET", "/api/v1/memories?workspace=beta", None),
        ("POST", "/api/v1/memories", {"workspace": "beta", "content": "sneaky"}),
        ("POST", "/api/v1/memories", {"workspace": "global", "content": "agents cannot write global"}),
        ("GET", "/api/v1/audit?workspace=beta", None),
        ("POST", "/api/v1/search", {"query": "kingfisher", "workspace": "*"}),
        ("POST", "/api/v1/workspaces", {"name": "gamma"}),
        ("GET", "/api/v1/tokens", None),
    ):
        response = await s.http.request(method, path, json=body, headers=s.headers(agent))
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "PERMISSION_DENIED"
    listed = await s.http.get("/api/v1/workspaces", headers=s.headers(agent))
    assert {w["id"] for w in listed.json()["workspaces"]} == {"alpha", "global"}
    # The audit log names the token's principal, never a name from the request.
    audit = await s.http.get("/api/v1/audit?workspace=alpha", headers=s.headers(agent))
    assert [e["principal"] for e in audit.json()["events"] if e["action"] == "write"] == ["agent-bot"]
    # An admin may search every workspace, and the result says so.
    everything = await s.http.post("/api/v1/search", json={"query": "kingfisher", "workspace": "*"}, headers=admin)
    assert everything.json()["scope"] == "every workspace (admin)"
    assert {h["workspace_id"] for h in everything.json()["results"]} == {"alpha", "beta", "global"}


async def test_an_unknown_workspace_looks_like_a_foreign_one_to_an_agent(secured: Secured) -> None:
    # Otherwise a token could find out which names and project paths are registered by probing.
    s = secured
    agent = await s.token("agent", "alpha", principal="prober")
    answers = {}
    for ref in ("beta", "no-such-workspace", "/home/someone/secret-project"):
        response = await s.http.get("/api/v1/memories", params={"workspace": ref}, headers=s.headers(agent))
        assert response.status_code == 403, response.text
        error = response.json()["error"]
        answers[ref] = error["message"].replace(repr(ref), "<ref>")
        assert error["message"].startswith(f"this token (prober) may not touch workspace {ref!r}")
    assert len(set(answers.values())) == 1, answers
    # Positive controls: the agent's own workspace is read, and an admin learns that a name is unknown.
    assert (await s.http.get("/api/v1/memories?workspace=alpha", headers=s.headers(agent))).status_code == 200
    unknown = await s.http.get("/api/v1/memories?workspace=no-such-workspace", headers=s.headers(s.admin))
    assert unknown.status_code == 404 and "not registered" in unknown.json()["error"]["message"]


async def test_roles_gate_confirm_restore_and_purge(secured: Secured) -> None:
    s = secured
    agent, reviewer = await s.token("agent", "alpha"), await s.token("reviewer", "alpha")
    memory = (await s.http.post("/api/v1/memories", json={"content": "Confirm me."}, headers=s.headers(agent))).json()
    memory_id = memory["memory"]["id"]
    denied = await s.http.post(
        f"/api/v1/memories/{memory_id}/confirm", json={"workspace": "alpha"}, headers=s.headers(agent)
    )
    assert denied.status_code == 403 and "reviewer" in denied.json()["error"]["message"]
    confirmed = await s.http.post(
        f"/api/v1/memories/{memory_id}/confirm", json={"workspace": "alpha"}, headers=s.headers(reviewer)
    )
    assert confirmed.status_code == 200 and confirmed.json()["memory"]["status"] == "confirmed"
    deleted = await s.http.delete(f"/api/v1/memories/{memory_id}?workspace=alpha&reason=x", headers=s.headers(agent))
    assert deleted.status_code == 200
    assert (
        await s.http.post(
            f"/api/v1/memories/{memory_id}/restore", json={"workspace": "alpha"}, headers=s.headers(agent)
        )
    ).status_code == 403
    assert (
        await s.http.post(
            f"/api/v1/memories/{memory_id}/restore", json={"workspace": "alpha"}, headers=s.headers(reviewer)
        )
    ).status_code == 200
    purge = {"workspace": "alpha", "force": True}
    denied = await s.http.post(f"/api/v1/memories/{memory_id}/purge", json=purge, headers=s.headers(reviewer))
    assert denied.status_code == 403 and "admin" in denied.json()["error"]["message"]


async def test_mcp_carries_the_token_and_the_wall(secured: Secured) -> None:
    s = secured
    agent = await s.token("agent", "alpha")
    async with mcp_client(s.stack, token=agent) as client:
        written = await client.call_tool("memory_write", {"content": "An MCP note about ospreys."})
        assert not written.is_error and json.loads(written.content[0].text)["memory"]["workspace_id"] == "alpha"
        refused = await client.call_tool("memory_search", {"query": "ospreys", "workspace": "beta"})
        assert refused.is_error and "PERMISSION_DENIED" in refused.content[0].text


async def test_mcp_offers_no_wildcard_even_to_an_admin(secured: Secured) -> None:
    s = secured
    admin = s.headers(s.admin)
    for workspace in ("alpha", "beta"):
        body = {"workspace": workspace, "content": f"Heron survey notes for {workspace}."}
        assert (await s.http.post("/api/v1/memories", json=body, headers=admin)).status_code == 201
    async with mcp_client(s.stack, token=s.admin) as client:
        refused = await client.call_tool("memory_search", {"query": "heron", "workspace": "*"})
        assert refused.is_error and "PERMISSION_DENIED: searching every workspace" in refused.content[0].text
        one = await client.call_tool("memory_search", {"query": "heron", "workspace": "alpha", "mode": "lexical"})
        assert {r["workspace_id"] for r in tool_json(one)["results"]} == {"alpha"}  # positive control
    async with mcp_client(s.stack, workspace="*", token=s.admin) as client:
        refused = await client.call_tool("memory_search", {"query": "heron"})
        assert refused.is_error and "not offered over MCP" in refused.content[0].text
    # The same admin searches every workspace over REST, where the result says so.
    everything = await s.http.post("/api/v1/search", json={"query": "heron", "workspace": "*"}, headers=admin)
    assert {r["workspace_id"] for r in everything.json()["results"]} == {"alpha", "beta"}
    code, out, err = await mnemo(s.stack, "search", "heron", "--workspace", "*", "--json", token=s.admin)
    assert code == 0, err
    assert {r["workspace_id"] for r in json.loads(out)["results"]} == {"alpha", "beta"}


async def test_a_revoked_token_stops_at_once(secured: Secured) -> None:
    s = secured
    agent = await s.token("agent", "alpha")
    assert (await s.http.get("/api/v1/workspaces", headers=s.headers(agent))).status_code == 200
    token_id = agent.split("_")[1]
    revoked = await s.http.delete(f"/api/v1/tokens/{token_id}", headers=s.headers(s.admin))
    assert revoked.status_code == 200 and revoked.json()["token"]["revoked_at"]
    assert (await s.http.get("/api/v1/workspaces", headers=s.headers(agent))).status_code == 401
    listed = (await s.http.get("/api/v1/tokens", headers=s.headers(s.admin))).json()["tokens"]
    assert {t["id"]: bool(t["revoked_at"]) for t in listed}[token_id] is True
    assert all("secret" not in t for t in listed)


async def test_services_refuse_callers_without_a_signed_principal(secured: Secured) -> None:
    s = secured
    async with grpc.aio.insecure_channel(s.stack.search.target) as channel:
        stub = sgrpc.SearchServiceStub(channel)
        for metadata in (
            (),
            (("x-mnemo-principal", '{"p":"me","r":"admin","w":["*"],"t":"","exp":9999999999}'),),
            (
                ("x-mnemo-principal", '{"p":"me","r":"admin","w":["*"],"t":"","exp":9999999999}'),
                ("x-mnemo-signature", "0" * 64),
            ),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.ListWorkspaces(spb.ListWorkspacesRequest(), metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # Positive control: health needs no principal (probes carry none).
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_bearer_token_never_travels_past_the_gateway(secured: Secured) -> None:
    s = secured
    agent = await s.token("agent", "alpha", principal="osprey-agent")
    s.recorder.seen.clear()
    await s.http.post("/api/v1/memories", json={"content": "Token travel check."}, headers=s.headers(agent))
    await s.http.post("/api/v1/search", json={"query": "travel"}, headers=s.headers(agent))
    received = [m for m in s.recorder.seen if "x-mnemo-principal" in m]
    principals = [json.loads(m["x-mnemo-principal"])["p"] for m in received]
    assert "osprey-agent" in principals and all("x-mnemo-signature" in m for m in received)
    secret_part = agent.split("_", 2)[2]
    for metadata in s.recorder.seen:
        assert not any(secret_part in value or agent in value for value in metadata.values()), metadata
        assert "authorization" not in metadata


async def test_rate_limit_answers_429_with_retry_after(postgres: Postgres) -> None:
    stack = await start_stack(
        await postgres.create_database("auth_rate"), HashEmbedder(64), MNEMO_AUTH="on", MNEMO_RATE_LIMIT_PER_MIN="5"
    )
    try:
        async with httpx.AsyncClient(base_url=stack.base_url) as http:
            headers = {"Authorization": f"Bearer {stack.bootstrap_token}"}
            codes = [(await http.get("/api/v1/workspaces", headers=headers)).status_code for _ in range(6)]
            assert codes[:5] == [200] * 5 and codes[5] == 429
            limited = await http.get("/api/v1/workspaces", headers=headers)
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
            error = limited.json()["error"]
            assert (error["code"], error["reason"]) == ("RESOURCE_EXHAUSTED", "RATE_LIMITED")
            assert "MNEMO_RATE_LIMIT_PER_MIN" in error["message"]
    finally:
        await stack.stop()


def test_serving_beyond_loopback_without_auth_is_refused(postgres: Postgres) -> None:
    env = stack_env("postgresql://unused", MNEMO_HTTP_HOST="0.0.0.0")
    with pytest.raises(SettingsError, match="MNEMO_AUTH=on"):
        StackConfig.from_env(env)
    # Positive controls: with auth on, or explicitly unsafe, it starts.
    assert StackConfig.from_env({**env, "MNEMO_AUTH": "on"}).auth.enabled
    assert StackConfig.from_env({**env, "MNEMO_UNSAFE_NO_AUTH": "true"}).auth.unsafe_no_auth


async def test_cli_manages_tokens(secured: Secured) -> None:
    s = secured
    code, out, err = await mnemo(s.stack, "token", "create", "--role", "agent", "--workspace", "alpha", token=s.admin)
    assert code == 0, err
    secret = out.strip().splitlines()[-1]
    assert secret.startswith("mnemo_") and "shown only now" in out
    code, out, err = await mnemo(s.stack, "token", "list", token=s.admin)
    assert code == 0 and secret.split("_")[1] in out
    code, out, err = await mnemo(s.stack, "workspace", "list", token=secret)
    assert code == 0 and "alpha" in out and "beta" not in out
    code, out, err = await mnemo(s.stack, "token", "list", token=secret)
    assert code == 1 and "admin" in err
    code, out, err = await mnemo(s.stack, "status")
    assert code == 1 and "MNEMO_TOKEN" in err
    code, out, err = await mnemo(s.stack, "token", "revoke", secret.split("_")[1], token=s.admin)
    assert code == 0 and "revoked" in out


async def test_only_a_reviewer_promotes_to_global_and_it_is_audited(secured: Secured) -> None:
    s = secured
    agent, reviewer = await s.token("agent", "alpha"), await s.token("reviewer", "alpha", principal="rev")
    beta_agent = await s.token("agent", "beta")
    note = await s.http.post(
        "/api/v1/memories", json={"content": "Use uv for every Python project."}, headers=s.headers(agent)
    )
    memory_id = note.json()["memory"]["id"]
    body = {"workspace": "alpha", "reason": "a team-wide convention"}
    denied = await s.http.post(f"/api/v1/memories/{memory_id}/promote", json=body, headers=s.headers(agent))
    assert denied.status_code == 403 and "reviewer" in denied.json()["error"]["message"]
    # Before promotion beta does not see it; after, it does (through global), and alpha's copy is superseded.
    query = {"query": "uv Python project", "mode": "lexical"}
    before = await s.http.post("/api/v1/search", json=query, headers=s.headers(beta_agent))
    assert before.json()["results"] == []
    promoted = await s.http.post(f"/api/v1/memories/{memory_id}/promote", json=body, headers=s.headers(reviewer))
    assert promoted.status_code == 200, promoted.text
    shared = promoted.json()["promoted"]
    assert shared["workspace_id"] == "global" and promoted.json()["original"]["status"] == "superseded"
    after = await s.http.post("/api/v1/search", json=query, headers=s.headers(beta_agent))
    assert [r["id"] for r in after.json()["results"]] == [shared["id"]]
    mine = await s.http.post("/api/v1/search", json=query, headers=s.headers(agent))
    assert [r["id"] for r in mine.json()["results"]] == [shared["id"]]  # the superseded original is gone
    audit = await s.http.get("/api/v1/audit?workspace=global", headers=s.headers(s.admin))
    promote = [e for e in audit.json()["events"] if e["action"] == "promote"]
    assert len(promote) == 1 and promote[0]["principal"] == "rev" and promote[0]["memory_id"] == shared["id"]
    # What beta reads of the promoted copy (result, metadata, global's audit chain) names the original by id,
    # which beta cannot open, and never alpha, the workspace it came from.
    seen = [
        await s.http.get(f"/api/v1/memories/{shared['id']}?workspace=global", headers=s.headers(beta_agent)),
        await s.http.get("/api/v1/audit?workspace=global", headers=s.headers(beta_agent)),
    ]
    assert all(r.status_code == 200 for r in seen)
    assert seen[0].json()["metadata"]["promoted_from"] == memory_id
    assert memory_id in seen[1].text and "alpha" not in after.text + seen[0].text + seen[1].text
    original = await s.http.get(f"/api/v1/memories/{memory_id}?workspace=alpha", headers=s.headers(beta_agent))
    assert original.status_code == 403


async def test_roles_gate_the_review_routes(secured: Secured) -> None:
    """An agent proposes (REST and MCP) but neither reads the queue nor decides; a reviewer of the
    workspace does both; a reviewer of another workspace is answered as for an unknown id."""
    s = secured
    agent, reviewer = await s.token("agent", "alpha"), await s.token("reviewer", "alpha", principal="rev-alpha")
    outsider = await s.token("reviewer", "beta", principal="rev-beta")
    written = await s.http.post("/api/v1/memories", json={"content": "Review me."}, headers=s.headers(agent))
    memory_id = written.json()["memory"]["id"]
    body = {"kind": "confirm", "memory_ids": [memory_id], "reason": "checked by the agent"}
    proposed = await s.http.post("/api/v1/proposals", json=body, headers=s.headers(agent))
    assert proposed.status_code == 201, proposed.text
    proposal_id = proposed.json()["proposal"]["id"]
    async with mcp_client(s.stack, token=agent) as client:
        via_mcp = tool_json(
            await client.call_tool("memory_propose", {"kind": "retract", "memory_ids": [memory_id], "reason": "hm"})
        )
    assert via_mcp["proposal"]["source"] == "agent" and via_mcp["proposal"]["proposed_by"] == "agent-bot"

    decisions = [
        ("GET", "/api/v1/proposals", None),
        ("GET", f"/api/v1/proposals/{proposal_id}", None),
        ("POST", f"/api/v1/proposals/{proposal_id}/accept", {}),
        ("POST", f"/api/v1/proposals/{proposal_id}/reject", {"reason": "no"}),
        ("POST", f"/api/v1/proposals/{proposal_id}/reverse", {"reason": "no"}),
    ]
    for method, path, json_body in decisions:
        denied = await s.http.request(method, path, json=json_body, headers=s.headers(agent))
        assert denied.status_code == 403 and "needs the reviewer role" in denied.json()["error"]["message"], path
    unknown = "00000000-0000-4000-8000-000000000001"
    for method, path, json_body in decisions[1:3]:
        theirs = await s.http.request(method, path, json=json_body, headers=s.headers(outsider))
        none = await s.http.request(
            method, path.replace(proposal_id, unknown), json=json_body, headers=s.headers(outsider)
        )
        assert theirs.status_code == none.status_code == 404, (theirs.text, none.text)
        assert theirs.json()["error"]["message"].replace(proposal_id, "<id>") == none.json()["error"][
            "message"
        ].replace(unknown, "<id>")
    assert (await s.http.get("/api/v1/proposals", headers=s.headers(outsider))).json()["proposals"] == []
    still = await s.http.get(f"/api/v1/memories/{memory_id}", headers=s.headers(agent))
    assert still.json()["status"] == "active"  # nothing applied by any refusal

    listed = await s.http.get("/api/v1/proposals", params={"state": "open"}, headers=s.headers(reviewer))
    assert {p["id"] for p in listed.json()["proposals"]} == {proposal_id, via_mcp["proposal"]["id"]}
    accepted = await s.http.post(f"/api/v1/proposals/{proposal_id}/accept", json={}, headers=s.headers(reviewer))
    assert accepted.status_code == 200, accepted.text
    assert (
        accepted.json()["proposal"]["decided_by"] == "rev-alpha"
        and accepted.json()["memories"][0]["status"] == "confirmed"
    )
    reversed_ = await s.http.post(
        f"/api/v1/proposals/{proposal_id}/reverse", json={"reason": "premature"}, headers=s.headers(reviewer)
    )
    assert reversed_.status_code == 200 and reversed_.json()["proposal"]["reversed_by"] == "rev-alpha"
