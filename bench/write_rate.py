"""How fast Mnemo fills: single writes, batch writes and the embedding backlog, as a user meets them.

`mnemo up` runs in its own process on a fresh data directory (embedded PostgreSQL, the bundled
model on onnxruntime); this process is the client, over HTTP. Measured in one run:

1. raw model: the same embedder loaded in this process, embedding the benchmark's notes in batches
   of the worker's size while the server is idle, before the writes and again after the backlog
   has drained: the mean of the two is the ceiling the pipeline is compared with (a shared
   machine's speed drifts over a run);
2. single writes: sequential `POST /api/v1/memories`, latency percentiles; beside them the floor
   under any request, measured the same way: `GET /healthz` (HTTP and the gateway alone) and
   `GET /api/v1/workspaces` (HTTP, the gateway, one gRPC call, one query);
3. batch import: --notes notes of about 80 tokens (pieces of SciFact abstracts, bench/data/scifact)
   in `POST /api/v1/memories:batch` calls as `mnemo import` makes them (batches of 200, two in
   flight): committed notes/s over the import's wall time, and each sampled batch's last note
   looked up by lexical search right after its call returns;
4. the backlog: when each note of the import was embedded, read from its stored vectors
   (`chunk_vectors.embedded_at` of its last chunk, when that batch was stored) once no chunk is
   pending: the embed rate over time, the pipeline's steady rate (the middle 80 % of the notes),
   and the drain time (from the import's first call to its last vector stored) against the raw
   model's time for the same notes. `GET /api/v1/status` is polled meanwhile only to learn when
   the backlog has drained, every 2 s: each poll counts the queue on the cores the model runs on, so polling for
   the figures themselves (every 0.5 s, as this benchmark did before) took from what it measured;
5. where the CPU time went during the import and then the drain (Linux, /proc: CpuLedger), against
   the raw model's CPU time for the same notes: how much work beside the model the stack did, and
   the shortest drain that work allows (`work_floor_vs_raw_time`).

Prints a table and writes bench/results/write_rate.json and write_rate.png (commit and embed rate
over time).

    uv run python -m bench.write_rate                 # 10,000 notes: about 6 minutes on 2 cores
    uv run python -m bench.write_rate --notes 2000    # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

from bench.common import cpu_seconds, cpu_ticks, percentile
from bench.latency import MNEMO, READY_BANNER, Spawned, free_port
from mnemo_cli.commands.imports import BATCH as IMPORT_BATCH
from mnemo_cli.commands.imports import IN_FLIGHT
from mnemo_embed.local import BATCH_NICE
from mnemo_embed.settings import EmbeddingSettings
from mnemo_platform.settings import load as load_settings
from mnemo_store.embedded import server_processes

REPO_ROOT = Path(__file__).resolve().parents[1]
SCIFACT = REPO_ROOT / "bench" / "data" / "scifact" / "corpus.jsonl"
WORDS_PER_NOTE = 60  # about 80 word pieces of the model's tokenizer on this text


def notes(count: int) -> list[str]:
    """Pieces of SciFact abstracts, WORDS_PER_NOTE words each, in corpus order; each ends in a
    unique marker word so one note can be found by lexical search."""
    pieces: list[str] = []
    with SCIFACT.open() as lines:
        for line in lines:
            words = json.loads(line)["text"].split()
            for start in range(0, len(words) - WORDS_PER_NOTE + 1, WORDS_PER_NOTE):
                pieces.append(" ".join(words[start : start + WORDS_PER_NOTE]) + f" marker{len(pieces)}x")
                if len(pieces) == count:
                    return pieces
    raise SystemExit(f"the SciFact corpus has fewer than {count} pieces of {WORDS_PER_NOTE} words")


def title_of(i: int) -> str:
    return f"note {i}"


class CpuLedger:
    """Where the machine's CPU time goes, in core-seconds since boot, read from /proc (Linux only):
    the server's model (its threads at BATCH_NICE, which compute the worker's batches:
    mnemo_embed.local), the rest of the server process, its PostgreSQL (every process working in
    the data directory, and what the postmaster's finished children used), this process (the
    client), everything else on the machine, and the cores' idle time. Two readings apart add up
    to the seconds between them times the cores (to the kernel's tick)."""

    PARTS = ("model", "server", "postgres", "client", "elsewhere", "idle")

    def __init__(self, server_pid: int, pgdata: Path) -> None:
        self.server_pid = server_pid
        self.pgdata = pgdata.resolve()
        self.tick = os.sysconf("SC_CLK_TCK")

    def _postgres_s(self) -> float:
        postmaster = int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        seconds = 0.0
        for process in server_processes(self.pgdata):
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                seconds += times.user + times.system
                if process.pid == postmaster:  # and what its children that ended (backends) used
                    seconds += times.children_user + times.children_system
        return seconds

    def _model_ticks(self) -> int:
        """The server's threads at BATCH_NICE: onnxruntime's live as long as their session. psutil
        gives a thread's times but not its nice value, so both come from its stat line."""
        ticks = 0
        for tid in os.listdir(f"/proc/{self.server_pid}/task"):
            with contextlib.suppress(OSError):
                line = Path(f"/proc/{self.server_pid}/task/{tid}/stat").read_text()
                fields = line[line.rindex(")") + 2 :].split()  # after the name, which may hold spaces
                if int(fields[16]) == BATCH_NICE:
                    ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks

    def read(self) -> dict[str, float]:
        machine = cpu_seconds(cpu_ticks())
        server = psutil.Process(self.server_pid).cpu_times()  # the threads that ended included
        model = self._model_ticks() / self.tick
        client = os.times()
        parts = {
            "model": model,
            "server": server.user + server.system - model,
            "postgres": self._postgres_s(),
            "client": client.user + client.system,
        }
        # What the hypervisor stole counts as elsewhere: the parts add up to the interval's cores.
        parts["elsewhere"] = machine["busy"] + machine["steal"] - sum(parts.values())
        parts["idle"] = machine["idle"]
        return parts

    @staticmethod
    def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {part: round(after[part] - before[part], 2) for part in CpuLedger.PARTS}


def raw_model_rate(texts: list[str], count: int, settings: EmbeddingSettings) -> dict[str, Any]:
    """The bundled embedder in this process, as the worker runs it: its batch size, its thread
    count, the next batch handed over while one runs, and the text it embeds (each note's title as
    context, then the note), on `count` of the notes spread evenly over them all (later notes hold
    a few more word pieces)."""
    from mnemo_embed.chunking import Chunk
    from mnemo_embed.local import LocalEmbedder

    batch_size = settings.batch_size
    step = max(1, len(texts) // count)
    texts = [Chunk(0, title_of(i), texts[i]).embedding_input() for i in range(0, len(texts), step)][:count]

    async def run() -> dict[str, Any]:
        embedder = LocalEmbedder(batch_size=batch_size, threads=settings.threads)
        embedder.start()
        await embedder.wait_ready()
        await embedder.embed(texts[:batch_size])  # warm-up
        started, cpu, machine = time.perf_counter(), os.times(), cpu_ticks()
        # The next batch is handed over while the model runs on this one, as the worker does: its
        # runs queue behind this one's, and a lane that finishes early takes one of them.
        running: asyncio.Task[Any] | None = None
        for i in range(0, len(texts), batch_size):
            following = asyncio.create_task(embedder.embed(texts[i : i + batch_size]))
            if running is not None:
                await running
            running = following
        if running is not None:
            await running
        elapsed = time.perf_counter() - started
        used = os.times()
        # What the rest of the machine did meanwhile (the server is meant to be idle), and what the
        # hypervisor took.
        spent = cpu_seconds([b - a for a, b in zip(machine, cpu_ticks(), strict=False)])
        core_s = used.user + used.system - cpu.user - cpu.system
        tokens = statistics.mean(embedder.count_tokens(t) for t in texts[:200])
        return {
            "notes": len(texts),
            "seconds": elapsed,
            "notes_per_s": len(texts) / elapsed,
            "core_s_per_note": core_s / len(texts),
            "tokens_per_note": tokens,
            "others_core_s": round(spent["busy"] - core_s, 2),
            "steal_core_s": round(spent["steal"], 2),
        }

    return asyncio.run(run())


def latencies(call: Any, count: int) -> dict[str, Any]:
    """`call(i)` timed `count` times: p50, p90, p99 in milliseconds."""
    taken = []
    for i in range(count):
        started = time.perf_counter()
        call(i).raise_for_status()
        taken.append((time.perf_counter() - started) * 1000)
    return {
        "calls": count,
        "p50_ms": percentile(taken, 50),
        "p90_ms": percentile(taken, 90),
        "p99_ms": percentile(taken, 99),
    }


def single_writes(client: httpx.Client, base: str, workspace: str, count: int) -> dict[str, Any]:
    """Sequential single writes, and in the same minute the floor under them: a request the gateway
    answers alone (`/healthz`), and a read that crosses the same layers as a write (HTTP, the
    gateway, one gRPC call, one query) but does no work of its own (`GET /api/v1/workspaces`)."""
    floor = {
        "healthz": latencies(lambda i: client.get(f"{base}/healthz"), count),
        "one_query_read": latencies(lambda i: client.get(f"{base}/api/v1/workspaces"), count),
    }
    writes = latencies(
        lambda i: client.post(
            f"{base}/api/v1/memories",
            json={"workspace": workspace, "content": f"A single note, number {i}: the cache key includes the locale."},
        ),
        count,
    )
    return {**writes, "writes": count, "floor": floor}


def wait_drained(client: httpx.Client, base: str, timeout: float = 1800) -> None:
    """Until no chunk waits for its vector and no vector for the HNSW graph."""
    deadline = time.perf_counter() + timeout
    while True:
        status = client.get(f"{base}/api/v1/status").json()
        if not status["chunks_pending"] and not status["graph_pending"]:
            return
        if time.perf_counter() > deadline:
            raise RuntimeError("the embedding backlog did not drain")
        time.sleep(0.2)


class BacklogWatch:
    """Polls the status every `every` seconds in a thread: (seconds since start, chunks pending,
    vectors waiting for the HNSW graph).
    Only to learn when the backlog has drained: each poll counts the queue on the cores the model
    runs on, and when each note was embedded is read from its vector afterwards (embedded_times)."""

    def __init__(self, base: str, every: float = 2.0) -> None:
        self.base, self.every = base, every
        self.samples: list[tuple[float, int, int]] = []
        self.started = time.perf_counter()
        self.started_at = time.time()  # the same moment on the clock PostgreSQL's now() reads
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self._stop.is_set():
                status = client.get(f"{self.base}/api/v1/status").json()
                self.samples.append(
                    (time.perf_counter() - self.started, status["chunks_pending"], status["graph_pending"])
                )
                self._stop.wait(self.every)

    def drained_at(self, after: float, graphed: bool = False, timeout: float = 1800) -> float:
        """The time of the first sample after `after` (seconds since the start) that finds no chunk
        pending (and with `graphed`, no vector waiting for the graph either): when the backlog
        drained, to within one interval. Only this thread polls meanwhile: each poll counts the
        queue on the cores the model runs on."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for at, pending, ungraphed in list(self.samples):
                if at > after and pending == 0 and not (graphed and ungraphed):
                    return at
            self._stop.wait(0.05)
        raise RuntimeError("the embedding backlog did not drain")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def batch_import(
    base: str, workspace: str, texts: list[str], batch: int, in_flight: int, checks: int, ledger: CpuLedger
) -> dict[str, Any]:
    """The import as `mnemo import` sends it: batches of `batch`, `in_flight` of them sent before the
    first is answered. Returns per-batch (end time, notes), the committed rate over the import's
    wall time, the lexical checks (a sampled batch's last note searched once its call returns), and
    the CPU time each part of the stack spent during the import and then until the backlog drained."""
    watch = BacklogWatch(base)
    check_every = max(1, (len(texts) // batch) // checks)
    local = threading.local()

    def send(n: int) -> tuple[float, int, bool | None]:
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=120)
        client = local.client
        start = n * batch
        items = [
            {"content": text, "title": title_of(start + i), "idempotency_key": f"bench-{start + i}"}
            for i, text in enumerate(texts[start : start + batch])
        ]
        response = client.post(f"{base}/api/v1/memories:batch", json={"workspace": workspace, "items": items})
        response.raise_for_status()
        ended = time.perf_counter() - watch.started
        results = response.json()["results"]
        if any("error" in r for r in results):
            raise RuntimeError(f"batch {n} refused items: {[r for r in results if 'error' in r][:3]}")
        visible = None
        if n % check_every == 0:
            marker = texts[start + len(items) - 1].rsplit(" ", 1)[1]
            found = client.post(
                f"{base}/api/v1/search",
                json={"workspace": workspace, "query": marker, "mode": "lexical", "limit": 1},
            ).json()["results"]
            visible = bool(found) and found[0]["id"] == results[-1]["memory"]["id"]
        return ended, len(items), visible

    began = time.perf_counter() - watch.started
    at_start = ledger.read()
    with ThreadPoolExecutor(in_flight) as senders:
        sent = list(senders.map(send, range(math.ceil(len(texts) / batch))))
    at_commit = ledger.read()
    commits = sorted((ended, count) for ended, count, _ in sent)
    wall = commits[-1][0] - began
    checked = [visible for _, _, visible in sent if visible is not None]
    drained_s = watch.drained_at(commits[-1][0])
    at_drained = ledger.read()
    # Found by meaning once drained, before the grapher has let its vector into the graph: the
    # last note, asked for in its own words.
    with httpx.Client(timeout=120) as client:
        found = client.post(
            f"{base}/api/v1/search",
            json={"workspace": workspace, "query": texts[-1], "mode": "semantic", "limit": 1},
        ).json()["results"]
    semantic_at_drain = bool(found) and found[0].get("title") == title_of(len(texts) - 1)
    waiting_at_drain = next(ungraphed for at, _, ungraphed in watch.samples if at == drained_s)
    graphed_s = watch.drained_at(drained_s, graphed=True)
    watch.stop()
    at_graphed = ledger.read()
    return {
        "notes": len(texts),
        "batch": batch,
        "in_flight": in_flight,
        "commit_seconds": wall,
        "committed_per_s": len(texts) / wall,
        "import_wall_s": commits[-1][0],
        "started_at": watch.started_at,
        "drained_polled_s": drained_s,
        "graph_waiting_at_drain": waiting_at_drain,
        "semantically_found_at_drain": semantic_at_drain,
        "graphed_polled_s": graphed_s,
        "lexical_checks": len(checked),
        "lexically_visible_at_commit": sum(checked),
        "commits": commits,
        "backlog": watch.samples,
        "cpu_core_s": {
            "import": CpuLedger.spent(at_start, at_commit),
            "drain": CpuLedger.spent(at_commit, at_drained),
            "graph": CpuLedger.spent(at_drained, at_graphed),
        },
    }


def embedded_times(data_dir: Path, workspace: str, started_at: float) -> list[float]:
    """When each of `workspace`'s notes was embedded, in seconds since `started_at` (a wall-clock
    time), sorted: its last vector's `embedded_at`, the start of the transaction that stored it.
    Read from `mnemo up`'s own PostgreSQL, over the socket its postmaster.pid names."""
    socket_dir = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()[4]

    async def read() -> list[float]:
        conn = await asyncpg.connect(f"postgresql://postgres@/postgres?host={socket_dir}")
        try:
            # A note is embedded when its last chunk is (a few notes have two).
            rows = await conn.fetch(
                "SELECT extract(epoch FROM max(v.embedded_at))::float8 AS at FROM chunk_vectors v "
                "JOIN workspaces w ON w.id = v.workspace_id WHERE w.name = $1 GROUP BY v.memory_id ORDER BY 1",
                workspace,
            )
        finally:
            await conn.close()
        return [row["at"] - started_at for row in rows]

    return asyncio.run(read())


def embed_rate(times: list[float], window: float = 5.0, step: float = 0.5) -> list[tuple[float, float]]:
    """Notes embedded per second over the last `window` seconds, every `step` seconds, from the
    sorted times each was embedded (a shorter window shows the model's batches of 32, not its rate)."""
    rates = []
    at = window
    while times and at <= times[-1] + step:
        rates.append((at, (bisect.bisect_right(times, at) - bisect.bisect_right(times, at - window)) / window))
        at += step
    return rates


def steady_rate(times: list[float], middle: float = 0.8) -> float | None:
    """Notes embedded per second over the `middle` share of them (the first and last tenths left
    out): the pipeline running, without the worker's start after the import or the last batch."""
    first = int(len(times) * (1 - middle) / 2)
    last = len(times) - 1 - first
    if last <= first:
        return None
    span = times[last] - times[first]
    return (last - first) / span if span > 0 else None


def cpu_account(
    spent: dict[str, dict[str, float]], raw_model_core_s: float, raw_time: float, cores: int
) -> dict[str, Any]:
    """What the import and its drain cost in CPU time, against the raw model's for the same notes.

    `model_cpu_per_note_vs_raw`: the server's model threads' CPU time over the raw model's (above 1:
    the model does less per core-second beside the rest of the stack than alone). `work_beside_model`:
    the server's other threads, PostgreSQL and the client (the import, the indexes' upkeep, the
    worker's claims and stores). `work_floor_vs_raw_time`: how long the raw model's CPU time plus
    that work would take on every core with none idle, against the raw model's time; the drain
    cannot beat it without doing less work."""
    # The drain's: the grapher's work after it (the `graph` phase) is kept beside, not added.
    total = {part: round(sum(spent[phase][part] for phase in ("import", "drain")), 2) for part in CpuLedger.PARTS}
    beside = total["server"] + total["postgres"] + total["client"]
    return {
        "core_s": {**spent, "total": total},
        "raw_model_core_s": round(raw_model_core_s, 2),
        "model_cpu_per_note_vs_raw": total["model"] / raw_model_core_s,
        "work_beside_model_core_s": round(beside, 2),
        "work_floor_vs_raw_time": (raw_model_core_s + beside) / cores / raw_time,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    imported = report["import"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    commits = imported["commits"]
    commit_times = [0.0] + [t for t, _ in commits]
    commit_rates = [n / (commit_times[i + 1] - commit_times[i]) for i, (_, n) in enumerate(commits)]
    ax.step([t for t, _ in commits], commit_rates, where="pre", label="committed (notes/s)", color="tab:blue")
    rates = report["embed_rate_over_time"]
    ax.plot([t for t, _ in rates], [r for _, r in rates], label="embedded (notes/s)", color="tab:orange")
    raw = report["raw_model"]["notes_per_s"]
    ax.axhline(raw, linestyle="--", color="tab:gray", label=f"raw model ({raw:.0f} notes/s)")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the import started")
    ax.set_ylabel("notes per second (log)")
    ax.set_title(
        f"Importing {imported['notes']:,} notes through the gateway "
        f"(batches of {imported['batch']}, {imported['in_flight']} in flight)"
    )
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.write_rate", description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=10_000, help="notes in the batch import (default 10,000)")
    parser.add_argument(
        "--batch", type=int, default=IMPORT_BATCH, help=f"notes per call (default {IMPORT_BATCH}, as mnemo import)"
    )
    parser.add_argument(
        "--in-flight",
        type=int,
        default=IN_FLIGHT,
        help=f"batch calls sent before the first is answered (default {IN_FLIGHT}, as mnemo import)",
    )
    parser.add_argument("--singles", type=int, default=300, help="sequential single writes (default 300)")
    parser.add_argument("--raw-notes", type=int, default=1024, help="notes the raw model embeds (default 1,024)")
    parser.add_argument("--out", default="bench/results", help="results folder, relative to the repo root")
    args = parser.parse_args(argv)
    out = REPO_ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    texts = notes(args.notes)
    # The worker's own settings, from the environment `mnemo up` is given too.
    embedding = load_settings(EmbeddingSettings)

    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as data_dir:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "MNEMO_DATA_DIR": data_dir,
            "MNEMO_HTTP_PORT": str(port),
            # The default log level: a user's `mnemo up` logs at info.
            "MNEMO_LOG_FORMAT": "json",
            "MNEMO_HARVEST_AGENTS": "",
        }
        print(f"starting mnemo up on port {port} …", flush=True)
        # Its output goes to a file, as under a service manager: read through a pipe, each of its
        # lines would wake a thread of this process, the client being measured.
        up = Spawned([MNEMO, "up"], env, log_file=Path(data_dir) / "mnemo-up.log")
        try:
            with httpx.Client(timeout=120) as client:
                deadline = time.perf_counter() + 300
                while True:
                    if up.process.poll() is not None or time.perf_counter() > deadline:
                        raise RuntimeError("mnemo up did not start:\n" + up.tail(20))
                    # The banner says the gateway reaches every service (the status can report the
                    # model ready before: it loads while the services start).
                    try:
                        if (
                            up.printed(READY_BANNER)
                            and client.get(f"{base}/api/v1/status").json().get("embedder_state") == "ready"
                        ):
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.2)
                print("ready; measuring the raw model in this process (server idle) …", flush=True)
                raw_before = raw_model_rate(texts, args.raw_notes, embedding)
                print(
                    f"  raw model: {raw_before['notes_per_s']:.1f} notes/s (the rest of the machine "
                    f"{raw_before['others_core_s']:.1f} core-s, stolen {raw_before['steal_core_s']:.1f})",
                    flush=True,
                )
                for name in ("singles", "import"):
                    client.post(f"{base}/api/v1/workspaces", json={"name": name}).raise_for_status()
                print(f"{args.singles} single writes …", flush=True)
                single = single_writes(client, base, "singles", args.singles)
                wait_drained(client, base)
                print(f"importing {len(texts):,} notes in batches of {args.batch} …", flush=True)
                ledger = CpuLedger(up.process.pid, Path(data_dir) / "pg")
                imported = batch_import(base, "import", texts, args.batch, args.in_flight, checks=10, ledger=ledger)
                # Kept in the results (to the millisecond), so the rates can be worked out again.
                imported["embedded_times"] = [
                    round(t, 3) for t in embedded_times(Path(data_dir), "import", imported["started_at"])
                ]
                # Again once the server is idle: a shared machine's speed drifts over a run, and the
                # pipeline ran between the two.
                print("the raw model again (server idle) …", flush=True)
                raw_after = raw_model_rate(texts, args.raw_notes, embedding)
                print(
                    f"  raw model: {raw_after['notes_per_s']:.1f} notes/s (the rest of the machine "
                    f"{raw_after['others_core_s']:.1f} core-s, stolen {raw_after['steal_core_s']:.1f})",
                    flush=True,
                )
        except Exception:
            print(up.tail(30), file=sys.stderr)
            raise
        finally:
            up.stop()

    raw = {
        "notes": raw_before["notes"],
        "tokens_per_note": raw_before["tokens_per_note"],
        "before": raw_before,
        "after": raw_after,
        # The reference the pipeline is held to: the mean of the runs before and after it.
        "notes_per_s": statistics.mean([raw_before["notes_per_s"], raw_after["notes_per_s"]]),
    }
    raw_time = len(texts) / raw["notes_per_s"]
    raw["core_s_per_note"] = statistics.mean([raw_before["core_s_per_note"], raw_after["core_s_per_note"]])
    cpu = cpu_account(imported["cpu_core_s"], raw["core_s_per_note"] * len(texts), raw_time, os.cpu_count() or 1)
    times = imported["embedded_times"]
    if len(times) != len(texts):
        raise RuntimeError(f"{len(times)} of the {len(texts)} imported notes have a vector")
    imported["drained_s"] = times[-1]
    rates = embed_rate(times)
    steady = steady_rate(times)
    # As the runs before 2026-12-04 counted it: from the import's end to the last vector, the
    # worker's start after the import included.
    after_import = [t for t in times if t > imported["import_wall_s"]]
    since_import = len(after_import) / (times[-1] - imported["import_wall_s"]) if after_import else None
    report = {
        "run_id": uuid.uuid4().hex[:8],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "config": {
            "notes": len(texts),
            "batch": args.batch,
            "embed_batch_size": embedding.batch_size,
            "threads": embedding.threads,
        },
        "raw_model": raw,
        "single_writes": single,
        "import": imported,
        "embed_rate_over_time": rates,
        "figures": {
            "single_write_p50_ms": single["p50_ms"],
            "healthz_p50_ms": single["floor"]["healthz"]["p50_ms"],
            "one_query_read_p50_ms": single["floor"]["one_query_read"]["p50_ms"],
            "batch_committed_notes_per_s": imported["committed_per_s"],
            "lexically_visible_at_commit": f"{imported['lexically_visible_at_commit']}/{imported['lexical_checks']}",
            "raw_model_notes_per_s": raw["notes_per_s"],
            "pipeline_steady_notes_per_s": steady,
            "pipeline_vs_raw": steady / raw["notes_per_s"] if steady else None,
            "pipeline_since_import_vs_raw": since_import / raw["notes_per_s"] if since_import else None,
            "drained_s": imported["drained_s"],
            "raw_model_s_for_all": raw_time,
            "drained_vs_raw_time": imported["drained_s"] / raw_time,
            "found_by_meaning_at_drain": imported["semantically_found_at_drain"],
            "graph_waiting_at_drain": imported["graph_waiting_at_drain"],
            "graphed_polled_s": imported["graphed_polled_s"],
            "model_cpu_per_note_vs_raw": cpu["model_cpu_per_note_vs_raw"],
            "work_beside_model_core_s": cpu["work_beside_model_core_s"],
            "work_floor_vs_raw_time": cpu["work_floor_vs_raw_time"],
        },
        "cpu": cpu,
    }
    (out / "write_rate.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(report, out / "write_rate.png")
    print()
    for name, value in report["figures"].items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"  {name:34} {shown}")
    print(f"\nwrote {out / 'write_rate.json'} and {out / 'write_rate.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
