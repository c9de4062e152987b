"""The ONNX graph of a BERT sentence encoder, built from its safetensors weights without torch.

The bundled all-MiniLM-L6-v2 ships only safetensors; exporting it with torch.onnx would need torch,
which the default install leaves out. So the graph is written here, op by op, the way Hugging
Face's BertModel computes it, followed by sentence-transformers' mean pooling and L2 normalisation:

    embeddings = LayerNorm(word[ids] + position[0..S) + token_type[0])
    per layer:   x = LayerNorm(x + Dense(SelfAttention(x, additive mask)))
                 x = LayerNorm(x + Dense(GELU_erf(Dense(x))))
    sentence   = normalize(sum(x * mask) / max(sum(mask), 1e-9))

Building takes under a second, but importing the `onnx` package takes about 1.5 s more (its
ml_dtypes extension), so the serialized graph is cached on disk (`cached_graph`), keyed by a hash
of the weights, the configs and GRAPH_VERSION: a later start hands the file to onnxruntime without
importing onnx at all. The cache is only a speed-up: if it cannot be written the graph is used
from memory. tests/libs/test_embedder_equivalence.py holds the result to vectors recorded from
sentence-transformers (bench/minilm_reference.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

if TYPE_CHECKING:
    import onnx

log = structlog.get_logger("mnemo.embed")

# Part of the cache key: bump it whenever build_sentence_encoder changes what it builds.
GRAPH_VERSION = "1"
OPSET = 17  # LayerNormalization is an ONNX op from 17 on
INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
OUTPUT = "sentence_embedding"


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


def fingerprint(model_dir: Path) -> str:
    """What the graph is built from: the weights, the configs that shape it, and GRAPH_VERSION."""
    digest = hashlib.sha256(GRAPH_VERSION.encode())
    for name in ("config.json", "modules.json", "1_Pooling/config.json"):
        path = model_dir / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    with (model_dir / "model.safetensors").open("rb") as weights:
        digest.update(hashlib.file_digest(weights, "sha256").digest())
    return digest.hexdigest()[:24]


def cached_graph(model_dir: Path, cache_dir: Path | None, rebuild: bool = False) -> str | bytes:
    """The graph for `model_dir`: a cached file's path if there is one (and not `rebuild`), else the
    built graph's bytes (written to the cache on the way, when `cache_dir` is given and writable)."""
    path = cache_dir / f"{model_dir.name}-{fingerprint(model_dir)}.onnx" if cache_dir else None
    if path is not None and path.is_file() and not rebuild:
        return str(path)
    data = build_sentence_encoder(model_dir).SerializeToString()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Written aside then renamed: two processes starting at once never read half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
            log.info("embedder_graph_cached", path=str(path))
        except OSError as exc:
            log.warning("embedder_graph_not_cached", path=str(path), error=str(exc))
    return data


class _Graph:
    """Collects nodes and initializers; every helper returns the name of its output."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self._name(hint)
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str = "", **attrs: Any) -> str:
        out = self._name(hint or op_type.lower())
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weights: dict[str, np.ndarray], prefix: str) -> str:
        # torch's Linear stores [out, in]; MatMul wants [in, out].
        w = self.const(prefix + ".weight", weights[prefix + ".weight"].T)
        b = self.const(prefix + ".bias", weights[prefix + ".bias"])
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str, eps: float) -> str:
        scale = self.const(prefix + ".weight", weights[prefix + ".weight"])
        bias = self.const(prefix + ".bias", weights[prefix + ".bias"])
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def build_sentence_encoder(model_dir: Path) -> onnx.ModelProto:
    """The graph: input_ids and attention_mask (int64, [batch, seq]) to unit vectors ([batch, hidden]).

    Token type ids are always 0 (one segment per text, as sentence-transformers encodes them).
    Raises UnsupportedModel if `supports(model_dir)` names a reason.
    """
    reason = supports(model_dir)
    if reason is not None:
        raise UnsupportedModel(f"{model_dir}: {reason}")
    # Imported here, not at the top: only a cache miss pays for importing onnx.
    import onnx
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    config = _read_json(model_dir / "config.json")
    weights = load_file(str(model_dir / "model.safetensors"))
    # Some exports prefix every name with the architecture ("bert.embeddings..."); strip it.
    weights = {k.removeprefix("bert."): v.astype(np.float32, copy=False) for k, v in weights.items()}
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    g = _Graph()

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
    mask = g.op("Cast", [ATTENTION_MASK], to=TensorProto.FLOAT)
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
    g.nodes.append(helper.make_node("Identity", [pooled], [OUTPUT]))

    graph = helper.make_graph(
        g.nodes,
        "sentence_encoder",
        inputs=[
            helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info(ATTENTION_MASK, TensorProto.INT64, ["batch", "sequence"]),
        ],
        outputs=[helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mnemo_embed")
    # onnxruntime 1.18+ reads IR version 10 at most; pin it so a newer onnx package does not outrun it.
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model
