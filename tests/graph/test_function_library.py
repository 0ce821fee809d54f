"""The prepared graph's function library: a name always means one definition."""

from __future__ import annotations

from tensorflow.core.framework import function_pb2, graph_pb2

from workbench.graph.function_library import RENAMED_SUFFIX, rename_changed_functions


def _function(name, body_ops, calls=()):
    f = function_pb2.FunctionDef()
    f.signature.name = name
    for i, op in enumerate(body_ops):
        f.node_def.add(name=f"n{i}", op=op)
    for i, callee in enumerate(calls):
        node = f.node_def.add(name=f"call{i}", op="PartitionedCall")
        node.attr["f"].func.name = callee
    return f


def _graph(functions, calls):
    g = graph_pb2.GraphDef()
    g.library.function.extend(functions)
    for i, callee in enumerate(calls):
        node = g.node.add(name=f"top{i}", op="StatefulPartitionedCall")
        node.attr["f"].func.name = callee
    return g


def test_changed_functions_and_their_callers_are_renamed_consistently():
    original = _graph([_function("inner", ["NoOp", "Conv2D"]),
                       _function("outer", ["Relu"], calls=["inner"]),
                       _function("same", ["Relu"])], [])
    optimized = _graph([_function("inner", ["Conv2D"]),
                        _function("outer", ["Relu"], calls=["inner"]),
                        _function("same", ["Relu"])], ["outer", "inner", "same"])
    again = graph_pb2.GraphDef()
    again.CopyFrom(optimized)

    renames = rename_changed_functions(optimized, original.library)

    assert set(renames) == {"inner", "outer"}
    assert all(RENAMED_SUFFIX in new for new in renames.values())
    names = [f.signature.name for f in optimized.library.function]
    assert names == [renames["inner"], renames["outer"], "same"]
    assert [n.attr["f"].func.name for n in optimized.node] == names[1:2] + names[:1] + ["same"]
    outer = optimized.library.function[1]
    assert outer.node_def[1].attr["f"].func.name == renames["inner"]
    # deterministic: the same library gets the same names
    assert rename_changed_functions(again, original.library) == renames


def test_unchanged_library_keeps_its_names():
    original = _graph([_function("f", ["Relu"])], [])
    optimized = _graph([_function("f", ["Relu"])], ["f"])
    assert rename_changed_functions(optimized, original.library) == {}
    assert optimized.node[0].attr["f"].func.name == "f"
