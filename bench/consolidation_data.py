"""Builds bench/data/consolidation/pairs.jsonl, the labelled duplicate and near-miss pairs that
bench/consolidation.py measures the consolidation job's precision on (provenance:
bench/data/consolidation/README.md).

Deterministic: the same inputs and seed give the same file.

    uv run python -m bench.consolidation_data
"""

from __future__ import annotations

import collections
import csv
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"
OUT = DATA / "consolidation" / "pairs.jsonl"
SEED = 13
PER_SOURCE = 30
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
PREFIXES = ("Note: ", "Recap: ", "Remember: ", "FYI, ", "As noted before, ")
FILLERS = ("really", "actually", "just", "also", "still")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def light_edit(text: str, rng: random.Random) -> str:
    """The same text as an agent would record it again: a prefix, a dropped or added filler word,
    a changed case or final punctuation; never a changed fact (numbers and names stay)."""
    tokens = text.split()
    edits = rng.sample(["prefix", "drop", "filler", "case", "punct"], 2)
    if "drop" in edits and len(tokens) > 8:
        candidates = [i for i, t in enumerate(tokens) if t.lower() in {"the", "a", "an", "so", "and", "very", "that"}]
        if candidates:
            del tokens[rng.choice(candidates)]
    if "filler" in edits and len(tokens) > 4:
        tokens.insert(rng.randrange(1, len(tokens)), rng.choice(FILLERS))
    out = " ".join(tokens)
    if "case" in edits:
        out = out[0].lower() + out[1:] if out[:1].isupper() else out[0].upper() + out[1:]
    if "punct" in edits:
        out = out.rstrip(".!?") if out.endswith((".", "!", "?")) else out + "."
    if "prefix" in edits:
        out = rng.choice(PREFIXES) + out
    return out


def agent_pairs() -> Iterator[dict[str, Any]]:
    path = DATA / "consolidation" / "agent_notes.jsonl"
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        item = json.loads(line)
        yield {"id": f"agent-{n:03d}", "source": "agent-notes", **item}


def locomo_turns() -> list[dict[str, Any]]:
    conversations = json.loads((DATA / "locomo" / "locomo-dev.json").read_text(encoding="utf-8"))
    turns = []
    for conv in conversations:
        c = conv["conversation"]
        for key, value in c.items():
            if re.fullmatch(r"session_\d+", key):
                for turn in value:
                    turns.append({"conv": conv["sample_id"], "session": key, **turn})
    return turns


def locomo_pairs(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Duplicates: a turn and a light edit of it. Near misses: two turns of one speaker in one
    session that share the most words (the same topic, a different statement)."""
    turns = [t for t in locomo_turns() if len(t["text"].split()) >= 15]
    by_session: dict[tuple[str, str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for t in turns:
        by_session[(t["conv"], t["session"], t["speaker"])].append(t)
    candidates = []
    for group in by_session.values():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                wa, wb = words(a["text"]), words(b["text"])
                candidates.append((len(wa & wb) / len(wa | wb), a["dia_id"], b["dia_id"], a, b))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    used: set[str] = set()
    near = []
    for _, ida, idb, a, b in candidates:
        if ida in used or idb in used:
            continue
        used |= {ida, idb}
        near.append((a, b))
        if len(near) == PER_SOURCE:
            break
    rest = [t for t in turns if t["dia_id"] not in used]
    rng.shuffle(rest)
    for n, t in enumerate(rest[:PER_SOURCE]):
        text = f"{t['speaker']}: {t['text']}"
        yield {
            "id": f"locomo-dup-{n:03d}",
            "source": "locomo",
            "kind": "duplicate",
            "a": text,
            "b": light_edit(text, rng),
        }
    for n, (a, b) in enumerate(near):
        yield {
            "id": f"locomo-near-{n:03d}",
            "source": "locomo",
            "kind": "near_miss",
            "a": f"{a['speaker']}: {a['text']}",
            "b": f"{b['speaker']}: {b['text']}",
        }


def opening(text: str, sentences: int = 3) -> str:
    return " ".join(_SENTENCE.split(text.strip())[:sentences])


def scifact_pairs(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Duplicates: an abstract's opening and a light edit of it. Near misses: the openings of two
    papers one SciFact claim cites (the same question, different findings)."""
    corpus = {}
    for line in (DATA / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        corpus[doc["_id"]] = doc
    cited: dict[str, list[str]] = collections.defaultdict(list)
    with (DATA / "scifact" / "qrels" / "train.tsv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["corpus-id"] in corpus and row["corpus-id"] not in cited[row["query-id"]]:
                cited[row["query-id"]].append(row["corpus-id"])
    used: set[str] = set()
    near = []
    for query in sorted(cited, key=int):
        docs = [d for d in cited[query] if d not in used]
        if len(docs) >= 2:
            used |= {docs[0], docs[1]}
            near.append((corpus[docs[0]], corpus[docs[1]]))
        if len(near) == PER_SOURCE:
            break
    rest = sorted(d for d in corpus if d not in used and len(corpus[d]["text"].split()) >= 60)
    rng.shuffle(rest)
    for n, doc_id in enumerate(rest[:PER_SOURCE]):
        text = opening(corpus[doc_id]["text"])
        yield {
            "id": f"scifact-dup-{n:03d}",
            "source": "scifact",
            "kind": "duplicate",
            "a": text,
            "b": light_edit(text, rng),
        }
    for n, (a, b) in enumerate(near):
        yield {
            "id": f"scifact-near-{n:03d}",
            "source": "scifact",
            "kind": "near_miss",
            "a": opening(a["text"]),
            "b": opening(b["text"]),
        }


def build() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    return [*agent_pairs(), *locomo_pairs(rng), *scifact_pairs(rng)]


def main() -> None:
    pairs = build()
    OUT.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    counts = collections.Counter((p["source"], p["kind"]) for p in pairs)
    print(f"{len(pairs)} pairs written to {OUT.relative_to(ROOT.parent)}: {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
