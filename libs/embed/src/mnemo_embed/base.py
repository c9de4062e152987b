"""The interface every embedder implements, and its readiness state."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np


class EmbedderUnavailable(Exception):
    """The embedder cannot embed right now (still loading, failed to load, endpoint down): nothing
    about the texts is wrong, and the same call may succeed later."""


class EmbedderRejected(Exception):
    """The embedder refused the texts themselves (an endpoint's 400, 413 or 422): one of them is
    bad, and asking again with the same texts will not help."""


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length vectors of a fixed dimension."""

    model: str
    """model is the name recorded with the vectors; a database built with another model is refused."""
    dimension: int
    """dimension is the length of every vector."""
    max_tokens: int
    """max_tokens is the model's window in its own tokens, special tokens included."""

    def count_tokens(self, text: str) -> int:
        """How many of the model's tokens `text` takes, without special tokens."""
        ...

    def start(self) -> None:
        """Begins loading in the background; returns at once. Idempotent."""
        ...

    @property
    def state(self) -> str:
        """`ready`, `loading`, or `failed: <reason>`."""
        ...

    async def wait_ready(self) -> None:
        """Returns once the embedder is ready; raises EmbedderUnavailable if loading failed."""
        ...

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        """One vector per text; raises EmbedderUnavailable when it cannot."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """The vector a search compares with the stored ones: `embed([text])[0]`, or an
        approximation of it the embedder computes faster (the local one's int8 graph)."""
        ...


class Readiness:
    """Tracks a background load: loading until `done()` or `fail()`."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._error: str | None = None
        self._started = False

    @property
    def started(self) -> bool:
        return self._started

    def begin(self) -> bool:
        """True the first time only: the caller should then start loading."""
        if self._started:
            return False
        self._started = True
        return True

    def done(self) -> None:
        self._event.set()

    def fail(self, reason: str) -> None:
        self._error = reason
        self._event.set()

    @property
    def state(self) -> str:
        if self._error is not None:
            return f"failed: {self._error}"
        if self._event.is_set():
            return "ready"
        return "loading" if self._started else "not started"

    async def wait(self) -> None:
        await self._event.wait()
        if self._error is not None:
            raise EmbedderUnavailable(self._error)

    def check(self) -> None:
        """Raises EmbedderUnavailable unless ready."""
        if self.state != "ready":
            raise EmbedderUnavailable(f"embedder {self.state}")


class EmbedderBase(ABC):
    """The lifecycle every embedder shares. One that loads something overrides start() and settles
    the readiness itself; one with nothing to load is ready as soon as it is started. Each says
    how it embeds (embed); a query is embedded as a text of its own unless it says otherwise."""

    def __init__(self) -> None:
        self._readiness = Readiness()

    def start(self) -> None:
        if self._readiness.begin():
            self._readiness.done()

    @property
    def state(self) -> str:
        return self._readiness.state

    async def wait_ready(self) -> None:
        await self._readiness.wait()

    @abstractmethod
    async def embed(self, texts: list[str]) -> list[np.ndarray]: ...

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed([text]))[0]
