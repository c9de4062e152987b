"""The lexical poster: brings the BM25 statistics (postings, document frequencies, sizes) in line
with the chunks that changed, in the background.

A write only queues its chunks (sql/0008_lexical_postings.sql); the lexical leg scores queued
chunks from their own tsvector until they are posted, so nothing waits on the poster for
correctness, only the statistics' freshness. Like the embedding workers it gives way to this
process's writes (mnemo_ingest.activity): posting is PostgreSQL work a committing batch would
otherwise share its cores with.
"""

from __future__ import annotations

import asyncio

import asyncpg
import structlog

from mnemo_ingest.activity import BackgroundLoop, WriteActivity
from mnemo_ingest.settings import IngestSettings
from mnemo_platform.errors import describe_error
from mnemo_platform.telemetry import untraced

log = structlog.get_logger("mnemo.ingest.posting")

FAILURE_WAIT_S = 5.0


class LexicalPoster(BackgroundLoop):
    task_name = "lexical-poster"

    def __init__(self, pool: asyncpg.Pool, settings: IngestSettings, activity: WriteActivity) -> None:
        self.pool = pool
        self.settings = settings
        self.activity = activity

    async def post_once(self) -> int:
        """Posts the oldest queued changes; returns how many queue rows were taken (0: none, or
        another process's poster holds the lock)."""
        taken: int = await self.pool.fetchval("SELECT lexical_post($1)", self.settings.lexical_post_batch)
        return taken

    async def _run(self) -> None:
        while True:
            wait = self.settings.lexical_post_idle_s
            try:
                await self.activity.pause()
                # Every MNEMO_LEXICAL_POST_IDLE_S, one statement: a trace each would bury the rest.
                with untraced():
                    posted = await self.post_once()
                if posted:
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Nothing is lost: the queue rows stay until a pass succeeds. One line, not a
                # traceback, and a longer wait: during an outage this repeats until it ends.
                log.warning("lexical_post_failed", error=describe_error(exc)[:300])
                wait = max(wait, FAILURE_WAIT_S)
            await asyncio.sleep(wait)
