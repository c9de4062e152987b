"""Harvest: run it now, its status per agent, the sessions it knows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.harvest.v1 import harvest_service_pb2 as harvest_pb
from mnemo_gateway.backends import call, streamed
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import check_text, iso, plain, source_json


class HarvestOperations(OperationsBase):
    """Calls to the harvest service, which a gateway in front of ingest and search only may lack."""

    def _harvest(self) -> Any:
        if self.backends.harvest is None:
            raise CallError(
                grpc.StatusCode.UNAVAILABLE,
                "the harvest service is not configured for this gateway (MNEMO_HARVEST_ADDR)",
                reasons_pb.ERROR_REASON_UNAVAILABLE,
            )
        return self.backends.harvest

    async def harvest_run(self, agent: str, ignore_idle: bool, session: str = "") -> AsyncIterator[dict[str, Any]]:
        """Streams one JSON object per session (or the one `session` names), then the totals (done=true)."""
        check_text(agent, "agent")
        check_text(session, "session")
        request = harvest_pb.RunRequest(agent=agent, ignore_idle=ignore_idle, session=session)
        async for message in streamed(self._harvest().Run(request)):
            yield plain(message)

    async def harvest_status(self) -> dict[str, Any]:
        response = await call(self._harvest().Status, harvest_pb.StatusRequest())
        data = plain(response)
        data["archive_bytes"] = response.archive_bytes
        data["last_run_at"] = iso(response.last_run_at)
        for agent, status in zip(data["agents"], response.agents, strict=True):
            agent["failures"] = [source_json(f) for f in status.failures]
            agent["refused"] = [source_json(f) for f in status.refused]
        return data

    async def harvest_sources(self, agent: str, state: str, page_size: int, page_token: str) -> dict[str, Any]:
        for value, field in ((agent, "agent"), (state, "state"), (page_token, "page_token")):
            check_text(value, field)
        response = await call(
            self._harvest().ListSources,
            harvest_pb.ListSourcesRequest(agent=agent, state=state, page_size=page_size, page_token=page_token),
        )
        return {"sources": [source_json(s) for s in response.sources], "next_page_token": response.next_page_token}
