"""Helpers for the web UI's tests: Debian's chromium under Playwright, and a signed-in HTTP client."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Browser, Playwright

CHROMIUM = Path("/usr/bin/chromium")
# Playwright's own browser download cannot work here (no internet but package registries): Debian's chromium,
# which .ci/run installs when missing.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


async def launch_chromium(playwright: Playwright) -> Browser:
    """The browser the UI tests drive; a missing chromium fails the test (never a skip)."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)"
    return await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, html[:2000]
    return found.group(1)


class UiClient:
    """One browser-like HTTP session on the UI: its cookie jar, and the Origin a page of the gateway sends."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.AsyncClient(base_url=base_url, timeout=60)
        self.csrf = ""

    async def close(self) -> None:
        await self.http.aclose()

    @property
    def origin(self) -> dict[str, str]:
        return {"Origin": self.base_url}

    async def sign_in(self, token: str) -> httpx.Response:
        page = await self.http.get("/ui/login")
        assert page.status_code == 200, page.text
        answer = await self.http.post(
            "/ui/login", data={"csrf": csrf_of(page.text), "token": token}, headers=self.origin
        )
        if answer.status_code == 303:
            self.csrf = csrf_of((await self.http.get("/ui/search")).text)
        return answer

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.http.get(path, params=params)

    async def post(self, path: str, data: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.http.post(path, data=data, headers=self.origin if headers is None else headers)
