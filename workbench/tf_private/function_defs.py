"""FunctionDefs as GraphDefs and back, and the op registry.

TF-TRT converted `_tftrt_convert_function` functions by rewriting their bodies as graphs; the
workbench does it in Python, and builds each engine's native segment as a library function.
TensorFlow's converters between the two forms, and the registry of op definitions (default
attributes, statefulness) a NodeDef is read against, have no public API.
"""

from __future__ import annotations

from typing import Any


def function_def_to_graph_def(function: Any, input_shapes: Any = None) -> tuple[Any, dict]:
    """(the function body as a GraphDef, its tensor names -> the GraphDef's)."""
    from tensorflow.python.framework.function_def_to_graph import (
        function_def_to_graph_def as convert,
    )

    return convert(function, input_shapes=input_shapes)


def graph_to_function_def(graph: Any, operations: Any, inputs: Any, outputs: Any,
                          out_names: Any = None) -> Any:
    """A FunctionDef of `operations` of `graph` with those inputs and outputs."""
    from tensorflow.python.framework.graph_to_function_def import graph_to_function_def as make

    return make(graph, operations, inputs, outputs, out_names=out_names)


def op_def(op: str) -> Any:
    """The registered OpDef of `op`, or None (a library function)."""
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op)
