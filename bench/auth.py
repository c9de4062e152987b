"""What authentication costs per request: the same REST calls with MNEMO_AUTH off and on.

With auth on, the gateway resolves every request's bearer token through SearchService.Authenticate (a gRPC
call and an indexed lookup) and signs the principal it forwards; every service verifies that signature.
This benchmark starts a whole Mnemo in-process (hash embedder: no model inference), once per mode and
round, alternating modes so that drift in the machine's load falls on both, and times sequential calls:
- `GET /api/v1/workspaces` (the cheapest authenticated route: the overhead shows most),
- `POST /api/v1/search` (lexical), and `POST /api/v1/memories` (a write).
Prints medians, p95 and the on/off ratio of medians, and writes bench/results/auth.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, embedded_postgres, git_info, machine_info, percentile, stack_env

REPO_ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ("list_workspaces", "search_lexical", "write")
SEED = 200


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.auth", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="stack starts per mode, alternating (default 3)")
    parser.add_argument("--requests", type=int, default=200, help="timed calls per operation and round (default 200)")
    parser.add_argument("--out", default="bench/results")
    return parser.parse_args(argv)


async def create_database(dsn: str, name: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    base, _, query = dsn.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


async def timed_round(dsn: str, auth: bool, requests: int) -> dict[str, list[float]]:
    """One stack, seeded, then each operation `requests` times in turn; latencies in ms."""
    import httpx

    from mnemo_embed import HashEmbedder
    from mnemo_server.stack import Stack, StackConfig

    env = stack_env(dsn) | {"MNEMO_EMBEDDER": "hash", "MNEMO_AUTH": "on" if auth else "off"}
    # Far above what the run sends: the bucket is still consulted (as in production), never empties.
    env["MNEMO_RATE_LIMIT_PER_MIN"] = "100000000"
    stack = Stack(StackConfig.from_env(env), embedder=HashEmbedder(64))
    await stack.start()
    try:
        await stack.after_start()
        headers = {"Authorization": f"Bearer {stack.bootstrap_token}"} if auth else {}
        async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=60, trust_env=False) as http:

            async def check(response: httpx.Response, what: str) -> dict[str, Any]:
                if response.status_code >= 400:
                    raise BenchError(f"{what}: {response.status_code} {response.text[:300]}")
                return response.json()

            await check(await http.post("/api/v1/workspaces", json={"name": "bench"}), "add workspace")
            for i in range(SEED):
                body = {"workspace": "bench", "content": f"Seed note {i}: the deploy uses blue-green slots {i % 7}."}
                await check(await http.post("/api/v1/memories", json=body), "seed write")
            calls = {
                "list_workspaces": lambda i: http.get("/api/v1/workspaces"),
                "search_lexical": lambda i: http.post(
                    "/api/v1/search", json={"workspace": "bench", "query": f"deploy slots {i % 7}", "mode": "lexical"}
                ),
                "write": lambda i: http.post(
                    "/api/v1/memories", json={"workspace": "bench", "content": f"Timed note {i} about canaries."}
                ),
            }
            latencies: dict[str, list[float]] = {op: [] for op in OPERATIONS}
            for op in OPERATIONS:
                for i in range(10):  # warm-up: connections, caches, the token's last-used stamp
                    await check(await calls[op](-i - 1), op)
                for i in range(requests):
                    started = time.perf_counter()
                    response = await calls[op](i)
                    latencies[op].append((time.perf_counter() - started) * 1000)
                    await check(response, op)
            return latencies
    finally:
        await stack.stop()


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(percentile(values, 50), 2), "p95_ms": round(percentile(values, 95), 2)}


async def run(cfg: argparse.Namespace) -> dict[str, Any]:
    collected = {mode: {op: [] for op in OPERATIONS} for mode in ("off", "on")}
    print("Starting embedded PostgreSQL …", flush=True)
    with embedded_postgres() as dsn:
        for round_no in range(cfg.rounds):
            # Alternate which mode goes first, so neither always meets a colder machine.
            for mode in ("off", "on") if round_no % 2 == 0 else ("on", "off"):
                database = await create_database(dsn, f"auth_{mode}_{round_no}")
                print(f"round {round_no + 1}/{cfg.rounds}, auth {mode}: {len(OPERATIONS)} x {cfg.requests} calls …")
                latencies = await timed_round(database, mode == "on", cfg.requests)
                for op, values in latencies.items():
                    collected[mode][op] += values
                    print(f"  {op}: p50 {percentile(values, 50):.2f} ms", flush=True)
    results = {}
    for op in OPERATIONS:
        off, on = summary(collected["off"][op]), summary(collected["on"][op])
        results[op] = {"off": off, "on": on, "ratio_p50": round(on["p50_ms"] / off["p50_ms"], 2)}
        results[op]["added_p50_ms"] = round(on["p50_ms"] - off["p50_ms"], 2)
    return results


def main(argv: list[str] | None = None) -> int:
    from mnemo_platform import configure_logging

    cfg = parse_args(sys.argv[1:] if argv is None else list(argv))
    configure_logging("warning", "auto")  # a line per request would be most of what this prints
    load_before = list(os.getloadavg())
    try:
        results = asyncio.run(run(cfg))
    except BenchError as error:
        print(f"auth: {error}", file=sys.stderr)
        return 1
    report = {
        "benchmark": "auth",
        "machine": machine_info(),
        "load_average": {"start": load_before, "end": list(os.getloadavg())},
        "git": git_info(),
        "config": {"rounds": cfg.rounds, "requests": cfg.requests, "seed_memories": SEED},
        "results": results,
    }
    print(f"\n{'operation':<18}{'off p50':>10}{'on p50':>10}{'added':>10}{'ratio':>8}{'off p95':>10}{'on p95':>10}")
    for op, r in results.items():
        print(
            f"{op:<18}{r['off']['p50_ms']:>10.2f}{r['on']['p50_ms']:>10.2f}{r['added_p50_ms']:>10.2f}"
            f"{r['ratio_p50']:>8.2f}{r['off']['p95_ms']:>10.2f}{r['on']['p95_ms']:>10.2f}"
        )
    print(f"load average: {report['load_average']}")
    out = REPO_ROOT / cfg.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "auth.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out / 'auth.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
