"""`MatrixBandPart(x, lower, upper)` -> a select against the band as a constant matrix.

Keras' TensorFlow attention writes its causal mask as `band_part(ones((T, S), bool), -1, 0)`.
TF-TRT 2.17 has no MatrixBandPart converter, and its Range refuses TensorFlow's scalar limits,
so the band cannot be computed from a shape inside an engine. When the last two dimensions are
static (as TensorFlow's importer infers them: Grappler leaves `ones((tf.shape(s)[2], ...))`
symbolic) the band is a constant [M, N] matrix of 0 and 1, and selecting with it is exact:
    bool x:    Greater(SelectV2(x, band, 0), 0)              (x and in the band)
    numeric x: SelectV2(Less(ZerosLike(x), band), x, 0)     (x where in the band, +0 elsewhere)
TF-TRT takes neither a bool constant as a select's condition nor a comparison of two constants,
hence the int32 detour and the ZerosLike that makes the condition a tensor.
"""

from __future__ import annotations

import numpy as np

from workbench.conversion.rewrites.graph_edit import (
    EXPLICIT_BATCH,
    SELECT_TYPES,
    GraphEdit,
    Rewrite,
    data_inputs,
)
from workbench.graph.nodes import Node

MAX_BAND_ELEMENTS = 1 << 22  # a 2048 x 2048 band is 16 MiB of int32 in the graph; more stays


def band_matrix(rows: int, columns: int, lower: int, upper: int) -> np.ndarray:
    """TensorFlow's in_band(m, n) = (lower < 0 or m - n <= lower) and (upper < 0 or
    n - m <= upper), as 0/1."""
    m = np.arange(rows)[:, None]
    n = np.arange(columns)[None, :]
    inside = ((lower < 0) | (m - n <= lower)) & ((upper < 0) | (n - m <= upper))
    return inside.astype(np.int32)


def _band(edit: GraphEdit, node: Node) -> np.ndarray | None:
    """The node's band as a constant, or None when its sizes or limits are not known."""
    if node.attr("T") not in ("bool", *SELECT_TYPES):
        return None
    limits = [edit.graph[ref.node] for ref in node.inputs[1:3]]
    if any(limit.op != "Const" for limit in limits):
        return None
    shape = edit.static_shape(node.inputs[0])
    if shape is None or len(shape) < 2:
        return None
    rows, columns = shape[-2:]
    if rows < 0 or columns < 0 or rows * columns > MAX_BAND_ELEMENTS:
        return None
    lower, upper = (int(edit.graph.const_value(limit.name)) for limit in limits)
    return band_matrix(rows, columns, lower, upper)


def _apply(edit: GraphEdit) -> int:
    bands = [(node, _band(edit, node)) for node in edit.nodes("MatrixBandPart")]
    bands = [(node, band) for node, band in bands if band is not None]  # decided, then edited
    for node, band in bands:
        dtype = node.attr("T")
        node_def = edit.node_def(node.name)
        x = data_inputs(node_def)[0]
        if dtype == "bool":
            zero = edit.const(f"{node.name}/zero", 0, "int32", anchor=x)
            as_int = edit.add(f"{node.name}/as_int32", "SelectV2",
                              [x, edit.const(f"{node.name}/band", band, "int32", anchor=x), zero],
                              control_from=node_def, T="int32")
            edit.retype(node_def, "Greater", [as_int.name, zero], T="int32")
        else:
            zeros = edit.add(f"{node.name}/zeros", "ZerosLike", [x], control_from=node_def,
                             T=dtype)
            in_band = edit.add(f"{node.name}/in_band", "Less",
                               [zeros.name, edit.const(f"{node.name}/band", band, dtype, x)],
                               control_from=node_def, T=dtype)
            zero = edit.const(f"{node.name}/zero", 0, dtype, anchor=x)
            edit.retype(node_def, "SelectV2", [in_band.name, x, zero], T=dtype)
    return len(bands)


MATRIX_BAND_PART = Rewrite(
    name="band_part_as_select",
    pattern="MatrixBandPart(x, lower, upper), lower and upper constants, x's last two "
            "dimensions static (a causal mask: lower=-1, upper=0)",
    replacement="bool x: Greater(SelectV2(x, band, 0), 0); float, half or int32 x: "
                "SelectV2(Less(ZerosLike(x), band), x, 0); band a constant 0/1 int32 or x-typed "
                "[M, N] matrix",
    rejects="Op type MatrixBandPart is not supported.",
    ops=("MatrixBandPart",),
    apply=_apply,
    shape_modes=(EXPLICIT_BATCH,),  # select and comparisons need explicit batch
)
