"""Start-up and freshness latency: how soon an agent can talk to Mnemo, and how soon a note is found.

Measures, on this machine, in one run:
- spawn of `mnemo up` -> first MCP `initialize` answered, -> "ready" printed, -> embedder ready
  (its `embedder_ready` log line), and "ready" printed -> embedder ready; cold: a new data directory
  and a new, empty graph cache (MNEMO_EMBED_CACHE_DIR), so the ONNX graph is built from the weights
  (the run fails unless it was); warm: the first cold run's directories again (the graph is read);
- spawn of `mnemo serve gateway` alone -> first MCP `initialize` answered;
- a note's write returning -> found by lexical search, and -> found by semantic search.
Prints a table and writes bench/results/latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
MNEMO = str(Path(sys.executable).parent / "mnemo")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
# JSON log events of mnemo_embed: the model is ready; the graph was built (and cached) by this start.
EMBEDDER_READY = '"embedder_ready"'
# What `mnemo up` prints once the gateway reaches every service (mnemo_server.up).
READY_BANNER = "Mnemo is ready"
GRAPH_BUILT = '"embedder_graph_cached"'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def initialize_answered(client: httpx.Client, base: str) -> bool:
    try:
        response = client.post(f"{base}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=2)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and "serverInfo" in response.text


class Spawned:
    """A child process whose stdout lines are timestamped as they arrive; or, with `log_file`,
    written to that file as a service manager would keep them, unread until asked for (`tail`)."""

    def __init__(self, args: list[str], env: dict[str, str], log_file: Path | None = None) -> None:
        self.started = time.perf_counter()
        self.lines: list[tuple[float, str]] = []
        self.log_file = log_file
        if log_file is not None:
            with log_file.open("w") as out:
                self.process = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
            return
        self.process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.perf_counter() - self.started, line.rstrip()))

    def printed(self, needle: str) -> bool:
        """Whether a line of the output so far holds `needle`."""
        if self.log_file is not None:
            return needle in self.log_file.read_text(errors="replace")
        return self.first(needle) is not None

    def tail(self, count: int) -> str:
        """The last `count` lines of the output."""
        if self.log_file is not None:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-count:])
        return "\n".join(text for _, text in self.lines[-count:])

    def first(self, needle: str) -> float | None:
        return next((t for t, line in self.lines if needle in line), None)

    def stop(self) -> float:
        started = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return time.perf_counter() - started


def measure_up(
    data_dir: str, cache_dir: str, expect_build: bool, measure_notes: bool = False, timeout: float = 180.0
) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "MNEMO_DATA_DIR": data_dir,
        "MNEMO_EMBED_CACHE_DIR": cache_dir,
        "MNEMO_HTTP_PORT": str(port),
        "MNEMO_LOG_FORMAT": "json",
        "MNEMO_HARVEST_AGENTS": "",
    }
    proc = Spawned([MNEMO, "up"], env)
    result: dict[str, Any] = {}
    with httpx.Client() as client:
        deadline = time.perf_counter() + timeout
        while "initialize_s" not in result:
            if proc.process.poll() is not None or time.perf_counter() > deadline:
                tail = "\n".join(text for _, text in proc.lines[-20:])
                raise RuntimeError(f"mnemo up exited or never answered:\n{tail}")
            if "listening_s" not in result and port_open(port):
                result["listening_s"] = time.perf_counter() - proc.started
            if "listening_s" in result and initialize_answered(client, base):
                result["initialize_s"] = time.perf_counter() - proc.started
                result["listening_to_initialize_s"] = result["initialize_s"] - result["listening_s"]
            else:
                time.sleep(0.01)
        while proc.first(READY_BANNER) is None:
            time.sleep(0.05)
        result["ready_s"] = proc.first(READY_BANNER)
        while (status := client.get(f"{base}/api/v1/status").json())["embedder_state"] == "loading":
            time.sleep(0.1)
        result["embedder_state"] = status["embedder_state"]
        if status["embedder_state"] != "ready":
            raise RuntimeError(f"the embedder did not load: {status['embedder_state']}")
        # The log line's arrival, not the status poll's: the poll would add up to its interval.
        while (ready := proc.first(EMBEDDER_READY)) is None:
            if time.perf_counter() > deadline:
                raise RuntimeError("the embedder is ready but its embedder_ready line never came")
            time.sleep(0.01)
        result["embedder_ready_s"] = ready
        result["ready_to_embedder_s"] = ready - result["ready_s"]
        result["graph_built"] = proc.first(GRAPH_BUILT) is not None
        if result["graph_built"] != expect_build:
            raise RuntimeError(f"expected graph_built={expect_build} with MNEMO_EMBED_CACHE_DIR={cache_dir}")
        result["freshness"] = measure_freshness(client, base) if measure_notes else None
    result["stop_s"] = proc.stop()
    result["exit_code"] = proc.process.returncode
    return result


def measure_gateway_alone() -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "MNEMO_HTTP_PORT": str(port),
        "MNEMO_GATEWAY_GRPC_ADDR": f"127.0.0.1:{free_port()}",
        "MNEMO_LOG_FORMAT": "json",
    }
    proc = Spawned([MNEMO, "serve", "gateway"], env)
    with httpx.Client() as client:
        while not initialize_answered(client, base):
            if proc.process.poll() is not None:
                raise RuntimeError("gateway exited:\n" + "\n".join(text for _, text in proc.lines[-20:]))
            time.sleep(0.02)
    answered = time.perf_counter() - proc.started
    proc.stop()
    return {"initialize_s": answered}


def measure_freshness(client: httpx.Client, base: str, notes: int = 20) -> dict[str, Any]:
    """Write one note at a time to an idle Mnemo; time until each search mode finds it."""
    workspace = f"fresh-{uuid.uuid4().hex[:6]}"
    client.post(f"{base}/api/v1/workspaces", json={"name": workspace}).raise_for_status()
    lexical, semantic = [], []
    for i in range(notes):
        token = uuid.uuid4().hex[:10]
        text = f"Note {i} about the {token} rollout: canary first, then ten percent of traffic, then all."
        response = client.post(f"{base}/api/v1/memories", json={"workspace": workspace, "content": text})
        response.raise_for_status()
        written_at = time.perf_counter()
        memory_id = response.json()["memory"]["id"]
        for mode, sink in (("lexical", lexical), ("semantic", semantic)):
            while True:
                found = client.post(
                    f"{base}/api/v1/search", json={"workspace": workspace, "query": text, "mode": mode, "limit": 3}
                ).json()
                if any(r["id"] == memory_id for r in found["results"]):
                    sink.append(time.perf_counter() - written_at)
                    break
                if time.perf_counter() - written_at > 30:
                    raise RuntimeError(f"note {memory_id} not found by {mode} search after 30 s")
                time.sleep(0.01)
    return {
        "notes": notes,
        "lexical_p50_s": statistics.median(lexical),
        "lexical_max_s": max(lexical),
        "semantic_p50_s": statistics.median(semantic),
        "semantic_p95_s": statistics.quantiles(semantic, n=20)[18],
        "semantic_max_s": max(semantic),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.latency", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold and warm `mnemo up` starts to time (default 3 each)")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = tempfile.mkdtemp(prefix="mnemo-lat-")
    cold, warm = [], []
    # Cold and warm starts alternate, so a change in the machine's load weighs on both alike.
    for i in range(args.runs):
        print(f"cold start {i + 1}/{args.runs} (new data directory, empty graph cache)...", flush=True)
        fresh = f"{root}/cold-{i}"
        cold.append(measure_up(f"{fresh}/data", f"{fresh}/cache", expect_build=True, measure_notes=i == 0))
        print(f"warm start {i + 1}/{args.runs} (the first cold start's directories)...", flush=True)
        warm.append(measure_up(f"{root}/cold-0/data", f"{root}/cold-0/cache", expect_build=False))
    gateway = [measure_gateway_alone() for _ in range(args.runs)]
    keys = (
        "listening_s",
        "initialize_s",
        "listening_to_initialize_s",
        "ready_s",
        "embedder_ready_s",
        "ready_to_embedder_s",
        "stop_s",
    )

    def median(runs: list[dict[str, Any]]) -> dict[str, float]:
        return {k: statistics.median(r[k] for r in runs) for k in keys}

    results = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "cold_up_runs": [{k: v for k, v in r.items() if k != "freshness"} for r in cold],
        "cold_up_median": median(cold),
        "warm_up_runs": [{k: v for k, v in r.items() if k != "freshness"} for r in warm],
        "warm_up_median": median(warm),
        "gateway_alone_initialize_s": [g["initialize_s"] for g in gateway],
        "freshness": cold[0]["freshness"],
    }
    out = REPO_ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "latency.json").write_text(json.dumps(results, indent=2))
    f = results["freshness"]
    cold_median = results["cold_up_median"]
    warm_median = results["warm_up_median"]
    rows = [
        (f"`mnemo up` cold (median of {len(cold)}): spawn -> gateway listening", f"{cold_median['listening_s']:.2f}"),
        ("`mnemo up` cold: spawn -> MCP initialize answered", f"{cold_median['initialize_s']:.2f}"),
        ("`mnemo up` cold: spawn -> ready printed", f"{cold_median['ready_s']:.2f}"),
        ("`mnemo up` cold: spawn -> embedder ready (graph built)", f"{cold_median['embedder_ready_s']:.2f}"),
        ("`mnemo up` cold: ready printed -> embedder ready", f"{cold_median['ready_to_embedder_s']:.2f}"),
        (f"`mnemo up` warm (median of {len(warm)}): spawn -> gateway listening", f"{warm_median['listening_s']:.2f}"),
        (
            "`mnemo up` warm: gateway listening -> MCP initialize answered",
            f"{warm_median['listening_to_initialize_s']:.3f}",
        ),
        ("`mnemo up` warm: spawn -> MCP initialize answered", f"{warm_median['initialize_s']:.2f}"),
        ("`mnemo up` warm: spawn -> ready printed", f"{warm_median['ready_s']:.2f}"),
        ("`mnemo up` warm: spawn -> embedder ready", f"{warm_median['embedder_ready_s']:.2f}"),
        ("`mnemo up` warm: ready printed -> embedder ready", f"{warm_median['ready_to_embedder_s']:.2f}"),
        ("`mnemo up` warm: SIGTERM -> exit", f"{warm_median['stop_s']:.2f}"),
        (
            "`mnemo serve gateway`: spawn -> MCP initialize (median)",
            f"{statistics.median(results['gateway_alone_initialize_s']):.2f}",
        ),
        (
            "write returned -> found by lexical search (p50 / max)",
            f"{f['lexical_p50_s']:.3f} / {f['lexical_max_s']:.3f}",
        ),
        (
            "write returned -> found by semantic search (p50 / p95 / max)",
            f"{f['semantic_p50_s']:.3f} / {f['semantic_p95_s']:.3f} / {f['semantic_max_s']:.3f}",
        ),
    ]
    print("\n| measured (seconds) | value |\n| --- | --- |")
    for label, value in rows:
        print(f"| {label} | {value} |")
    print(f"\nwritten to {out / 'latency.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
