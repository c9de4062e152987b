"""Writes in flight in this process, so that background work can give way to them.

An agent waits on its write; nobody waits on an embedding. On a small machine the model's batch
takes every core for a few hundred milliseconds, so a worker that starts one while a write is
being checked and committed slows that write down for nothing. The embedding workers of the same
process therefore start a model batch only once no single write has been in flight for a moment,
and wait at most a bounded time for that, so a steady stream of writes delays embedding but never
stops it.

A batch of writes (an import, a harvest) is told apart: it is bulk work whose backlog is what the
model is there for, and it leaves a core idle between its calls (the client, the gateway, the
ingest service and PostgreSQL taking turns: 4.4 of its 11 core-seconds in a 10,000-note import on
two cores, bench/write_rate.py). The model's batches, at a lower priority (mnemo_embed.local),
run in those gaps instead of after the import. The lexical poster still waits for batches too:
its statements run at PostgreSQL's normal priority, beside the import's own.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator

# Writes this close together count as one burst (a client sending its next batch, an agent
# writing several notes): the model waits for the burst, not for the gap inside it.
SETTLE_S = 0.25
# The longest background work waits for writes to pause: the few seconds it takes stay short of
# delaying an agent's notes noticeably.
PATIENCE_S = 10.0


class WriteActivity:
    def __init__(self) -> None:
        # By kind: single writes (False) and batches (True).
        self._in_flight = {False: 0, True: 0}
        self._last_end = {False: 0.0, True: 0.0}

    @contextlib.contextmanager
    def writing(self, batch: bool = False) -> Iterator[None]:
        self._in_flight[batch] += 1
        try:
            yield
        finally:
            self._in_flight[batch] -= 1
            self._last_end[batch] = asyncio.get_running_loop().time()

    def _quiet_for(self, now: float, kinds: tuple[bool, ...]) -> float:
        if any(self._in_flight[kind] for kind in kinds):
            return 0.0
        return now - max(self._last_end[kind] for kind in kinds)

    async def pause(self, settle: float = SETTLE_S, patience: float = PATIENCE_S, batches: bool = True) -> bool:
        """Returns once no write (no single write, with `batches` false) has been in flight for
        `settle` seconds (True), or after `patience` seconds of writes (False)."""
        kinds = (False, True) if batches else (False,)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while (quiet := self._quiet_for(loop.time(), kinds)) < settle:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(settle - quiet)
        return True


class BackgroundLoop(ABC):
    """One loop of background work that gives way to writes (the lexical poster, the grapher),
    started and stopped with the ingest service; a subclass's `_run` is the loop."""

    task_name = "background-loop"
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @abstractmethod
    async def _run(self) -> None: ...
