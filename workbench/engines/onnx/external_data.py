"""ONNX model files whose weights sit in a data file beside them (ONNX's external data).

An engine's model is written this way: the exporter streams each weight from the segment's
GraphDef into `<model>.data`, the model proto itself holds no weight, and ONNX Runtime maps the
data file rather than parse every weight out of a proto (VGG16's first call held the export,
its serialized bytes and ORT's parsed copy at once: 3x its weights). `write_inline` turns such
a model into one self-contained file (saved engines, `<engine>.onnx` for trtexec), streamed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import onnx

from workbench.graph.wire import field, varint

DATA_SUFFIX = ".data"
COPY_CHUNK = 16 << 20
INLINE_BYTES = 4096  # initializers up to this size stay in the model
_ALIGN = 4096  # each weight starts on a page: ONNX Runtime maps it in place

# Field numbers of ModelProto.graph, GraphProto.initializer and TensorProto.raw_data.
_GRAPH, _INITIALIZER, _RAW_DATA = 7, 5, 9


def data_file(model: Path) -> Path:
    """Where the weights of the model file `model` are (whether it has them there or not)."""
    return model.with_name(model.name + DATA_SUFFIX)


@contextmanager
def new_model() -> Iterator[Path]:
    """A new temporary `.onnx` file, removed (with its data file) if making it fails."""
    handle, name = tempfile.mkstemp(prefix="workbench-engine-", suffix=".onnx")
    os.close(handle)
    path = Path(name)
    try:
        yield path
    except BaseException:
        remove_model(path)
        raise


@contextmanager
def model_file() -> Iterator[tuple[BinaryIO, Path]]:
    """`new_model()` open for writing."""
    with new_model() as path, path.open("wb") as out:
        yield out, path


def remove_model(path: Path) -> None:
    """Removes a model file and its data file."""
    path.unlink(missing_ok=True)
    data_file(path).unlink(missing_ok=True)


def take_model(path: Path) -> onnx.ModelProto:
    """The model file `path` in memory, its weights included; its files removed."""
    try:
        return onnx.load(str(path))
    finally:
        remove_model(path)


def append_external(tensor: onnx.TensorProto, data: bytes, out: BinaryIO) -> None:
    """Writes `data`, the initializer `tensor`'s bytes, at the end of the data file `out` and
    makes `tensor` point there (its location is the data file's name: the model sits beside)."""
    offset = _aligned(out)
    out.write(data)
    _point_to(tensor, out, offset, len(data))


def _aligned(out: BinaryIO) -> int:
    offset = out.tell() + -out.tell() % _ALIGN
    out.seek(offset)
    return offset


def _point_to(tensor: onnx.TensorProto, out: BinaryIO, offset: int, length: int) -> None:
    del tensor.external_data[:]
    for key, value in (("location", Path(out.name).name), ("offset", str(offset)),
                       ("length", str(length))):
        tensor.external_data.add(key=key, value=value)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.ClearField("raw_data")


def write_inline(path: Path, out: BinaryIO) -> None:
    """The model file `path` into `out` as one self-contained model, its external weights
    inline, streamed: the model without its initializers, then each initializer as a piece of
    the graph (`wire`), its bytes copied from the data file."""
    data = data_file(path)
    if not data.exists():
        with path.open("rb") as model:
            shutil.copyfileobj(model, out, COPY_CHUNK)
        return
    model = onnx.load(str(path), load_external_data=False)  # small: no weights
    head = onnx.ModelProto()
    head.CopyFrom(model)
    del head.graph.initializer[:]
    out.write(head.SerializeToString())
    with data.open("rb") as weights:
        for tensor in model.graph.initializer:
            _write_initializer(tensor, weights, out)


def _write_initializer(tensor: onnx.TensorProto, weights: BinaryIO, out: BinaryIO) -> None:
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        data = tensor.SerializeToString()
        piece = field(_INITIALIZER, len(data)) + data
        out.write(field(_GRAPH, len(piece)) + piece)
        return
    where = {entry.key: entry.value for entry in tensor.external_data}
    offset, length = int(where.get("offset", 0)), int(where["length"])
    header = onnx.TensorProto()
    header.CopyFrom(tensor)
    del header.external_data[:]
    header.ClearField("data_location")
    head = header.SerializeToString() + field(_RAW_DATA, length)
    size = len(head) + length
    initializer = field(_INITIALIZER, size)
    out.write(field(_GRAPH, len(initializer) + size) + initializer + head)
    weights.seek(offset)
    _copy(weights, out, length)


def split_inline(source: BinaryIO, path: Path) -> None:
    """The self-contained model read from `source` (to its end) into the model file `path` and
    its data file, streamed: each initializer's raw bytes larger than INLINE_BYTES go to the
    data file as they are read (`write_inline` the other way), so ONNX Runtime maps them
    rather than parse them out of the proto and copy them into its tensors."""
    with path.open("wb") as model, data_file(path).open("wb") as data:
        while (found := _next_field(source)) is not None:
            number, wire, key = found
            if number == _GRAPH and wire == 2:
                _split_graph(source, _read_varint(source), model, data)
            else:
                model.write(key + _value(source, wire))


def _split_graph(source: BinaryIO, length: int, model: BinaryIO, data: BinaryIO) -> None:
    """The graph's fields, each written as a piece of the graph (`wire`)."""
    end = source.tell() + length
    while source.tell() < end:
        found = _next_field(source)
        if found is None:
            raise ValueError("the model ends inside its graph")
        number, wire, key = found
        if number == _INITIALIZER and wire == 2:
            tensor = _split_tensor(source, _read_varint(source), data)
            piece = field(_INITIALIZER, len(tensor)) + tensor
        else:
            piece = key + _value(source, wire)
        model.write(field(_GRAPH, len(piece)) + piece)


def _split_tensor(source: BinaryIO, length: int, data: BinaryIO) -> bytes:
    """A serialized initializer, its raw bytes moved to `data` when large."""
    end = source.tell() + length
    head = bytearray()
    moved: tuple[int, int] | None = None
    while source.tell() < end:
        found = _next_field(source)
        if found is None:
            raise ValueError("the model ends inside an initializer")
        number, wire, key = found
        if number == _RAW_DATA and wire == 2 and moved is None:
            size = _read_varint(source)
            if size > INLINE_BYTES:
                moved = (_aligned(data), size)
                _copy(source, data, size)
                continue
            head += key + varint(size) + _read(source, size)
            continue
        head += key + _value(source, wire)
    if moved is None:
        return bytes(head)
    tensor = onnx.TensorProto.FromString(bytes(head))
    _point_to(tensor, data, *moved)
    return tensor.SerializeToString()


def _next_field(source: BinaryIO) -> tuple[int, int, bytes] | None:
    """The next field's number, wire type and key bytes; None at the end."""
    first = source.read(1)
    if not first:
        return None
    raw = bytearray(first)
    while raw[-1] & 0x80:
        raw += _read(source, 1)
    key = _decode(bytes(raw))
    return key >> 3, key & 7, bytes(raw)


def _value(source: BinaryIO, wire: int) -> bytes:
    """A field's value as its wire bytes (a length-delimited one with its length)."""
    if wire == 0:
        raw = bytearray(_read(source, 1))
        while raw[-1] & 0x80:
            raw += _read(source, 1)
        return bytes(raw)
    if wire in (1, 5):
        return _read(source, 8 if wire == 1 else 4)
    if wire == 2:
        size = _read_varint(source)
        return varint(size) + _read(source, size)
    raise ValueError(f"unexpected protobuf wire type {wire} in an ONNX model")


def _read_varint(source: BinaryIO) -> int:
    return _decode(_value(source, 0))


def _decode(raw: bytes) -> int:
    return sum((b & 0x7F) << (7 * i) for i, b in enumerate(raw))


def _read(source: BinaryIO, size: int) -> bytes:
    data = source.read(size)
    if len(data) != size:
        raise ValueError("the model file ends early")
    return data


def _copy(source: BinaryIO, out: BinaryIO, size: int) -> None:
    while size:
        chunk = _read(source, min(size, COPY_CHUNK))
        out.write(chunk)
        size -= len(chunk)
