"""An engine as TensorRT built it: its kernels after fusion, each with the TF nodes it holds.

Two sources give the same `Kernel` list, and `kernel_table` one DataFrame per engine (as
NVIDIA's TREx keeps engine data):
- TensorRT-RTX's builder (every machine): with `ProfilingVerbosity.DETAILED` and a VERBOSE
  logger it logs a `Layers:` message, one `Name: ..., LayerType: ..., Inputs: [...],
  Constants: [...], Outputs: [...], TacticName: ..., StreamId: ..., Metadata: [ONNX Layer:
  ...]...` line per kernel (`parse_layers_message`).
- The engine inspector's JSON, which trtexec's `--exportLayerInfo` writes where a GPU built
  the engine (`inspector_kernels`): `Layers` objects with `Name`, `LayerType`, `Inputs` and
  `Outputs` (`Name`, `Dimensions`, `Format/Datatype`) and, in newer TensorRT, `Metadata`.

Kernels name ONNX nodes; our exporter names each ONNX node after its TF node, or
`<TF node>/<label>` for a helper node (`onnx_context.ExportContext.helper`), so `tf_node_of`
maps them back. Every TF node of an engine is then in one place: a kernel's `nodes`; the
shape nodes (`shape_arithmetic`: values computed from tensor shapes, which TensorRT computes
on the host in dynamic shape or folds); or the nodes TensorRT removed or folded away (dead
layers, identities, constant subgraphs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from workbench.engines.layer_table import normalise_precision, precision_of_format
from workbench.engines.onnx.precision import CAST_PREFIX

KERNEL_JSON_KEYS = ("name", "type", "nodes", "inputs", "outputs")  # `convert --json --tensorrt`
KERNEL_COLUMNS = ["engine", "kernel", "type", "nodes", "onnx_nodes", "input_shapes",
                  "output_shapes", "input_dtypes", "output_dtypes", "input_formats",
                  "output_formats", "constant_shapes", "tactic"]
# Layers that compute nothing of the network: shape computations and their copy to the device,
# stream synchronisation, and the inspector's no-ops (a reshape that only reinterprets memory).
NON_COMPUTE_TYPES = frozenset({"shape_call", "ShapeHostToDevice", "signal", "wait", "NoOp"})
# The placeholders TF-TRT names engine inputs and outputs with: not TF nodes of the model.
_IO_PLACEHOLDER = re.compile(r"^TensorRT(Input|Output)PH_\d+$")
# INT8's Q/DQ nodes, `<tensor>_QuantizeLinear` (ONNX Runtime's quantizer): quantization of a
# tensor, not its TF node's work.
_QDQ_SUFFIXES = ("_QuantizeLinear", "_DequantizeLinear")


@dataclass(frozen=True)
class KernelTensor:
    """A tensor a kernel reads or writes: `shape` as TensorRT gives it (-1: dynamic)."""

    name: str
    shape: tuple[int, ...]
    dtype: str | None  # FP32, FP16, INT8, INT32...
    format: str  # `(NHWC) Channel major format`, `Row major linear FP32`...

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "format": self.format}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelTensor:
        return cls(data["name"], tuple(data["shape"]), data["dtype"], data["format"])


@dataclass(frozen=True)
class Kernel:
    """One layer of a built engine: after fusion, one kernel launch (or a stream event)."""

    name: str
    type: str
    onnx_nodes: tuple[str, ...]  # the ONNX nodes TensorRT says it holds, in its order
    nodes: tuple[str, ...] = ()  # their TF nodes (filled by `with_tf_nodes`)
    inputs: tuple[KernelTensor, ...] = ()
    outputs: tuple[KernelTensor, ...] = ()
    constants: tuple[KernelTensor, ...] = ()  # weights and folded constants it reads
    tactic: str = ""
    # The inspector's other fields (ParameterType, Kernel, Stride, Groups, Activation...).
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The contract's object: name, type, nodes (TF node names), inputs, outputs."""
        return {"name": self.name, "type": self.type, "nodes": list(self.nodes),
                "inputs": [t.to_json() for t in self.inputs],
                "outputs": [t.to_json() for t in self.outputs]}

    def to_record(self) -> dict[str, Any]:
        """Everything, for caches: `from_record` makes the same kernel again."""
        return {**self.to_json(), "onnx_nodes": list(self.onnx_nodes),
                "constants": [t.to_json() for t in self.constants], "tactic": self.tactic,
                "parameters": dict(self.parameters)}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Kernel:
        def tensors(key: str) -> tuple[KernelTensor, ...]:
            return tuple(KernelTensor.from_json(t) for t in data.get(key, ()))

        return cls(data["name"], data["type"], tuple(data.get("onnx_nodes", ())),
                   tuple(data.get("nodes", ())), tensors("inputs"), tensors("outputs"),
                   tensors("constants"), data.get("tactic", ""),
                   dict(data.get("parameters") or {}))

    @property
    def computes(self) -> bool:
        """False for shape calls and stream events, which hold no node of the network."""
        return self.type not in NON_COMPUTE_TYPES


# --- TensorRT-RTX's builder log ---------------------------------------------------------------

_KERNEL_LINE = re.compile(r"^Name: (?P<name>.*?), LayerType: (?P<type>[^,]*), (?P<rest>.*)$",
                          re.MULTILINE)
_SECTIONS = ("Inputs", "Constants", "Outputs")
_TENSOR = re.compile(
    r"\{ Name: (?P<name>.*?), Dimensions: \[(?P<dims>[^\]]*)\](?:, [A-Za-z]+: \[[^\]]*\])*"
    r", Datatype: (?P<dtype>[^,]*), Format: (?P<format>.*?) \}")
_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]*)\]")
_TACTIC = re.compile(r"(?:^|, )TacticName: (?P<tactic>[^,]*)")
_REFORMAT_NAME = "Reformatting CopyNode for "  # the inspector's format copies
_FOREIGN_NODE = re.compile(r"^ForeignNode \{ForeignNode\[(?P<region>.*?)\]\} metadata: ")


def parse_layers_message(message: str) -> list[Kernel]:
    """The kernels of TensorRT-RTX's `Layers:` build message, in execution order."""
    kernels = []
    for match in _KERNEL_LINE.finditer(message):
        rest = match["rest"]
        sections = _sections(rest)
        metadata = rest.partition("Metadata: ")[2] if "Metadata: " in rest else ""
        tactic = _TACTIC.search(rest)
        kernels.append(Kernel(
            match["name"], match["type"].strip(), tuple(_ONNX_LAYER.findall(metadata)),
            inputs=_tensors(sections["Inputs"]), outputs=_tensors(sections["Outputs"]),
            constants=_tensors(sections["Constants"]),
            tactic=tactic["tactic"].strip() if tactic else ""))
    return kernels


def parse_foreign_node(message: str) -> tuple[str, tuple[str, ...]] | None:
    """(region, its ONNX nodes) from a `ForeignNode {ForeignNode[first...last]} metadata:
    [ONNX Layer: ...]...` message: what one fused (Myelin) region holds; None for others."""
    match = _FOREIGN_NODE.match(message)
    if match is None:
        return None
    return match["region"], tuple(_ONNX_LAYER.findall(message[match.end():]))


def _sections(rest: str) -> dict[str, str]:
    """`Inputs: [...]`, `Constants: [...]`, `Outputs: [...]` of a kernel line, bracket-matched
    (dimension lists nest brackets inside them)."""
    found = dict.fromkeys(_SECTIONS, "")
    for section in _SECTIONS:
        start = rest.find(f"{section}: [")
        if start < 0:
            continue
        start += len(section) + 3
        depth, end = 1, start
        while end < len(rest) and depth:
            depth += {"[": 1, "]": -1}.get(rest[end], 0)
            end += 1
        found[section] = rest[start:end - 1]
    return found


def _tensors(text: str) -> tuple[KernelTensor, ...]:
    return tuple(KernelTensor(m["name"], _dims(m["dims"]), normalise_precision(m["dtype"]),
                              m["format"].strip())
                 for m in _TENSOR.finditer(text))


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split(",") if d.strip())


# --- the engine inspector's JSON (trtexec --exportLayerInfo) -----------------------------------

def inspector_kernels(layers: Iterable[Any],
                      name_parts: Callable[[str], Sequence[str]] = lambda name: ()
                      ) -> list[Kernel]:
    """The kernels of the inspector's `Layers` array. ONNX nodes come from each layer's
    `Metadata` (`[ONNX Layer: ...]`, TensorRT 10); without it, from `name_parts(layer name)`
    (older TensorRT names a fused layer after its parts: `a + b`)."""
    kernels = []
    for layer in layers:
        layer = {"Name": layer} if isinstance(layer, str) else layer  # layer_names_only
        name = str(layer.get("Name", ""))
        metadata = layer.get("Metadata")
        if layer.get("LayerType") == "Reformat" or layer.get("Origin") == "REFORMAT" \
                or name.startswith(_REFORMAT_NAME):
            onnx_nodes: tuple[str, ...] = ()  # a format copy TensorRT added, named after its user
        elif isinstance(metadata, str):
            onnx_nodes = tuple(_ONNX_LAYER.findall(metadata))
        else:
            onnx_nodes = tuple(name_parts(name))
        kernels.append(Kernel(
            name, str(layer.get("LayerType") or ""), onnx_nodes,
            inputs=_inspector_tensors(layer.get("Inputs")),
            outputs=_inspector_tensors(layer.get("Outputs")),
            constants=_inspector_weights(layer),
            tactic=str(layer.get("TacticName") or layer.get("TacticValue") or ""),
            parameters={k: v for k, v in layer.items() if k not in _INSPECTOR_READ}))
    return kernels


_INSPECTOR_READ = {"Name", "LayerType", "Inputs", "Outputs", "Metadata", "TacticName",
                   "TacticValue", "Weights", "Bias"}


def _inspector_weights(layer: Mapping[str, Any]) -> tuple[KernelTensor, ...]:
    """A convolution's or matrix product's `Weights` and `Bias` (`{"Type", "Count"}`) as
    constants: weights shaped (OutMaps, inputs per group, *Kernel) where the counts agree,
    else flat."""
    found = []
    for key in ("Weights", "Bias"):
        item = layer.get(key)
        if not isinstance(item, dict) or not item.get("Count"):
            continue
        count, shape = int(item["Count"]), (int(item["Count"]),)
        window = [int(d) for d in layer.get("Kernel") or ()]
        out_maps = int(layer.get("OutMaps") or 0)
        area = out_maps * math.prod(window)
        if key == "Weights" and area and count % area == 0:
            shape = (out_maps, count // area, *window)
        found.append(KernelTensor(key.lower(), shape, normalise_precision(item.get("Type")),
                                  ""))
    return tuple(found)


def _inspector_tensors(items: Any) -> tuple[KernelTensor, ...]:
    tensors = []
    for item in items or ():
        if isinstance(item, dict):
            text = str(item.get("Format/Datatype") or "")
            tensors.append(KernelTensor(str(item.get("Name", "")),
                                        tuple(int(d) for d in item.get("Dimensions") or ()),
                                        precision_of_format(text), text))
    return tuple(tensors)


# --- ONNX nodes -> TF nodes --------------------------------------------------------------------

def tf_node_of(onnx_node: str, tf_nodes: Iterable[str] | None = None) -> str | None:
    """The TF node an ONNX node of our exporter stands for: the node itself, or for a helper
    `<TF node>/<label>` the longest prefix that is one of `tf_nodes`. Without `tf_nodes`, the
    name itself. None for nodes that are no TF node's (FP16 casts, INT8 Q/DQ, I/O
    placeholders)."""
    if onnx_node.startswith(CAST_PREFIX) or onnx_node.endswith(_QDQ_SUFFIXES) \
            or _IO_PLACEHOLDER.match(onnx_node):
        return None
    if tf_nodes is None:
        return onnx_node
    names = tf_nodes if isinstance(tf_nodes, set | frozenset) else set(tf_nodes)
    candidate = onnx_node
    while candidate:
        if candidate in names:
            return candidate
        candidate = candidate.rpartition("/")[0]
    return None


def with_tf_nodes(kernels: Iterable[Kernel], tf_nodes: Iterable[str] | None = None
                  ) -> list[Kernel]:
    """`kernels` with `nodes` filled from their ONNX nodes (`tf_node_of`), in order, once."""
    names = None if tf_nodes is None else set(tf_nodes)
    return [replace(k, nodes=tuple(dict.fromkeys(
        n for n in (tf_node_of(o, names) for o in k.onnx_nodes) if n is not None)))
        for k in kernels]


def tf_nodes_of(onnx_nodes: Iterable[str], tf_nodes: Iterable[str] | None = None) -> list[str]:
    """The TF nodes ONNX nodes stand for, in order, once."""
    names = None if tf_nodes is None else set(tf_nodes)
    return list(dict.fromkeys(n for n in (tf_node_of(o, names) for o in onnx_nodes)
                              if n is not None))


# --- one engine's anatomy -------------------------------------------------------------------

@dataclass(frozen=True)
class EngineAnatomy:
    """An engine's kernels and what became of the TF nodes that are in none of them.

    `shape_nodes`: TF nodes in no kernel that compute shapes (`shape_arithmetic`): TensorRT
    computes them from the input shapes (on the host, in dynamic shape). `removed`: the other
    TF nodes of the network TensorRT parsed that no kernel names (TensorRT removed them or
    folded them away: identities, reshapes, constant subgraphs). `folded`:
    TF node -> the kernel it was folded into before TensorRT saw it (FP16/INT8 fold the graph
    first, `precision.fold_for_precision`: a batch-norm's scale and shift go into the
    convolution's weights); those kernels list them after TensorRT's own nodes."""

    engine: str
    kernels: tuple[Kernel, ...]
    removed: tuple[str, ...] = ()
    folded: Mapping[str, str | None] = field(default_factory=dict)
    source: str = ""  # the builder or file that described it
    # TensorRT's fused (Myelin) regions: its name for one, and the TF nodes it was given.
    regions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    shape_nodes: tuple[str, ...] = ()

    def table(self) -> pd.DataFrame:
        """One row per kernel (`KERNEL_COLUMNS`)."""
        return kernel_table(self.kernels, self.engine)

    @property
    def node_kernel(self) -> dict[str, str]:
        """TF node -> the kernel holding it (the first, where TensorRT lists it twice)."""
        found: dict[str, str] = {}
        for kernel in self.kernels:
            for node in kernel.nodes:
                found.setdefault(node, kernel.name)
        return found


def engine_anatomy(engine: str, kernels: Iterable[Kernel], network_nodes: Iterable[str] = (),
                   exported: Mapping[str, Sequence[str]] | None = None,
                   tf_nodes: Iterable[str] | None = None, source: str = "",
                   shape_nodes: Iterable[str] = ()) -> EngineAnatomy:
    """One engine's anatomy from its kernels (ONNX nodes), the ONNX nodes of the network
    TensorRT parsed and the exported model's nodes (ONNX node -> the nodes producing its
    inputs, in graph order); they differ where FP16/INT8 folded the model first.
    `shape_nodes`: the engine's TF nodes that compute shapes (`shape_arithmetic`); those in no
    kernel are the anatomy's `shape_nodes`, not removed ones."""
    listed = None if tf_nodes is None else list(tf_nodes)
    names = None if listed is None else set(listed)
    mapped = with_tf_nodes(kernels, names)
    holder = {n: i for i, k in enumerate(mapped) for n in reversed(k.nodes)}
    network = tf_nodes_of(network_nodes, names)
    shapes = set(shape_nodes)
    order = list(dict.fromkeys([*network, *(listed or ())]))
    on_host = tuple(n for n in order if n in shapes and n not in holder)
    removed = tuple(n for n in network if n not in holder and n not in shapes)
    parsed = set(network)
    folded: dict[str, str | None] = {}
    extra: dict[int, list[str]] = {}
    for node, index in _folded(exported or {}, parsed, holder, names).items():
        folded[node] = None if index is None else mapped[index].name
        if index is not None:
            extra.setdefault(index, []).append(node)
    mapped = [replace(k, nodes=k.nodes + tuple(extra.get(i, ()))) for i, k in enumerate(mapped)]
    return EngineAnatomy(engine, tuple(mapped), removed, folded, source,
                         shape_nodes=tuple(n for n in on_host if folded.get(n) is None))


def _folded(exported: Mapping[str, Sequence[str]], parsed: set[str], holder: dict[str, int],
            names: set[str] | None) -> dict[str, int | None]:
    """TF node -> the index of the kernel holding the node it was folded into: of the nodes
    producing its inputs, upstream, the first a kernel holds (a batch-norm's multiply folds
    into the convolution before it)."""
    tf_of = {o: tf_node_of(o, names) for o in exported}
    parts: dict[str, list[str]] = {}  # TF node -> its ONNX nodes
    for onnx_node, tf_node in tf_of.items():
        if tf_node is not None and tf_node not in parsed and tf_node not in holder:
            parts.setdefault(tf_node, []).append(onnx_node)
    found: dict[str, int | None] = {}
    for tf_node, onnx_nodes in parts.items():
        seen = set(onnx_nodes)
        queue = [p for o in onnx_nodes for p in exported[o]]
        index = None
        while queue and index is None:
            producer = queue.pop(0)
            if producer in seen:
                continue
            seen.add(producer)
            index = holder.get(tf_of[producer] or "")
            queue += exported[producer]
        found[tf_node] = index
    return found


def kernel_table(kernels: Iterable[Kernel], engine: str = "") -> pd.DataFrame:
    """One row per kernel: its type, TF and ONNX nodes, and its tensors' shapes, datatypes and
    formats (lists, in port order)."""
    rows = [{"engine": engine, "kernel": k.name, "type": k.type, "nodes": list(k.nodes),
             "onnx_nodes": list(k.onnx_nodes),
             "input_shapes": [t.shape for t in k.inputs],
             "output_shapes": [t.shape for t in k.outputs],
             "input_dtypes": [t.dtype for t in k.inputs],
             "output_dtypes": [t.dtype for t in k.outputs],
             "input_formats": [t.format for t in k.inputs],
             "output_formats": [t.format for t in k.outputs],
             "constant_shapes": [t.shape for t in k.constants], "tactic": k.tactic}
            for k in kernels]
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS)


def onnx_producers(model: Any) -> dict[str, list[str]]:
    """ONNX node -> the nodes producing its inputs, in graph order (an `onnx.ModelProto`)."""
    producer = {out: node.name for node in model.graph.node for out in node.output}
    return {node.name: [producer[i] for i in node.input if i in producer]
            for node in model.graph.node}
