"""Casts TF-TRT refuses, and the equivalent forms it converts.

TF-TRT 2.17's Cast converter takes float and half only, in and out. A widening Cast followed by
a narrowing one is one Cast of the two ends; a Cast to bool is a comparison with zero; a Cast
from bool is a select of 1 and 0; a bool ExpandDims of such a Cast is the ExpandDims of its
input, cast after; a Fill with a constant bool is a comparison of an int32 Fill.
"""

from __future__ import annotations

from collections.abc import Callable

from workbench.conversion.rewrites.graph_edit import (
    EXPLICIT_BATCH,
    SELECT_TYPES,
    GraphEdit,
    Rewrite,
    data_inputs,
)
from workbench.graph.nodes import Graph, Node

FLOAT_HALF = ("float", "half")
# Casts that keep every value exactly: to a type that represents all of the source's values.
LOSSLESS = {"half": ("float", "double"), "float": ("double",)}
# Types whose Equal TF-TRT converts (the comparison converters' float, half, int32).
COMPARABLE = ("float", "half", "int32")


def _fuse_cast_chains(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("Cast")):
        first = edit.graph[node.inputs[0].node]
        if first.op != "Cast":
            continue
        source, middle, target = first.attr("SrcT"), first.attr("DstT"), node.attr("DstT")
        if middle not in LOSSLESS.get(source, ()) or target not in FLOAT_HALF:
            continue
        node_def = edit.node_def(node.name)
        x = data_inputs(edit.node_def(first.name))[0]
        if source == target:
            edit.retype(node_def, "Identity", [x], T=source)
        else:
            node_def.input[0] = x
            node_def.attr["SrcT"].type = edit.node_def(first.name).attr["SrcT"].type
        rewritten += 1
    return rewritten


def _bool_cast_source(edit: GraphEdit, name: str) -> str | None:
    """The input of a `Cast(x -> bool)` node named `name` (x comparable), else None."""
    node = edit.graph[name]
    if node.op != "Cast" or node.attr("DstT") != "bool" or node.attr("SrcT") not in COMPARABLE:
        return None
    return data_inputs(edit.node_def(name))[0]


def _casts_to_bool(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("Cast")):
        x = _bool_cast_source(edit, node.name)
        if x is None:
            continue
        dtype = node.attr("SrcT")
        node_def = edit.node_def(node.name)
        zero = edit.const(f"{node.name}/zero", 0, dtype, anchor=x)
        equal = edit.add(f"{node.name}/is_zero", "Equal", [x, zero], control_from=node_def,
                         T=dtype)
        equal.attr["incompatible_shape_error"].b = True
        edit.retype(node_def, "LogicalNot", [equal.name])
        rewritten += 1
    return rewritten


def _casts_from_bool(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("Cast")):
        dtype = node.attr("DstT")
        if node.attr("SrcT") != "bool" or dtype not in SELECT_TYPES:
            continue
        node_def = edit.node_def(node.name)
        x = data_inputs(node_def)[0]
        one, zero = (edit.const(f"{node.name}/{name}", value, dtype, anchor=x)
                     for name, value in (("one", 1), ("zero", 0)))
        edit.retype(node_def, "SelectV2", [x, one, zero], T=dtype)
        rewritten += 1
    return rewritten


def _expand_dims_before_bool_cast(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("ExpandDims")):
        if node.attr("T") != "bool":
            continue
        x = _bool_cast_source(edit, node.inputs[0].node)
        if x is None:
            continue
        node_def = edit.node_def(node.name)
        axis = data_inputs(node_def)[1]
        dtype = edit.graph[node.inputs[0].node].attr("SrcT")
        expand = edit.add(f"{node.name}/{dtype}", "ExpandDims", [x, axis],
                          control_from=node_def, T=dtype, Tdim=node.attr("Tdim"))
        edit.retype(node_def, "Cast", [expand.name], SrcT=dtype, DstT="bool")
        node_def.attr["Truncate"].b = False
        rewritten += 1
    return rewritten


def _bool_fills(edit: GraphEdit) -> int:
    rewritten = 0
    for node in list(edit.nodes("Fill")):
        value = edit.graph[node.inputs[1].node]
        if node.attr("T") != "bool" or value.op != "Const":
            continue
        node_def = edit.node_def(node.name)
        dims = data_inputs(node_def)[0]
        flag = int(bool(edit.graph.const_value(value.name)))
        fill = edit.add(f"{node.name}/int32", "Fill",
                        [dims, edit.const(f"{node.name}/int32_value", flag, "int32", dims)],
                        control_from=node_def, T="int32", index_type=node.attr("index_type"))
        one = edit.const(f"{node.name}/one", 1, "int32", dims)
        edit.retype(node_def, "Equal", [fill.name, one], T="int32")
        node_def.attr["incompatible_shape_error"].b = True
        rewritten += 1
    return rewritten


def _after_a_cast(graph: Graph, node: Node) -> bool:
    return graph[node.inputs[0].node].op == "Cast"


def _is_bool(attr: str) -> Callable[[Graph, Node], bool]:
    return lambda graph, node: node.attr(attr) == "bool"


CAST_CHAIN = Rewrite(
    name="cast_chain_fused",
    pattern="Cast(A->B) then Cast(B->C), A->B lossless (half->float/double, float->double), "
            "A and C float or half",
    replacement="Cast(A->C), or Identity when A == C",
    rejects="Cast op is not supported - Allowed output dtypes: [float, half]. Received: double",
    ops=("Cast",),
    apply=_fuse_cast_chains,
    starts_at=_after_a_cast,
)
BOOL_EXPAND_DIMS = Rewrite(
    name="bool_expand_dims_before_cast",
    pattern="ExpandDims(Cast(x -> bool), axis), x float, half or int32",
    replacement="Cast(ExpandDims(x, axis) -> bool)",
    rejects="Data type bool is not supported for ExpandDims, must be one of [float, int32, half]",
    ops=("ExpandDims",),
    apply=_expand_dims_before_bool_cast,
    starts_at=_is_bool("T"),
    shape_modes=(EXPLICIT_BATCH,),  # the Cast it leaves becomes a comparison (below)
)
CAST_TO_BOOL = Rewrite(
    name="cast_to_bool_as_comparison",
    pattern="Cast(x -> bool), x float, half or int32",
    replacement="LogicalNot(Equal(x, 0)) (NaN is true, -0 false, as Cast gives)",
    rejects="Cast op is not supported - Allowed output dtypes: [float, half]. Received: bool",
    ops=("Cast",),
    apply=_casts_to_bool,
    starts_at=_is_bool("DstT"),
    shape_modes=(EXPLICIT_BATCH,),  # comparisons and LogicalNot need explicit batch
)
CAST_FROM_BOOL = Rewrite(
    name="cast_from_bool_as_select",
    pattern="Cast(x bool -> float, half or int32)",
    replacement="SelectV2(x, 1, 0)",
    rejects="Cast op is not supported - Allowed input dtypes: [float, half]. Received: bool",
    ops=("Cast",),
    apply=_casts_from_bool,
    starts_at=_is_bool("SrcT"),
    shape_modes=(EXPLICIT_BATCH,),  # selects need explicit batch
)
BOOL_FILL = Rewrite(
    name="bool_fill_as_comparison",
    pattern="Fill(dims, b), b a constant bool",
    replacement="Equal(Fill(dims, int32(b)), 1)",
    rejects="Data type bool is not supported for Fill, must be one of [float, half, int32]",
    ops=("Fill",),
    apply=_bool_fills,
    starts_at=_is_bool("T"),
    shape_modes=(EXPLICIT_BATCH,),  # Fill and Equal need explicit batch
)
