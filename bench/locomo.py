"""LoCoMo retrieval benchmark: every turn a memory, every question a search, scored per mode via REST."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_OUT,
    REPO_ROOT,
    BenchError,
    check,
    embedded_postgres,
    fmt,
    git_info,
    machine_info,
    mean,
    model_stack,
    ndcg_at,
    percentile,
    print_run_footer,
    quiet_model_env,
    recall_at,
    recorded_env,
    stack_env,
    wait_embedded,
)

DEFAULT_DATA = "bench/data/locomo/locomo-dev.json"
MODES = ("lexical", "semantic", "hybrid")
TOP_K = 10
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Evidence ids are noisy ("D8:6; D9:17", "D:11:26", "D30:05"): this pattern plus int() fixes all of them.
DIA_ID = re.compile(r"D:?(\d+):(\d+)")
SESSION_KEY = re.compile(r"session_(\d+)")
# The dev file's count of category 1-4 items with non-empty evidence; a different count means
# the data or the filtering changed and the figures are not comparable with earlier runs.
EXPECTED_DEV_QUESTIONS = 760
WARMUP_QUERIES = 3

# Reference points quoted in the issue, for comparison only (not measured here).
REFERENCES: dict[str, dict[str, float]] = {
    "BM25": {"recall@10": 0.548},
    "MiniLM alone": {"recall@10": 0.521},
    "BM25+MiniLM RRF": {"recall@10": 0.592},
    "mcp-memory-service 12.4.0 (best mode)": {"recall@5": 0.554, "recall@10": 0.664, "search_p50_ms": 34.0},
}
# The search-engine issue's target (it was 0.68 before the BM25 leg).
TARGET_HYBRID_RECALL_AT_10 = 0.72

DiaKey = tuple[int, int]


# -- data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    sample_id: str
    session: int
    dia_id: str
    key: DiaKey
    speaker: str
    text: str
    caption: str
    date: str


@dataclass(frozen=True)
class Question:
    sample_id: str
    index: int
    question: str
    answer: str
    category: int
    evidence: frozenset[DiaKey]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: dict[str, int] = field(default_factory=dict)


def dia_label(key: DiaKey) -> str:
    return f"D{key[0]}:{key[1]}"


def normalise_evidence(evidence: Sequence[Any]) -> frozenset[DiaKey]:
    keys: set[DiaKey] = set()
    for item in evidence:
        for match in DIA_ID.finditer(str(item)):
            keys.add((int(match.group(1)), int(match.group(2))))
    return frozenset(keys)


def parse_conversation(sample: dict[str, Any]) -> Conversation:
    sample_id = sample["sample_id"]
    conv = sample["conversation"]
    turns: list[Turn] = []
    # Iterate over session_<N> keys, not date keys: conv-26 has dates for sessions that do not exist.
    sessions = sorted(int(m.group(1)) for k in conv if (m := SESSION_KEY.fullmatch(k)))
    for n in sessions:
        date = conv.get(f"session_{n}_date_time", "")
        for raw in conv[f"session_{n}"]:
            match = DIA_ID.fullmatch(raw["dia_id"])
            if match is None:
                raise BenchError(f"{sample_id}: turn id {raw['dia_id']!r} is not D<session>:<turn>")
            turns.append(
                Turn(
                    sample_id=sample_id,
                    session=n,
                    dia_id=raw["dia_id"],
                    key=(int(match.group(1)), int(match.group(2))),
                    speaker=raw["speaker"],
                    text=raw.get("text", ""),
                    caption=raw.get("blip_caption", ""),
                    date=date,
                )
            )
    questions: list[Question] = []
    skipped = {"category_5": 0, "no_evidence": 0}
    for i, qa in enumerate(sample["qa"]):
        category = int(qa["category"])
        if category == 5:
            skipped["category_5"] += 1
            continue
        evidence = normalise_evidence(qa.get("evidence", []))
        if not evidence:
            skipped["no_evidence"] += 1
            continue
        questions.append(Question(sample_id, i, qa["question"], str(qa.get("answer", "")), category, evidence))
    return Conversation(sample_id, turns, questions, skipped)


def load_dataset(path: Path, limit: int | None) -> list[Conversation]:
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(samples, list) or not samples:
        raise BenchError(f"{path} is not a non-empty JSON list of LoCoMo samples")
    if limit is not None:
        samples = samples[:limit]
    return [parse_conversation(s) for s in samples]


def memory_for_turn(turn: Turn) -> dict[str, Any]:
    """The REST write body for one turn: the representation under test, kept in one place."""
    text = turn.text
    if turn.caption:
        text = f"{text} [shares a photo: {turn.caption}]".strip()
    return {
        "workspace": turn.sample_id,
        "title": f"{turn.speaker} · {turn.date}" if turn.date else turn.speaker,
        "content": f"{turn.speaker}: {text}",
        "tags": ["locomo", f"session-{turn.session}"],
        "metadata": {"dia_id": turn.dia_id, "session": turn.session, "date": turn.date},
    }


# -- metrics ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One question answered by one mode."""

    question: Question
    mode: str
    ranked: list[DiaKey | None]
    latency_s: float
    degraded: list[str]
    relaxed: bool

    @property
    def recall5(self) -> float:
        return recall_at(self.ranked, self.question.evidence, 5)

    @property
    def recall10(self) -> float:
        return recall_at(self.ranked, self.question.evidence, TOP_K)

    @property
    def ndcg10(self) -> float:
        # Binary relevance: the ideal ranking puts min(|evidence|, 10) relevant turns first.
        return ndcg_at(self.ranked, dict.fromkeys(self.question.evidence, 1), TOP_K)


def summarise_mode(outcomes: list[Outcome]) -> dict[str, Any]:
    latencies_ms = [o.latency_s * 1000 for o in outcomes]
    per_category: dict[str, Any] = {}
    for cat, name in CATEGORIES.items():
        subset = [o for o in outcomes if o.question.category == cat]
        per_category[str(cat)] = {
            "name": name,
            "questions": len(subset),
            "recall@5": mean([o.recall5 for o in subset]),
            "recall@10": mean([o.recall10 for o in subset]),
            "ndcg@10": mean([o.ndcg10 for o in subset]),
        }
    return {
        "questions": len(outcomes),
        "recall@5": mean([o.recall5 for o in outcomes]),
        "recall@10": mean([o.recall10 for o in outcomes]),
        "ndcg@10": mean([o.ndcg10 for o in outcomes]),
        "hit@10": mean([1.0 if o.recall10 > 0 else 0.0 for o in outcomes]),
        "per_category": per_category,
        "latency_ms": {
            "p50": percentile(latencies_ms, 50),
            "p95": percentile(latencies_ms, 95),
            "mean": mean(latencies_ms),
            "max": max(latencies_ms) if latencies_ms else float("nan"),
        },
        "degraded_responses": sum(1 for o in outcomes if o.degraded),
        "lexical_relaxed_responses": sum(1 for o in outcomes if o.relaxed),
        "short_result_lists": sum(1 for o in outcomes if len(o.ranked) < TOP_K),
        "foreign_hits": sum(1 for o in outcomes for key in o.ranked if key is None),
    }


# -- the run ----------------------------------------------------------------------------------


@dataclass
class RunConfig:
    data: Path
    conversations: int | None
    out: Path
    concurrency: int
    search_concurrency: int
    dump_failures: int
    log_level: str


async def write_all(
    client: Any, conversations: list[Conversation], concurrency: int
) -> tuple[dict[str, dict[str, DiaKey]], dict[str, Any]]:
    """Writes every turn; returns memory id -> turn key per conversation, and the timings."""
    for conv in conversations:
        check(await client.post("/api/v1/workspaces", json={"name": conv.sample_id}), "register workspace")
    turns = [t for conv in conversations for t in conv.turns]
    ids: dict[str, dict[str, DiaKey]] = {conv.sample_id: {} for conv in conversations}
    latencies: list[float] = []
    semaphore = asyncio.Semaphore(concurrency)
    done = 0
    started = time.perf_counter()

    async def write(turn: Turn) -> None:
        nonlocal done
        async with semaphore:
            t0 = time.perf_counter()
            body = check(await client.post("/api/v1/memories", json=memory_for_turn(turn)), "write")
            latencies.append(time.perf_counter() - t0)
        if body["outcome"] != "created":
            raise BenchError(f"write of {turn.sample_id} {turn.dia_id} gave outcome {body['outcome']!r}")
        ids[turn.sample_id][body["memory"]["id"]] = turn.key
        done += 1
        if done % 500 == 0:
            rate = done / (time.perf_counter() - started)
            print(f"  {done}/{len(turns)} written ({rate:.0f}/s)", flush=True)

    await asyncio.gather(*(write(t) for t in turns))
    written_s = time.perf_counter() - started
    print(f"  {len(turns)}/{len(turns)} written in {written_s:.1f} s; waiting for embeddings", flush=True)

    status = await wait_embedded(client)
    embedded_s = time.perf_counter() - started
    embedded = int(status["chunks_embedded"])
    if int(status["memories"]) != len(turns):
        raise BenchError(f"status reports {status['memories']} memories; {len(turns)} were written")
    latencies_ms = [x * 1000 for x in latencies]
    timings = {
        "memories": len(turns),
        "chunks": embedded,
        "concurrency": concurrency,
        "write_seconds": written_s,
        "memories_per_s_committed": len(turns) / written_s,
        "seconds_to_all_embedded": embedded_s,
        "memories_per_s_embedded": len(turns) / embedded_s,
        "embedding_lag_after_last_write_s": embedded_s - written_s,
        "write_latency_ms": {"p50": percentile(latencies_ms, 50), "p95": percentile(latencies_ms, 95)},
    }
    return ids, timings


async def search_all(
    client: Any, conversations: list[Conversation], ids: dict[str, dict[str, DiaKey]], concurrency: int
) -> dict[str, list[Outcome]]:
    """Every question in every mode; the modes of one question run back to back, so drift hits all alike."""
    questions = [q for conv in conversations for q in conv.questions]

    async def one(question: Question, mode: str) -> Outcome:
        body = {"workspace": question.sample_id, "query": question.question, "mode": mode, "limit": TOP_K}
        t0 = time.perf_counter()
        response = await client.post("/api/v1/search", json=body)
        latency = time.perf_counter() - t0
        result = check(response, f"{mode} search")
        mapping = ids[question.sample_id]
        ranked = [mapping.get(hit["id"]) for hit in result["results"]]
        return Outcome(question, mode, ranked, latency, result["degraded"], result["lexical_relaxed"])

    # The first queries pay for cold caches and lazy initialisation; they are not measured.
    for question in questions[:WARMUP_QUERIES]:
        for mode in MODES:
            await one(question, mode)

    outcomes: dict[str, list[Outcome]] = {mode: [] for mode in MODES}
    semaphore = asyncio.Semaphore(concurrency)
    done = 0
    started = time.perf_counter()

    async def run(question: Question) -> None:
        nonlocal done
        async with semaphore:
            for mode in MODES:
                outcomes[mode].append(await one(question, mode))
        done += 1
        if done % 100 == 0:
            rate = done / (time.perf_counter() - started)
            print(f"  {done}/{len(questions)} questions ({rate:.1f}/s)", flush=True)

    await asyncio.gather(*(run(q) for q in questions))
    print(f"  {len(questions)} questions x {len(MODES)} modes in {time.perf_counter() - started:.1f} s", flush=True)
    return outcomes


async def run_benchmark(cfg: RunConfig, conversations: list[Conversation], dsn: str) -> dict[str, Any]:
    import httpx

    env = stack_env(dsn)
    async with model_stack(env) as (stack, embedder, load_s):
        limits = httpx.Limits(max_connections=max(cfg.concurrency, cfg.search_concurrency) + 4)
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=120.0, limits=limits, trust_env=False) as client:
            total = sum(len(c.turns) for c in conversations)
            print(f"Writing {total} turns of {len(conversations)} conversations (concurrency {cfg.concurrency}) …")
            ids, writes = await write_all(client, conversations, cfg.concurrency)
            print(
                f"  {writes['memories_per_s_committed']:.1f} memories/s committed, "
                f"{writes['memories_per_s_embedded']:.1f} memories/s fully embedded",
                flush=True,
            )
            n_questions = sum(len(c.questions) for c in conversations)
            print(
                f"Searching {n_questions} questions x {len(MODES)} modes "
                f"(concurrency {cfg.search_concurrency}, top {TOP_K}) …",
                flush=True,
            )
            outcomes = await search_all(client, conversations, ids, cfg.search_concurrency)
    return {
        "model_load_seconds": load_s,
        "writes": writes,
        "outcomes": outcomes,
        "stack_env": recorded_env(env),
        "embedding_model": embedder.model,
    }


# -- reporting --------------------------------------------------------------------------------


def failures(outcomes: dict[str, list[Outcome]], conversations: list[Conversation], n: int) -> list[dict[str, Any]]:
    """Hybrid misses, worst first, with where each leg ranked the evidence: material for tuning."""
    texts = {(c.sample_id, t.key): memory_for_turn(t)["content"] for c in conversations for t in c.turns}
    by_question = {mode: {(o.question.sample_id, o.question.index): o for o in outcomes[mode]} for mode in outcomes}
    missed = [o for o in outcomes["hybrid"] if o.recall10 < 1.0]
    missed.sort(key=lambda o: (o.recall10, o.question.category, o.question.sample_id, o.question.index))
    dump = []
    for o in missed[:n]:
        q = o.question
        ranks = {
            mode: {
                dia_label(key): (by_question[mode][(q.sample_id, q.index)].ranked.index(key) + 1)
                if key in by_question[mode][(q.sample_id, q.index)].ranked
                else None
                for key in sorted(q.evidence)
            }
            for mode in MODES
        }
        dump.append(
            {
                "sample_id": q.sample_id,
                "qa_index": q.index,
                "category": q.category,
                "category_name": CATEGORIES[q.category],
                "question": q.question,
                "answer": q.answer,
                "hybrid_recall@10": o.recall10,
                "evidence": [
                    {"dia_id": dia_label(key), "text": texts.get((q.sample_id, key), "<no such turn>")}
                    for key in sorted(q.evidence)
                ],
                "evidence_rank_top10": ranks,
                "hybrid_top5": [
                    {
                        "dia_id": dia_label(key) if key else None,
                        "relevant": key in q.evidence,
                        "text": texts.get((q.sample_id, key), "") if key else "",
                    }
                    for key in o.ranked[:5]
                ],
            }
        )
    return dump


def print_report(report: dict[str, Any]) -> None:
    modes = report["modes"]
    writes = report["writes"]
    data = report["dataset"]
    line = "-" * 78
    print()
    print("LoCoMo retrieval benchmark (turn-level, categories 1-4, top 10)")
    print(line)
    print(
        f"data: {report['config']['data']}  conversations: {data['conversations']}  turns: {data['turns']}  "
        f"questions: {data['questions']}"
    )
    print(f"{'mode':<10}{'R@5':>8}{'R@10':>8}{'nDCG@10':>9}{'hit@10':>8}{'p50 ms':>9}{'p95 ms':>9}")
    for mode in MODES:
        m = modes[mode]
        print(
            f"{mode:<10}{fmt(m['recall@5']):>8}{fmt(m['recall@10']):>8}{fmt(m['ndcg@10']):>9}{fmt(m['hit@10']):>8}"
            f"{fmt(m['latency_ms']['p50'], 1):>9}{fmt(m['latency_ms']['p95'], 1):>9}"
        )
    print()
    print("Recall@10 per category")
    header = "".join(f"{f'{c} {n}':>16}" for c, n in CATEGORIES.items())
    print(f"{'mode':<10}{header}")
    counts = "".join(f"{'n=' + str(modes['hybrid']['per_category'][str(c)]['questions']):>16}" for c in CATEGORIES)
    print(f"{'':<10}{counts}")
    for mode in MODES:
        cells = "".join(f"{fmt(modes[mode]['per_category'][str(c)]['recall@10']):>16}" for c in CATEGORIES)
        print(f"{mode:<10}{cells}")
    print()
    print(f"Writes ({writes['memories']} memories, concurrency {writes['concurrency']}, via REST)")
    print(
        f"  committed:      {writes['memories_per_s_committed']:7.1f} memories/s  ({writes['write_seconds']:.1f} s; "
        f"write p50 {writes['write_latency_ms']['p50']:.1f} ms, p95 {writes['write_latency_ms']['p95']:.1f} ms)"
    )
    print(
        f"  fully embedded: {writes['memories_per_s_embedded']:7.1f} memories/s  "
        f"({writes['seconds_to_all_embedded']:.1f} s from first write; "
        f"{writes['embedding_lag_after_last_write_s']:.1f} s after the last)"
    )
    print()
    print("Reference points from the issue (not measured here)")
    for name, figures in report["references"].items():
        parts = [f"{k} {v:g}" for k, v in figures.items()]
        print(f"  {name:<40}{', '.join(parts)}")
    hybrid = modes["hybrid"]["recall@10"]
    verdict = "met" if hybrid >= TARGET_HYBRID_RECALL_AT_10 else "NOT met"
    print(f"  target: hybrid R@10 >= {TARGET_HYBRID_RECALL_AT_10}: {verdict} ({fmt(hybrid)})")
    print(line)
    notes = []
    for mode in MODES:
        m = modes[mode]
        if m["degraded_responses"]:
            notes.append(f"{mode}: {m['degraded_responses']} degraded responses")
        if m["foreign_hits"]:
            notes.append(f"{mode}: {m['foreign_hits']} hits that are not turns of the conversation")
    if notes:
        print("WARNING: " + "; ".join(notes))
    print(
        f"search latency: client-observed wall time per REST request, {report['config']['search_concurrency']} "
        f"request(s) in flight, after {WARMUP_QUERIES} warm-up questions"
    )
    print_run_footer(report)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = report["modes"]
    metrics = ("recall@5", "recall@10", "ndcg@10")
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.1, 1]})
    width = 0.26
    for i, mode in enumerate(MODES):
        xs = [j + (i - 1) * width for j in range(len(metrics))]
        values = [modes[mode][m] for m in metrics]
        bars = left.bar(xs, values, width, label=mode)
        left.bar_label(bars, fmt="%.3f", fontsize=7, padding=2)
    lines = [
        (0.548, "BM25 R@10", "tab:gray", ":"),
        (0.521, "MiniLM R@10", "tab:olive", ":"),
        (0.592, "BM25+MiniLM RRF R@10", "tab:brown", "--"),
        (0.554, "mcp-memory-service R@5", "tab:pink", "-."),
        (0.664, "mcp-memory-service R@10", "tab:purple", "-."),
        (TARGET_HYBRID_RECALL_AT_10, "target hybrid R@10", "tab:red", "-"),
    ]
    for y, label, color, style in lines:
        left.axhline(y, color=color, linestyle=style, linewidth=1, label=label)
    left.set_xticks(range(len(metrics)), ["Recall@5", "Recall@10", "nDCG@10"])
    left.set_ylim(0, 1)
    left.set_title(f"LoCoMo dev, {report['dataset']['questions']} questions (cat. 1-4), turn level")
    left.legend(fontsize=7, loc="upper left", ncol=2)

    cats = list(CATEGORIES)
    for i, mode in enumerate(MODES):
        xs = [j + (i - 1) * width for j in range(len(cats))]
        values = [modes[mode]["per_category"][str(c)]["recall@10"] for c in cats]
        right.bar(xs, values, width, label=mode)
    right.set_xticks(
        range(len(cats)),
        [f"{CATEGORIES[c]}\n(n={modes['hybrid']['per_category'][str(c)]['questions']})" for c in cats],
    )
    right.set_ylim(0, 1)
    right.set_title("Recall@10 per category")
    right.legend(fontsize=8)
    latency = ", ".join(f"{m} p50 {modes[m]['latency_ms']['p50']:.0f} ms" for m in MODES)
    commit = (report["git"]["commit"] or "")[:12]
    fig.suptitle(f"Mnemo {commit}  ·  search {latency}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_report(
    cfg: RunConfig, conversations: list[Conversation], run: dict[str, Any], duration_s: float, data_sha: str
) -> dict[str, Any]:
    turn_keys = {(c.sample_id, t.key) for c in conversations for t in c.turns}
    questions = [q for c in conversations for q in c.questions]
    dangling = sorted(
        f"{q.sample_id} {dia_label(k)}" for q in questions for k in q.evidence if (q.sample_id, k) not in turn_keys
    )
    return {
        "benchmark": "locomo-retrieval",
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": {},
        "machine": machine_info(),
        "config": {
            "data": str(cfg.data),
            "data_sha256": data_sha,
            "conversations_limit": cfg.conversations,
            "write_concurrency": cfg.concurrency,
            "search_concurrency": cfg.search_concurrency,
            "top_k": TOP_K,
            "modes": list(MODES),
            "warmup_questions": WARMUP_QUERIES,
            "embedding_model": run["embedding_model"],
            "stack_env": run["stack_env"],
            "representation": "title '<speaker> · <session date>', content '<speaker>: <text> "
            "[shares a photo: <blip_caption>]', tags [locomo, session-N], metadata {dia_id, session, date}",
        },
        "dataset": {
            "conversations": len(conversations),
            "sample_ids": [c.sample_id for c in conversations],
            "turns": sum(len(c.turns) for c in conversations),
            "questions": len(questions),
            "questions_per_category": {str(c): sum(1 for q in questions if q.category == c) for c in CATEGORIES},
            "skipped_category_5": sum(c.skipped["category_5"] for c in conversations),
            "skipped_no_evidence": sum(c.skipped["no_evidence"] for c in conversations),
            "evidence_ids": sum(len(q.evidence) for q in questions),
            "evidence_ids_without_turn": dangling,
        },
        "model_load_seconds": run["model_load_seconds"],
        "writes": run["writes"],
        "modes": {mode: summarise_mode(run["outcomes"][mode]) for mode in MODES},
        "references": REFERENCES,
        "target": {"hybrid_recall@10": TARGET_HYBRID_RECALL_AT_10},
        "duration_s": duration_s,
    }


# -- entry point ------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> RunConfig:
    parser = argparse.ArgumentParser(
        prog="mnemo bench locomo",
        description="Turn-level retrieval benchmark on LoCoMo through a whole in-process Mnemo (REST).",
    )
    parser.add_argument(
        "--data", default=DEFAULT_DATA, help=f"LoCoMo JSON; relative paths are from the repo root ({DEFAULT_DATA})"
    )
    parser.add_argument("--conversations", type=int, default=None, metavar="N", help="only the first N conversations")
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"results directory; relative paths are from the repo root ({DEFAULT_OUT})"
    )
    parser.add_argument("--concurrency", type=int, default=8, metavar="N", help="writes in flight (default 8)")
    parser.add_argument(
        "--search-concurrency",
        type=int,
        default=1,
        metavar="N",
        help="questions in flight; 1 (default) gives unloaded latency figures",
    )
    parser.add_argument(
        "--dump-failures",
        type=int,
        default=25,
        metavar="N",
        help="write the N worst hybrid misses to <out>/locomo_failures.json (0: none; default 25)",
    )
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    for name in ("conversations", "concurrency", "search_concurrency"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.dump_failures < 0:
        parser.error("--dump-failures must not be negative")
    return RunConfig(
        data=(REPO_ROOT / args.data).resolve(),  # an absolute --data stays as given
        conversations=args.conversations,
        out=(REPO_ROOT / args.out).resolve(),
        concurrency=args.concurrency,
        search_concurrency=args.search_concurrency,
        dump_failures=args.dump_failures,
        log_level=args.log_level,
    )


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else list(argv))
    started = time.perf_counter()
    if not cfg.data.is_file():
        print(
            f"locomo: data file not found: {cfg.data}\n"
            "  pass --data PATH (see bench/data/locomo/README.md for the dataset)",
            file=sys.stderr,
        )
        return 2
    quiet_model_env()
    # Other work on a small machine skews every timing: record how busy it was before we started.
    load_before = os.getloadavg()
    git = git_info()
    try:
        conversations = load_dataset(cfg.data, cfg.conversations)
        data_sha = hashlib.sha256(cfg.data.read_bytes()).hexdigest()
        n_questions = sum(len(c.questions) for c in conversations)
        print(
            f"LoCoMo: {len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
            f"{n_questions} questions (categories 1-4 with evidence)",
            flush=True,
        )
        if cfg.data.name == "locomo-dev.json" and cfg.conversations is None:
            verdict = "as expected" if n_questions == EXPECTED_DEV_QUESTIONS else "UNEXPECTED"
            print(f"  question count {n_questions}: {verdict} (dev file: {EXPECTED_DEV_QUESTIONS})", flush=True)
        if n_questions == 0:
            raise BenchError("no questions to ask")

        from mnemo_platform import configure_logging

        configure_logging(cfg.log_level, "auto")
        print("Starting embedded PostgreSQL …", flush=True)
        with embedded_postgres() as dsn:
            run = asyncio.run(run_benchmark(cfg, conversations, dsn))
        report = build_report(cfg, conversations, run, time.perf_counter() - started, data_sha)
        report["git"] = git
        report["machine"]["load_average_before"] = [round(x, 2) for x in load_before]
        report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]

        cfg.out.mkdir(parents=True, exist_ok=True)
        (cfg.out / "locomo.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        plot(report, cfg.out / "locomo.png")
        if cfg.dump_failures:
            dump = failures(run["outcomes"], conversations, cfg.dump_failures)
            (cfg.out / "locomo_failures.json").write_text(
                json.dumps(dump, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
        print_report(report)
        written = ["locomo.json", "locomo.png"] + (["locomo_failures.json"] if cfg.dump_failures else [])
        print(f"results: {', '.join(str(cfg.out / name) for name in written)}")
    except BenchError as exc:
        print(f"locomo: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("locomo: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
