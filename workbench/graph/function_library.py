"""The function library of a prepared graph: one definition per name, in the whole process.

Functions Grappler does not inline (`_noinline`, `_XlaMustCompile`: Keras 3's ConvNeXt keeps
18 `_conv_xla`) stay in the library, and Grappler optimizes their bodies under their old
names. The frozen function already registered those names in TensorFlow's process-wide
registry with the old bodies, so importing the optimized graph failed with "Attempting to add
a duplicate function ... where the previous and current definitions differ". Each function
Grappler changed (and each caller of one) is renamed after its content, so a name always
means one definition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

RENAMED_SUFFIX = "_wb"


def rename_changed_functions(graph_def: Any, original_library: Any) -> dict[str, str]:
    """Renames, in place, every library function of `graph_def` whose definition differs from
    the one of the same name in `original_library`, and every function calling a renamed one;
    returns old name -> new name. Node and function attrs are rewired to the new names."""
    before = {f.signature.name: _digest(f) for f in original_library.function}
    functions = {f.signature.name: f for f in graph_def.library.function}
    changed = {name for name, f in functions.items() if before.get(name) != _digest(f)}
    callers = {name: {callee for callee in _called(f.node_def) if callee in functions}
               for name, f in functions.items()}
    grown = True
    while grown:  # callers of a renamed function change too
        grown = False
        for name, callees in callers.items():
            if name not in changed and callees & changed:
                changed.add(name)
                grown = True
    renames = {name: f"{name}{RENAMED_SUFFIX}{_digest(functions[name])[:10]}"
               for name in sorted(changed)}
    if not renames:
        return renames
    for function in graph_def.library.function:
        function.signature.name = renames.get(function.signature.name, function.signature.name)
        _rename_in(function.node_def, renames)
    for gradient in graph_def.library.gradient:
        gradient.function_name = renames.get(gradient.function_name, gradient.function_name)
    _rename_in(graph_def.node, renames)
    return renames


def _digest(function: Any) -> str:
    return hashlib.sha256(function.SerializeToString(deterministic=True)).hexdigest()


def function_refs(nodes: Any) -> Iterator[Any]:
    """Every `NameAttrList` a node attr holds (`f`, `then_branch`, lists of them)."""
    for node in nodes:
        for value in node.attr.values():
            if value.HasField("func"):
                yield value.func
            elif value.HasField("list"):
                yield from value.list.func


def _called(nodes: Any) -> set[str]:
    names = {value.name for value in function_refs(nodes)}
    return names | {node.op for node in nodes}  # a function can be called as an op


def _rename_in(nodes: Any, renames: dict[str, str]) -> None:
    for value in function_refs(nodes):
        value.name = renames.get(value.name, value.name)
    for node in nodes:
        node.op = renames.get(node.op, node.op)
