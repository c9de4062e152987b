"""The grapher: lets stored vectors into the HNSW graph once the model has no backlog to embed.

An insert into the graph is PostgreSQL's largest share of a vector's cost (sql/0024_vector_graph.sql),
and on a small machine it runs on the cores the model needs: while this process's workers drain
the embedding queue, the grapher waits, and the vectors they store are compared exactly by the
semantic leg meanwhile, so nothing waits on it for correctness, only a search's speed. It waits at
most until MNEMO_VECTOR_GRAPH_BACKLOG vectors are waiting: then it lets in the excess at once, so
a long import costs each search a bounded exact scan (about 0.3 µs a waiting vector in the
searched workspaces). Like the lexical poster it also gives way to this process's writes
(mnemo_ingest.activity).
"""

from __future__ import annotations

import asyncio

import asyncpg
import structlog

from mnemo_ingest.activity import BackgroundLoop, WriteActivity
from mnemo_ingest.settings import IngestSettings
from mnemo_ingest.worker import EmbeddingWorkers
from mnemo_platform.errors import describe_error
from mnemo_platform.telemetry import untraced
from mnemo_store import vector_graph

log = structlog.get_logger("mnemo.ingest.graphing")

# How often the grapher looks at the queue: while the workers embed (to count what waits), and when
# there is nothing to let in.
LOOK_S = 1.0
FAILURE_WAIT_S = 5.0


class VectorGrapher(BackgroundLoop):
    task_name = "vector-grapher"

    def __init__(
        self, pool: asyncpg.Pool, settings: IngestSettings, activity: WriteActivity, workers: EmbeddingWorkers
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.activity = activity
        self.workers = workers

    async def graph_once(self) -> int:
        """Lets in what may enter the graph now; returns how many vectors it let in (0: none)."""
        if self.workers.embedding:
            # Only the excess over the backlog allowed, counted once for this pass.
            limit = await vector_graph.waiting(self.pool) - self.settings.vector_graph_backlog
            if limit <= 0:
                return 0
        else:
            limit = self.settings.vector_graph_batch
        graphed = 0
        while limit > 0:
            done = await vector_graph.graph(self.pool, min(limit, self.settings.vector_graph_batch))
            if not done:
                break
            graphed += done
            limit -= done
        return graphed

    async def _run(self) -> None:
        while True:
            wait = LOOK_S
            try:
                await self.activity.pause()
                # One statement a batch: a trace each would bury the rest.
                with untraced():
                    graphed = await self.graph_once()
                if graphed and not self.workers.embedding:
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Nothing is lost: the vectors wait, compared exactly, until a pass succeeds.
                log.warning("vector_graph_failed", error=describe_error(exc)[:300])
                wait = FAILURE_WAIT_S
            await asyncio.sleep(wait)
