"""The embedding queue's workers: claim pending chunks, embed them in batches, never lose one.

A worker keeps the model busy: while it runs on one batch, the next is claimed (and the one
before stored), and no transaction or row lock is held during inference. The queue's SQL, and
why it never waits for a row lock, is mnemo_store.embed_queue's.

Two kinds of failure are told apart. The embedder being unavailable (a model that failed to
load, an endpoint down) says nothing about the chunks: they wait, however long the outage, and
the workers try again after a wait that doubles up to MNEMO_EMBED_OUTAGE_MAX_DELAY_S. A batch
the embedder refuses (an endpoint's 400, a model error) is split, so only the chunk at fault
counts attempts, and after MNEMO_EMBED_MAX_ATTEMPTS it is `failed`; failed chunks are queued
again after MNEMO_EMBED_FAILED_RETRY_S, or at once by `mnemo embed retry`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import asyncpg
import structlog

from mnemo_embed import Embedder, EmbedderUnavailable
from mnemo_embed.chunking import Chunk
from mnemo_ingest.activity import WriteActivity
from mnemo_ingest.settings import IngestSettings
from mnemo_platform.errors import UNAVAILABLE_ERRORS, describe_error
from mnemo_platform.metrics import chunks_embedded, set_queue
from mnemo_platform.telemetry import background_span, untraced
from mnemo_store import EMBED_CHANNEL, embed_queue

log = structlog.get_logger("mnemo.ingest.worker")

# A queue row held by a writing transaction (one moving its chunk in or out of the search
# indexes) is tried again this many times, after 0.05, 0.1, 0.2 … s; then it stays leased and
# comes back when the lease ends.
STORE_TRIES = 6
LISTEN_CLOSE_TIMEOUT_S = 2.0


# How often the queue's depth and oldest age are sampled for the metrics.
QUEUE_SAMPLE_S = 2.0


class EmbeddingWorkers:
    """Worker tasks woken by LISTEN/NOTIFY, with a periodic rescan for anything a NOTIFY missed."""

    name = "embedding-workers"

    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        embedder: Embedder,
        settings: IngestSettings,
        batch_size: int,
        activity: WriteActivity | None = None,
    ) -> None:
        self.pool = pool
        self.activity = activity or WriteActivity()
        self.dsn = dsn
        self.embedder = embedder
        self.settings = settings
        self.batch_size = batch_size
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.embedded = 0
        # While the embedder is unavailable: since when, and the wait before the next try.
        self._outage_since: float | None = None
        self._outage_delay = 0.0
        # Leased chunks whose release failed (the database was what broke): released at the next drain.
        self._owed: set[int] = set()
        # Leases of claims whose answer never came (_claim): what they took is handed back by lease.
        self._owed_leases: set[uuid.UUID] = set()
        self._draining = 0

    @property
    def embedding(self) -> bool:
        """Whether a worker is draining the queue (the model busy with it, or about to be)."""
        return self._draining > 0

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._listen(), name="embed-listen"))
        for i in range(self.settings.embed_workers):
            self._tasks.append(asyncio.create_task(self._run(i), name=f"embed-worker-{i}"))
        if self.settings.embed_failed_retry_s > 0:
            self._tasks.append(asyncio.create_task(self._requeue_failed(), name="embed-requeue-failed"))
        self._tasks.append(asyncio.create_task(self._sample_queue(), name="embed-queue-sampler"))

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
                with background_span("embed.listen"):
                    conn = await asyncpg.connect(self.dsn)
                    await conn.add_listener(EMBED_CHANNEL, self.wake)
                self.wake()  # catch up on anything queued while we were not listening
                closed = asyncio.Event()
                conn.add_termination_listener(lambda _, closed=closed: closed.set())
                await closed.wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("embed_listen_failed", error=describe_error(exc))
                await asyncio.sleep(min(5.0, self.settings.embed_rescan_s))
            finally:
                if conn is not None and not conn.is_closed():
                    # Bounded: on a network path that died silently a graceful close never returns
                    # (asyncpg aborts the connection when the timeout passes).
                    with contextlib.suppress(Exception):
                        await conn.close(timeout=LISTEN_CLOSE_TIMEOUT_S)

    async def _run(self, index: int) -> None:
        try:
            await self.embedder.wait_ready()
        except EmbedderUnavailable as exc:
            # Chunks stay `pending` (lexical search still finds them); status reports the reason.
            log.error("embed_worker_idle", reason=str(exc))
            return
        log.info("embed_worker_started", worker=index)
        while True:
            if self._outage_since is not None:
                # New writes do not wake a worker during an outage: each try costs the endpoint's
                # whole timeout, and the chunks are safe where they are.
                await asyncio.sleep(self._outage_delay)
            self._wake.clear()
            try:
                with background_span("embed.drain", worker=index) as span:
                    self._draining += 1
                    try:
                        taken = await self._drain()
                    finally:
                        self._draining -= 1
                    span.set_attribute("mnemo.chunks", taken)
                    again = bool(taken) and self._outage_since is None
                    if not again:
                        delay = await self._next_due_in()
                if again:
                    continue
            except asyncio.CancelledError:
                raise
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError) as exc:
                # The database is away (restarting, unreachable): one line, not a traceback a drain
                # loop would repeat every few seconds until it is back.
                log.warning("embed_batch_failed", error=describe_error(exc))
                delay = min(5.0, self.settings.embed_rescan_s)
            except Exception:
                log.exception("embed_batch_failed")
                delay = min(5.0, self.settings.embed_rescan_s)
            if self._outage_since is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _drain(self) -> int:
        """Embeds batches until the queue is empty; returns how many chunks were taken (0: nothing
        was due). The model never waits for the database: while it runs on one batch, the next is
        claimed and tokenised and the one before stored, and it starts on the next as soon as it
        is done."""
        taken = 0
        await self._settle_owed()
        batch = await self._claim()
        embedding = asyncio.create_task(self._embed(batch)) if batch else None
        while embedding is not None:
            taken += len(batch)
            try:
                following = await self._claim()
            except BaseException:
                await self._abandon(embedding, batch)
                raise
            # Started at once, so the next batch's texts are tokenised while the model runs on this
            # one; the model still takes one batch at a time (the embedder queues its runs).
            upcoming = asyncio.create_task(self._embed(following)) if following else None
            try:
                pairs = await embedding
            except BaseException as exc:
                if upcoming is not None:
                    await self._abandon(upcoming, following)
                if not isinstance(exc, asyncio.CancelledError):
                    await self._release(batch)  # a cancelled embedding hands its own batch back
                raise
            if self._outage_since is not None and upcoming is not None:
                # The embedder went away: the next batch waits for the next try, not for the lease.
                await self._abandon(upcoming, following)
                following, upcoming = [], None
            embedding = upcoming
            try:
                await self._store(pairs)
            except BaseException:
                if embedding is not None:
                    await self._abandon(embedding, following)
                await self._release(batch)  # what was stored is no longer pending: untouched
                raise
            batch = following
        return taken

    async def _claim(self) -> list[asyncpg.Record]:
        lease = uuid.uuid4()
        try:
            return await embed_queue.claim(self.pool, self.batch_size, self.settings.embed_lease_s, lease)
        except BaseException:
            # The server may have run the claim and its answer been lost (the connection ended
            # mid-statement): its chunks are handed back by their lease at the next drain, not left
            # leased and unseen for the whole lease (a fault drill waited out 60 s for one such chunk).
            self._owed_leases.add(lease)
            raise

    async def _abandon(self, embedding: asyncio.Task[Any], rows: list[asyncpg.Record]) -> None:
        """Cancels the embedding of `rows` and makes sure they are handed back. Cancelled in
        flight, it hands them back itself; one that had already finished (a fast embedder, or a
        model done just before the database failed) returned vectors nobody will store, and its
        chunks stayed leased for the whole lease (a fault drill waited out its 60 s for three)."""
        embedding.cancel()
        try:
            await embedding
        except asyncio.CancelledError:
            return  # cancelled in flight: it handed its batch back itself
        except Exception as exc:
            log.info("embed_abandoned_batch_failed", error=describe_error(exc)[:300])
        await self._release(rows)

    async def _release(self, rows: list[asyncpg.Record]) -> None:
        """Hands leased chunks back; if the database cannot take them now (it is what failed), they
        are owed, and handed back at the next drain, not left leased for the whole lease."""
        ids = [r["id"] for r in rows]
        try:
            await asyncio.shield(embed_queue.release(self.pool, ids))
        except Exception:
            self._owed.update(ids)

    async def _settle_owed(self) -> None:
        if self._owed:
            owed = list(self._owed)
            await embed_queue.release(self.pool, owed)
            self._owed.difference_update(owed)
        if self._owed_leases:
            leases = list(self._owed_leases)
            await embed_queue.release_leases(self.pool, leases)
            self._owed_leases.difference_update(leases)

    async def _embed(self, rows: list[asyncpg.Record]) -> list[tuple[asyncpg.Record, Any]]:
        """The batch's vectors, outside any transaction; failures are recorded, the rest returned.

        The model starts once this process's single writes pause (mnemo_ingest.activity)."""
        inputs = [Chunk(0, r["context"], r["text"]).embedding_input() for r in rows]
        try:
            # Inside the try: cancelled while it waits for writes to pause (the next claim failed
            # under a write load), the batch is handed back too; it used to stay leased.
            await self.activity.pause(batches=False)
            vectors = await self.embedder.embed(inputs)
            self._recovered()
            return list(zip(rows, vectors, strict=True))
        except asyncio.CancelledError:
            await self._release(rows)
            raise
        except EmbedderUnavailable as exc:
            await self._unavailable([r["id"] for r in rows], str(exc))
            return []
        except Exception as exc:
            # Something in the batch broke the model or was refused (EmbedderRejected): embed one
            # by one so only the culprit fails.
            log.info("embed_batch_split", count=len(rows), error=f"{type(exc).__name__}: {exc}"[:300])
        pairs = []
        for i, (row, text) in enumerate(zip(rows, inputs, strict=True)):
            try:
                pairs.append((row, (await self.embedder.embed([text]))[0]))
                self._recovered()
            except asyncio.CancelledError:
                await self._release(rows)
                raise
            except EmbedderUnavailable as exc:
                await self._unavailable([r["id"] for r in rows[i:]], str(exc))
                break
            except Exception as exc:
                await self._record_failure([row["id"]], f"{type(exc).__name__}: {exc}")
        return pairs

    async def _unavailable(self, ids: list[int], error: str) -> None:
        """The embedder is down: the chunks wait for the next try without counting an attempt, and
        the wait before it doubles, up to MNEMO_EMBED_OUTAGE_MAX_DELAY_S."""
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            self._outage_delay = self.settings.embed_backoff_s
            log.warning("embedder_unavailable", error=error[:300], chunks_waiting=len(ids))
        else:
            self._outage_delay = min(self._outage_delay * 2, self.settings.embed_outage_max_delay_s)
        await embed_queue.defer(self.pool, ids, error[:2000], self._outage_delay)

    def _recovered(self) -> None:
        if self._outage_since is not None:
            log.info("embedder_recovered", outage_s=round(time.monotonic() - self._outage_since, 1))
            self._outage_since = None

    async def _sample_queue(self) -> None:
        """Reports the queue's depth and the age of its oldest pending chunk every QUEUE_SAMPLE_S
        (mnemo_platform.metrics); untraced, as a readiness probe is."""
        while True:
            try:
                with untraced():
                    stats = await embed_queue.queue_stats(self.pool)
                set_queue(stats.pending, stats.failed, stats.oldest_age_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("embed_queue_sample_failed", error=describe_error(exc)[:300])
            await asyncio.sleep(QUEUE_SAMPLE_S)

    async def _requeue_failed(self) -> None:
        """Queues chunks that have been `failed` for MNEMO_EMBED_FAILED_RETRY_S again, checking
        every minute (or sooner for a shorter setting): a model or endpoint fixed since gets its
        chance without anyone asking."""
        every = min(60.0, self.settings.embed_failed_retry_s)
        while True:
            await asyncio.sleep(every)
            try:
                with background_span("embed.requeue_failed"):
                    count = await embed_queue.requeue_failed(self.pool, None, self.settings.embed_failed_retry_s)
            except (asyncpg.PostgresError, OSError) as exc:
                log.warning("embed_requeue_failed_failed", error=describe_error(exc)[:300])
                continue
            if count:
                log.info("failed_chunks_requeued", count=count)
                self.wake()

    async def _store(self, pairs: list[tuple[asyncpg.Record, Any]]) -> None:
        vectors = {row["id"]: vector for row, vector in pairs}
        if not vectors:
            return
        for attempt in range(STORE_TRIES):
            if attempt:
                await asyncio.sleep(0.05 * 2 ** (attempt - 1))
            try:
                done = await embed_queue.store_vectors(self.pool, list(vectors.items()), self.embedder.model)
            except asyncpg.PostgresError as exc:
                if isinstance(exc, tuple(UNAVAILABLE_ERRORS)):
                    # The database went away mid-store (a restart, a terminated connection): nothing
                    # about the chunks was wrong, so no attempt is counted; _drain hands the batch
                    # back. Counted, a storm of terminations had failed a chunk for good (5 attempts).
                    raise
                await self._record_failure(list(vectors), f"storing vectors: {describe_error(exc)}")
                return
            self.embedded += done.stored
            chunks_embedded.add(done.stored, {"outcome": "embedded"})
            log.debug("chunks_embedded", count=done.stored)
            vectors = {chunk_id: vectors[chunk_id] for chunk_id in done.held}
            if not vectors:
                return
        log.info("chunks_store_deferred", count=len(vectors), lease_s=self.settings.embed_lease_s)

    async def _next_due_in(self) -> float:
        """Seconds until the earliest retry is due, at most the rescan interval."""
        seconds = await embed_queue.next_due_in(self.pool)
        if seconds is None:
            return self.settings.embed_rescan_s
        return max(0.05, min(seconds, self.settings.embed_rescan_s))

    async def _record_failure(self, ids: list[int], error: str) -> None:
        await embed_queue.record_failure(
            self.pool, ids, error[:2000], self.settings.embed_max_attempts, self.settings.embed_backoff_s
        )
        chunks_embedded.add(len(ids), {"outcome": "error"})
        log.warning("chunks_embed_failed", count=len(ids), error=error[:300])
