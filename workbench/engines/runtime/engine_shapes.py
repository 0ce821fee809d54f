"""Engine input shapes for `build(input_fn)`, from the model's input shapes alone.

On a GPU, TF-TRT builds engines from the shapes of `input_fn`'s tensors; their values never
reach a CPU kernel that could reject them (the user guide's BERT example feeds token ids in
[0, 30522) to `input_type_ids`, whose embedding has 2 rows). So the shapes each engine sees
are inferred (Grappler's shape inference with the inputs pinned to the given shapes), and data
runs through the model only for an engine whose input shapes depend on values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from workbench.engines.profiles import ShapeSet
from workbench.engines.weights import large_const, lift_weights
from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import TensorRef
from workbench.lazy import tf

_FAILED_NODE = re.compile(r"\{\{node ([^}]+)\}\}")


def engine_input_shapes(graph_def: Any, input_tensors: Sequence[str], shapes: ShapeSet,
                        engines: Sequence[Any], functions: Sequence[Any] = ()
                        ) -> dict[str, ShapeSet | None]:
    """engine name -> the concrete shapes of its inputs when the model's inputs
    (`input_tensors`, Placeholder outputs of `graph_def`) have `shapes`; None for an engine
    with an input whose shape cannot be told without values.

    TensorFlow's graph construction infers the shapes, evaluating small constant shape
    computations (Shape -> StridedSlice -> Pack) as it goes, which Grappler's static
    inference leaves symbolic. `functions` (FunctionConversion) have engines in their bodies:
    their shapes are inferred the same way in the body, from the argument shapes at the
    function's first top-level call."""
    dtypes = {node.name: node.attr["dtype"].type for node in graph_def.node
              if node.op == "Placeholder"}
    if any(TensorRef.parse(t).node not in dtypes for t in input_tensors):
        return dict.fromkeys((e.name for e in engines), None)  # inputs that are not fed
    graph = tf.Graph()
    with graph.as_default():
        feeds = {tensor: tf.compat.v1.placeholder(
                     tf.dtypes.as_dtype(dtypes[TensorRef.parse(tensor).node]), shape)
                 for tensor, shape in zip(input_tensors, shapes, strict=True)}
        # Shape inference needs only the weights' shapes (importing the weights took seconds).
        tf.compat.v1.import_graph_def(lift_weights(graph_def, large_const).graph_def,
                                      input_map=feeds, name="")
    fed = {TensorRef.parse(t): tuple(s) for t, s in zip(input_tensors, shapes, strict=True)}

    def shape_of(text: str) -> tuple[int, ...] | None:
        ref = TensorRef.parse(text)
        if ref in fed:
            return fed[ref]
        shape = graph.get_tensor_by_name(f"{ref.node}:{ref.port}").shape
        return tuple(shape.as_list()) if shape.is_fully_defined() else None

    found: dict[str, ShapeSet | None] = {}
    for engine in engines:
        engine_shapes = [shape_of(text) for text in engine.inputs]
        found[engine.name] = (None if any(s is None for s in engine_shapes)
                              else tuple(engine_shapes))
    for function in functions:
        found.update(dict.fromkeys((e.name for e in function.engines), None))
        call = next((n for n in graph_def.node
                     if "f" in n.attr and n.attr["f"].func.name == function.function), None)
        if call is None:
            continue
        arg_shapes = [shape_of(t) for t in call.input if not t.startswith("^")]
        if all(s is not None for s in arg_shapes):
            found.update(engine_input_shapes(
                function.body.graph_def, [f"{a}:0" for a in function.body.args],
                tuple(arg_shapes), function.engines))  # type: ignore[arg-type]
    return found


def data_run_error(exc: Exception, engines: Sequence[str], index: int, ops: dict[str, str],
                   input_names: Sequence[str]) -> WorkbenchError:
    """A one-line error for an input set that failed while running through the model to
    find data-dependent engine input shapes: which engines needed it, which op failed."""
    message = getattr(exc, "message", None) or str(exc)
    node = _FAILED_NODE.search(message)
    where = ""
    if node:  # the in-process graph nests segment nodes (cond/native/...): name the model's
        name = node.group(1)
        match = next((n for n in sorted(ops, key=len, reverse=True) if name.endswith(n)), "")
        where = f" at {ops[match]} {match}" if match else f" at {name}"
    # TF's message: "Graph execution error:", "Detected at node ...", then the cause.
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    detail = next((line for line in lines if not line.startswith(
        ("Graph execution error", "Detected at node", "<stack traces", "[["))), first_line(exc))
    return WorkbenchError(
        f"build(): the input shapes of {', '.join(engines)} depend on the input values, so input "
        f"set {index} ({', '.join(input_names)}) ran through the model, which failed{where}: "
        f"{detail}; give input_fn values the model accepts")
