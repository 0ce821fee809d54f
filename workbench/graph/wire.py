"""Protobuf's wire format, for writing a large message in pieces rather than serialized whole.

A serialized message is its fields one after another, and a parser merges a message field that
occurs more than once and appends to repeated fields: so a model or a GraphDef can be written
as its small part, then each large piece (a weight) under its field's key, streamed. Serializing
a message whole copies every weight twice (into upb's buffer, then Python's bytes), and upb's
`ByteSize()` serializes to count.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from workbench.graph.nodes import element_count

# Field numbers: GraphDef.node, NodeDef.attr, a map entry's key and value, AttrValue.tensor,
# TensorProto.tensor_content.
_NODE, _ATTR, _KEY, _VALUE, _TENSOR, _CONTENT = 1, 5, 1, 2, 8, 4
LARGE_ELEMENTS = 1 << 18  # a Const this large has its bytes written apart


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, size: int) -> bytes:
    """The key and length of a length-delimited field (message, bytes, string) of `size`
    bytes: what precedes its contents."""
    return varint(number << 3 | 2) + varint(size)


def write_graph_def(graph_def: Any, out: BinaryIO, weights: dict[str, Any] | None = None,
                    placed: dict[str, int] | None = None) -> tuple[int, int]:
    """`graph_def` into the binary file `out` a node at a time, each large Const's bytes read
    once and written apart. `weights` (node name -> TensorProto) stand for nodes of those names
    (a lifted graph's Placeholders): each is written as a Const of its value. `placed` gets,
    for each Const whose bytes were written apart, where they start (bytes from where writing
    began), so they can be read back a slice at a time. Returns the bytes written and their
    CRC32; the file parses as the GraphDef."""
    from tensorflow.core.framework import graph_pb2, node_def_pb2

    written, crc = 0, 0

    def write(*pieces: bytes) -> None:
        nonlocal written, crc
        for piece in pieces:
            out.write(piece)
            written += len(piece)
            crc = zlib.crc32(piece, crc)

    for node in graph_def.node:
        tensor = (weights or {}).get(node.name)
        if tensor is not None:
            shell = node_def_pb2.NodeDef(name=node.name, op="Const", device=node.device)
            shell.attr["dtype"].type = tensor.dtype
        elif node.op == "Const" and element_count(node.attr["value"].tensor) >= LARGE_ELEMENTS:
            tensor, shell = node.attr["value"].tensor, _without_value(node)
        else:
            data = node.SerializeToString()
            write(field(_NODE, len(data)), data)
            continue
        head, content = _const_pieces(shell.SerializeToString(), tensor)
        write(head)
        if content and placed is not None:
            placed[node.name] = written
        write(content)
    for descriptor, value in graph_def.ListFields():  # the library, versions
        if descriptor.name != "node":
            write(_copy_fields(graph_pb2.GraphDef(), [(descriptor, value)]).SerializeToString())
    return written, crc


def read_fields(file: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The top-level length-delimited fields of a serialized message (a GraphDef: each node,
    the library, the versions) as (field number, contents), read one at a time: parsing a
    GraphDef whole holds its bytes and the parsed message at once (2x its weights)."""
    while True:
        number = _read_varint(file, allow_end=True)
        if number is None:
            return
        if number & 7 != 2:
            raise ValueError(f"field {number >> 3} is not length-delimited (wire type "
                             f"{number & 7}): not a GraphDef written by write_graph_def")
        size = _read_varint(file)
        data = file.read(size)
        if len(data) != size:
            raise ValueError("the file ends inside a field: truncated")
        yield number >> 3, data


def read_graph_def(file: BinaryIO, replace: Callable[[Any], Any] | None = None) -> Any:
    """A GraphDef parsed a field at a time (`read_fields`). `replace(node)` may return a node
    to put in a node's place (a weight's stand-in; the parsed node is then the caller's)."""
    from tensorflow.core.framework import graph_pb2, node_def_pb2

    graph_def = graph_pb2.GraphDef()
    for number, data in read_fields(file):
        if number != _NODE:
            graph_def.MergeFromString(field(number, len(data)) + data)
        elif replace is None:
            graph_def.node.add().ParseFromString(data)
        else:
            node = node_def_pb2.NodeDef.FromString(data)
            graph_def.node.append(replace(node) or node)
    return graph_def


def _read_varint(file: BinaryIO, allow_end: bool = False) -> int | None:
    value, shift = 0, 0
    while True:
        byte = file.read(1)
        if not byte:
            if allow_end and shift == 0:
                return None
            raise ValueError("the file ends inside a field: truncated")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7


def _const_pieces(shell: bytes, tensor: Any) -> tuple[bytes, bytes]:
    """A Const node's field in the GraphDef as what precedes the tensor's bytes (the serialized
    node without its value, `shell`, and the value's map entry), then the bytes, read once."""
    head, content = _tensor_pieces(tensor)
    value = len(head) + len(content)
    attr_value = field(_TENSOR, value)
    entry = field(_KEY, 5) + b"value" + field(_VALUE, len(attr_value) + value)
    attr = field(_ATTR, len(entry) + len(attr_value) + value)
    size = len(shell) + len(attr) + len(entry) + len(attr_value) + value
    return field(_NODE, size) + shell + attr + entry + attr_value + head, content


def _tensor_pieces(tensor: Any) -> tuple[bytes, bytes]:
    """A serialized TensorProto as its head and its bytes."""
    from tensorflow.core.framework import tensor_pb2

    content = tensor.tensor_content
    if not content:
        return tensor.SerializeToString(), b""
    head = tensor_pb2.TensorProto(dtype=tensor.dtype, version_number=tensor.version_number)
    head.tensor_shape.CopyFrom(tensor.tensor_shape)
    return head.SerializeToString() + field(_CONTENT, len(content)), content


def _without_value(node: Any) -> Any:
    """A copy of NodeDef `node` without its `value` attr (the weight is not copied)."""
    shell = _copy_fields(type(node)(), [(d, v) for d, v in node.ListFields() if d.name != "attr"])
    for key, value in node.attr.items():
        if key != "value":
            shell.attr[key].CopyFrom(value)
    return shell


def _copy_fields(message: Any, fields: list[tuple[Any, Any]]) -> Any:
    """`message` given `fields` (as `ListFields()` lists them), copied one by one."""
    for descriptor, value in fields:
        if hasattr(value, "extend"):  # a repeated field
            getattr(message, descriptor.name).extend(value)
        elif descriptor.message_type is not None:
            getattr(message, descriptor.name).CopyFrom(value)
        else:
            setattr(message, descriptor.name, value)
    return message
