"""The ONNX graph of a BERT sentence encoder, built from its safetensors weights without torch.

The bundled all-MiniLM-L6-v2 ships only safetensors; exporting it with torch.onnx would need torch,
which the default install leaves out. So the graph is written here, op by op, the way Hugging
Face's BertModel computes it, followed by sentence-transformers' mean pooling and L2 normalisation:

    embeddings = LayerNorm(word[ids] + position[0..S) + token_type[0])
    per layer:   x = LayerNorm(x + Dense(SelfAttention(x, additive mask)))
                 x = LayerNorm(x + Dense(GELU_erf(Dense(x))))
    sentence   = normalize(sum(x * mask) / max(sum(mask), 1e-9))

The ModelProto is written by mnemo_embed.onnx_proto, not the `onnx` package (whose import alone
took longer than the build), straight from the arrays safetensors reads: apart from the transposed
dense matrices, no weight is copied before it is written out, and building takes a few tenths of
a second. The graph is still cached on disk (`cached_graph`), keyed by a hash of the weights, the
configs and GRAPH_VERSION, and the graphs of older builds are removed once the current one has
loaded (`evict_stale`). The cache is only a speed-up: if it cannot be written the graph is used
from memory. tests/libs/test_embedder_equivalence.py holds the result to vectors recorded from
sentence-transformers (bench/minilm_reference.py); tests/libs/test_onnx_proto.py holds the bytes
to the `onnx` package's checker and parser.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from mnemo_embed import onnx_proto

log = structlog.get_logger("mnemo.embed")

# Part of the cache key: bump it whenever build_sentence_encoder changes what it builds.
GRAPH_VERSION = "1"
OPSET = 17  # LayerNormalization is an ONNX op from 17 on
IR_VERSION = 9  # what onnxruntime 1.16 and later read
PRODUCER = "mnemo_embed"
# onnxruntime's own operators (DynamicQuantizeMatMul), which its CPU provider always has.
CONTRIB_DOMAIN = "com.microsoft"
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
OUTPUT = "sentence_embedding"
# A temporary file this old is a write that was interrupted, not one in progress.
ABANDONED_TMP_S = 3600.0


class UnsupportedModel(Exception):
    """The directory is not a BERT sentence encoder this builder knows (ask sentence-transformers)."""


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def supports(model_dir: Path) -> str | None:
    """None if `model_dir` can be built here; else why not (the caller then falls back to torch)."""
    config = _read_json(model_dir / "config.json")
    if config.get("model_type") != "bert":
        return f"model_type is {config.get('model_type')!r}, not 'bert'"
    if config.get("hidden_act", "gelu") != "gelu":
        return f"hidden_act is {config.get('hidden_act')!r}, not 'gelu'"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return "position embeddings are not absolute"
    if not (model_dir / "model.safetensors").exists():
        return "no model.safetensors"
    pooling = _read_json(model_dir / "1_Pooling" / "config.json")
    if pooling and not pooling.get("pooling_mode_mean_tokens"):
        return "pooling is not mean pooling"
    if any(pooling.get(mode) for mode in ("pooling_mode_cls_token", "pooling_mode_max_tokens")):
        return "pooling is not mean pooling alone"
    modules = json.loads((model_dir / "modules.json").read_text()) if (model_dir / "modules.json").exists() else []
    known = {"Transformer", "Pooling", "Normalize"}
    unknown = [m["type"] for m in modules if m.get("type", "").rsplit(".", 1)[-1] not in known]
    if unknown:
        return f"modules {unknown} are not Transformer, Pooling, Normalize"
    return None


def normalizes(model_dir: Path) -> bool:
    """Whether the sentence-transformers pipeline ends with a Normalize module."""
    path = model_dir / "modules.json"
    modules = json.loads(path.read_text()) if path.exists() else []
    return any(m.get("type", "").endswith(".Normalize") for m in modules)


def fingerprint(model_dir: Path, quantized: bool = False) -> str:
    """What the graph is built from: the weights, the configs that shape it, GRAPH_VERSION, and
    whether its dense layers are quantized."""
    digest = hashlib.sha256(GRAPH_VERSION.encode() + (b"\0int8" if quantized else b""))
    for name in ("config.json", "modules.json", "1_Pooling/config.json"):
        path = model_dir / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    with (model_dir / "model.safetensors").open("rb") as weights:
        digest.update(hashlib.file_digest(weights, "sha256").digest())
    return digest.hexdigest()[:24]


def graph_file(model_dir: Path, cache_dir: Path | None, quantized: bool = False) -> Path | None:
    """Where the graph of `model_dir` is cached: `<model dir name>-<fingerprint>.onnx`, and
    `<model dir name>-int8-<fingerprint>.onnx` for the quantized one."""
    if cache_dir is None:
        return None
    name = f"{model_dir.name}-int8" if quantized else model_dir.name
    return cache_dir / f"{name}-{fingerprint(model_dir, quantized)}.onnx"


def cached_graph(model_dir: Path, path: Path | None, rebuild: bool = False, quantized: bool = False) -> str | bytes:
    """The graph for `model_dir`: the file at `path` if there is one (and not `rebuild`); else the graph
    is built and written there, and its path returned, or its bytes if it cannot be written."""
    if path is not None and path.is_file() and not rebuild:
        return str(path)
    parts = build_sentence_encoder(model_dir, quantized).parts
    if path is None:
        return b"".join(parts)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside then renamed: two processes starting at once never read half a file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.writelines(parts)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("embedder_graph_not_cached", path=str(path), error=str(exc))
        return b"".join(parts)
    log.info("embedder_graph_cached", path=str(path))
    return str(path)


def evict_stale(current: Path) -> list[Path]:
    """Removes the graphs of the same model cached under other fingerprints (built from older
    weights, configs or GRAPH_VERSION), and writes of them that were interrupted; keeps `current`.
    Graphs of other model directories are left alone. Returns what was removed."""
    prefix = re.escape(current.name.rsplit("-", 1)[0])
    stale = re.compile(rf"{prefix}-[0-9a-f]{{24}}\.onnx(?P<tmp>.+\.tmp)?")
    removed = []
    try:
        candidates = list(current.parent.iterdir())
    except OSError:
        return []
    for path in candidates:
        match = stale.fullmatch(path.name)
        if match is None or path.name == current.name:
            continue
        try:
            # Another process may be writing a temporary file right now: only old ones are leftovers.
            if match["tmp"] and time.time() - path.stat().st_mtime < ABANDONED_TMP_S:
                continue
            path.unlink()
        except OSError as exc:
            log.warning("embedder_graph_not_evicted", path=str(path), error=str(exc))
            continue
        removed.append(path)
    if removed:
        log.info("embedder_graphs_evicted", paths=[str(p) for p in removed])
    return removed


class _Graph:
    """Collects nodes and initializers; every helper returns the name of its output."""

    def __init__(self, quantized: bool) -> None:
        self.nodes: list[onnx_proto.Message] = []
        self.initializers: list[onnx_proto.Message] = []
        self.quantized = quantized
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self._name(hint)
        self.initializers.append(onnx_proto.tensor(name, value))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str = "", domain: str = "", **attrs: Any) -> str:
        out = self._name(hint or op_type.lower())
        self.nodes.append(onnx_proto.node(op_type, inputs, [out], domain=domain, **attrs))
        return out

    def linear(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        # torch's Linear stores [out, in]; MatMul wants [in, out] (the one copy these weights get).
        matrix = weights[prefix + ".weight"].T
        b = self.const(prefix + ".bias", weights[prefix + ".bias"])
        if not self.quantized:
            return self.op("Add", [self.op("MatMul", [x, self.const(prefix + ".weight", matrix)]), b])
        # Each output column to int8 with a scale of its own (symmetric, so no zero point); the
        # input is quantized to uint8 as it arrives, per tensor, by onnxruntime's contrib op.
        scale = np.abs(matrix).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        q = np.clip(np.rint(matrix / scale), -127, 127).astype(np.int8)
        inputs = [x, self.const(prefix + ".weight_int8", q), self.const(prefix + ".scale", scale.astype(np.float32))]
        inputs += [self.const(prefix + ".zero_point", np.zeros(len(scale), np.int8)), b]
        return self.op("DynamicQuantizeMatMul", inputs, domain=CONTRIB_DOMAIN)

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str, eps: float) -> str:
        scale = self.const(prefix + ".weight", weights[prefix + ".weight"])
        bias = self.const(prefix + ".bias", weights[prefix + ".bias"])
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def build_sentence_encoder(model_dir: Path, quantized: bool = False) -> onnx_proto.Message:
    """The serialized ModelProto: input_ids and attention_mask (int64, [batch, seq]) to unit vectors
    ([batch, hidden]), as pieces to write out in order (`b"".join(parts)` is the model's bytes).

    `quantized`: every dense layer an int8 matrix product (onnxruntime's DynamicQuantizeMatMul:
    the weights per output column here, the input per tensor as it arrives), 2-3x as fast on a
    query, its vectors at cosine ~0.99 of the float graph's; searches embed their query with it
    (mnemo_embed.local._OnnxBackend says what it was measured to cost).

    Token type ids are always 0 (one segment per text, as sentence-transformers encodes them).
    Raises UnsupportedModel if `supports(model_dir)` names a reason.
    """
    reason = supports(model_dir)
    if reason is not None:
        raise UnsupportedModel(f"{model_dir}: {reason}")
    from safetensors.numpy import load_file

    config = _read_json(model_dir / "config.json")
    weights = load_file(str(model_dir / "model.safetensors"))
    # Some exports prefix every name with the architecture ("bert.embeddings..."); strip it.
    weights = {k.removeprefix("bert."): v.astype(np.float32, copy=False) for k, v in weights.items()}
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    g = _Graph(quantized)

    # Embeddings: word + position + token type 0, then LayerNorm.
    # Positions 0..S-1 are the first S rows of the table (a Slice, all 1-D, as onnxruntime wants).
    seq_len = g.op(
        "Slice",
        [g.op("Shape", [INPUT_IDS]), g.const("one", np.array([1], np.int64)), g.const("two", np.array([2], np.int64))],
    )
    word = g.op("Gather", [g.const("word_embeddings", weights["embeddings.word_embeddings.weight"]), INPUT_IDS])
    position_table = g.const("position_embeddings", weights["embeddings.position_embeddings.weight"])
    zero = g.const("zero", np.array([0], np.int64))
    position = g.op("Slice", [position_table, zero, seq_len, zero])
    token_type = g.const("token_type_0", weights["embeddings.token_type_embeddings.weight"][0])
    x = g.op("Add", [g.op("Add", [word, position]), token_type])
    x = g.layer_norm(x, weights, "embeddings.LayerNorm", eps)

    # The attention mask as an additive bias on the scores, [batch, 1, 1, seq]: 0 on real tokens,
    # -10000 on padding (as BERT does; exp(-10000) is exactly 0 in float32).
    mask = g.op("Cast", [ATTENTION_MASK], to=onnx_proto.FLOAT)
    inverted = g.op("Sub", [g.const("one_f", np.array(1.0, dtype=np.float32)), mask])
    bias = g.op("Mul", [inverted, g.const("minus_10000", np.array(-10000.0, dtype=np.float32))])
    bias = g.op("Unsqueeze", [bias, g.const("axes_1_2", np.array([1, 2], dtype=np.int64))])

    split_heads = g.const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    half = g.const("half", np.array(0.5, dtype=np.float32))
    one = g.const("one_f", np.array(1.0, dtype=np.float32))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))

    for layer in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{layer}."
        # [batch, seq, hidden] -> [batch, heads, seq, head_dim]; keys as [batch, heads, head_dim, seq].
        q = g.op("Reshape", [g.linear(x, weights, p + "attention.self.query"), split_heads])
        k = g.op("Reshape", [g.linear(x, weights, p + "attention.self.key"), split_heads])
        v = g.op("Reshape", [g.linear(x, weights, p + "attention.self.value"), split_heads])
        q = g.op("Transpose", [q], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.linear(context, weights, p + "attention.output.dense")
        x = g.layer_norm(g.op("Add", [attended, x]), weights, p + "attention.output.LayerNorm", eps)
        # Feed-forward with BERT's exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
        h = g.linear(x, weights, p + "intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, sqrt2])])
        h = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [erf, one])])
        out = g.linear(h, weights, p + "output.dense")
        x = g.layer_norm(g.op("Add", [out, x]), weights, p + "output.LayerNorm", eps)

    # Mean pooling over the real tokens (sentence-transformers clamps the count at 1e-9).
    mask3 = g.op("Unsqueeze", [mask, g.const("axis_2", np.array([2], dtype=np.int64))])
    axis1 = g.const("axis_1", np.array([1], dtype=np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3]), axis1], keepdims=0)
    count = g.op("Max", [g.op("ReduceSum", [mask3, axis1], keepdims=0), g.const("eps9", np.array(1e-9, np.float32))])
    pooled = g.op("Div", [summed, count])
    if normalizes(model_dir):
        # torch.nn.functional.normalize: x / max(||x||, 1e-12).
        norm = g.op("ReduceL2", [pooled], axes=[-1], keepdims=1)
        norm = g.op("Max", [norm, g.const("eps12", np.array(1e-12, np.float32))])
        pooled = g.op("Div", [pooled, norm])
    g.nodes.append(onnx_proto.node("Identity", [pooled], [OUTPUT]))

    graph = onnx_proto.graph(
        "sentence_encoder",
        nodes=g.nodes,
        initializers=g.initializers,
        inputs=[
            onnx_proto.tensor_value_info(INPUT_IDS, onnx_proto.INT64, ["batch", "sequence"]),
            onnx_proto.tensor_value_info(ATTENTION_MASK, onnx_proto.INT64, ["batch", "sequence"]),
        ],
        outputs=[onnx_proto.tensor_value_info(OUTPUT, onnx_proto.FLOAT, ["batch", hidden])],
    )
    # IR version 9 (onnxruntime 1.16+ reads it) with opset 17; tests/libs/test_onnx_proto.py runs
    # onnx.checker on the result.
    domains = [(CONTRIB_DOMAIN, 1)] if quantized else []
    return onnx_proto.model(graph, ir_version=IR_VERSION, opset=OPSET, producer=PRODUCER, domains=domains)
