"""What the retrieval benchmarks share: the throw-away stack, the REST checks, ranking metrics, run records."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = "bench/results"
STATUS_POLL_S = 0.2

# The stack's own settings; any other MNEMO_* variable in the environment passes through so a
# ranking knob (MNEMO_LEXICAL_WEIGHT, MNEMO_SEARCH_CANDIDATES, ...) can be tried without editing code.
FORCED_ENV_KEYS = ("MNEMO_DATABASE_URL", "MNEMO_HTTP_PORT", "MNEMO_EMBEDDER")


class BenchError(Exception):
    """A failure worth one clear line instead of a traceback."""


# -- metrics ----------------------------------------------------------------------------------


def recall_at(ranked: Sequence[Any], relevant: Collection[Any], k: int) -> float:
    """The share of the relevant items found in the top k (the ranking holds each item once)."""
    return len(set(relevant).intersection(ranked[:k])) / len(relevant)


def ndcg_at(ranked: Sequence[Any], gains: Mapping[Any, float], k: int) -> float:
    """nDCG@k as trec_eval's ndcg_cut (and so BEIR) computes it: an item's gain is its graded
    relevance, discounted by log2(rank + 1); the ideal ranking orders every judged item by gain.
    With gains of 1 this is binary nDCG over min(|relevant|, k) ideal hits."""
    dcg = sum(gains[key] / math.log2(i + 2) for i, key in enumerate(ranked[:k]) if key in gains)
    ideal_gains = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    return dcg / ideal if ideal else 0.0


def mrr_at(ranked: Sequence[Any], relevant: Collection[Any], k: int) -> float:
    """1 / the rank of the first relevant item in the top k; 0 when there is none."""
    for i, key in enumerate(ranked[:k]):
        if key in relevant:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def fmt(value: float | None, digits: int = 3) -> str:
    return "  n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


# -- the stack --------------------------------------------------------------------------------


def quiet_model_env() -> None:
    """Before anything imports the model stack: nothing may be downloaded, and the tokenizer's
    own thread pool would fight the embedding worker for the same cores."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Progress bars and gRPC's fork notices would drown the benchmark's own progress lines.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")


@contextlib.contextmanager
def embedded_postgres(settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """A throw-away PostgreSQL with pgvector; its URI while the block runs.

    `settings` (postgresql.conf names and values) are written with ALTER SYSTEM and the server is
    restarted once, so those that only take effect at start (shared_buffers) do too."""
    from mnemo_store.embedded import open_server

    # A short path: the server's Unix socket lives in its data directory (108-byte limit).
    root = Path(tempfile.mkdtemp(prefix="mnemo-bench-"))
    server = None
    try:
        if settings:
            server = open_server(root / "pg", cleanup_mode="stop")
            server.psql("".join(f"ALTER SYSTEM SET {name} = '{value}';\n" for name, value in settings.items()))
            server.cleanup()  # stops it; the next start reads postgresql.auto.conf
        server = open_server(root / "pg", cleanup_mode="delete")
        yield server.get_uri()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def stack_env(dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith("MNEMO_") and k not in FORCED_ENV_KEYS}
    env.setdefault("MNEMO_GRPC_GRACE_S", "1")
    env.update({"MNEMO_DATABASE_URL": dsn, "MNEMO_HTTP_PORT": "0", "MNEMO_EMBEDDER": "local"})
    # The benchmark measures retrieval; the machine's own agent sessions have no place in it.
    env.setdefault("MNEMO_HARVEST_AGENTS", "")
    return env


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The stack's environment as a report records it: everything but the database's address."""
    return {k: v for k, v in env.items() if k != "MNEMO_DATABASE_URL"}


async def wait_with_progress(awaitable: Any, what: str, every_s: float = 5.0) -> float:
    """Awaits while printing elapsed time, so a slow model load does not look like a hang."""
    started = time.perf_counter()
    task = asyncio.ensure_future(awaitable)
    while True:
        done, _ = await asyncio.wait({task}, timeout=every_s)
        elapsed = time.perf_counter() - started
        if done:
            task.result()
            return elapsed
        print(f"  … {what} ({elapsed:.0f} s)", flush=True)


@contextlib.asynccontextmanager
async def model_stack(env: dict[str, str]) -> AsyncIterator[tuple[Any, Any, float]]:
    """Ingest, search and gateway in-process on the bundled model, started and the model loaded
    before anything is timed: (stack, embedder, model load seconds) while the block runs."""
    from mnemo_embed.local import LocalEmbedder
    from mnemo_server.stack import Stack, StackConfig

    embedder = LocalEmbedder()
    stack = Stack(StackConfig.from_env(env), embedder=embedder)
    print("Starting ingest, search and gateway …", flush=True)
    await stack.start()
    try:
        await stack.after_start()
        print(f"  gateway at {stack.base_url}", flush=True)
        print(f"Loading the embedding model ({embedder.model}) …", flush=True)
        load_s = await wait_with_progress(embedder.wait_ready(), "loading model")
        print(f"  model ready in {load_s:.1f} s", flush=True)
        yield stack, embedder, load_s
    finally:
        print("Stopping the stack …", flush=True)
        await stack.stop()


def check(response: Any, what: str) -> dict[str, Any]:
    if response.status_code >= 400:
        raise BenchError(f"{what} failed: HTTP {response.status_code}: {response.text[:500]}")
    return response.json()


async def wait_embedded(client: Any, workspace: str = "", every_s: float = 5.0) -> dict[str, Any]:
    """Polls `GET /api/v1/status` (of every workspace, or of one) until no chunk waits for its
    vector or for the lexical statistics, and no vector for the HNSW graph; the last status. Fails
    when a chunk failed or nothing was embedded at all."""
    params = {"workspace": workspace} if workspace else None
    last_print = time.perf_counter()
    while True:
        status = check(await client.get("/api/v1/status", params=params), "status")
        pending, embedded, failed = (int(status[k]) for k in ("chunks_pending", "chunks_embedded", "chunks_failed"))
        # The lexical statistics too: a benchmark ranks with the statistics of the whole corpus.
        # And the graph: a benchmark measures searches on a settled index.
        if pending == 0 and int(status.get("lexical_pending", 0)) == 0 and int(status.get("graph_pending", 0)) == 0:
            break
        if time.perf_counter() - last_print > every_s:
            print(f"  … {embedded} chunks embedded, {pending} pending", flush=True)
            last_print = time.perf_counter()
        await asyncio.sleep(STATUS_POLL_S)
    if failed or embedded == 0:
        raise BenchError(f"embedding did not complete: {embedded} embedded, {failed} failed: {status['last_error']}")
    return status


# -- run records ------------------------------------------------------------------------------


def cpu_ticks() -> list[int]:
    """The machine's CPU time counters since boot (the `cpu` line of /proc/stat), in ticks."""
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def cpu_seconds(ticks: list[int]) -> dict[str, float]:
    """`ticks` (cpu_ticks, or the difference of two readings) in core-seconds: working (`busy`),
    `idle` (waiting for I/O included) and `steal` (taken by the hypervisor); the three add up."""
    # user nice system idle iowait irq softirq steal (guest time is already counted in user)
    tick = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    steal = ticks[7] if len(ticks) > 7 else 0
    return {"busy": (sum(ticks[:8]) - idle - steal) / tick, "idle": idle / tick, "steal": steal / tick}


def cpu_use(seconds: float = 3.0) -> dict[str, Any]:
    """How busy the whole machine is over `seconds` while this process sleeps: the share of all CPU
    time spent working (`busy`, 0-1) and the share stolen by the hypervisor (`steal`), with the
    load averages. Linux only (/proc/stat); elsewhere busy and steal are NaN."""
    load = [round(x, 2) for x in os.getloadavg()]
    try:
        before = cpu_ticks()
        time.sleep(seconds)
        after = cpu_ticks()
    except OSError:
        time.sleep(seconds)
        return {"busy": math.nan, "steal": math.nan, "seconds": seconds, "load_average": load}
    spent = cpu_seconds([b - a for a, b in zip(before, after, strict=False)])
    total = sum(spent.values()) or 1
    return {
        "busy": round((total - spent["idle"]) / total, 4),
        "steal": round(spent["steal"] / total, 4),
        "seconds": seconds,
        "load_average": load,
    }


def machine_busy(use: Mapping[str, Any], max_busy: float, max_steal: float = 0.05) -> str:
    """Why the machine is too busy to measure on (empty when it is not): another process working
    on at least `max_busy` of its CPU time, or the hypervisor stealing at least `max_steal`."""
    reasons = []
    if use["busy"] >= max_busy:
        cores = use["busy"] * (os.cpu_count() or 1)
        reasons.append(f"{use['busy']:.0%} of the CPU time was in use ({cores:.2f} cores) over {use['seconds']:g} s")
    if use["steal"] >= max_steal:
        reasons.append(f"{use['steal']:.0%} of the CPU time was stolen by the hypervisor")
    return "; ".join(reasons)


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args],  # noqa: S607 - git from PATH is the one the developer uses
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    return info


def print_run_footer(report: Mapping[str, Any]) -> None:
    """How long the run took and how busy the machine was around it, with a warning when busy."""
    loaded = f" (model load {report['model_load_seconds']:.1f} s)" if "model_load_seconds" in report else ""
    print(f"run took {report['duration_s']:.0f} s{loaded}")
    machine = report["machine"]
    before = machine["load_average_before"][0]
    model = f" ({machine['cpu_model']})" if machine.get("cpu_model") else ""
    print(
        f"machine: {machine['cpu_count']} CPUs{model}; load average before the run {before:.2f}, "
        f"after {machine['load_average_after'][0]:.2f}"
    )
    if before > 0.5 * (machine["cpu_count"] or 1):
        print("WARNING: the machine was busy before the run started: timings are pessimistic")
