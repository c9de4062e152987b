"""The rendered manifests run as local processes: each pod a `mnemo` process on its own loopback
address, each Service a TCP balancer on its own, the way kube-proxy spreads a Service's connections
over its ready endpoints.

A pod runs its container's command with the environment the kubelet would build
(`manifests.environment`), with what a cluster provides replaced by its local counterpart: the
Secrets' values (the database URL is the test's PostgreSQL, the other keys generated), the volumes
(an emptyDir is a directory of the pod's own, a Secret volume its keys as files), `0.0.0.0` (the
pod's address) and every Service name (its balancer's address). Readiness is the container's own
readinessProbe (gRPC health of the named service, or HTTP GET), polled by the balancer, which only
sends new connections to ready pods — and, as a dead pod is dropped from the endpoints, to pods
that accept them. A pod started again keeps its address and directories (a restarted container
rather than a new pod: the same thing to its clients, which only know the Service).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import random
import re
import secrets
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy.manifests import Obj, environment, named, pod_spec
from tests.e2e.test_processes import Proc, clean_env, spawn

# The manifests mount an emptyDir there (the root filesystem is read-only); here it is the pod's own.
TMP_MOUNT = "/tmp"  # noqa: S108
SECRET_REF = re.compile(r"<secret ([^/>]+)/([^>]+)>")
PROBE_INTERVAL_S = 0.25
"""How often a balancer probes its pods' readiness (the manifests say 5 s; the drill has no time to wait)."""
PRE_STOP_S = 0.5
"""How long a deleted pod keeps serving, out of the endpoints, before its SIGTERM (Pod.delete)."""


def cluster_block() -> str:
    """127.N.0.0/16 for one run: two drills on one machine never meet (all of 127/8 is loopback)."""
    return f"127.{random.randint(16, 250)}"


@dataclass
class Pod:
    """One replica of a workload: its address, directories, environment and process."""

    name: str
    address: str
    env: dict[str, str]
    command: list[str]
    logs: Path
    probe: Obj | None
    ports: dict[str, int]
    proc: Proc | None = None
    runs: int = 0
    terminating: bool = False
    """terminating: being deleted; out of every Service's endpoints, though still running."""

    async def start(self) -> None:
        self.runs += 1
        self.terminating = False
        self.proc = await spawn(self.command, self.env, self.logs / f"run-{self.runs}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.process.returncode is None

    async def kill(self, sig: signal.Signals = signal.SIGKILL) -> int:
        """Signals the process and waits for its exit code."""
        assert self.proc is not None and self.running, f"{self.name} is not running"
        self.proc.process.send_signal(sig)
        return await asyncio.wait_for(self.proc.process.wait(), timeout=60)

    async def delete(self) -> int:
        """A pod deleted: out of the endpoints first, as Kubernetes removes it while its preStop
        sleep runs, then SIGTERM once that pause is over; its exit code. Endpoints change at once
        here, so the pause need not be the manifests' 5 s (meant for a cluster's propagation)."""
        self.terminating = True
        await asyncio.sleep(PRE_STOP_S)
        return await self.kill(signal.SIGTERM)

    async def ready(self) -> bool:
        """The container's readinessProbe, as the kubelet runs it."""
        if not self.running or self.probe is None:
            return self.running
        with contextlib.suppress(grpc.aio.AioRpcError, httpx.HTTPError, OSError):
            if "grpc" in self.probe:
                target = f"{self.address}:{self.probe['grpc']['port']}"
                async with grpc.aio.insecure_channel(target) as channel:
                    reply = await health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(service=self.probe["grpc"].get("service", "")), timeout=1
                    )
                return reply.status == health_pb2.HealthCheckResponse.SERVING
            if "httpGet" in self.probe:
                get = self.probe["httpGet"]
                port = get["port"] if isinstance(get["port"], int) else self.ports[get["port"]]
                async with httpx.AsyncClient(timeout=1) as http:
                    return (await http.get(f"http://{self.address}:{port}{get['path']}")).status_code < 400
        return False

    def output(self) -> str:
        return self.proc.output() if self.proc else "(never started)"


@dataclass
class Balancer:
    """A Service: listens on its own address at each of its ports, and sends every new connection
    to the next ready pod (round robin) at the port the Service targets; a pod that refuses is
    skipped. With no pod to take it, the connection is closed at once (kube-proxy rejects it)."""

    name: str
    address: str
    ports: dict[int, str | int]
    """ports maps each Service port to its targetPort (a number or a container port's name)."""
    pods: list[Pod] = field(default_factory=list)
    ready: set[str] = field(default_factory=set)
    active: Counter[str] = field(default_factory=Counter)
    """active counts each pod's open connections through the balancer."""
    rejected: int = 0
    _servers: list[asyncio.Server] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    async def start(self) -> None:
        for port, target in self.ports.items():
            server = await asyncio.start_server(
                functools.partial(self._accept, target=target), self.address, port, reuse_address=True
            )
            self._servers.append(server)
        self._tasks.add(asyncio.create_task(self._probe_forever()))

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _probe_forever(self) -> None:
        while True:
            states = await asyncio.gather(*(pod.ready() for pod in self.pods))
            self.ready = {pod.name for pod, ok in zip(self.pods, states, strict=True) if ok}
            await asyncio.sleep(PROBE_INTERVAL_S)

    def endpoints(self) -> list[Pod]:
        return [pod for pod in self.pods if pod.name in self.ready and pod.running and not pod.terminating]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: str | int) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            endpoints = self.endpoints()
            start = next(self._turn)
            for k in range(len(endpoints)):
                pod = endpoints[(start + k) % len(endpoints)]
                port = target if isinstance(target, int) else pod.ports[target]
                try:
                    up_reader, up_writer = await asyncio.open_connection(pod.address, port)
                except OSError:
                    continue
                self.active[pod.name] += 1
                try:
                    await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
                finally:
                    self.active[pod.name] -= 1
                return
            self.rejected += 1
        finally:
            writer.close()
            self._tasks.discard(task)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # Either side gone ends the flow both ways, as a dead pod's connections end.
            writer.close()


@dataclass
class LocalCluster:
    """The objects of one rendered overlay, run here: `replicas` pods per Deployment named in it."""

    objects: list[Obj]
    root: Path
    database_url: str
    replicas: dict[str, int]
    overrides: dict[str, str] = field(default_factory=dict)
    """overrides are settings the test sets on every pod on top of the manifests' (stated where used)."""
    block: str = field(default_factory=cluster_block)
    services: dict[str, Balancer] = field(default_factory=dict)
    pods: dict[str, list[Pod]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], str] = field(default_factory=dict)
    _addresses: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        for n, service in enumerate(o for o in self.objects if o["kind"] == "Service"):
            name = service["metadata"]["name"]
            ports = {p["port"]: p.get("targetPort", p["port"]) for p in service["spec"]["ports"]}
            self.services[name] = Balancer(name, f"{self.block}.1.{n + 1}", ports)

    def secret(self, name: str, key: str) -> str:
        """A Secret's value here: the database URI is the test's database, any other key generated."""
        if (name, key) not in self.secrets:
            self.secrets[name, key] = self.database_url if key == "uri" else secrets.token_urlsafe(32)
        return self.secrets[name, key]

    def local(self, value: str, pod_address: str, paths: dict[str, Path]) -> str:
        """A value of the manifests with the cluster's names, addresses, paths and Secrets made local."""
        value = SECRET_REF.sub(lambda m: self.secret(m[1], m[2]), value)
        if value == "0.0.0.0":
            return pod_address
        for mount, path in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            if value == mount or value.startswith(mount + "/"):
                return str(path) + value[len(mount) :]
        host, sep, port = value.rpartition(":")
        if sep and port.isdigit() and host in self.services:
            return f"{self.services[host].address}:{port}"
        return value

    def volumes(self, workload: Obj, pod_dir: Path) -> dict[str, Path]:
        """Each volume mount's local directory: emptyDir the pod's own, a Secret volume its items as files."""
        spec = pod_spec(workload)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        paths: dict[str, Path] = {}
        [container] = spec["containers"]
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            path = pod_dir / "volumes" / mount["name"]
            path.mkdir(parents=True, exist_ok=True)
            if "secret" in volume:
                secret_name = volume["secret"]["secretName"]
                for item in volume["secret"]["items"]:
                    (path / item["path"]).write_text(self.secret(secret_name, item["key"]))
            paths[mount["mountPath"]] = path
        return paths

    def pod(self, workload: Obj, ordinal: int, args: list[str] | None = None) -> Pod:
        name = workload["metadata"]["name"]
        pod_name = f"{name}-{ordinal}"
        address = f"{self.block}.2.{next(self._addresses)}"
        pod_dir = self.root / pod_name
        [container] = pod_spec(workload)["containers"]
        paths = self.volumes(workload, pod_dir)
        env = {k: self.local(v, address, paths) for k, v in environment(self.objects, container).items()}
        if TMP_MOUNT in paths:
            env["TMPDIR"] = str(paths[TMP_MOUNT])
        env.update(self.overrides)
        command = [*container.get("command", []), *container.get("args", []), *(args or [])]
        assert command[0] == "mnemo", command
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
        return Pod(pod_name, address, clean_env(**env), command[1:], pod_dir, container.get("readinessProbe"), ports)

    async def run_job(self, name: str, *extra_args: str) -> str:
        """Runs a Job's container to completion; its stdout."""
        job = named(self.objects, "Job", name)
        pod = self.pod(job, 0, list(extra_args))
        await pod.start()
        assert pod.proc is not None
        code = await asyncio.wait_for(pod.proc.process.wait(), timeout=120)
        assert code == 0, f"Job {name} failed ({code})\n{pod.output()}"
        return pod.proc.stdout

    async def start(self) -> None:
        for balancer in self.services.values():
            await balancer.start()
        for name, count in self.replicas.items():
            workload = named(self.objects, "Deployment", name)
            self.pods[name] = []
            for ordinal in range(count):
                pod = self.pod(workload, ordinal)
                self.pods[name].append(pod)
                self.services[name].pods.append(pod)
                await pod.start()

    async def stop(self) -> dict[str, int | None]:
        """SIGTERM to every pod (a Deployment deleted), then SIGKILL to any left; each pod's exit code."""
        codes: dict[str, int | None] = {}
        for pods in self.pods.values():
            for pod in pods:
                if pod.running and pod.proc is not None:
                    pod.proc.process.send_signal(signal.SIGTERM)
        for pods in self.pods.values():
            for pod in pods:
                if pod.proc is None:
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(pod.proc.process.wait(), timeout=30)
                codes[pod.name] = pod.proc.process.returncode
                await pod.proc.kill()
        for balancer in self.services.values():
            await balancer.stop()
        return codes

    def url(self, service: str, port: int) -> str:
        return f"http://{self.services[service].address}:{port}"
