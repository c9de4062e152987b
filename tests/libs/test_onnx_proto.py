"""The hand-written ONNX protobuf is what the `onnx` package writes and accepts.

mnemo_embed.onnx_proto writes the ModelProto without importing onnx (a second saved at start-up);
here onnx, a dev dependency, is the judge: its checker accepts the bundled model's graph, its parser
reads back every field, and for a small model onnx.helper writes the very same bytes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from mnemo_embed import onnx_graph, onnx_proto
from mnemo_embed.local import bundled_model_dir


@pytest.fixture(scope="module")
def bundled_graph() -> bytes:
    return b"".join(onnx_graph.build_sentence_encoder(bundled_model_dir()).parts)


def _small_model_by_hand() -> bytes:
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [
        onnx_proto.node("MatMul", ["x", "w"], ["y"]),
        onnx_proto.node("LayerNormalization", ["y", "scale"], ["z"], axis=-1, epsilon=1e-5),
        onnx_proto.node("ReduceL2", ["z"], ["out"], axes=[-1, 0], keepdims=1),
    ]
    body = onnx_proto.graph(
        "small",
        nodes=nodes,
        initializers=[onnx_proto.tensor("w", weight), onnx_proto.tensor("scale", np.ones(3, np.float32))],
        inputs=[onnx_proto.tensor_value_info("x", onnx_proto.FLOAT, ["batch", 2])],
        outputs=[onnx_proto.tensor_value_info("out", onnx_proto.FLOAT, [1, 1])],
    )
    return b"".join(onnx_proto.model(body, ir_version=9, opset=17, producer="mnemo_embed").parts)


def _small_model_by_onnx() -> bytes:
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"]),
            helper.make_node("LayerNormalization", ["y", "scale"], ["z"], axis=-1, epsilon=1e-5),
            helper.make_node("ReduceL2", ["z"], ["out"], axes=[-1, 0], keepdims=1),
        ],
        "small",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
        outputs=[helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1])],
        initializer=[numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.ones(3, np.float32), "scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mnemo_embed")
    model.ir_version = 9
    return model.SerializeToString()


def test_a_small_model_is_written_byte_for_byte_as_onnx_writes_it() -> None:
    ours = _small_model_by_hand()
    assert ours == _small_model_by_onnx()
    # Positive control: the comparison sees a one-attribute difference.
    assert ours != _small_model_by_onnx().replace(b"epsilon", b"epsiloN")
    onnx.checker.check_model(onnx.load_from_string(ours), full_check=True)
    x = np.array([[1.0, 2.0]], np.float32)
    out = onnxruntime.InferenceSession(ours, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    y = x @ np.arange(6, dtype=np.float32).reshape(2, 3)
    z = (y - y.mean()) / np.sqrt(y.var() + 1e-5)
    np.testing.assert_allclose(out, [[np.linalg.norm(z)]], rtol=1e-5)


def test_the_bundled_graph_passes_the_checker_and_parses_back_to_the_same_bytes(bundled_graph: bytes) -> None:
    model = onnx.load_from_string(bundled_graph)
    onnx.checker.check_model(model, full_check=True)
    # Parsed and written again by onnx: nothing was unknown, defaulted or encoded another way.
    assert model.SerializeToString() == bundled_graph
    assert (model.ir_version, [(o.domain, o.version) for o in model.opset_import]) == (9, [("", 17)])
    assert [i.name for i in model.graph.input] == [onnx_graph.INPUT_IDS, onnx_graph.ATTENTION_MASK]
    assert [o.name for o in model.graph.output] == [onnx_graph.OUTPUT]
    dims = model.graph.output[0].type.tensor_type.shape.dim
    assert (dims[0].dim_param, dims[1].dim_value) == ("batch", 384)
    # Negative attribute values survive (two's-complement varints) and the weights are all there.
    norms = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    assert len(norms) == 13 and {
        helper.get_attribute_value(a) for n in norms for a in n.attribute if a.name == "axis"
    } == {-1}
    weights = sum(numpy_helper.to_array(t).size for t in model.graph.initializer)
    assert weights > 22_000_000


def test_the_int8_graph_passes_the_checker_and_quantizes_every_dense_layer() -> None:
    quantized = b"".join(onnx_graph.build_sentence_encoder(bundled_model_dir(), quantized=True).parts)
    model = onnx.load_from_string(quantized)
    onnx.checker.check_model(model, full_check=True)
    assert model.SerializeToString() == quantized
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17), (onnx_graph.CONTRIB_DOMAIN, 1)]
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    # Six layers of four attention and two feed-forward dense layers, all int8.
    assert ops.count((onnx_graph.CONTRIB_DOMAIN, "DynamicQuantizeMatMul")) == 36
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert sum(w.dtype == np.int8 and w.ndim == 2 for w in weights.values()) == 36
    # What is left in float: the attention's own two products (no weights), and the tables.
    assert ops.count(("", "MatMul")) == 12
    # Positive control: the float graph has those 36 as float products.
    floating = onnx.load_from_string(b"".join(onnx_graph.build_sentence_encoder(bundled_model_dir()).parts))
    assert [n.op_type for n in floating.graph.node].count("MatMul") == 48
    assert not any(n.domain for n in floating.graph.node)


def test_a_node_of_another_domain_and_its_opset_are_written_as_onnx_writes_them() -> None:
    ours = onnx_proto.node("DynamicQuantizeMatMul", ["a", "b", "s"], ["y"], domain="com.microsoft")
    theirs = helper.make_node("DynamicQuantizeMatMul", ["a", "b", "s"], ["y"], domain="com.microsoft")
    assert b"".join(ours.parts) == theirs.SerializeToString()
    body = onnx_proto.graph("g", nodes=[], initializers=[], inputs=[], outputs=[])
    model = onnx_proto.model(body, ir_version=9, opset=17, producer="p", domains=[("com.microsoft", 1)])
    expected = helper.make_model(
        helper.make_graph([], "g", [], []),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="p",
    )
    expected.ir_version = 9
    assert b"".join(model.parts) == expected.SerializeToString()
    # Positive control: without the domain the node's bytes differ.
    default_domain = onnx_proto.node("DynamicQuantizeMatMul", ["a", "b", "s"], ["y"])
    assert b"".join(default_domain.parts) != theirs.SerializeToString()


def test_an_attribute_of_a_kind_the_writer_does_not_know_is_refused() -> None:
    with pytest.raises(TypeError, match="not an int, a float or a list of ints"):
        onnx_proto.attribute("mode", "constant")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no ONNX tensor type"):
        onnx_proto.tensor("flags", np.array([True]))
    # Positive control: the kinds it knows are written.
    assert onnx_proto.attribute("axis", -1).size > 0 and onnx_proto.tensor("ids", np.array([1], np.int64)).size > 0
