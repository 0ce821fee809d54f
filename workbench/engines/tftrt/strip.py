"""Life after TF-TRT: a TF-TRT converted SavedModel with every TRTEngineOp replaced by its native
segment, which TensorFlow >= 2.18 and TensorFlow Serving load and serve.

TF-TRT's save() wrote two things today's TensorFlow has no kernels for: TRTEngineOp nodes in
the converted function, and one `_TRTEngineResource` per engine (a TrackableResource whose
creator runs CreateTRTResourceHandle and whose initializer runs InitializeTRTResource on the
`assets/trt-serialized-engine.<engine>` file), with the TF1 init op that initializes them.
Loading fails on the first: "Op type not registered 'CreateTRTResourceHandle'".

`strip_engines` edits the protos only (TensorFlow cannot import them): each TRTEngineOp becomes
a call of its `segment_func`, the native segment TF-TRT kept in the function library (the
segment TF-TRT itself ran when an engine could not be built), on no particular device; the
engine resources, their functions, assets and init-op nodes go. Everything else (signatures,
variables, other functions and objects) is written as it was.

The workbench's own saved models hold TRTEngineOps the same way (each calling its
`<engine>_native_segment`, `engines/runtime/saving.py`), without engine resources: stripped,
they load without the workbench, and `workbench.load()` still gives their engines back.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.engines.tftrt.saved_model import ASSET_PREFIX, ENGINE_OP, TftrtModelError
from workbench.errors import WorkbenchError, first_line
from workbench.words import counted

# Ops of TF-TRT's engine resources (trt_engine_resource_ops.cc).
RESOURCE_OPS = frozenset({"CreateTRTResourceHandle", "InitializeTRTResource",
                          "SerializeTRTResource"})
TFTRT_OPS = RESOURCE_OPS | {ENGINE_OP, "GetCalibrationDataOp"}


@dataclass(frozen=True)
class StrippedModel:
    """What `strip_engines` wrote: where, and what it replaced and removed."""

    path: str
    engines: tuple[str, ...]  # TRTEngineOps replaced by their native segments
    functions_removed: tuple[str, ...]  # the engine resources' functions
    assets_removed: tuple[str, ...]  # trt-serialized-engine.* files not copied

    def __str__(self) -> str:
        functions = counted(len(self.functions_removed), "engine-resource function")
        assets = counted(len(self.assets_removed), "serialized-engine asset")
        return (f"wrote {self.path}: {counted(len(self.engines), 'TRTEngineOp')} replaced by their "
                f"native segments, {functions} and {assets} removed")


def strip_engines(model_dir: str | Path, output_dir: str | Path) -> StrippedModel:
    """Writes `model_dir`, a SavedModel TF-TRT converted, to `output_dir` with every
    TRTEngineOp replaced by its native segment and TF-TRT's engine resources removed."""
    from workbench.graph.loading import read_saved_model_proto

    source, target = Path(model_dir), Path(output_dir)
    if not source.is_dir():
        raise TftrtModelError(f"No such SavedModel directory: {source}. Give the directory "
                              "TF-TRT's save() wrote.")
    if target.resolve() == source.resolve() or source.resolve() in target.resolve().parents:
        raise WorkbenchError(f"{target} is the model's own directory or inside it: write the "
                             "stripped model elsewhere.")
    if target.exists() and any(target.iterdir()):
        raise WorkbenchError(f"{target} exists and is not empty: give a new directory.")
    proto = read_saved_model_proto(source)
    engines: list[str] = []
    removed: set[str] = set()
    assets: set[str] = set()
    for meta in proto.meta_graphs:
        engines += _replace_engines(meta.graph_def)
        removed |= _remove_resources(meta)
        assets |= _remove_engine_assets(meta)
    if not engines and not removed:
        raise TftrtModelError(f"{source} has no TRTEngineOp and no TF-TRT engine resource: it "
                              "is not a model TF-TRT converted; nothing to strip.")
    _write(source, target, proto.SerializeToString(), assets)
    return StrippedModel(str(target), tuple(sorted(set(engines))), tuple(sorted(removed)),
                         tuple(sorted(assets)))


# --- TRTEngineOp -> a call of its native segment -------------------------------------------


def _replace_engines(graph_def: Any) -> list[str]:
    """Rewrites every TRTEngineOp of the graph and its functions; returns their names."""
    library = {f.signature.name: f for f in graph_def.library.function}
    replaced = []
    for nodes, outputs in _node_lists(graph_def):
        engines = {n.name for n in nodes if n.op == ENGINE_OP}
        for node in nodes:
            if node.op == ENGINE_OP:
                _to_segment_call(node, library)
                replaced.append(node.name)
            node.input[:] = [_output_ref(i, engines) for i in node.input]
        for key in outputs or {}:
            outputs[key] = _output_ref(outputs[key], engines)
    return replaced


def _node_lists(graph_def: Any) -> Iterator[tuple[Any, Any]]:
    """(nodes, return map or None) of the top-level graph and of each library function."""
    yield graph_def.node, None
    for function in graph_def.library.function:
        yield function.node_def, function.ret


def _to_segment_call(node: Any, library: dict[str, Any]) -> None:
    segment = node.attr["segment_func"].func.name
    if segment not in library:
        raise TftrtModelError(f"TRTEngineOp {node.name} names native segment {segment!r}, "
                              "which the model's function library does not hold: it cannot "
                              "be replaced.")
    attrs = {}
    for new, old in (("Tin", "InT"), ("Tout", "OutT"), ("_output_shapes", "_output_shapes")):
        if old in node.attr:  # copied: clearing the map empties the values it held
            attrs[new] = type(node.attr[old])()
            attrs[new].CopyFrom(node.attr[old])
    node.op = "StatefulPartitionedCall" if _stateful(library[segment]) else "PartitionedCall"
    node.device = ""  # TF-TRT placed engines on the GPU; the segment runs anywhere
    node.attr.clear()
    for key, value in attrs.items():
        node.attr[key].CopyFrom(value)
    node.attr["f"].func.name = segment
    for key in ("config", "config_proto", "executor_type"):
        node.attr[key].s = b""


def _stateful(function: Any) -> bool:
    from workbench.tf_private.function_defs import op_def

    return any(getattr(op_def(n.op), "is_stateful", False)
               for n in function.node_def)


def _output_ref(text: str, engines: set[str]) -> str:
    """A function's `engine:out_tensor:i` -> `engine:output:i` (the call's output list)."""
    parts = text.split(":")
    if len(parts) == 3 and parts[0] in engines and parts[1] == "out_tensor":
        return f"{parts[0]}:output:{parts[2]}"
    return text


# --- TF-TRT's engine resources --------------------------------------------------------------


def _remove_resources(meta: Any) -> set[str]:
    """Removes the engine resources: their objects, their functions, the nodes calling those.
    Returns the functions removed."""
    graph = meta.graph_def
    library = {f.signature.name: f for f in graph.library.function}
    tainted = _tainted_functions(library)
    if not tainted:
        return set()
    dropped_objects = _drop_resource_objects(meta.object_graph_def, tainted)
    candidates = tainted | dropped_objects
    kept_roots = _called_functions(graph.node) | _object_functions(meta.object_graph_def)
    live = _closure(kept_roots - candidates, library)
    removed = {name for name in candidates if name in library and name not in live}
    kept = [f for f in graph.library.function if f.signature.name not in removed]
    del graph.library.function[:]
    graph.library.function.extend(kept)
    _drop_calling_nodes(graph, removed)
    return removed


def _tainted_functions(library: dict[str, Any]) -> set[str]:
    """Functions running a TF-TRT resource op, directly or through the functions they call."""
    tainted = {name for name, f in library.items()
               if any(n.op in RESOURCE_OPS for n in f.node_def)}
    grew = True
    while grew:
        grew = False
        for name, function in library.items():
            if name not in tainted and _called_functions(function.node_def) & tainted:
                tainted.add(name)
                grew = True
    return tainted


def _called_functions(nodes: Iterable[Any]) -> set[str]:
    names = set()
    for node in nodes:
        for value in node.attr.values():
            if value.HasField("func"):
                names.add(value.func.name)
            names.update(f.name for f in value.list.func)
    return names


def _closure(names: set[str], library: dict[str, Any]) -> set[str]:
    live, stack = set(), list(names)
    while stack:
        name = stack.pop()
        if name in live or name not in library:
            continue
        live.add(name)
        stack.extend(_called_functions(library[name].node_def))
    return live


def _object_functions(graph: Any, nodes: Iterable[int] | None = None) -> set[str]:
    """The concrete functions the object graph's nodes (all, or `nodes`) stand for."""
    names = set()
    for index in range(len(graph.nodes)) if nodes is None else nodes:
        obj = graph.nodes[index]
        kind = obj.WhichOneof("kind")
        if kind == "function":
            names.update(obj.function.concrete_functions)
        elif kind == "bare_concrete_function":
            names.add(obj.bare_concrete_function.concrete_function_name)
    return names


def _drop_resource_objects(graph: Any, tainted: set[str]) -> set[str]:
    """Removes the resource objects with a tainted function below them, and what only they
    reach (their functions and asset); renumbers the rest. Returns the dropped objects'
    functions."""
    if not graph.nodes:
        return set()
    doomed = {i for i, obj in enumerate(graph.nodes) if obj.WhichOneof("kind") == "resource"
              and _object_functions(graph, _subtree(graph, i)) & tainted}
    reachable = _reachable(graph, doomed)
    dropped = set(range(len(graph.nodes))) - reachable
    functions = _object_functions(graph, dropped)
    _renumber(graph, sorted(reachable))
    for name in functions:
        graph.concrete_functions.pop(name, None)
    return functions


def _subtree(graph: Any, start: int) -> set[int]:
    seen, stack = set(), [start]
    while stack:
        index = stack.pop()
        if index not in seen:
            seen.add(index)
            stack.extend(c.node_id for c in graph.nodes[index].children)
    return seen


def _reachable(graph: Any, blocked: set[int]) -> set[int]:
    """Object nodes reachable from the root without passing a blocked node (the resources a
    kept function captures included)."""
    seen, stack = set(), [0]
    while stack:
        index = stack.pop()
        if index in seen or index in blocked:
            continue
        seen.add(index)
        obj = graph.nodes[index]
        stack.extend(r.node_id for r in [*obj.children, *obj.dependencies])
        stack.extend(s.slot_variable_node_id for s in obj.slot_variables)
        for name in _object_functions(graph, [index]):
            if name in graph.concrete_functions:
                stack.extend(graph.concrete_functions[name].bound_inputs)
    return seen


def _renumber(graph: Any, kept: list[int]) -> None:
    new_id = {old: new for new, old in enumerate(kept)}
    nodes = [graph.nodes[i] for i in kept]
    for obj in nodes:
        for field in (obj.children, obj.dependencies):
            refs = [(new_id[r.node_id], r.local_name) for r in field if r.node_id in new_id]
            del field[:]
            for node_id, name in refs:
                field.add(node_id=node_id, local_name=name)
        slots = [s for s in obj.slot_variables if s.original_variable_node_id in new_id
                 and s.slot_variable_node_id in new_id]
        for slot in slots:
            slot.original_variable_node_id = new_id[slot.original_variable_node_id]
            slot.slot_variable_node_id = new_id[slot.slot_variable_node_id]
        del obj.slot_variables[:]
        obj.slot_variables.extend(slots)
    for function in graph.concrete_functions.values():
        function.bound_inputs[:] = [new_id[i] for i in function.bound_inputs if i in new_id]
    copies = [type(n)() for n in nodes]
    for copy, node in zip(copies, nodes, strict=True):
        copy.CopyFrom(node)
    del graph.nodes[:]
    graph.nodes.extend(copies)


def _drop_calling_nodes(graph: Any, removed: set[str]) -> None:
    """Removes the top-level nodes that call a removed function or run a TF-TRT op, and the
    nodes fed by them; control edges from them are dropped (the init op keeps its other
    dependencies)."""
    gone = {n.name for n in graph.node
            if n.op in TFTRT_OPS or _called_functions([n]) & removed}
    _drop_nodes(graph, gone)


def _drop_nodes(graph: Any, gone: set[str]) -> None:
    """Removes `gone` and every node with a data input from a removed node."""
    grew = True
    while grew:
        grew = False
        for node in graph.node:
            if node.name not in gone and any(
                    not i.startswith("^") and i.split(":")[0] in gone for i in node.input):
                gone.add(node.name)
                grew = True
    kept = [n for n in graph.node if n.name not in gone]
    for node in kept:
        node.input[:] = [i for i in node.input if i.lstrip("^").split(":")[0] not in gone]
    del graph.node[:]
    graph.node.extend(kept)


# --- the serialized engines ------------------------------------------------------------------


def _remove_engine_assets(meta: Any) -> set[str]:
    """Removes the `trt-serialized-engine.*` assets: their AssetFileDefs (asset objects
    renumbered) and the Placeholders TF1 loaders feed their paths to (with what they feed).
    Returns their file names."""
    defs = list(meta.asset_file_def)
    engine_files = [i for i, d in enumerate(defs) if d.filename.startswith(ASSET_PREFIX)]
    if not engine_files:
        return set()
    new_index = {old: new for new, old in enumerate(
        i for i in range(len(defs)) if i not in engine_files)}
    graph = meta.object_graph_def
    doomed = {i for i, obj in enumerate(graph.nodes) if obj.WhichOneof("kind") == "asset"
              and obj.asset.asset_file_def_index in engine_files}
    if doomed:
        _renumber(graph, sorted(_reachable(graph, doomed)))
    for obj in graph.nodes:
        if obj.WhichOneof("kind") == "asset":
            obj.asset.asset_file_def_index = new_index[obj.asset.asset_file_def_index]
    _drop_nodes(meta.graph_def, {defs[i].tensor_info.name.split(":")[0] for i in engine_files})
    del meta.asset_file_def[:]
    meta.asset_file_def.extend(d for i, d in enumerate(defs) if i not in engine_files)
    return {defs[i].filename for i in engine_files}


def _write(source: Path, target: Path, proto: bytes, assets: set[str]) -> None:
    try:
        shutil.copytree(source, target, dirs_exist_ok=True,
                        ignore=lambda folder, names: [n for n in names if n in assets
                                                      and Path(folder).name == "assets"])
        (target / "saved_model.pb").write_bytes(proto)
        (target / "saved_model.pbtxt").unlink(missing_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot write the stripped model to {target}: "
                             f"{first_line(exc)}") from None
