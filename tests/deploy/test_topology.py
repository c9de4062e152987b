"""The dev overlay's Deployments run as local processes (tests/deploy/cluster.py): gateway x1,
ingest x2, search x2, harvest x1, each pod on its own loopback address, each Service a balancer on
its own, one PostgreSQL; the migration Job first, which mints the admin token the clients use.

Under a steady load of keyed writes and searches through the gateway's REST, one ingest pod and then
one search pod are SIGKILLed (a node lost) and replaced, then SIGTERMed (a pod deleted) and
replaced: clients that follow the documented retry contract (docs/reliability.md: a 503 or a
dropped connection is retried, a write with its key) see every request succeed, the retries landing
on the other replica. Then every search pod is stopped:
writes are still acknowledged while searches and /readyz answer 503 naming search; one search pod
back, searches answer again. Nothing acknowledged is lost or stored twice, the audit chain verifies,
every chunk ends embedded, and every pod stops cleanly on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import signal
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.deploy.cluster import LocalCluster, Pod
from tests.deploy.manifests import render
from tests.faults.test_sigkill import check_nothing_lost
from tests.helpers import Postgres, eventually

REPLICAS = {"gateway": 1, "ingest": 2, "search": 2, "harvest": 1}
WRITERS, SEARCHERS = 3, 2
WORKSPACE = "topology-drill"
# The one setting the drill changes from the manifests: a killed ingest's claims on chunks come back
# after MNEMO_EMBED_LEASE_S (300 s by default), and the drill waits for every chunk to be embedded.
OVERRIDES = {"MNEMO_EMBED_LEASE_S": "5"}


@dataclass
class Load:
    """Writers and searchers over REST that retry 503s and dropped connections (writes with the same
    key) until answered; every raw answer is counted. They run until `stop` is set."""

    http: httpx.AsyncClient
    prefix: str = "topo"
    acknowledged: dict[str, str] = field(default_factory=dict)
    keys: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    # (when the answered try was sent, when its answer came), per kind
    done: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"write": [], "search": []})
    searching: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def total(self) -> int:
        return self.keys

    async def retried(self, kind: str, path: str, body: Mapping[str, object]) -> httpx.Response:
        delay = 0.05
        while True:
            sent = time.perf_counter()
            try:
                response = await self.http.post(path, json=body)
            except httpx.TransportError as exc:
                self.answers[f"{kind} {type(exc).__name__}"] += 1
            else:
                self.answers[f"{kind} {response.status_code}"] += 1
                if response.status_code in (200, 201):
                    self.done[kind].append((sent, time.perf_counter()))
                    return response
                assert response.status_code == 503, (kind, response.status_code, response.text)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def writer(self, n: int) -> None:
        while not self.stop.is_set():
            key = f"{self.prefix}-{n}-{self.keys}"
            self.keys += 1
            body = {"workspace": WORKSPACE, "content": f"topology note {key} about the harbour", "idempotency_key": key}
            response = await self.retried("write", "/memories", body)
            self.acknowledged[key] = response.json()["memory"]["id"]
            await asyncio.sleep(0.05)

    async def searcher(self) -> None:
        while not self.stop.is_set():
            await self.searching.wait()
            await self.retried("search", "/search", {"workspace": WORKSPACE, "query": "harbour topology note"})
            await asyncio.sleep(0.1)

    def failed(self) -> int:
        return sum(count for answer, count in self.answers.items() if not answer.endswith((" 200", " 201")))

    async def answered_after(self, kind: str, moment: float, count: int = 1) -> float:
        """Seconds from `moment` until `count` requests of `kind` sent after it were answered."""

        async def enough() -> bool:
            return len([1 for sent, _ in self.done[kind] if sent >= moment]) >= count

        await eventually(enough, timeout=120, interval=0.05)
        return min(answered for sent, answered in self.done[kind] if sent >= moment) - moment


async def all_ready(cluster: LocalCluster, service: str, count: int) -> bool:
    for pod in cluster.pods[service]:
        assert pod.running or pod.proc is None, f"{pod.name} exited\n{pod.output()}"
    return len(cluster.services[service].endpoints()) >= count


async def replace(cluster: LocalCluster, pod: Pod) -> float:
    """Starts a stopped pod again, as its Deployment would; seconds until it is ready."""
    started = time.perf_counter()
    await pod.start()

    async def ready() -> bool:
        return await pod.ready()

    await eventually(ready, timeout=120, interval=0.1)
    return time.perf_counter() - started


async def test_one_replica_of_each_service_killed_under_load_fails_no_request_and_loses_nothing(
    postgres: Postgres, tmp_path: Path
) -> None:
    dsn = await postgres.create_database("topology")
    cluster = LocalCluster(render("dev"), tmp_path, dsn, REPLICAS, OVERRIDES)
    out = await cluster.run_job("mnemo-migrate", "--admin-token")
    token = out.split("MNEMO_TOKEN=", 1)[1].split()[0]
    tasks: list[asyncio.Task[None]] = []
    figures: list[str] = []
    try:
        await cluster.start()
        for service, count in REPLICAS.items():
            await eventually(functools.partial(all_ready, cluster, service, count), timeout=180, interval=0.25)
        # In-cluster clients call the gateway by its Service name.
        headers = {"authorization": f"Bearer {token}", "host": "gateway:8420"}
        base = f"{cluster.url('gateway', 8420)}/api/v1"
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
            assert (await http.post("/workspaces", json={"name": WORKSPACE})).status_code == 201
            load = Load(http)
            load.searching.set()
            tasks = [asyncio.create_task(load.writer(n)) for n in range(WRITERS)]
            tasks += [asyncio.create_task(load.searcher()) for _ in range(SEARCHERS)]
            await load.answered_after("write", 0, 10)
            await load.answered_after("search", 0, 5)

            # A node lost (SIGKILL), then a pod deleted (SIGTERM: it drains, exits 0), for each service.
            for sig, service in itertools.product((signal.SIGKILL, signal.SIGTERM), ("ingest", "search")):
                # The pod the gateway's connection goes to: stopping it cuts calls in flight.
                active = cluster.services[service].active
                victim = max(cluster.pods[service], key=lambda pod: active[pod.name])
                assert active[victim.name] > 0, dict(active)
                killed = time.perf_counter()
                if sig == signal.SIGKILL:
                    assert await victim.kill(sig) == -signal.SIGKILL, victim.output()
                else:
                    assert await victim.delete() == 0, victim.output()
                writes = await load.answered_after("write", killed, 5)
                searches = await load.answered_after("search", killed, 5)
                back = await replace(cluster, victim)
                figures.append(
                    f"{sig.name} {victim.name}: writes answered after {writes:.2f} s, searches {searches:.2f} s, "
                    f"replaced and ready in {back:.1f} s"
                )
            one_down = dict(load.answers)

            # Every search pod stopped (the Deployment scaled to 0): searches are refused, writes go on.
            load.searching.clear()
            codes = await asyncio.gather(*(pod.delete() for pod in cluster.pods["search"]))
            assert codes == [0] * len(codes), [pod.output() for pod in cluster.pods["search"]]
            stopped = time.perf_counter()
            response = await http.post("/search", json={"workspace": WORKSPACE, "query": "harbour"})
            assert response.status_code == 503, response.text
            error = response.json()["error"]
            assert error["code"] == "UNAVAILABLE" and "search" in error["message"], error
            ready = await http.get(f"{cluster.url('gateway', 8420)}/readyz")
            assert ready.status_code == 503 and ready.json()["down"] == ["search"], ready.text
            writes_without_search = await load.answered_after("write", time.perf_counter(), 10)
            figures.append(f"every search pod stopped: writes answered after {writes_without_search:.2f} s")

            # Positive control: one search pod back, searches and readiness come back.
            back = await replace(cluster, cluster.pods["search"][0])
            load.searching.set()
            searches = await load.answered_after("search", time.perf_counter(), 5)
            assert (await http.get(f"{cluster.url('gateway', 8420)}/readyz")).status_code == 200
            figures.append(
                f"search back: ready {back:.1f} s after start, searching again "
                f"{time.perf_counter() - stopped:.1f} s after the stop (+{searches:.2f} s)"
            )

            load.stop.set()
            load.searching.set()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
            print(f"\ntopology drill ({cluster.block}.0.0/16), answers with one replica killed: {one_down}")
            print(f"  all answers, with the search outage: {dict(load.answers)}")
            for line in figures:
                print(f"  {line}")
            await check_nothing_lost(dsn, base, load, WORKSPACE, headers)
        codes = await cluster.stop()
        assert all(code == 0 for code in codes.values()), codes
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
        await cluster.stop()
