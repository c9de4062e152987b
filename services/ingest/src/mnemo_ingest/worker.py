"""The embedding queue's workers: claim pending chunks, embed them in batches, never lose one."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import structlog

from mnemo_embed import Embedder, EmbedderUnavailable
from mnemo_embed.chunking import Chunk
from mnemo_ingest.settings import IngestSettings
from mnemo_store import EMBED_CHANNEL

log = structlog.get_logger("mnemo.ingest.worker")

_CLAIM = """
SELECT id, context, text FROM chunks
WHERE embed_status = 'pending' AND embed_after <= now()
ORDER BY embed_after, id
LIMIT $1
FOR UPDATE SKIP LOCKED
"""

_FAIL = """
UPDATE chunks SET
    embed_attempts = embed_attempts + 1,
    embed_error = $2,
    embed_status = CASE WHEN embed_attempts + 1 >= $3 THEN 'failed' ELSE 'pending' END,
    embed_after = now() + make_interval(secs => $4 * power(2, embed_attempts))
WHERE id = ANY($1::bigint[])
"""

_STORE = """
UPDATE chunks SET embedding = $2, embed_status = 'embedded', embed_model = $3, embedded_at = now(),
                  embed_error = NULL
WHERE id = $1
"""


class EmbeddingWorkers:
    """Worker tasks woken by LISTEN/NOTIFY, with a periodic rescan for anything a NOTIFY missed."""

    name = "embedding-workers"

    def __init__(
        self, pool: asyncpg.Pool, dsn: str, embedder: Embedder, settings: IngestSettings, batch_size: int
    ) -> None:
        self.pool = pool
        self.dsn = dsn
        self.embedder = embedder
        self.settings = settings
        self.batch_size = batch_size
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.embedded = 0

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._listen(), name="embed-listen"))
        for i in range(self.settings.embed_workers):
            self._tasks.append(asyncio.create_task(self._run(i), name=f"embed-worker-{i}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def wake(self, *_: Any) -> None:
        self._wake.set()

    async def _listen(self) -> None:
        """Keeps one LISTEN connection open, reconnecting after a drop; the rescan covers the gap."""
        while True:
            conn = None
            try:
                conn = await asyncpg.connect(self.dsn)
                await conn.add_listener(EMBED_CHANNEL, self.wake)
                self.wake()  # catch up on anything queued while we were not listening
                closed = asyncio.Event()
                conn.add_termination_listener(lambda _, closed=closed: closed.set())
                await closed.wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("embed_listen_failed", error=str(exc))
                await asyncio.sleep(min(5.0, self.settings.embed_rescan_s))
            finally:
                if conn is not None and not conn.is_closed():
                    await conn.close()

    async def _run(self, index: int) -> None:
        try:
            await self.embedder.wait_ready()
        except EmbedderUnavailable as exc:
            # Chunks stay `pending` (lexical search still finds them); status reports the reason.
            log.error("embed_worker_idle", reason=str(exc))
            return
        log.info("embed_worker_started", worker=index)
        while True:
            self._wake.clear()
            try:
                if await self._process_batch():
                    continue
                delay = await self._next_due_in()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("embed_batch_failed")
                delay = min(5.0, self.settings.embed_rescan_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _next_due_in(self) -> float:
        """Seconds until the earliest retry is due, at most the rescan interval."""
        seconds = await self.pool.fetchval(
            "SELECT EXTRACT(EPOCH FROM min(embed_after) - now()) FROM chunks WHERE embed_status = 'pending'"
        )
        if seconds is None:
            return self.settings.embed_rescan_s
        return max(0.05, min(float(seconds), self.settings.embed_rescan_s))

    async def _process_batch(self) -> int:
        """Embeds one claimed batch; returns how many chunks were claimed (0: queue empty)."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(_CLAIM, self.batch_size)
            if not rows:
                return 0
            inputs = [Chunk(0, r["context"], r["text"]).embedding_input() for r in rows]
            try:
                vectors = await self.embedder.embed(inputs)
                pairs = list(zip(rows, vectors, strict=True))
            except EmbedderUnavailable as exc:
                # The embedder as a whole is down: every chunk waits and counts an attempt.
                await self._record_failure(conn, [r["id"] for r in rows], str(exc))
                return len(rows)
            except Exception:
                # Something in the batch broke the model: embed one by one so only the culprit fails.
                pairs = []
                for row, text in zip(rows, inputs, strict=True):
                    try:
                        pairs.append((row, (await self.embedder.embed([text]))[0]))
                    except Exception as exc:
                        await self._record_failure(conn, [row["id"]], f"{type(exc).__name__}: {exc}")
            try:
                async with conn.transaction():  # a savepoint: a bad vector must not lose the failure records
                    await conn.executemany(_STORE, [(row["id"], vector, self.embedder.model) for row, vector in pairs])
            except asyncpg.PostgresError as exc:
                await self._record_failure(conn, [row["id"] for row, _ in pairs], f"storing vectors: {exc}")
                return len(rows)
            self.embedded += len(pairs)
            log.debug("chunks_embedded", count=len(pairs))
            return len(rows)

    async def _record_failure(self, conn: asyncpg.Connection, ids: list[int], error: str) -> None:
        await conn.execute(_FAIL, ids, error[:2000], self.settings.embed_max_attempts, self.settings.embed_backoff_s)
        log.warning("chunks_embed_failed", count=len(ids), error=error[:300])
