"""An embedder for any OpenAI-compatible /v1/embeddings endpoint (OpenAI, Ollama, vLLM, TEI)."""

from __future__ import annotations

import math

import httpx
import numpy as np
import structlog
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_random_exponential,
)

from mnemo_embed.base import EmbedderBase, EmbedderRejected, EmbedderUnavailable
from mnemo_platform.chat import shown_url

log = structlog.get_logger("mnemo.embed")


# What an endpoint answers when the input itself is wrong (malformed, too long, unprocessable): the
# batch is split by the worker so only the culprit fails. Any other answer (401, 404, 429, 5xx, no
# answer) is the endpoint's state, not the text's.
REJECTED_STATUSES = (400, 413, 422)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return False


class OpenAIEmbedder(EmbedderBase):
    """POSTs batches to `<url>/embeddings`; vectors are normalised to unit length.

    Nothing to load locally: it is ready once started; reachability is checked and reported per call.
    """

    def __init__(
        self,
        url: str,
        model: str,
        dimension: int,
        max_tokens: int = 512,
        api_key: str = "",
        timeout_s: float = 30.0,
    ) -> None:
        super().__init__()
        self.url = url.rstrip("/")
        # What errors, logs and status may show of the endpoint: never credentials in the URL
        # (user:password@, or a key in the query string).
        self.shown_url = shown_url(self.url)
        self.model = model
        self.dimension = dimension
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout_s)

    def count_tokens(self, text: str) -> int:
        # Without the remote tokenizer, over-estimate: BPE tokenizers average ~4 bytes a token
        # on English, so bytes/3 keeps chunks inside the window rather than truncated.
        return math.ceil(len(text.encode("utf-8")) / 3)

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        self._readiness.check()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_delay(self.timeout_s),
                wait=wait_random_exponential(multiplier=0.2, max=2),
                retry=retry_if_exception(_retryable),
                reraise=True,
            ):
                with attempt:
                    response = await self._client.post("/embeddings", json={"model": self.model, "input": texts})
                    response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            # Not the exception's own words: they quote the whole request URL.
            if exc.response.status_code in REJECTED_STATUSES:
                raise EmbedderRejected(
                    f"embedding endpoint {self.shown_url} refused the input: HTTP {exc.response.status_code}"
                ) from exc
            raise EmbedderUnavailable(
                f"embedding endpoint {self.shown_url} answered HTTP {exc.response.status_code}"
            ) from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise EmbedderUnavailable(f"embedding endpoint {self.shown_url}: {type(exc).__name__}: {exc}") from exc
        return self._parse(response, len(texts))

    def _parse(self, response: httpx.Response, expected: int) -> list[np.ndarray]:
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [np.asarray(item["embedding"], dtype=np.float32) for item in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderUnavailable(f"embedding endpoint {self.shown_url} answered malformed JSON: {exc}") from exc
        if len(vectors) != expected:
            raise EmbedderUnavailable(f"embedding endpoint returned {len(vectors)} vectors for {expected} texts")
        out = []
        for vector in vectors:
            if vector.shape != (self.dimension,):
                raise EmbedderUnavailable(
                    f"embedding endpoint returned {vector.shape[0]} dimensions; "
                    f"MNEMO_EMBED_DIMENSION is {self.dimension}"
                )
            norm = float(np.linalg.norm(vector))
            out.append(vector / norm if norm else vector)
        return out

    async def aclose(self) -> None:
        await self._client.aclose()
