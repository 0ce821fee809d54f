"""The op rules and the ONNX exporter agree: every case the op-rule tables accept (implicit or
dynamic-shape mode) is a one-op segment the exporter turns into a valid ONNX model, unless its
op type is in `onnx_export.NOT_EXPORTED` with the reason. Otherwise such a segment would count
as an engine while it runs natively."""

from __future__ import annotations

import numpy as np
import pytest
from test_op_rules_families import CASES as FAMILY_CASES
from test_op_rules_shapes import CASES as SHAPE_CASES

from workbench.conversion.result import EngineInfo
from workbench.engines.onnx.segment_export import NOT_EXPORTED, ExportError, export_onnx
from workbench.engines.segment import INPUT_PREFIX, OUTPUT_PREFIX, SegmentGraph
from workbench.graph.nodes import TensorSpec


def accepted_cases() -> list[tuple]:
    """(id, op, inputs, attrs) of every table row a mode accepts."""
    cases = []
    for table, rows in (("families", FAMILY_CASES), ("shapes", SHAPE_CASES)):
        for index, (op, inputs, attrs, expect_ib, expect_eb) in enumerate(rows):
            dynamic = expect_ib if expect_eb == "same" else expect_eb
            if expect_ib is None or dynamic is None:
                cases.append((f"{table}-{op}-{index}", op, inputs, attrs))
    return cases


def one_op_segment(op: str, inputs: list, attrs: dict) -> SegmentGraph:
    """A segment holding node `n` of type `op`: its tensor inputs as the engine's inputs, its
    constants inside, one engine output per output of `n` (dtypes and shapes TensorFlow
    infers)."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.framework import op_def_registry, tensor_util

    graph_def = graph_pb2.GraphDef()
    names, dtypes, specs = [], [], []
    for index, (kind, payload, dtype) in enumerate(inputs):
        if kind == "Const":
            node = graph_def.node.add(name=f"const_{index}", op="Const")
            value = np.asarray(payload)
            tensor = tensor_util.make_tensor_proto(value, dtype=tf.as_dtype(dtype or value.dtype))
            node.attr["value"].tensor.CopyFrom(tensor)
            node.attr["dtype"].type = tensor.dtype
            dtypes.append(tf.as_dtype(tensor.dtype))
        else:
            node = graph_def.node.add(name=f"{INPUT_PREFIX}{len(specs)}", op="Placeholder")
            dtype = tf.as_dtype(dtype)
            node.attr["dtype"].type = dtype.as_datatype_enum
            shape = None if payload is None else [None if d < 0 else d for d in payload]
            node.attr["shape"].shape.CopyFrom(tf.TensorShape(shape).as_proto())
            specs.append(TensorSpec(dtype.name, None if payload is None else tuple(payload)))
            dtypes.append(dtype)
        names.append(node.name)
    node = graph_def.node.add(name="n", op=op, input=names)
    op_def = op_def_registry.get(op)
    if op_def is None:
        raise ValueError(f"TensorFlow has no op {op}")
    _set_attrs(node, op_def, attrs, dtypes)
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
    outputs = graph.get_operation_by_name("n").outputs
    output_specs = []
    for port, tensor in enumerate(outputs):
        identity = graph_def.node.add(name=f"{OUTPUT_PREFIX}{port}", op="Identity",
                                      input=[f"n:{port}"])
        identity.attr["T"].type = tensor.dtype.as_datatype_enum
        shape = tensor.shape
        output_specs.append(TensorSpec(tensor.dtype.name, None if shape.rank is None else
                                       tuple(-1 if d is None else d for d in shape.as_list())))
    engine = EngineInfo(name="TRTEngineOp_000_000", nodes=("n",), native_ops={op: 1},
                        native_node_count=1, effective_size=1, input_dtypes=(),
                        output_dtypes=(), input_shapes=(), output_shapes=())
    return SegmentGraph(engine, graph_def, [f"{INPUT_PREFIX}{i}" for i in range(len(specs))],
                        [f"{OUTPUT_PREFIX}{i}" for i in range(len(outputs))], specs,
                        output_specs)


def _set_attrs(node: object, op_def: object, attrs: dict, dtypes: list) -> None:
    """The table's attrs as AttrValues of the op's types; type attrs the table leaves out
    come from the inputs, list lengths from their count."""
    import tensorflow as tf

    kinds = {attr.name: attr.type for attr in op_def.attr}
    for key, value in attrs.items():
        kind = kinds.get(key)
        if kind == "type":
            node.attr[key].type = tf.as_dtype(value).as_datatype_enum
        elif kind == "list(type)":
            node.attr[key].list.type.extend(tf.as_dtype(v).as_datatype_enum for v in value)
        elif kind == "list(int)":
            node.attr[key].list.i.extend(int(v) for v in value)
        elif kind == "int":
            node.attr[key].i = int(value)
        elif kind == "float":
            node.attr[key].f = float(value)
        elif kind == "bool":
            node.attr[key].b = bool(value)
        elif kind == "string":
            node.attr[key].s = value.encode() if isinstance(value, str) else value
    position = 0
    for arg in op_def.input_arg:
        count = len(dtypes) - position if arg.number_attr else 1
        if arg.number_attr and arg.number_attr not in node.attr:
            # The variadic inputs run up to the inputs the later args take.
            count -= len(op_def.input_arg) - 1 - list(op_def.input_arg).index(arg)
            node.attr[arg.number_attr].i = count
        elif arg.number_attr:
            count = node.attr[arg.number_attr].i
        if arg.type_attr and arg.type_attr not in node.attr and position < len(dtypes):
            node.attr[arg.type_attr].type = dtypes[position].as_datatype_enum
        position += count


CASES = accepted_cases()


@pytest.mark.parametrize(("case", "op", "inputs", "attrs"), CASES, ids=[c[0] for c in CASES])
def test_every_accepted_case_is_exported(case: str, op: str, inputs: list, attrs: dict) -> None:
    """Exported, and where TensorFlow runs the node on sample inputs, ONNX Runtime gives
    the same outputs."""
    import onnxruntime as ort

    try:
        segment = one_op_segment(op, inputs, attrs)
    except ValueError as exc:  # TensorFlow itself refuses the node: not a case a model has
        pytest.skip(f"TensorFlow cannot build this node: {str(exc).splitlines()[0]}")
    feeds = sample_inputs(segment)
    want = native_outputs(segment, feeds)
    try:
        model = export_onnx(segment)
    except ExportError as exc:
        if op in NOT_EXPORTED:
            return
        if want is None:
            pytest.skip(f"TensorFlow cannot run this node either ({exc})")
        raise AssertionError(f"{case}: accepted by the op rule but {exc}") from None
    if want is None:
        return  # exported; TensorFlow cannot run it on these inputs to compare
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    got = session.run(segment.output_names, dict(zip(segment.input_names, feeds, strict=True)))
    for mine, theirs in zip(got, want, strict=True):
        theirs = np.asarray(theirs)
        assert mine.shape == theirs.shape, case
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5, err_msg=case)


def sample_inputs(segment: SegmentGraph) -> list[np.ndarray]:
    """Random floats, 0/1 integers (valid indices and axes), unknown dims 3."""
    rng = np.random.default_rng(0)
    inputs = []
    for spec in segment.input_specs:
        shape, dtype = [3 if d < 0 else d for d in spec.shape], np.dtype(spec.dtype)
        values = rng.standard_normal(shape) if dtype.kind == "f" else rng.integers(0, 2, shape)
        inputs.append(values.astype(dtype))
    return inputs


def native_outputs(segment: SegmentGraph, inputs: list[np.ndarray]) -> list | None:
    """TensorFlow's outputs of the segment, or None when TensorFlow cannot run it."""
    from workbench.engines.segment import NativeSegment

    try:
        return NativeSegment(segment)(inputs)
    except Exception:  # TensorFlow's InvalidArgumentError and friends
        return None


def test_each_converter_sits_in_the_family_of_its_rule():
    """Adding an op means editing the files of one family name: its rule in
    conversion/ops/<family>.py, its ONNX converter in engines/onnx/ops/<family>.py."""
    import importlib

    from workbench.conversion import ops as rules
    from workbench.engines.onnx import ops as converters

    rule_family = {op: family.__name__.rpartition(".")[2]
                   for family in rules._FAMILIES for op in family.RULES}
    misplaced = []
    for family in converters._FAMILIES:
        name = family.__name__.rpartition(".")[2]
        assert importlib.util.find_spec(f"workbench.conversion.ops.{name}"), name
        misplaced += [f"{op}: rule in {rule_family[op]}, converter in {name}"
                      for op in family.CONVERTERS if rule_family.get(op, name) != name]
    assert not misplaced, "\n".join(misplaced)

