"""One client for any OpenAI-compatible chat endpoint (OpenAI, Ollama, vLLM…): harvest's summarizer
and consolidation's drafter both ask it for one answer to a system prompt and a user message."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_random_exponential


def shown_url(url: str) -> str:
    """What errors, logs and status may show of an endpoint: scheme, host, port and path, never the
    credentials a URL can carry (user:password@, a key in the query string)."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class ChatFailed(Exception):
    """No answer: the endpoint was unreachable for the whole timeout, refused, or answered nothing usable."""


class ChatClient:
    """POSTs `/chat/completions`; a connection failure is retried with backoff until `timeout_s`."""

    def __init__(self, url: str, model: str, api_key: str, timeout_s: float) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.shown_url = shown_url(url.rstrip("/"))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s)

    async def complete(self, system: str, user: str, temperature: float) -> str:
        """The model's answer, stripped; ChatFailed when there is none."""
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": temperature,
        }
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(self.timeout_s),
                wait=wait_random_exponential(multiplier=0.5, max=5),
                retry=retry_if_exception_type(httpx.TransportError),
                reraise=True,
            ):
                with attempt:
                    response = await self._client.post("/chat/completions", json=body)
            response.raise_for_status()
            text = response.json()["choices"][0]["message"]["content"]
        except httpx.HTTPStatusError as exc:
            # Not the exception's own words: they quote the whole URL.
            raise ChatFailed(f"{self.shown_url} answered HTTP {exc.response.status_code}") from exc
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise ChatFailed(f"{self.shown_url}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(text, str) or not text.strip():
            raise ChatFailed(f"{self.shown_url} returned an empty answer")
        return text.strip()

    async def aclose(self) -> None:
        await self._client.aclose()
