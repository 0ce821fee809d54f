"""Channels-first nodes TensorFlow's CPU kernels cannot run, rewritten so they run here.

A graph prepared for a GPU (graph/gpu.py) holds NCHW convolutions and pools wherever the layout
optimizer put them. Inside engines they are what TF-TRT converted; outside them (the native
part of the converted graph, a native segment) TensorFlow runs them. Its CPU kernels run NCHW
only through oneDNN (x86 builds with oneDNN on); elsewhere they refuse; DepthToSpace and
SpaceToDepth have no NCHW CPU kernel at all. (MaxPoolV2, whose ksize and strides are tensors,
is not rewritten: a native NCHW one fails with TensorFlow's own error.) `cpu_runnable` wraps each
such node in Transposes: channels-last in, the same op on channels-last data, channels-first
out, under the node's own name so every consumer still reads it. Graphs without such nodes (every
CPU-prepared graph) are returned as they are.
"""

from __future__ import annotations

from typing import Any

from workbench.lazy import tf

# Ops with a channels-first `data_format` that TensorFlow's plain CPU kernels refuse, and which
# of their inputs carry the data (the others are filters, sizes, ksize/strides tensors).
DATA_INPUTS = {
    "Conv2D": (0,), "DepthwiseConv2dNative": (0,), "Conv3D": (0,),
    "MaxPool": (0,), "AvgPool": (0,), "MaxPool3D": (0,), "AvgPool3D": (0,),
    "Conv2DBackpropInput": (2,), "Conv3DBackpropInputV2": (2,),
    # No NCHW CPU kernel at all, oneDNN or not; TensorFlow defines them as the NHWC op
    # between Transposes, which is what the layout optimizer relied on.
    "DepthToSpace": (0,), "SpaceToDepth": (0,),
}
# Inputs that are vectors in data_format's order: reordered with the data.
SHAPE_INPUTS = {
    "Conv2DBackpropInput": ((0, "sizes"),), "Conv3DBackpropInputV2": ((0, "sizes"),),
}
CHANNELS_FIRST = {b"NCHW": b"NHWC", b"NCDHW": b"NDHWC"}
SUFFIX = "/_workbench_channels_last"


def original_node(name: str) -> str:
    """The prepared graph's node a node of the rewrite belongs to (profiles time it there)."""
    return name.split(SUFFIX, 1)[0]


def needs_rewrite(node: Any) -> bool:
    return node.op in DATA_INPUTS and node.attr["data_format"].s in CHANNELS_FIRST


def cpu_runnable(graph_def: Any) -> Any:
    """`graph_def`, or a copy whose channels-first nodes the CPU cannot run are channels-last
    between Transposes (same outputs, same node names)."""
    if not any(needs_rewrite(node) for node in graph_def.node):
        return graph_def
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    for node in list(out.node):
        if needs_rewrite(node):
            _to_channels_last(out, node)
    return out


def _to_channels_last(graph_def: Any, node: Any) -> None:
    rank = 5 if node.attr["data_format"].s == b"NCDHW" else 4
    to_last = [0, *range(2, rank), 1]
    to_first = [0, rank - 1, *range(1, rank - 1)]
    inner = graph_def.node.add()
    inner.CopyFrom(node)
    inner.name = node.name + SUFFIX
    inner.attr["data_format"].s = CHANNELS_FIRST[node.attr["data_format"].s]
    for attr in ("strides", "ksize", "dilations"):
        if attr in inner.attr and len(inner.attr[attr].list.i) == rank:
            values = list(inner.attr[attr].list.i)
            inner.attr[attr].list.i[:] = [values[i] for i in to_last]
    pads = list(inner.attr["explicit_paddings"].list.i) if "explicit_paddings" in inner.attr \
        else []
    if len(pads) == 2 * rank:  # (before, after) per dimension, in data_format's order
        inner.attr["explicit_paddings"].list.i[:] = [
            pads[2 * i + j] for i in to_last for j in (0, 1)]
    for index, label in SHAPE_INPUTS.get(node.op, ()):
        inner.input[index] = _permuted(graph_def, node, inner.input[index], to_last, label)
    for index in DATA_INPUTS[node.op]:
        inner.input[index] = _transpose(graph_def, node, inner.input[index], to_last, "in")
    # The node itself becomes the Transpose back, so its consumers need no change.
    device = node.device
    node.Clear()
    node.name, node.op, node.device = inner.name.removesuffix(SUFFIX), "Transpose", device
    node.input.append(inner.name)
    node.input.append(_perm_const(graph_def, inner.name + "/to_first", to_first, inner.name))
    node.attr["T"].CopyFrom(inner.attr["T"])
    node.attr["Tperm"].type = _int32()


def _transpose(graph_def: Any, node: Any, source: str, perm: list[int], label: str) -> str:
    transpose = graph_def.node.add(name=f"{node.name}{SUFFIX}/{label}", op="Transpose")
    transpose.input.extend([source,
                            _perm_const(graph_def, transpose.name + "/perm", perm, source)])
    transpose.attr["T"].CopyFrom(node.attr["T"])
    transpose.attr["Tperm"].type = _int32()
    return transpose.name


def _permuted(graph_def: Any, node: Any, source: str, perm: list[int], label: str) -> str:
    """A vector in data_format's order (the backprop ops' input sizes) reordered by `perm`."""
    gather = graph_def.node.add(name=f"{node.name}{SUFFIX}/{label}", op="GatherV2")
    axis = _perm_const(graph_def, gather.name + "/axis", 0, source)
    gather.input.extend([source, _perm_const(graph_def, gather.name + "/perm", perm, source),
                         axis])
    gather.attr["Tparams"].type = _int32()
    gather.attr["Tindices"].type = _int32()
    gather.attr["Taxis"].type = _int32()
    return gather.name


def _perm_const(graph_def: Any, name: str, values: list[int] | int, anchor: str) -> str:
    """A Const hanging on `anchor` (a control input), so it lives in the anchor's loop frame
    and cond branch: a Const outside a loop may not feed a node inside ("inputs from
    different frames"). Not on a Placeholder, which is in no frame or branch: whoever feeds it
    maps its tensor, and a control input would still ask for the Placeholder itself (a native
    segment's inputs, the model's)."""
    const = graph_def.node.add(name=name, op="Const")
    source = anchor.split(":")[0].lstrip("^")
    if not any(n.name == source and n.op == "Placeholder" for n in graph_def.node):
        const.input.append("^" + source)
    const.attr["dtype"].type = _int32()
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(values, "int32"))
    return name


def _int32() -> int:
    from tensorflow.core.framework import types_pb2

    return types_pb2.DT_INT32
