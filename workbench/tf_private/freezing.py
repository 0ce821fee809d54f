"""TensorFlow's freezing (`convert_to_constants`): variables become Consts.

TF-TRT froze the signature with `convert_variables_to_constants_v2`; the workbench does the
same, and runs its steps one by one (the converter data, the rewrite, the function made
again) to keep large weights out of the Consts (`graph/freeze.py`, `graph/direct_freeze.py`).
There is no public API for either.
"""

from __future__ import annotations

from typing import Any


def _module() -> Any:
    from tensorflow.python.framework import convert_to_constants

    return convert_to_constants


def convert_variables_to_constants_v2(function: Any) -> Any:
    """The frozen ConcreteFunction, as TF-TRT made it."""
    return _module().convert_variables_to_constants_v2(function)


def eager_converter_data() -> type:
    """The class holding a function's graph and its variables' values while it is frozen."""
    return _module()._FunctionConverterDataInEager


def tensor_data(numpy: Any, dtype_enum: int, index: int) -> Any:
    """One captured value as the freezing's data holds it."""
    return _module()._TensorData(numpy=numpy, dtype=dtype_enum, index=index)


def replace_variables_by_constants(converter_data: Any) -> tuple[Any, Any]:
    """(the GraphDef with Consts for the variables, what was converted)."""
    return _module()._replace_variables_by_constants(converter_data)


def construct_concrete_function(function: Any, graph_def: Any, converted: Any) -> Any:
    """The ConcreteFunction of the frozen `graph_def`, with `function`'s signature."""
    return _module()._construct_concrete_function(function, graph_def, converted)
