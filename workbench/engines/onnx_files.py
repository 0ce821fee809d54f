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

from workbench.engines.wire import field

DATA_SUFFIX = ".data"
COPY_CHUNK = 16 << 20
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
    offset = out.tell() + -out.tell() % _ALIGN
    out.seek(offset)
    out.write(data)
    del tensor.external_data[:]
    for key, value in (("location", Path(out.name).name), ("offset", str(offset)),
                       ("length", str(len(data)))):
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
    while length:
        chunk = weights.read(min(length, COPY_CHUNK))
        if not chunk:
            raise ValueError(f"{weights.name} ends inside the weights of {tensor.name}")
        out.write(chunk)
        length -= len(chunk)

