"""Harvest through the gateway: REST routes, the MCP tool and the CLI, against the real services."""

from __future__ import annotations

import json
import re

import httpx
from mcp.client.client import Client

from tests.harvest.agents import conversation
from tests.harvest.harness import Harvest, register
from tests.helpers import mcp_url, mnemo, tool_json


async def harvest_outcomes(http: httpx.AsyncClient) -> dict[str, float]:
    """mnemo_harvest_sessions_total by outcome, scraped from the gateway's /metrics."""
    text = (await http.get(str(http.base_url.join("/metrics")))).text
    found = re.findall(r'^mnemo_harvest_sessions_total\{outcome="(\w+)"\} (\S+)$', text, re.MULTILINE)
    return {outcome: float(value) for outcome, value in found}


async def test_rest_runs_harvest_and_reports_it(harvest: Harvest) -> None:
    (ws,) = await register(harvest, "/work/rest")
    done = conversation(harvest.projects, "/work/rest", "dunlin").write()
    active = conversation(harvest.projects, "/work/rest", "sanderling").write(age_s=0)
    async with httpx.AsyncClient(base_url=harvest.stack.base_url + "/api/v1") as http:
        before = await harvest_outcomes(http)
        response = await http.post("/harvest/run", json={})
        assert response.status_code == 200 and response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.text.splitlines()]
        by_session = {line["session_id"]: line for line in lines[:-1]}
        assert by_session[done.session_id]["outcome"] == "harvested" and by_session[done.session_id]["memory_id"]
        assert by_session[active.session_id]["outcome"] == "skipped"
        assert lines[-1]["done"] and lines[-1]["harvested"] == 1 and lines[-1]["total"] == 2
        # The outcomes are counted in the process's metrics (one process here, as under `mnemo up`:
        # the gateway's /metrics carries the harvest service's series).
        after = await harvest_outcomes(http)
        assert {k: after.get(k, 0) - before.get(k, 0) for k in ("harvested", "skipped", "failed")} == {
            "harvested": 1,
            "skipped": 1,
            "failed": 0,
        }

        # ignore_idle takes the active one too.
        now = [
            json.loads(line) for line in (await http.post("/harvest/run", json={"ignore_idle": True})).text.splitlines()
        ]
        assert {n["session_id"]: n["outcome"] for n in now[:-1]}[active.session_id] == "harvested"

        status = (await http.get("/harvest/status")).json()
        claude = next(a for a in status["agents"] if a["agent"] == "claude-code")
        assert claude["enabled"] and claude["harvested"] == 2 and claude["roots"] == [str(harvest.projects)]
        assert not next(a for a in status["agents"] if a["agent"] == "codex")["enabled"]
        assert status["archive_bytes"] > 0 and status["last_run_at"]

        sources = (await http.get("/harvest/sources", params={"state": "harvested"})).json()["sources"]
        assert {s["session_id"] for s in sources} == {done.session_id, active.session_id}
        assert all(s["workspace_id"] == ws and s["path"].endswith(".jsonl") for s in sources)

        # Bad input: a clear 4xx with a JSON body, and nothing run.
        bad_agent = await http.post("/harvest/run", json={"agent": "vim"})
        assert bad_agent.status_code == 400 and "agent" in bad_agent.text
        off = await http.post("/harvest/run", json={"agent": "codex"})
        assert off.status_code == 400 and "not harvested here" in off.json()["error"]["message"]
        bad_state = await http.get("/harvest/sources", params={"state": "eaten"})
        assert bad_state.status_code == 400 and "state must be one of" in bad_state.json()["error"]["message"]


async def test_mcp_tool_reports_harvest_status(harvest: Harvest) -> None:
    await register(harvest, "/work/mcp")
    conversation(harvest.projects, "/work/mcp", "knot").write()
    conversation(harvest.projects, "/work/nowhere", "ruff").write()
    await harvest.run()
    async with Client(mcp_url(harvest.stack, "/work/mcp")) as client:
        status = tool_json(await client.call_tool("memory_harvest_status", {}))
        # What reaches the model: harvested text framed as quoted data, an agent's own note not.
        tool_json(await client.call_tool("memory_write", {"content": "Our own note: knot job is fine."}))
        found = tool_json(await client.call_tool("memory_search", {"query": "knot job", "mode": "lexical"}))
        by_provenance = {r["provenance"]: r for r in found["results"]}
        session = by_provenance["harvested_transcript"]
        assert session["snippet"].startswith("<quoted-data source='harvested_transcript'")
        assert session["snippet"].endswith("</quoted-data>") and "by harvest in" in session["label"]
        assert not by_provenance["agent"]["snippet"].startswith("<quoted-data")
        got = tool_json(await client.call_tool("memory_get", {"id": session["id"]}))
        assert got["content"].startswith("<quoted-data source='harvested_transcript'")
    claude = next(a for a in status["agents"] if a["agent"] == "claude-code")
    assert claude["harvested"] == 1 and claude["skipped"] == {"no-workspace": 1}
    assert status["unregistered"] == ["/work/nowhere"]
    assert [a["agent"] for a in status["agents"]] == ["claude-code", "codex", "opencode", "pi"]


async def test_cli_harvest_run_and_status(harvest: Harvest) -> None:
    await register(harvest, "/work/cli")
    session = conversation(harvest.projects, "/work/cli", "whimbrel").write()
    code, out, err = await mnemo(harvest.stack, "harvest", "run", "--once")
    assert code == 0, err
    assert f"harvested    claude-code  {session.session_id}" in out
    assert "1 sessions: 1 harvested, 0 skipped, 0 failed" in out
    code, out, err = await mnemo(harvest.stack, "harvest", "run", "--json")
    assert code == 0, err
    assert json.loads(out)["sessions"][0]["outcome"] == "unchanged"
    code, out, err = await mnemo(harvest.stack, "harvest", "status")
    assert code == 0, err
    assert "claude-code  on  seen 1     harvested 1" in out and f"roots: {harvest.projects}" in out
    code, out, err = await mnemo(harvest.stack, "harvest", "run", "--agent", "vim")
    assert code == 2 and "invalid choice" in err


async def test_status_names_failed_sessions_with_their_error(harvest: Harvest) -> None:
    await register(harvest, "/work/fail")
    fine = conversation(harvest.projects, "/work/fail", "stint").write()
    assert (await harvest.outcome(fine.session_id)).outcome == "harvested"
    # Ingest goes down: the next session cannot be written, and says so.
    await harvest.stack.ingest.stop()
    broken = conversation(harvest.projects, "/work/fail", "godwit").write()
    failed = await harvest.outcome(broken.session_id)
    assert failed.outcome == "failed" and failed.detail.startswith("ingest: UNAVAILABLE")
    async with httpx.AsyncClient(base_url=harvest.stack.base_url + "/api/v1") as http:
        status = (await http.get("/harvest/status")).json()
    claude = next(a for a in status["agents"] if a["agent"] == "claude-code")
    assert claude["failed"] == 1 and claude["harvested"] == 1
    assert [(f["session_id"], f["state"]) for f in claude["failures"]] == [(broken.session_id, "failed")]
    assert claude["failures"][0]["detail"].startswith("ingest: UNAVAILABLE")
    code, out, err = await mnemo(harvest.stack, "harvest", "status")
    assert code == 0, err
    assert f"failed {broken.session_id}: ingest: UNAVAILABLE" in out
    code, out, _ = await mnemo(harvest.stack, "harvest", "run")
    assert code == 1 and "1 failed" in out
