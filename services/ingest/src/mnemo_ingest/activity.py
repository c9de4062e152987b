"""Writes in flight in this process, so that background work can give way to them.

An agent waits on its write; nobody waits on an embedding. On a small machine the model's batch
takes every core for a few hundred milliseconds, so a worker that starts one while a write (or a
batch of a thousand) is being checked and committed slows that write down for nothing. The
embedding workers of the same process therefore start a model batch only once no write has
been in flight for a moment, and wait at most a bounded time for that, so a steady stream of
writes delays embedding but never stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

# Writes this close together count as one burst (a client sending its next batch, an agent
# writing several notes): the model waits for the burst, not for the gap inside it.
SETTLE_S = 0.25
# The longest a model batch waits for writes to pause: a bulk import commits first and is
# embedded after (its drain ends about as late either way), while the few seconds it takes stay
# short of delaying an agent's notes noticeably.
PATIENCE_S = 10.0


class WriteActivity:
    def __init__(self) -> None:
        self._in_flight = 0
        self._last_end = 0.0

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self._last_end = asyncio.get_running_loop().time()

    def _quiet_for(self, now: float) -> float:
        return 0.0 if self._in_flight else now - self._last_end

    async def pause(self, settle: float = SETTLE_S, patience: float = PATIENCE_S) -> bool:
        """Returns once no write has been in flight for `settle` seconds (True), or after `patience`
        seconds of writes (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while (quiet := self._quiet_for(loop.time())) < settle:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(settle - quiet)
        return True
