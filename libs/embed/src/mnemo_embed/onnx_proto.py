"""The few ONNX protobuf messages a sentence encoder needs, written in protobuf's wire format by hand.

Importing the `onnx` package takes 1.1-1.9 s on a 2-core machine (most of it loading ml_dtypes'
extension module), several times what building the whole graph takes, and a first start paid it.
These functions write the same bytes `onnx.helper` and `SerializeToString()` write for the fields
used here: fields in number order, repeated scalars unpacked as in proto2, every tensor's values
as `raw_data`, little-endian. A message is kept as a list of buffers, so a weight matrix is never
copied into an intermediate message: its bytes go from the array to the file once.

Field numbers, type codes and the proto2 encoding follow onnx/onnx.proto from ONNX
(https://github.com/onnx/onnx, Apache License 2.0); no code of it is copied.
tests/libs/test_onnx_proto.py checks the output with onnx.checker and onnx's own parser.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

Buffer = bytes | memoryview

# onnx.proto's TensorProto.DataType and AttributeProto.AttributeType codes.
FLOAT = 1
INT8 = 3
INT64 = 7
_DATA_TYPES = {np.dtype("<f4"): FLOAT, np.dtype("int8"): INT8, np.dtype("<i8"): INT64}
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7

_VARINT, _FIXED32, _LENGTH = 0, 5, 2


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are written as their 64-bit two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


class Message:
    """A message being written: its encoded pieces in order, and their total size."""

    __slots__ = ("parts", "size")

    def __init__(self) -> None:
        self.parts: list[Buffer] = []
        self.size = 0

    def _put(self, piece: Buffer) -> None:
        self.parts.append(piece)
        self.size += len(piece)

    def int64(self, field: int, value: int) -> Message:
        self._put(_key(field, _VARINT) + _varint(value))
        return self

    def float32(self, field: int, value: float) -> Message:
        self._put(_key(field, _FIXED32) + struct.pack("<f", value))
        return self

    def data(self, field: int, value: Buffer) -> Message:
        self._put(_key(field, _LENGTH) + _varint(len(value)))
        if len(value):
            self._put(value)
        return self

    def string(self, field: int, value: str) -> Message:
        return self.data(field, value.encode())

    def message(self, field: int, value: Message) -> Message:
        self._put(_key(field, _LENGTH) + _varint(value.size))
        self.parts.extend(value.parts)
        self.size += value.size
        return self

    def messages(self, field: int, values: Iterable[Message]) -> Message:
        for value in values:
            self.message(field, value)
        return self

    def strings(self, field: int, values: Iterable[str]) -> Message:
        for value in values:
            self.string(field, value)
        return self

    def int64s(self, field: int, values: Iterable[int]) -> Message:
        for value in values:
            self.int64(field, value)
        return self


def _byte_view(array: np.ndarray) -> memoryview:
    # One byte per element, so len() of the view is its size in bytes; no copy of a contiguous array.
    return array.reshape(-1).view(np.uint8).data


def tensor(name: str, array: np.ndarray) -> Message:
    """TensorProto: dims 1, data_type 2, name 8, raw_data 9 (the array's own bytes, not copied
    when it is already contiguous little-endian float32 or int64)."""
    dtype = array.dtype.newbyteorder("<")
    if dtype not in _DATA_TYPES:
        raise TypeError(f"no ONNX tensor type for {array.dtype}")
    array = np.ascontiguousarray(array, dtype=dtype)
    return Message().int64s(1, array.shape).int64(2, _DATA_TYPES[dtype]).string(8, name).data(9, _byte_view(array))


def attribute(name: str, value: int | float | Sequence[int]) -> Message:
    """AttributeProto: name 1, f 2, i 3, ints 8, type 20 (the kinds the encoder uses)."""
    out = Message().string(1, name)
    if isinstance(value, bool) or not isinstance(value, int | float | list | tuple):
        raise TypeError(f"attribute {name}: {value!r} is not an int, a float or a list of ints")
    if isinstance(value, int):
        return out.int64(3, value).int64(20, _ATTR_INT)
    if isinstance(value, float):
        return out.float32(2, value).int64(20, _ATTR_FLOAT)
    return out.int64s(8, value).int64(20, _ATTR_INTS)


def node(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    domain: str = "",
    **attrs: int | float | Sequence[int],
) -> Message:
    """NodeProto: input 1, output 2, op_type 4, attribute 5 (sorted by name, as onnx.helper does),
    domain 7 (only when the op is not from the default domain)."""
    out = Message().strings(1, inputs).strings(2, outputs).string(4, op_type)
    out.messages(5, (attribute(key, attrs[key]) for key in sorted(attrs)))
    return out.string(7, domain) if domain else out


def tensor_value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> Message:
    """ValueInfoProto (name 1, type 2) of a tensor: TypeProto.tensor_type 1 holds elem_type 1 and
    shape 2, whose dims (1) are each a dim_value 1 or a named dim_param 2."""
    dims = Message()
    for dim in shape:
        dims.message(1, Message().string(2, dim) if isinstance(dim, str) else Message().int64(1, dim))
    tensor_type = Message().int64(1, elem_type).message(2, dims)
    return Message().string(1, name).message(2, Message().message(1, tensor_type))


def graph(
    name: str,
    nodes: Iterable[Message],
    initializers: Iterable[Message],
    inputs: Iterable[Message],
    outputs: Iterable[Message],
) -> Message:
    """GraphProto: node 1, name 2, initializer 5, input 11, output 12."""
    return (
        Message()
        .messages(1, nodes)
        .string(2, name)
        .messages(5, initializers)
        .messages(11, inputs)
        .messages(12, outputs)
    )


def model(
    body: Message, ir_version: int, opset: int, producer: str, domains: Sequence[tuple[str, int]] = ()
) -> Message:
    """ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (OperatorSetIdProto:
    domain 1, version 2), the default domain's first, then each of `domains`."""
    opsets = [Message().string(1, domain).int64(2, version) for domain, version in [("", opset), *domains]]
    return Message().int64(1, ir_version).string(2, producer).message(7, body).messages(8, opsets)
