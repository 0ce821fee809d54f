"""TF-TRT 2.17's validator (spec §2.3) and op rules (spec §3): exact reason texts, both modes."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.conversion.validator import ValidatorSettings, supported_op_types, validate_node
from workbench.graph.nodes import Graph, Node, TensorRef, TensorSpec

IB = ValidatorSettings()
EB = ValidatorSettings(use_implicit_batch=False)
INT8 = ValidatorSettings(precision_mode="INT8")
INPUT_FAIL = "Failed to convert at least one input to a TRT_TensorOrWeights: "
X4 = (-1, 8, 8, 3)  # an NHWC activation with unknown batch


# ------------------------------------------------------------------ graph-building helpers

def ph(shape, dtype="float"):
    """A tensor input (a Placeholder with known properties)."""
    return ("Placeholder", shape, dtype)


def const(value, dtype=None):
    """A Const input; dtype defaults to TF's name for the numpy dtype."""
    return ("Const", np.asarray(value), dtype)


_TF = {"float32": "float", "float16": "half", "float64": "double"}


def _input_node(name, spec):
    kind, payload, dtype = spec
    if kind == "Const":
        tf_dtype = dtype or _TF.get(payload.dtype.name, payload.dtype.name)
        return Node(0, name, "Const", raw_attrs={"value": payload, "dtype": tf_dtype},
                    output_specs=[TensorSpec(tf_dtype, payload.shape)])
    shape = None if payload is None else tuple(payload)
    return Node(0, name, kind, raw_attrs={"dtype": dtype},
                output_specs=[TensorSpec(dtype, shape)])


def run(op, inputs=(), attrs=None, settings=IB):
    """Validates node `n` of type `op` fed by `inputs` (ph/const specs or (name, Node))."""
    nodes = [_input_node(f"in{i}", spec) for i, spec in enumerate(inputs)]
    node = Node(0, "n", op, inputs=[TensorRef(n.name) for n in nodes],
                raw_attrs=dict(attrs or {}), output_specs=[TensorSpec("float", None)])
    graph = Graph([*nodes, node])
    return validate_node(graph, graph["n"], settings)


def both(op, inputs=(), attrs=None):
    return run(op, inputs, attrs, IB), run(op, inputs, attrs, EB)


def assert_rule_case(op, inputs, attrs, expect_ib, expect_eb):
    """A case table's row: the implicit- and explicit-batch verdicts ("same": as implicit)."""
    got_ib, got_eb = both(op, inputs, attrs)
    assert got_ib == expect_ib
    assert got_eb == (expect_ib if expect_eb == "same" else expect_eb)


F = {"T": "float"}


# ------------------------------------------------------------------ registry and op support

def test_registry_has_tftrt_217_converters():
    ops = supported_op_types(INT8)
    assert len(ops) == 124
    assert {"Conv2D", "CombinedNonMaxSuppression", "Einsum", "SelectV2", "FakeOp"} <= ops
    for absent in ("Placeholder", "NoOp", "PadV2", "MirrorPad", "All", "Any", "GatherNd",
                   "NonMaxSuppressionV5", "ResizeBicubic", "Where", "BroadcastTo", "If"):
        assert absent not in ops
    assert "QuantizeAndDequantizeV2" not in supported_op_types(IB)


@pytest.mark.parametrize("op", ["NoOp", "Placeholder", "MirrorPad", "Erfc", "ResizeBicubic"])
def test_unregistered_ops(op):
    assert run(op) == f"Op type {op} is not supported."


@pytest.mark.parametrize("op", ["QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3",
                                "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxArgs"])
@pytest.mark.parametrize("precision", ["FP32", "FP16"])
def test_quantization_ops_need_int8(op, precision):
    settings = ValidatorSettings(precision_mode=precision)
    assert run(op, [ph(X4)], settings=settings) == f"Op type {op} is not supported."


def test_quantization_ops_in_int8():
    qdq = [ph(X4), const(np.float32(-1)), const(np.float32(1))]
    assert run("QuantizeAndDequantizeV2", qdq, settings=INT8) is None
    assert run("FakeQuantWithMinMaxArgs", [ph(X4)], settings=INT8) is None
    explicit = ValidatorSettings(precision_mode="INT8", use_explicit_precision=True)
    assert run("QuantizeAndDequantizeV2", qdq, settings=explicit) is None
    # FakeQuant is not convertible in explicit-precision mode, with an empty message.
    assert run("FakeQuantWithMinMaxVars", qdq, settings=explicit) == ""


def test_fake_list_accepts_anything_after_input_conversion():
    fake = ValidatorSettings(fake_ops=frozenset({"Where"}))
    assert "Where" in supported_op_types(fake)
    assert run("Where", [ph((-1, 3), "bool")], settings=fake) is None
    assert run("Where", [ph((-1, 3), "int64")], settings=fake) == (
        INPUT_FAIL + "Unsupported tensorflow data type int64")


# ------------------------------------------------------------------ input conversion (§2.3)

@pytest.mark.parametrize("spec, inner", [
    (ph(X4, "int64"), "Unsupported tensorflow data type int64"),
    (ph(X4, "uint8"), "Unsupported tensorflow data type uint8"),
    (ph(X4, "int8"), "Unsupported tensorflow data type int8"),
    (ph(X4, "double"), "Unsupported tensorflow data type double"),
    (ph(None), "Input tensor rank is unknown."),
    (ph((-1,) + (2,) * 9), "Input tensor rank is greater than 9"),
    (ph((-1, 0, 3)), "Input tensor with shape [?,0,3] is an empty tensor, which is not "
                     "supported by TRT"),
    (ph(()), "Scalar input tensor is not supported since the first dimension is treated as "
             "batch dimension by TRT"),
    (const(np.array([2**40], dtype=np.int64)), "Value at index 0 is outside the range of int32"),
    (const(np.array([1.0])), "Unsupported tensorflow data type double"),
    (const(np.array([1], dtype=np.int32), "int64"),
     "DataType mismatch between attr (int64) and tensor (int32)"),
])
def test_input_conversion_failures_in_implicit_batch(spec, inner):
    assert run("Identity", [spec]) == INPUT_FAIL + inner


@pytest.mark.parametrize("spec, inner", [
    (ph((2,) * 9), "Input tensor rank is greater than 8"),
    (ph((0, 3)), "Input tensor with shape [0,3] is an empty tensor, which is not supported by "
                 "TRT"),
])
def test_input_conversion_failures_in_explicit_batch(spec, inner):
    assert run("Identity", [spec], settings=EB) == INPUT_FAIL + inner


def test_input_conversion_accepts():
    assert run("Identity", [ph(()), ], settings=EB) is None  # scalars fine in explicit batch
    assert run("Identity", [ph((0, 3))]) is None  # the batch dim may be 0 in implicit batch
    assert run("Identity", [ph(X4, "bool")]) is None  # TRT >= 8.2
    assert run("Identity", [const(np.array([7], dtype=np.uint8))]) is None  # cast to int32
    assert run("Identity", [const(np.float32(1))]) is None  # scalar Const is fine in IB


def test_unknown_properties_and_multi_output_const():
    src = Node(0, "src", "Relu")  # no output properties
    node = Node(0, "n", "Identity", inputs=[TensorRef("src")])
    graph = Graph([src, node])
    assert validate_node(graph, graph["n"], IB) == INPUT_FAIL + "Shape and data type are unknown"
    c = Node(0, "c", "Const", raw_attrs={"value": np.float32(1), "dtype": "float"})
    node = Node(0, "n", "Identity", inputs=[TensorRef("c", 1)])
    graph = Graph([c, node])
    assert validate_node(graph, graph["n"], IB) == (
        INPUT_FAIL + "Const node should only have one output.")


def test_identity_chain_to_const_counts_as_weights():
    x = _input_node("x", ph(X4))
    c = _input_node("c", const(np.ones((3, 3, 3, 4), np.float32)))
    ident = Node(0, "c/read", "Identity", inputs=[TensorRef("c")],
                 output_specs=[TensorSpec("float", (3, 3, 3, 4))])
    conv = Node(0, "n", "Conv2D", inputs=[TensorRef("x"), TensorRef("c/read")],
                raw_attrs={"T": "float", "padding": "SAME", "strides": [1, 1, 1, 1]})
    graph = Graph([x, c, ident, conv])
    assert validate_node(graph, graph["n"], IB) is None


def test_resource_placeholder_is_a_fake_handle():
    res = Node(0, "res", "Placeholder", raw_attrs={"dtype": "resource"})
    node = Node(0, "n", "ReadVariableOp", inputs=[TensorRef("res")],
                raw_attrs={"dtype": "float", "_shape": (3, 4)})
    graph = Graph([res, node])
    assert validate_node(graph, graph["n"], EB) is None
    assert validate_node(graph, graph["n"], IB) == "Implicit batch mode not supported, at n"


def test_identity_walk_keeps_the_original_edge_port():
    # TF-TRT walks to the Identity's source but converts it at the edge's own port (0 here),
    # so the properties of split:0 are used even though the Identity reads split:1.
    split = Node(0, "split", "Split", output_specs=[TensorSpec("float", (-1, 4)),
                                                    TensorSpec("int64", (-1, 4))])
    ident = Node(0, "id", "Identity", inputs=[TensorRef("split", 1)],
                 output_specs=[TensorSpec("int64", (-1, 4))])
    relu = Node(0, "n", "Relu", inputs=[TensorRef("id")], raw_attrs={"T": "float"})
    graph = Graph([split, ident, relu])
    assert validate_node(graph, graph["n"], IB) is None
    direct = Node(0, "m", "Relu", inputs=[TensorRef("split", 1)], raw_attrs={"T": "float"})
    graph = Graph([split, direct])
    assert validate_node(graph, graph["m"], IB) == (
        INPUT_FAIL + "Unsupported tensorflow data type int64")


def test_variable_inputs_are_weights():
    var = Node(0, "v", "VariableV2", raw_attrs={"dtype": "float", "shape": (3, 3, 3, 4)})
    x = _input_node("x", ph(X4))
    conv = Node(0, "n", "Conv2D", inputs=[TensorRef("x"), TensorRef("v")],
                raw_attrs={"T": "float", "padding": "SAME", "strides": [1, 1, 1, 1],
                           "dilations": [1, 1, 1, 1], "data_format": "NHWC"})
    graph = Graph([var, x, conv])
    assert validate_node(graph, graph["n"], IB) is None
    read = Node(0, "r", "ReadVariableOp", inputs=[TensorRef("h")],
                raw_attrs={"dtype": "float", "_shape": (3, 3, 3, 4)})
    handle = Node(0, "h", "VarHandleOp", raw_attrs={"dtype": "float"},
                  output_specs=[TensorSpec("resource", ())])
    conv2 = Node(0, "n", "Conv2D", inputs=[TensorRef("x"), TensorRef("r")],
                 raw_attrs=dict(conv.raw_attrs))
    graph = Graph([handle, read, _input_node("x", ph(X4)), conv2])
    assert validate_node(graph, graph["n"], EB) is None
    # In implicit batch the ReadVariableOp converter refuses, and that is an input failure.
    assert validate_node(graph, graph["n"], IB) == (
        INPUT_FAIL + "Implicit batch mode not supported, at r")
    # VarHandleOp's dtype attr is the variable's dtype, so TF-TRT falls through to properties.
    assert validate_node(graph, graph["r"], EB) == (
        INPUT_FAIL + "Unsupported tensorflow data type resource")


def test_an_op_registered_twice_is_a_clear_error_in_both_registries():
    from workbench.errors import DuplicateRegistrationError, merge_registry

    assert merge_registry("op rules", [{"Relu": 1}, {"Tanh": 2}]) == {"Relu": 1, "Tanh": 2}
    with pytest.raises(DuplicateRegistrationError,
                       match=r"ONNX converters: 1 op type registered twice \(Relu\)"):
        merge_registry("ONNX converters", [{"Relu": 1, "Tanh": 2}, {"Relu": 3}])
