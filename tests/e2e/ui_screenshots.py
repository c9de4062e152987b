"""Screenshots of the web UI's main pages for docs/ui/ (not a test: `uv run python -m tests.e2e.ui_screenshots`).

Starts an embedded PostgreSQL and a whole Mnemo in local mode, writes a few memories (one of them corrected, so its
page has a history) and open proposals, and saves the search (with explain), memory and review pages as PNG files,
taken by Debian's chromium at a laptop's 1280 by 800.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import async_playwright

from mnemo_embed import HashEmbedder
from tests.e2e.ui import launch_chromium
from tests.helpers import Postgres, start_stack

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "ui"
WORKSPACE = "payments-service"
NOTES: list[dict[str, Any]] = [
    {
        "title": "Why numpy is pinned below 2",
        "content": "We pin numpy<2 because the C extension in vendor/fastfft is built against the 1.x ABI. "
        "Unpin once fastfft publishes wheels for numpy 2.",
        "kind": "decision",
        "tags": ["deps", "build"],
    },
    {
        "title": "Flaky test: test_refund_timeout",
        "content": "test_refund_timeout fails about one run in twenty on CI because the fake clock is shared "
        "between workers; run it with -p no:xdist until the clock is per worker.",
        "kind": "lesson",
        "tags": ["ci", "tests"],
    },
    {
        "title": "Release process",
        "content": "Releases are cut from main on Tuesdays; the changelog is generated from merged PR titles.",
        "kind": "note",
        "tags": ["release"],
    },
]


async def _seed(http: httpx.AsyncClient) -> str:
    made = await http.post("/api/v1/workspaces", json={"name": WORKSPACE})
    made.raise_for_status()
    first = ""
    for note in NOTES:
        written = await http.post("/api/v1/memories", json={**note, "workspace": WORKSPACE})
        written.raise_for_status()
        first = first or written.json()["memory"]["id"]
    await asyncio.sleep(1.1)
    updated = await http.patch(
        f"/api/v1/memories/{first}",
        json={
            "workspace": WORKSPACE,
            "content": NOTES[0]["content"] + " The numpy 2 build was tried on 2026-11-30 and still fails to import.",
        },
    )
    updated.raise_for_status()
    await _propose(http, first)
    return str(first)


async def _propose(http: httpx.AsyncClient, memory_id: str) -> None:
    """Open proposals for the review queue's picture: a staged import (which opens its own accept_batch proposal)
    and two proposals on the pinned-numpy decision, over REST."""
    batch = await http.post(
        "/api/v1/imports", json={"source": "mcp-memory-service", "staged": True, "workspace": WORKSPACE}
    )
    batch.raise_for_status()
    items = [{"content": "Payment retries back off exponentially, capped at 30 s."}]
    staged = await http.post(
        f"/api/v1/imports/{batch.json()['batch']['id']}/memories:batch", json={"workspace": WORKSPACE, "items": items}
    )
    staged.raise_for_status()
    proposals = [
        {"kind": "confirm", "memory_ids": [memory_id], "reason": "Checked against vendor/fastfft's build: still true."},
        {"kind": "retract", "memory_ids": [memory_id], "reason": "Feedback: outdated, numpy 2 wheels may exist now."},
    ]
    for body in proposals:
        answer = await http.post("/api/v1/proposals", json={**body, "workspace": WORKSPACE})
        answer.raise_for_status()


async def main() -> None:
    from mnemo_store.embedded import open_server

    OUT.mkdir(parents=True, exist_ok=True)
    server = open_server(Path(tempfile.mkdtemp(prefix="mnemo-shots-")) / "pg", cleanup_mode="delete")
    try:
        postgres = Postgres(server.get_uri())
        stack = await start_stack(await postgres.create_database("shots"), HashEmbedder(64))
        try:
            async with httpx.AsyncClient(base_url=stack.base_url, timeout=60) as http:
                memory_id = await _seed(http)
            async with async_playwright() as playwright:
                browser = await launch_chromium(playwright)
                page = await browser.new_page(base_url=stack.base_url, viewport={"width": 1280, "height": 800})
                ws = f"workspace={WORKSPACE}"
                shots = {
                    "search.png": f"/ui/search?{ws}&q=numpy+pinned&explain=on",
                    "memory.png": f"/ui/memories/{memory_id}?{ws}",
                    "review.png": f"/ui/review?{ws}",
                }
                for name, path in shots.items():
                    await page.goto(path)
                    await page.screenshot(path=str(OUT / name), full_page=True)
                    print(f"wrote {OUT / name}")
                await browser.close()
        finally:
            await stack.stop()
    finally:
        server.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
