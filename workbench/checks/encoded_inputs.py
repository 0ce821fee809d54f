"""Generated values for string inputs that carry encoded images.

Random bytes cannot stand in for a string input, but a serving signature taking image files
shows what it wants: the string reaches a DecodePng / DecodeJpeg / DecodeImage / DecodeBmp,
often inside a `map_fn` loop (through TensorList or TensorArray ops) or a function. Then the
generated input is a batch of valid encoded images: channels from the decode op's attribute,
size from the first static image shape after it (a resize, map_fn's stacked result, a conv's
input), else DEFAULT_SIDE square.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import Graph, Node
from workbench.lazy import tf

logger = logging.getLogger("workbench.checks")

# Decode op -> the format generated for it (DecodeImage sniffs the format: PNG it is).
IMAGE_FORMATS = {"DecodePng": "PNG", "DecodeJpeg": "JPEG", "DecodeImage": "PNG",
                 "DecodeBmp": "BMP", "DecodeAndCropJpeg": "JPEG"}
OTHER_DECODES = frozenset({"DecodeGif", "DecodeRaw", "DecodeCSV", "DecodeJSONExample",
                           "ParseExample", "ParseExampleV2", "ParseSingleExample",
                           "DecodeWav", "DecodeBase64", "DecodeCompressed", "StringToNumber"})
DEFAULT_SIDE = 32
# A string travels to its decode op through tensors of these dtypes (TensorList and
# TensorArray handles, loop frames); integer side branches (its Shape) are not followed.
_CARRIER_DTYPES = frozenset({"string", "variant", "resource"})
_FUNCTION_ATTRS = ("f", "body", "then_branch", "else_branch", "branches")
_SEARCH_DEPTH = 16


@dataclass(frozen=True)
class ImageInput:
    """How a string input is used as encoded images, and the images generated for it."""

    decode: str  # the decode op's type and node, e.g. "DecodePng map/while/DecodePng"
    image_format: str  # PNG, JPEG or BMP
    channels: int
    dtype: str  # pixel dtype: uint8 (uint16 for a 16-bit DecodePng)
    height: int
    width: int
    size_from: str  # the node whose static shape set the size, or "" for the default

    def describe(self, name: str) -> str:
        where = self.size_from or f"none found, the default {DEFAULT_SIDE}x{DEFAULT_SIDE}"
        return (f"input {name}: generated {self.height}x{self.width} {self.channels}-channel "
                f"{self.image_format} images for {self.decode} (static size from {where})")


def image_input(graph: Graph, library: Any, input_node: str) -> ImageInput | None:
    """How the string input `input_node` is decoded as images, or None when it is not."""
    decode = _first_decode(graph, library, input_node)
    if decode is None or decode.op not in IMAGE_FORMATS:
        return None
    channels = decode.channels or 3  # 0: as encoded; generate RGB
    found = _later_image_shape(decode.graph, decode.node.name, channels)
    height, width, size_from = found or (DEFAULT_SIDE, DEFAULT_SIDE, "")
    return ImageInput(decode.label, IMAGE_FORMATS[decode.op], channels, decode.dtype,
                      height, width, size_from)


def string_input_error(graph: Graph, library: Any, input_node: str, name: str
                       ) -> WorkbenchError:
    """The one-line error for a string input the workbench cannot generate values for."""
    decode = _first_decode(graph, library, input_node)
    use = f"it feeds {decode.label}, " if decode else ""
    return WorkbenchError(
        f"cannot generate string input {name!r}: {use}only encoded images (PNG, JPEG, BMP) "
        "are generated; pass real inputs (from Python: validate(..., inputs=...) or "
        "build(input_fn); from the CLI: workbench validate --inputs FILE.npz)")


def encoded_images(rng: np.random.Generator, shape: tuple[int, ...], use: ImageInput
                   ) -> np.ndarray:
    """A string array of `shape` holding random images encoded as `use` wants."""
    count = int(np.prod(shape, dtype=np.int64))
    high = 1 << 16 if use.dtype == "uint16" else 256
    pixels = rng.integers(0, high, (count, use.height, use.width, use.channels)).astype(use.dtype)
    encode = {"PNG": lambda p: tf.io.encode_png(p).numpy(),
              "JPEG": lambda p: tf.io.encode_jpeg(p).numpy(), "BMP": _encode_bmp}
    data = np.empty(count, dtype=object)
    for index, image in enumerate(pixels):
        data[index] = encode[use.image_format](image)
    return data.reshape(shape)


def _encode_bmp(pixels: np.ndarray) -> bytes:
    """An uncompressed 24-bit (or 32-bit for 4 channels) BMP; TensorFlow has no encoder."""
    height, width, channels = pixels.shape
    if channels == 1:
        pixels, channels = np.repeat(pixels, 3, axis=2), 3
    bgr = pixels[::-1, :, [2, 1, 0, 3][:channels]]  # bottom-up rows, BGR(A)
    row = width * channels
    padded = np.zeros((height, (row + 3) // 4 * 4), np.uint8)
    padded[:, :row] = bgr.reshape(height, row)
    body = padded.tobytes()
    header = b"BM" + (54 + len(body)).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
    info = b"".join(v.to_bytes(n, "little", signed=True) for v, n in (
        (40, 4), (width, 4), (height, 4), (1, 2), (8 * channels, 2), (0, 4), (len(body), 4),
        (2835, 4), (2835, 4), (0, 4), (0, 4)))
    return header + info + body


@dataclass(frozen=True)
class _Decode:
    graph: Graph  # where `node` is: the model's graph or a called function's body
    node: Node  # the decode node (a call node when its function body is opaque)
    op: str
    channels: int
    dtype: str
    label: str  # for messages: "DecodePng <node>", "DecodePng inside <call op> <node>"


def _first_decode(graph: Graph, library: Any, start: str, depth: int = 0) -> _Decode | None:
    """The first decode op the string from `start` reaches, looking into the functions it
    passes through (a call's body as a graph, with the argument shapes of the call)."""
    for node, index in _downstream(graph, start, carriers_only=True):
        if node.op in IMAGE_FORMATS or node.op in OTHER_DECODES:
            return _Decode(graph, node, node.op, int(node.attr("channels", 0) or 0),
                           _pixel_dtype(node.attr("dtype")), f"{node.op} {node.name}")
        called = _called(node)
        if not called or library is None or depth > 3:
            continue
        inner = (_decode_in_body(graph, library, node, index, depth)
                 if node.has_attr("f") else None) or _decode_in_function(library, called)
        if inner is not None:
            return inner if isinstance(inner, _Decode) else _Decode(
                graph, node, inner.op, int(_proto_attr(inner, "channels", 0)),
                _pixel_dtype(_proto_attr(inner, "dtype")),
                f"{inner.op} inside {node.op} {node.name}")
    return None


def _decode_in_body(graph: Graph, library: Any, call: Node, index: int, depth: int
                    ) -> _Decode | None:
    """The decode op reached inside the function `call` calls, from its argument `index`."""
    from workbench.conversion.function_conversion import function_graph_def
    from workbench.graph.build import graph_from_graph_def
    from workbench.graph.prepare import infer_shapes

    function = next((f for f in library.function if f.signature.name == call.attr("f")), None)
    if function is None or index >= len(function.signature.input_arg):
        return None
    specs = [graph.output_spec(ref) for ref in call.inputs]
    try:
        body, fetches, args = function_graph_def(function, library, specs)
        body_graph = graph_from_graph_def(body, infer_shapes(body, fetches))
    except Exception as error:  # a body TensorFlow cannot import: no decode found through it
        logger.debug("function %s not searched for a decode: %s", call.attr("f"),
                     first_line(error))
        return None
    inner = _first_decode(body_graph, library, args[index], depth + 1)
    if inner is None:
        return None
    return _Decode(inner.graph, inner.node, inner.op, inner.channels, inner.dtype,
                   f"{inner.label} inside {call.op} {call.name}")


def _pixel_dtype(dtype: Any) -> str:
    return "uint16" if dtype == "uint16" else "uint8"


def _called(node: Node) -> list[str]:
    names = [node.attr(key) for key in _FUNCTION_ATTRS if node.has_attr(key)]
    return [n for n in names if isinstance(n, str) and n]


def _decode_in_function(library: Any, names: list[str]) -> Any:
    """The first decode NodeDef in library functions `names` or the functions they call."""
    functions = {f.signature.name: f for f in library.function}
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop(0)
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node_def in functions[name].node_def:
            if node_def.op in IMAGE_FORMATS or node_def.op in OTHER_DECODES:
                return node_def
            stack += [node_def.attr[k].func.name for k in _FUNCTION_ATTRS
                      if k in node_def.attr and node_def.attr[k].func.name]
    return None


def _proto_attr(node_def: Any, key: str, default: Any = None) -> Any:
    from workbench.graph.nodes import decode_attr

    return decode_attr(node_def.attr[key]) if key in node_def.attr else default


def _later_image_shape(graph: Graph, start: str, channels: int
                       ) -> tuple[int, int, str] | None:
    """(height, width, node) of the first static [.., H, W, channels] shape after `start`."""
    for node, _index in _downstream(graph, start, carriers_only=False):
        for spec in node.output_specs:
            shape = spec.shape
            if (shape is not None and len(shape) in (3, 4) and shape[-1] == channels
                    and shape[-3] > 0 and shape[-2] > 0):
                return shape[-3], shape[-2], f"{node.op} {node.name}"
    return None


def _downstream(graph: Graph, start: str, carriers_only: bool
                ) -> Iterator[tuple[Node, int]]:
    """(node, input index) reached from `start` along data edges, nearest first."""
    seen, frontier = {start}, [start]
    for _ in range(_SEARCH_DEPTH):
        following = []
        for name in frontier:
            for consumer, index in graph.consumers.get(name, []):
                if consumer.name in seen:
                    continue
                seen.add(consumer.name)
                yield consumer, index
                if not carriers_only or consumer.op.startswith("TensorArray") or any(
                        s.dtype in _CARRIER_DTYPES for s in consumer.output_specs):
                    following.append(consumer.name)
        frontier = following
