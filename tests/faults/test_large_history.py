"""A memory whose versions together pass gRPC's 16 MiB message limit: its history comes in pages,
over REST, MCP and the CLI, and a message-size failure is never reported as rate limiting (429)."""

from __future__ import annotations

import json
import time

import grpc
import httpx

from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo.search.v1 import search_service_pb2_grpc as search_grpc
from mnemo_gateway.errors import CallError
from mnemo_platform import current_call
from mnemo_server.stack import Stack
from tests.helpers import mcp_client, mnemo

WORKSPACE = "faults-history-large"
VERSIONS = 18
VERSION_BYTES = 1_000_000  # just under the default MNEMO_MAX_CONTENT_BYTES (1 MiB): 18 MB in all


def version_text(n: int) -> str:
    words = " ".join(f"v{n}w{i}" for i in range(VERSION_BYTES // 9))
    return f"version {n} " + words[: VERSION_BYTES - 20]


async def test_a_history_beyond_the_message_limit_comes_in_pages(hash_stack: Stack) -> None:
    stack = hash_stack
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=120) as http:
        assert (await http.post("/api/v1/workspaces", json={"name": WORKSPACE})).status_code in (200, 201)
        started = time.perf_counter()
        for n in range(1, VERSIONS + 1):
            written = await http.post(
                "/api/v1/memories",
                json={"workspace": WORKSPACE, "content": version_text(n), "source_uri": "file:///big.md"},
            )
            assert written.status_code in (200, 201), written.text
        memory_id = written.json()["memory"]["id"]
        print(f"{VERSIONS} versions of {VERSION_BYTES} bytes written in {time.perf_counter() - started:.1f} s")

        # REST: the default pages (4 MiB of text each) hold every version once, in order.
        pages, versions, token = [], [], ""
        while True:
            page = await http.get(
                f"/api/v1/memories/{memory_id}/history",
                params={"workspace": WORKSPACE, **({"page_token": token} if token else {})},
            )
            assert page.status_code == 200, page.text[:300]
            body = page.json()
            pages.append(body)
            versions += [v["version"] for v in body["versions"]]
            token = body["next_page_token"]
            if not token:
                break
        assert versions == list(range(1, VERSIONS + 1))
        assert len(pages) == 4, len(pages)  # 18 MB in pages of under 4 MiB plus one version: 5 of 1 MB each
        assert all(len(json.dumps(p["versions"])) < 6_000_000 for p in pages)
        assert pages[0]["states"] and pages[0]["events"]  # the first page carries the status spans and events
        assert not pages[1]["states"] and not pages[1]["events"]
        # page_size bounds a page by count as well; a forged token is refused, not misread.
        two = (
            await http.get(f"/api/v1/memories/{memory_id}/history", params={"workspace": WORKSPACE, "page_size": 2})
        ).json()
        assert [v["version"] for v in two["versions"]] == [1, 2] and two["next_page_token"] == "2"
        forged = await http.get(
            f"/api/v1/memories/{memory_id}/history", params={"workspace": WORKSPACE, "page_token": "x1"}
        )
        assert forged.status_code == 400, forged.text

    # MCP: the same pages, through the tool's page_token.
    async with mcp_client(stack, WORKSPACE) as client:
        first = json.loads((await client.call_tool("memory_history", {"id": memory_id})).content[0].text)
        assert first["next_page_token"] and first["versions"][0]["version"] == 1
        second = json.loads(
            (await client.call_tool("memory_history", {"id": memory_id, "page_token": first["next_page_token"]}))
            .content[0]
            .text
        )
        assert second["versions"][0]["version"] == first["versions"][-1]["version"] + 1

    # The CLI follows the pages and shows the history whole.
    code, out, err = await mnemo(stack, "history", memory_id, "--workspace", WORKSPACE)
    assert code == 0, err
    assert all(f"  v{n} by" in out for n in range(1, VERSIONS + 1)), out[-500:]


async def test_a_message_over_the_limit_is_not_reported_as_rate_limiting(hash_stack: Stack) -> None:
    """A real oversized answer (a channel whose limit is below one history page) becomes INTERNAL
    (500) with advice, never RESOURCE_EXHAUSTED (429)."""
    stack = hash_stack
    assert stack.search is not None
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        written = await http.post("/api/v1/memories", json={"workspace": WORKSPACE, "content": "x " * 40_000})
        assert written.status_code == 201, written.text
    memory_id = written.json()["memory"]["id"]
    request = search_pb.GetHistoryRequest(workspace=WORKSPACE, id=memory_id)
    metadata = current_call().metadata()
    async with grpc.aio.insecure_channel(
        stack.search.target, options=[("grpc.max_receive_message_length", 32 * 1024)]
    ) as small:
        try:
            await search_grpc.SearchServiceStub(small).GetHistory(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # what gRPC itself says
            error = CallError.of_rpc(exc)
        else:
            raise AssertionError("a 80 kB answer passed a 32 kB limit")
    assert error.code == grpc.StatusCode.INTERNAL and error.http_status == 500
    assert "smaller pages" in error.message
    # Positive control: the same call on a channel with the usual limit answers.
    async with grpc.aio.insecure_channel(stack.search.target) as usual:
        answer = await search_grpc.SearchServiceStub(usual).GetHistory(request, metadata=metadata, timeout=10)
    assert answer.versions[0].content.startswith("x x")
    # A rate limit is still a 429: the mapping only moved gRPC's own size error.
    limited = CallError.of_rpc(_Failed(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit"))
    assert limited.http_status == 429


class _Failed(grpc.aio.AioRpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)
