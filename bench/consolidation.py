"""Consolidation: precision and recall of the merge proposals on a labelled set of duplicate and
near-miss pairs, a threshold sweep, and the cost of a full and of an incremental pass at scale.

One throw-away PostgreSQL and a whole Mnemo in-process on the bundled model; everything goes
through the gateway's REST API (`POST /api/v1/consolidate`) as `mnemo consolidate --now` sends it.
What it does and the figures: bench/README.md, "Consolidation"; the set: bench/data/consolidation/.

    uv run python -m bench.consolidation                 # labelled set, then passes at 100,000 notes (~10 min)
    uv run python -m bench.consolidation --sizes 2000    # a quick check: about half a minute
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    DEFAULT_OUT,
    REPO_ROOT,
    check,
    embedded_postgres,
    git_info,
    machine_info,
    model_stack,
    print_run_footer,
    quiet_model_env,
    recorded_env,
    stack_env,
    wait_embedded,
)

PAIRS = REPO_ROOT / "bench" / "data" / "consolidation" / "pairs.jsonl"
LABELLED_WORKSPACE = "consolidation-labelled"
SCALE_WORKSPACE = "scale"  # where bench.scale's corpus writes its notes
COSINES = (0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98)
JACCARDS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
WRITE_BATCH = 200
SEED = 20261202
NOISE = 0.5  # as bench.scale: copied vectors at about cosine 0.89 to their source
# Each copy from one labelled-set vector, as when the cost figures were measured (bench/README.md).
PARENTS = 1


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...]
    changed: float
    out: Path


def load_pairs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]


def scores(pairs: Sequence[Mapping[str, Any]], predicted: set[frozenset[str]]) -> dict[str, Any]:
    """Precision over the labelled pairs a proposal put together, and recall of the duplicates."""
    dup = [p for p in pairs if p["kind"] == "duplicate"]
    near = [p for p in pairs if p["kind"] == "near_miss"]
    tp = sum(frozenset((p["a"], p["b"])) in predicted for p in dup)
    fp = sum(frozenset((p["a"], p["b"])) in predicted for p in near)
    return {
        "duplicates": len(dup),
        "near_misses": len(near),
        "true_positives": tp,
        "false_positives": fp,
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / len(dup), 4) if dup else None,
    }


async def pair_cosine(conn: Any, a: str, b: str) -> float:
    """The best cosine between a chunk of each (what the pass computes for neighbours)."""
    value = await conn.fetchval(
        """
        SELECT max(1 - (x.embedding <=> y.embedding)) FROM chunk_vectors x, chunk_vectors y
        WHERE x.memory_id = $1::uuid AND y.memory_id = $2::uuid AND x.indexed AND y.indexed
        """,
        a,
        b,
    )
    return float(value)


async def write_texts(http: httpx.AsyncClient, workspace: str, texts: Sequence[str]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for start in range(0, len(texts), WRITE_BATCH):
        chunk = texts[start : start + WRITE_BATCH]
        items = [{"workspace": workspace, "content": t, "kind": "note"} for t in chunk]
        body = check(await http.post("/api/v1/memories:batch", json={"items": items}), "batch write")
        for text, result in zip(chunk, body["results"], strict=True):
            ids[text] = result["memory"]["id"]
    return ids


async def measure_labelled(http: httpx.AsyncClient, pool: Any) -> dict[str, Any]:
    from mnemo_ingest.consolidate import jaccard, numbers_agree, word_set

    pairs = load_pairs()
    texts = list(dict.fromkeys(t for p in pairs for t in (p["a"], p["b"])))
    check(await http.post("/api/v1/workspaces", json={"name": LABELLED_WORKSPACE}), "register workspace")
    print(f"Writing the labelled set: {len(pairs)} pairs, {len(texts)} distinct texts …", flush=True)
    ids = await write_texts(http, LABELLED_WORKSPACE, texts)
    text_of = {v: k for k, v in ids.items()}
    await wait_embedded(http, LABELLED_WORKSPACE)

    started = time.perf_counter()
    body = check(await http.post("/api/v1/consolidate", json={"workspace": LABELLED_WORKSPACE}), "consolidate")
    wall = time.perf_counter() - started
    (one,) = body["passes"]
    predicted = set()
    for merge in one["merges"]:
        members = [text_of[m] for m in merge["memory_ids"]]
        predicted |= {frozenset(c) for c in itertools.combinations(members, 2)}
    labelled = {frozenset((p["a"], p["b"])) for p in pairs}
    unlabelled = [sorted(x) for x in predicted - labelled]
    by_source = {
        source: scores([p for p in pairs if p["source"] == source], predicted)
        for source in sorted({p["source"] for p in pairs})
    }
    rerun = check(await http.post("/api/v1/consolidate", json={"workspace": LABELLED_WORKSPACE}), "rerun")
    rerun_full = check(
        await http.post("/api/v1/consolidate", json={"workspace": LABELLED_WORKSPACE, "full": True}), "full rerun"
    )

    print("Scoring every labelled pair for the sweep …", flush=True)
    scored = []
    async with pool.acquire() as conn:
        for p in pairs:
            cosine = await pair_cosine(conn, ids[p["a"]], ids[p["b"]])
            overlap = jaccard(word_set(p["a"]), word_set(p["b"]))
            scored.append({**p, "cosine": cosine, "jaccard": overlap, "numbers_agree": numbers_agree(p["a"], p["b"])})
    sweep = []
    for rule, c, j in itertools.product((True, False), COSINES, JACCARDS):
        chosen = {
            frozenset((p["a"], p["b"]))
            for p in scored
            if p["cosine"] >= c and p["jaccard"] >= j and (p["numbers_agree"] or not rule)
        }
        sweep.append({"numbers_must_agree": rule, "min_cosine": c, "min_jaccard": j, **scores(pairs, chosen)})
    misses = sorted(
        (p for p in scored if p["kind"] == "duplicate" and frozenset((p["a"], p["b"])) not in predicted),
        key=lambda p: p["cosine"],
    )
    false_hits = [p for p in scored if p["kind"] == "near_miss" and frozenset((p["a"], p["b"])) in predicted]
    return {
        "pairs": len(pairs),
        "texts": len(texts),
        "pass": {"compared": one["compared"], "pairs": one["pairs"], "merges": len(one["merges"]), "wall_s": wall},
        "overall": scores(pairs, predicted),
        "by_source": by_source,
        "unlabelled_pairs_proposed": len(unlabelled),
        "unlabelled_examples": unlabelled[:5],
        "rerun_new_merges": sum(len(x["merges"]) for x in rerun["passes"]),
        "full_rerun_new_merges": sum(len(x["merges"]) for x in rerun_full["passes"]),
        "sweep": sweep,
        "missed_duplicates": [_brief(p) for p in misses[:10]],
        "false_positives": [_brief(p) for p in false_hits],
        "score_ranges": _ranges(scored),
    }


def _brief(p: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": p["id"],
        "cosine": round(p["cosine"], 3),
        "numbers_agree": p["numbers_agree"],
        "jaccard": round(p["jaccard"], 3),
        "a": p["a"][:160],
        "b": p["b"][:160],
    }


def _ranges(scored: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for (source, kind), group in itertools.groupby(
        sorted(scored, key=lambda p: (p["source"], p["kind"])), key=lambda p: (p["source"], p["kind"])
    ):
        items = list(group)
        cos = sorted(p["cosine"] for p in items)
        jac = sorted(p["jaccard"] for p in items)
        out[f"{source}/{kind}"] = {
            "cosine_min_median_max": [round(cos[0], 3), round(cos[len(cos) // 2], 3), round(cos[-1], 3)],
            "jaccard_min_median_max": [round(jac[0], 3), round(jac[len(jac) // 2], 3), round(jac[-1], 3)],
        }
    return out


async def consolidate(http: httpx.AsyncClient, **body: Any) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    result = check(await http.post("/api/v1/consolidate", json={"workspace": SCALE_WORKSPACE, **body}), "consolidate")
    (one,) = result["passes"]
    return one, time.perf_counter() - started


async def measure_cost(
    stack: Any, http: httpx.AsyncClient, pool: Any, cfg: Config, loaded: int, size: int
) -> dict[str, Any]:
    """Grows the scale workspace to `size` notes (copied vectors, as bench.scale does), then times a
    full pass, a pass with nothing changed, and a pass after `cfg.changed` of the notes changed."""
    from bench.scale import CorpusSpec, base_vectors, build_vector_index, drop_vector_index, fill_copies, load_notes

    spec = CorpusSpec(SEED, max(cfg.sizes), 0, 0.0)
    embedder_model = stack.ingest.embedder.model
    workers = stack.ingest.workers
    base = await base_vectors(pool)
    await workers.stop()  # the model must not embed what gets a copied vector
    try:
        definition = await drop_vector_index(pool)
        print(f"Writing notes {loaded:,}–{size:,} into {SCALE_WORKSPACE!r} …", flush=True)
        started = time.perf_counter()
        await asyncio.to_thread(load_notes, stack.base_url, spec, loaded, size)
        load_s = time.perf_counter() - started
        filled, _ = await fill_copies(pool, base, embedder_model, SEED + size, NOISE, PARENTS)
        build_s, _ = await build_vector_index(pool, definition)
        print(f"  {size - loaded:,} notes in {load_s:.0f} s; HNSW index built in {build_s:.0f} s", flush=True)
        await pool.execute("VACUUM (ANALYZE)", timeout=3600)
        plan = await explain_neighbours(pool, stack.ingest.settings.consolidate_neighbours)
        print(f"Full pass over {size:,} notes …", flush=True)
        full, full_s = await consolidate(http, full=True)
        print(f"  {full['compared']:,} compared, {full['pairs']} pairs, {len(full['merges'])} merges in {full_s:.1f} s")
        # A pass's mark trails its start by a minute (mnemo_store.consolidation.SETTLE_MARGIN), so
        # the next pass would compare again the vectors stored just before it. Between two hourly
        # passes the data is older than that: the mark is moved to now, as an hour would.
        await pool.execute(
            "UPDATE consolidation_marks SET scanned_to = clock_timestamp() WHERE workspace_id = $1", SCALE_WORKSPACE
        )
        idle, idle_s = await consolidate(http)
        print(f"  pass with nothing changed: {idle['compared']} compared in {idle_s:.2f} s", flush=True)

        n_changed = max(1, int(size * cfg.changed))
        rng = random.Random(SEED + size)
        rows = await pool.fetch(
            "SELECT id FROM memories WHERE workspace_id = $1 AND deleted_at IS NULL ORDER BY id", SCALE_WORKSPACE
        )
        chosen = rng.sample([str(r["id"]) for r in rows], n_changed)
        print(f"Changing {n_changed:,} notes ({cfg.changed:.0%}) …", flush=True)
        contents = await pool.fetch(
            """
            SELECT m.id::text AS id, v.content FROM memories m
            JOIN memory_versions v ON v.memory_id = m.id AND v.version = m.version WHERE m.id = ANY($1::uuid[])
            """,
            chosen,
        )
        for row in contents:
            check(
                await http.patch(
                    f"/api/v1/memories/{row['id']}",
                    json={"workspace": SCALE_WORKSPACE, "content": row["content"] + " (revised)"},
                ),
                "update",
            )
        await fill_copies(pool, base, embedder_model, SEED + size + 1, NOISE, PARENTS)
        changed, changed_s = await consolidate(http)
        print(f"  incremental pass: {changed['compared']:,} compared in {changed_s:.2f} s", flush=True)
    finally:
        await workers.start()
    return {
        "notes": size,
        "load_s": round(load_s, 1),
        "vectors_filled": filled,
        "hnsw_build_s": round(build_s, 1),
        "full_pass": {
            "compared": full["compared"],
            "pairs": full["pairs"],
            "merges": len(full["merges"]),
            "server_s": round(full["seconds"], 2),
            "wall_s": round(full_s, 2),
            "per_memory_ms": round(1000 * full["seconds"] / max(1, full["compared"]), 3),
        },
        "neighbour_plan": plan,
        "unchanged_pass": {"compared": idle["compared"], "wall_s": round(idle_s, 3)},
        "incremental_pass": {
            "changed": n_changed,
            "compared": changed["compared"],
            "pairs": changed["pairs"],
            "merges": len(changed["merges"]),
            "server_s": round(changed["seconds"], 3),
            "wall_s": round(changed_s, 3),
        },
    }


async def explain_neighbours(pool: Any, k: int) -> list[str]:
    """The plan of the neighbour statement for a few chunks: one HNSW index scan per chunk."""
    from mnemo_store import consolidation

    ids = [
        r["chunk_id"]
        for r in await pool.fetch(
            "SELECT chunk_id FROM chunk_vectors WHERE indexed AND workspace_id = $1 LIMIT 5", SCALE_WORKSPACE
        )
    ]
    async with pool.acquire() as conn, conn.transaction():
        await consolidation.scan_settings(conn, k)
        rows = await conn.fetch(
            "EXPLAIN (ANALYZE, COSTS OFF) " + consolidation.NEIGHBOURS_SQL, ids, SCALE_WORKSPACE, k + 2, 0.85
        )
    return [r[0] for r in rows]


def extrapolate(costs: Sequence[Mapping[str, Any]], target: int = 100_000) -> dict[str, Any] | None:
    """A linear extrapolation of the largest size measured (per-memory cost x notes), if below target."""
    if not costs or max(c["notes"] for c in costs) >= target:
        return None
    last = max(costs, key=lambda c: c["notes"])
    per_ms = last["full_pass"]["per_memory_ms"]
    incr = last["incremental_pass"]
    return {
        "target_notes": target,
        "from_notes": last["notes"],
        "full_pass_s": round(per_ms * target / 1000, 1),
        "incremental_pass_s": round(incr["server_s"] * target / last["notes"], 2),
        "method": "linear in the memories compared, at the per-memory cost of the largest size measured; an HNSW "
        "search grows about logarithmically with the index, so this is a rough figure, not a measurement",
    }


async def run(cfg: Config, dsn: str) -> dict[str, Any]:
    from mnemo_store import open_pool

    env = stack_env(dsn)
    env["MNEMO_CONSOLIDATE_INTERVAL_S"] = "0"  # only the passes the benchmark asks for
    report: dict[str, Any] = {"benchmark": "consolidation", "started_at": datetime.now(UTC).isoformat()}
    started = time.perf_counter()
    load_before = os.getloadavg()
    async with model_stack(env) as (stack, _embedder, model_load_s):
        report["model_load_seconds"] = model_load_s
        settings = stack.ingest.settings
        report["config"] = {
            "min_cosine": settings.consolidate_min_cosine,
            "min_jaccard": settings.consolidate_min_jaccard,
            "neighbours": settings.consolidate_neighbours,
            "numbers_must_agree": settings.consolidate_numbers_must_agree,
            "sizes": list(cfg.sizes),
            "changed": cfg.changed,
            "vector_noise": NOISE,
            "stack_env": recorded_env(env),
        }
        pool = await open_pool(dsn, 1, 4)
        try:
            async with httpx.AsyncClient(base_url=stack.base_url, timeout=3600) as http:
                report["labelled"] = await measure_labelled(http, pool)
                print_labelled(report["labelled"])
                check(await http.post("/api/v1/workspaces", json={"name": SCALE_WORKSPACE}), "register workspace")
                costs, loaded = [], 0
                for size in cfg.sizes:
                    costs.append(await measure_cost(stack, http, pool, cfg, loaded, size))
                    loaded = size
                report["cost"] = costs
                report["cost_extrapolated"] = extrapolate(costs)
        finally:
            await pool.close()
    report["duration_s"] = time.perf_counter() - started
    report["git"] = git_info()
    report["machine"] = {**machine_info(), "load_average_before": load_before, "load_average_after": os.getloadavg()}
    return report


def print_labelled(labelled: Mapping[str, Any]) -> None:
    o = labelled["overall"]
    print(
        f"Labelled set: precision {o['precision']}, recall {o['recall']} "
        f"({o['true_positives']} of {o['duplicates']} duplicates, {o['false_positives']} of {o['near_misses']} "
        f"near misses proposed; {labelled['unlabelled_pairs_proposed']} unlabelled pairs)"
    )
    for source, s in labelled["by_source"].items():
        print(f"  {source:<12} precision {s['precision']}, recall {s['recall']}")
    print(f"  rerun: {labelled['rerun_new_merges']} new merges; full rerun: {labelled['full_rerun_new_merges']}")
    print("  sweep (min_cosine, min_jaccard: precision / recall):")
    by_c = collections.defaultdict(list)
    for row in labelled["sweep"]:
        key = (row["numbers_must_agree"], row["min_cosine"])
        by_c[key].append(f"{row['min_jaccard']}: {row['precision']}/{row['recall']}")
    for (rule, c), cells in by_c.items():
        print(f"    numbers {'agree' if rule else 'any  '} {c}: " + "  ".join(cells))


def print_costs(report: Mapping[str, Any]) -> None:
    for c in report.get("cost", []):
        f, i = c["full_pass"], c["incremental_pass"]
        print(
            f"{c['notes']:,} notes: full pass {f['server_s']} s ({f['per_memory_ms']} ms a memory), "
            f"incremental with {i['changed']} changed {i['server_s']} s, unchanged {c['unchanged_pass']['wall_s']} s"
        )
    if report.get("cost_extrapolated"):
        e = report["cost_extrapolated"]
        print(
            f"extrapolated to {e['target_notes']:,}: full pass ~{e['full_pass_s']} s, "
            f"incremental (1%) ~{e['incremental_pass_s']} s"
        )


def parse_args(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(prog="bench.consolidation", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated note counts for the cost (default 100000)")
    parser.add_argument(
        "--changed", type=float, default=0.01, help="share of notes changed before the incremental pass"
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results directory")
    args = parser.parse_args(argv)
    sizes = tuple(sorted(int(s) for s in args.sizes.split(",") if s.strip()))
    out = Path(args.out)
    return Config(sizes, args.changed, out if out.is_absolute() else REPO_ROOT / out)


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    quiet_model_env()
    with embedded_postgres() as dsn:
        report = asyncio.run(run(cfg, dsn))
    cfg.out.mkdir(parents=True, exist_ok=True)
    path = cfg.out / "consolidation.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print_costs(report)
    print_run_footer(report)
    print(f"wrote {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
