"""A harvester on a laptop: the same engine over the laptop's sessions, writing through the gateway with a
harvester token (docs/harvest.md, "Remote harvest"). It needs the gateway's URL and the token, never the
internal secret nor the database: what it knows of its sessions is kept in a local file (mnemo_harvest.ledger).

The engine calls ingest and search as gRPC stubs; here the three calls it makes go over the gateway's REST
routes instead, and a refusal comes back as the gRPC error the service sent (its code and ErrorReason), so
the engine acts on a tombstone or a transient failure exactly as in-cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import structlog
from google.protobuf import json_format

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.harvest.v1 import harvest_service_pb2 as pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_harvest.archive import Archive
from mnemo_harvest.engine import HarvestEngine
from mnemo_harvest.ledger import FileSources
from mnemo_harvest.readers import build_readers
from mnemo_harvest.settings import HarvestSettings, RemoteHarvestSettings, SummarizerSettings
from mnemo_harvest.summarize import Summarizer
from mnemo_platform import enum_label, enum_value, load_all
from mnemo_platform.reasons import status_details
from mnemo_platform.settings import SettingsError
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings

log = structlog.get_logger("mnemo.harvest")

API = "/api/v1/harvest"


def rpc_error(code: grpc.StatusCode, message: str, reason: int) -> grpc.aio.AioRpcError:
    """The gRPC error a service would have raised: its code, message and ErrorReason (read by reason_of)."""
    trailers = grpc.aio.Metadata(*status_details(code, message, reason))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailers, message)


class Gateway:
    """The gateway's harvest routes, as the harvester token's holder."""

    def __init__(self, url: str, token: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout_s)

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        waited = 0.0
        while True:
            response = await self._send(method, path, **kwargs)
            # A first harvest of a laptop sends more than a token's rate (MNEMO_RATE_LIMIT_PER_MIN): wait as the
            # gateway says and go on. Every call here may be repeated (placement reads; the writes carry their
            # derivation or idempotency key), and the wait is bounded, after which the session fails and the
            # next run takes it again.
            pause = _retry_after(response)
            if pause is None or waited + pause > MAX_RATE_WAIT_S:
                break
            log.info("gateway_rate_limited", path=path, retry_after_s=pause)
            await asyncio.sleep(pause)
            waited += pause
        return self._answer(response, path)

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, API + path, **kwargs)
        except httpx.HTTPError as exc:
            # As a channel reports a service it cannot reach: the engine retries the session next run.
            message = f"cannot reach the gateway at {self.url}: {type(exc).__name__}: {exc}"
            raise rpc_error(grpc.StatusCode.UNAVAILABLE, message, reasons_pb.ERROR_REASON_UNAVAILABLE) from None

    def _answer(self, response: httpx.Response, path: str) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success and isinstance(body, dict):
            return body
        error = body.get("error", {}) if isinstance(body, dict) else {}
        code = grpc.StatusCode.__members__.get(str(error.get("code")), _BY_HTTP.get(response.status_code))
        message = str(error.get("message") or f"HTTP {response.status_code} from {self.url}{API}{path}")
        raise rpc_error(code or grpc.StatusCode.UNKNOWN, message, _reason(error.get("reason")))

    async def aclose(self) -> None:
        await self.http.aclose()


class RemoteIngest:
    """The ingest calls the engine makes, through the gateway (the metadata the engine signs is not sent: the
    gateway forwards the token's own principal)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def WriteMemory(
        self, request: ingest_pb.WriteMemoryRequest, metadata: object = None
    ) -> ingest_pb.WriteMemoryResponse:
        body = {
            "workspace": request.workspace,
            "title": request.title,
            "content": request.content,
            "tags": list(request.tags),
            "metadata": json_format.MessageToDict(request.metadata),
            "source_uri": request.source_uri,
            "provenance": enum_label(common_pb2.Provenance, request.provenance),
            "derivation": {
                "source_fingerprint": request.derivation.source_fingerprint,
                "summarizer": request.derivation.summarizer,
                "prompt_version": request.derivation.prompt_version,
            },
        }
        answer = await self.gateway.request("POST", "/sessions", json=body)
        return ingest_pb.WriteMemoryResponse(memory=_memory(answer["memory"]), outcome=_outcome(answer["outcome"]))

    async def WriteMemories(
        self, request: ingest_pb.WriteMemoriesRequest, metadata: object = None
    ) -> ingest_pb.WriteMemoriesResponse:
        # The engine sends one session's candidates at a time, all in the session's workspace.
        items = [
            {
                "kind": enum_label(common_pb2.MemoryKind, item.kind),
                "title": item.title,
                "content": item.content,
                "tags": list(item.tags),
                "metadata": json_format.MessageToDict(item.metadata),
                "source_uri": item.source_uri,
                "idempotency_key": item.idempotency_key,
            }
            for item in request.items
        ]
        workspace = request.items[0].workspace if request.items else ""
        answer = await self.gateway.request("POST", "/candidates", json={"workspace": workspace, "items": items})
        results = []
        for result in answer["results"]:
            if "error" in result:
                error = result["error"]
                results.append(
                    ingest_pb.WriteResult(
                        error=ingest_pb.ItemError(
                            code=str(error.get("code", "UNKNOWN")),
                            reason=_reason(error.get("reason")),
                            message=str(error.get("message", "")),
                        )
                    )
                )
            else:
                results.append(
                    ingest_pb.WriteResult(memory=_memory(result["memory"]), outcome=_outcome(result["outcome"]))
                )
        return ingest_pb.WriteMemoriesResponse(results=results)

    async def AddWorkspace(
        self, request: ingest_pb.AddWorkspaceRequest, metadata: object = None
    ) -> ingest_pb.AddWorkspaceResponse:
        raise rpc_error(
            grpc.StatusCode.PERMISSION_DENIED,
            "a remote harvester registers no workspace (that takes an admin token): register "
            f"{request.root_path} with `mnemo workspace add` and bind the harvester token to it",
            reasons_pb.ERROR_REASON_ROLE_TOO_LOW,
        )


class RemoteSearch:
    """The one search call the engine makes (placement), through the gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def ResolveWorkspace(
        self, request: search_pb.ResolveWorkspaceRequest, metadata: object = None
    ) -> search_pb.ResolveWorkspaceResponse:
        answer = await self.gateway.request("GET", "/placement", params={"path": request.workspace})
        workspace = answer["workspace"]
        return search_pb.ResolveWorkspaceResponse(
            workspace=common_pb2.Workspace(id=workspace["id"], name=workspace.get("name", ""))
        )


@dataclass
class RemoteHarvester:
    """The engine and what it holds open: the gateway's client and the summarizer's."""

    engine: HarvestEngine
    gateway: Gateway
    interval_s: float

    async def run(self, agent: str = "", ignore_idle: bool = False, session: str = "") -> AsyncIterator[pb.RunProgress]:
        """One pass over every session, or over the one `session` names (harvested at once, idle or not)."""
        async for progress in self.engine.run(agent, ignore_idle, session):
            yield progress

    async def forever(self) -> None:
        """A run every MNEMO_HARVEST_INTERVAL_S, as the in-cluster service does, until cancelled."""
        while True:
            try:
                async for progress in self.run():
                    if progress.done:
                        log.info("remote_harvest_run", gateway=self.gateway.url, **_totals(progress))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("harvest_tick_failed", gateway=self.gateway.url)
            await asyncio.sleep(self.interval_s)

    async def aclose(self) -> None:
        await self.gateway.aclose()
        if self.engine.summarizer is not None:
            await self.engine.summarizer.aclose()


def build_remote(url: str, token: str, environ: Mapping[str, str] | None = None) -> RemoteHarvester:
    """A harvester for this machine's sessions that writes through the gateway at `url` with `token`."""
    database, settings, remote, summarizer, content = load_all(
        (DatabaseSettings, HarvestSettings, RemoteHarvestSettings, SummarizerSettings, ContentSettings), environ
    )
    url = url or remote.url
    if not url.startswith(("http://", "https://")):
        raise SettingsError(f"invalid configuration: the gateway URL must start with http:// or https://, not {url!r}")
    if not token:
        raise SettingsError("a remote harvester needs a token in MNEMO_TOKEN (`mnemo token create --role harvester`)")
    if settings.auto_register:
        raise SettingsError("MNEMO_HARVEST_AUTO_REGISTER needs an admin token; a remote harvester registers nothing")
    data_dir = database.resolved_data_dir
    gateway = Gateway(url, token, remote.timeout_s)
    engine = HarvestEngine(
        FileSources(Path(remote.state_file) if remote.state_file else data_dir / "harvest-remote.json", gateway.url),
        build_readers(settings),
        RemoteIngest(gateway),
        RemoteSearch(gateway),
        settings,
        data_dir,
        content.max_content_bytes,
        summarizer=Summarizer(summarizer) if summarizer.url else None,
        archive=(
            Archive(data_dir / "archive", settings.archive_max_bytes, settings.archive_retention_days)
            if settings.archive
            else None
        ),
    )
    return RemoteHarvester(engine, gateway, settings.interval_s)


async def serve_remote(harvester: RemoteHarvester) -> None:
    """Harvests every interval until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info("remote_harvest_started", gateway=harvester.gateway.url, agents=list(harvester.engine.readers))
    task = asyncio.create_task(harvester.forever(), name="remote-harvest")
    try:
        await stop.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await harvester.aclose()
        log.info("remote_harvest_stopped", gateway=harvester.gateway.url)


# The longest a remote harvester waits out the gateway's rate limit for one call, in all.
MAX_RATE_WAIT_S = 120.0


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the gateway asks a rate-limited caller to wait (429 with Retry-After); None for any other answer."""
    if response.status_code != 429:
        return None
    try:
        return max(0.0, float(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


def _totals(progress: pb.RunProgress) -> dict[str, int]:
    return {
        "sessions": progress.total,
        "harvested": progress.harvested,
        "skipped": progress.skipped,
        "failed": progress.failed,
    }


def _memory(data: dict[str, Any]) -> common_pb2.Memory:
    return common_pb2.Memory(
        id=str(data["id"]), version=int(data.get("version", 0)), workspace_id=str(data.get("workspace_id", ""))
    )


def _outcome(label: str) -> int:
    return enum_value(ingest_pb.WriteOutcome, label, "outcome")


def _reason(name: object) -> int:
    try:
        return reasons_pb.ErrorReason.Value(f"ERROR_REASON_{name}")
    except ValueError:
        return reasons_pb.ERROR_REASON_UNSPECIFIED


# A status with no JSON error body (a proxy's answer, say): what gRPC code it stands for.
_BY_HTTP = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.FAILED_PRECONDITION,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    502: grpc.StatusCode.UNAVAILABLE,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}
