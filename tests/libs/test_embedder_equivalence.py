"""The ONNX embedder gives the vectors sentence-transformers gave, so existing databases stay valid.

tests/fixtures/embeddings/minilm_reference.json was recorded from sentence-transformers and torch
(bench/minilm_reference.py; the versions are in the file): short queries, notes, code, unicode, and
texts past the 256-token window, which both must truncate the same way.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from mnemo_embed import local, onnx_graph
from mnemo_embed.local import BUNDLED_MODEL_NAME, MAX_PADDING, LocalEmbedder, bundled_model_dir, similar_runs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "embeddings" / "minilm_reference.json"
MIN_COSINE = 0.999
# A query's int8 vector against the float one sentence-transformers recorded. When this was
# written: worst 0.980 (the empty text), median 0.992.
MIN_QUERY_COSINE = 0.975
MEDIAN_QUERY_COSINE = 0.99


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
async def embedder(cache_dir: Path) -> LocalEmbedder:
    model = LocalEmbedder(cache_dir=cache_dir)
    model.start()
    await model.wait_ready()
    return model


async def test_every_reference_text_embeds_to_the_recorded_vector(embedder: LocalEmbedder, reference: dict) -> None:
    assert embedder.backend == "onnxruntime"
    assert embedder.model == reference["model"] == BUNDLED_MODEL_NAME
    texts = [s["text"] for s in reference["samples"]]
    expected = np.array([s["vector"] for s in reference["samples"]], dtype=np.float64)
    assert len(texts) >= 40
    got = np.array(await embedder.embed(texts), dtype=np.float64)
    assert got.shape == expected.shape == (len(texts), embedder.dimension) == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= MIN_COSINE, f"{texts[worst][:60]!r}: cosine {cosines[worst]:.6f}"


async def test_a_text_alone_embeds_as_it_does_in_a_padded_batch(
    embedder: LocalEmbedder, reference: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Padding must be invisible: the short query is padded to the long text's length in one run
    # (left to itself the embedder would give each its own run: similar_runs).
    short, long = "Who is Caroline's mentor?", reference["samples"][-8]["text"]
    alone = (await embedder.embed([short]))[0]
    monkeypatch.setattr(embedder._backend, "max_padding", float("inf"))
    batched = (await embedder.embed([long, short]))[1]
    assert float(alone @ batched) >= 0.99999
    assert await embedder.embed([]) == []


async def test_a_batch_of_mixed_lengths_runs_in_pieces_of_similar_length(
    embedder: LocalEmbedder, reference: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = embedder._backend
    session = backend._session
    runs: list[tuple[int, list[int]]] = []  # each run's width and its texts' own lengths

    class Recording:
        def run(self, names: list[str], inputs: dict) -> list:
            mask = inputs[onnx_graph.ATTENTION_MASK]
            runs.append((mask.shape[1], mask.sum(axis=1).tolist()))
            return session.run(names, inputs)

    monkeypatch.setattr(backend, "_session", Recording())
    texts = [s["text"] for s in reference["samples"]]
    await embedder.embed(texts)
    tokenizer = Tokenizer.from_file(str(embedder.path / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=embedder.max_tokens)
    tokenizer.no_padding()
    assert sorted(n for _, lengths in runs for n in lengths) == sorted(
        len(e.ids) for e in tokenizer.encode_batch(texts)
    )
    assert len(runs) > -(-len(texts) // embedder.batch_size)  # cut finer than the batch size alone
    for width, lengths in runs:
        assert len(lengths) == 1 or width * len(lengths) <= (1 + MAX_PADDING) * sum(lengths)
    # Positive control: one run per batch (and one lane) pads these texts far past that.
    runs.clear()
    monkeypatch.setattr(backend, "max_padding", float("inf"))
    monkeypatch.setattr(backend, "_lanes", 1)
    await embedder.embed(texts)
    assert len(runs) == -(-len(texts) // embedder.batch_size)
    assert any(width * len(lengths) > 2 * sum(lengths) for width, lengths in runs)


def test_runs_of_similar_length_cover_every_text_once_within_the_padding() -> None:
    rng = random.Random(7)
    for _ in range(300):
        lengths = sorted((rng.randint(3, 256) for _ in range(rng.randint(1, 70))), reverse=True)
        most, slack = rng.randint(1, 40), rng.choice([0.0, 0.1, 0.5])
        runs = similar_runs(lengths, most, slack)
        assert [i for run in runs for i in run] == list(range(len(lengths)))
        for run in runs:
            widths = [lengths[i] for i in run]
            assert len(widths) <= most
            # Within the padding, unless the run is a single text.
            assert len(widths) == 1 or widths[0] * len(widths) <= (1 + slack) * sum(widths)
        # Each run stops because it is full or the next text would pad it too much.
        for run, after in itertools.pairwise(runs):
            grown = [lengths[i] for i in run] + [lengths[after.start]]
            assert len(grown) > most or grown[0] * len(grown) > (1 + slack) * sum(grown)
    assert similar_runs([], 32, 0.1) == []


def test_texts_of_one_length_share_runs_and_an_outlier_gets_its_own() -> None:
    assert similar_runs([80] * 70, 32, 0.1) == [range(0, 32), range(32, 64), range(64, 70)]
    assert similar_runs([169, 100, 99, 98, 97], 32, 0.1) == [range(0, 1), range(1, 5)]


def _graphs(cache_dir: Path) -> tuple[Path, Path]:
    """The float graph's cache file and the int8 one's."""
    model_dir = bundled_model_dir()
    float_graph = onnx_graph.graph_file(model_dir, cache_dir)
    int8_graph = onnx_graph.graph_file(model_dir, cache_dir, quantized=True)
    assert float_graph is not None and int8_graph is not None
    return float_graph, int8_graph


async def test_a_query_embeds_with_the_int8_graph_close_to_the_recorded_vector(
    embedder: LocalEmbedder, reference: dict
) -> None:
    """Notes are embedded with the float graph (above); a search's query with the int8 one, whose
    vectors are near, not equal: the retrieval figures are what it was judged by (README)."""
    texts = [s["text"] for s in reference["samples"]]
    expected = np.array([s["vector"] for s in reference["samples"]], dtype=np.float64)
    got = np.array([await embedder.embed_query(t) for t in texts], dtype=np.float64)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= MIN_QUERY_COSINE, f"{texts[worst][:60]!r}: cosine {cosines[worst]:.6f}"
    assert np.median(cosines) >= MEDIAN_QUERY_COSINE
    # It is another graph's vector, not the float one's: the two differ on every text.
    assert cosines.max() < 0.99999
    # Positive control: with the int8 graph turned off, a query's vector is the note's.
    exact = LocalEmbedder(cache_dir=embedder.cache_dir, query_int8=False)
    exact.start()
    await exact.wait_ready()
    for text in texts[:5]:
        assert float(await exact.embed_query(text) @ (await embedder.embed([text]))[0]) >= 0.99999


async def test_notes_and_queries_run_on_their_own_sessions(
    embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = embedder._backend
    assert isinstance(backend, local._OnnxBackend)
    calls: list[tuple[str, int]] = []

    class Recording:
        def __init__(self, name: str, session: object) -> None:
            self.name, self.session = name, session

        def run(self, names: list[str], inputs: dict) -> list:
            calls.append((self.name, len(inputs[onnx_graph.INPUT_IDS])))
            return self.session.run(names, inputs)  # type: ignore[attr-defined]

    monkeypatch.setattr(backend, "_session", Recording("notes", backend._session))
    monkeypatch.setattr(backend, "_query_session", Recording("queries", backend._query_session))
    await embedder.embed(["a note written alone"])
    await embedder.embed(["two notes", "one batch"])  # one length: one run
    assert calls == [("notes", 1), ("notes", 2)]
    calls.clear()
    await embedder.embed_query("a search")
    assert calls == [("queries", 1)]


async def test_the_graphs_are_cached_and_a_second_start_reads_them(embedder: LocalEmbedder, cache_dir: Path) -> None:
    float_graph, int8_graph = _graphs(cache_dir)
    assert sorted(cache_dir.glob("*.onnx")) == sorted([float_graph, int8_graph])
    # The word-piece table stays float in both; the dense layers are a quarter of their size in int8.
    assert float_graph.stat().st_size > 80_000_000 > int8_graph.stat().st_size > 50_000_000
    before = {p: p.stat().st_mtime_ns for p in (float_graph, int8_graph)}
    again = LocalEmbedder(cache_dir=cache_dir)
    again.start()
    await again.wait_ready()
    text = "the cache holds the same graph"
    assert float((await again.embed([text]))[0] @ (await embedder.embed([text]))[0]) >= 0.99999
    assert float(await again.embed_query(text) @ await embedder.embed_query(text)) >= 0.99999
    # Read, not rebuilt: the files are the ones the first start wrote (how fast is bench/embedder.py's to say).
    assert {p: p.stat().st_mtime_ns for p in cache_dir.glob("*.onnx")} == before


@pytest.mark.parametrize("which", ["float", "int8"])
async def test_a_damaged_cache_file_is_rebuilt(
    embedder: LocalEmbedder, cache_dir: Path, tmp_path: Path, which: str
) -> None:
    float_graph, int8_graph = _graphs(cache_dir)
    damaged, intact = (float_graph, int8_graph) if which == "float" else (int8_graph, float_graph)
    (tmp_path / damaged.name).write_bytes(damaged.read_bytes()[:1000])
    shutil.copy(intact, tmp_path / intact.name)
    model = LocalEmbedder(cache_dir=tmp_path)
    model.start()
    await model.wait_ready()
    assert model.state == "ready"
    assert (tmp_path / damaged.name).stat().st_size == damaged.stat().st_size, "the rebuilt graph replaced it"
    # Positive control: the intact one was read, not rebuilt.
    assert (tmp_path / intact.name).read_bytes() == intact.read_bytes()
    text = "rebuilt"
    assert float((await model.embed([text]))[0] @ (await embedder.embed([text]))[0]) >= 0.99999
    assert float(await model.embed_query(text) @ await embedder.embed_query(text)) >= 0.99999


async def test_a_query_is_not_queued_behind_a_large_batch(embedder: LocalEmbedder) -> None:
    batch = [" ".join(["memory"] * 250) + f" {i}" for i in range(64)]
    worker = asyncio.create_task(embedder.embed(batch))
    await asyncio.sleep(0.05)  # the batch is in the model
    query = await embedder.embed_query("where is the deploy script?")
    # Behind a lock the query would come back only after the whole batch; here it comes back first.
    assert not worker.done(), "the query waited for the batch"
    assert query.shape == (384,) and len(await worker) == 64


async def test_a_model_the_builder_does_not_know_needs_the_torch_extra(
    embedder: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in the default install, whether or not this environment has the extra: the import fails.
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    model_dir = tmp_path / "some-roberta"
    shutil.copytree(bundled_model_dir(), model_dir, ignore=shutil.ignore_patterns("*.safetensors"))
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    model = LocalEmbedder(str(model_dir))
    model.start()
    with pytest.raises(Exception, match="torch extra"):
        await model.wait_ready()
    assert "model_type is 'roberta'" in model.state
    # Positive control: the bundled BERT needs no extra; it runs on onnxruntime.
    assert (embedder.state, embedder.backend) == ("ready", "onnxruntime")


async def test_graphs_of_older_builds_are_evicted_once_the_current_one_loads(
    embedder: LocalEmbedder, cache_dir: Path, tmp_path: Path
) -> None:
    current, int8_graph = _graphs(cache_dir)
    shutil.copy(current, tmp_path / current.name)
    shutil.copy(int8_graph, tmp_path / int8_graph.name)
    copied = (tmp_path / current.name).stat().st_mtime_ns
    model_name = current.name.rsplit("-", 1)[0]
    older = tmp_path / f"{model_name}-{'0' * 24}.onnx"  # another fingerprint: older weights or GRAPH_VERSION
    older_int8 = tmp_path / f"{model_name}-int8-{'0' * 24}.onnx"
    abandoned = tmp_path / f"{older.name}x1y2z3.tmp"  # a write that was interrupted long ago
    in_progress = tmp_path / f"{current.name}a1b2c3.tmp"  # another process writing right now
    other_model = tmp_path / f"other-model-{'1' * 24}.onnx"
    unrelated = tmp_path / "notes.txt"
    for path in (older, older_int8, abandoned, in_progress, other_model, unrelated):
        path.write_bytes(b"x")
    long_ago = time.time() - 2 * onnx_graph.ABANDONED_TMP_S
    os.utime(abandoned, (long_ago, long_ago))
    model = LocalEmbedder(cache_dir=tmp_path)
    model.start()
    await model.wait_ready()
    assert not older.exists() and not older_int8.exists() and not abandoned.exists()
    # Positive control: the current graphs (read, not rebuilt; neither evicts the other) and what
    # is not an older build stay.
    assert (tmp_path / current.name).stat().st_mtime_ns == copied
    assert (tmp_path / int8_graph.name).exists()
    assert in_progress.exists() and other_model.exists() and unrelated.exists()
    text = ["evicted"]
    assert float((await model.embed(text))[0] @ (await embedder.embed(text))[0]) >= 0.99999


def test_nothing_is_evicted_from_a_missing_cache_directory(tmp_path: Path) -> None:
    assert onnx_graph.evict_stale(tmp_path / "absent" / f"model-{'0' * 24}.onnx") == []
    # Positive control: the same call on a directory holding an older build removes it.
    (tmp_path / f"model-{'1' * 24}.onnx").write_bytes(b"x")
    assert onnx_graph.evict_stale(tmp_path / f"model-{'0' * 24}.onnx") == [tmp_path / f"model-{'1' * 24}.onnx"]


def _nice(task: int) -> int:
    """The nice value Linux keeps for one thread of this process (field 19 of its stat)."""
    stat = Path(f"/proc/self/task/{task}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


async def test_a_batch_runs_on_lanes_at_once_at_a_lower_priority_than_queries_and_the_rest(tmp_path: Path) -> None:
    """The worker's batches are computed on `threads` lanes at BATCH_NICE, a run on each at the
    same time; a query runs on its caller's thread, whose priority and the rest of the process's
    are untouched."""

    model = LocalEmbedder(cache_dir=tmp_path, threads=2)
    model.start()
    await model.wait_ready()
    backend = model._backend
    assert isinstance(backend, local._OnnxBackend)
    session = backend._session
    # Each run waits for the other at a barrier: the batch is embedded only if two runs compute at
    # once, on two threads.
    together = threading.Barrier(2, timeout=30)
    lanes: list[tuple[str, int]] = []

    class Meeting:
        def run(self, names: list[str], inputs: dict) -> list:
            lanes.append((threading.current_thread().name, _nice(threading.get_native_id())))
            together.wait()
            return session.run(names, inputs)

    backend._session = Meeting()
    try:
        texts = [f"note number {i} of a batch" for i in range(10, 26)]  # one length: two runs of eight
        vectors = await model.embed(texts)
    finally:
        backend._session = session
    assert len(lanes) == 2 and len(set(lanes)) == 2, lanes
    assert all(name.startswith("embed-batch") and nice == local.BATCH_NICE > 0 for name, nice in lanes), lanes
    # Each text still gets its own vector, wherever its run was computed.
    for text, vector in zip(texts[:3], vectors, strict=False):
        assert float((await model.embed([text]))[0] @ vector) >= 0.99999

    # Controls: a query is computed on the thread that asks for it, at that thread's priority: it
    # is answered while the batch thread is held.
    def query_on_this_thread() -> int:
        model._encode_query("a query")
        return _nice(threading.get_native_id())

    held = threading.Event()
    holding = [backend._batches.submit(held.wait) for _ in range(2)]
    try:
        assert await asyncio.wait_for(asyncio.to_thread(query_on_this_thread), 60) == 0
    finally:
        held.set()
        for hold in holding:
            hold.result()
    assert _nice(threading.get_native_id()) == 0
