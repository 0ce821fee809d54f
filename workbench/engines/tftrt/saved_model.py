"""Reading a model TF-TRT already converted: its TRTEngineOps, native segments and saved plans.

TensorFlow >= 2.18 has no TRTEngineOp kernel, so the model is read as protobuf only, never
imported. The converted function is the one the signature calls that holds TRTEngineOp nodes
(TF-TRT saved its `wrap_function` of the converted GraphDef); its nodes are what TF-TRT's
`summary()` scanned, with each function argument standing for the Placeholder it was. Each
`assets/trt-serialized-engine.<engine>` is a TFRecord of `TRTEngineInstance` protos
(`trt_engine_instance.proto`: `input_shapes` = 1, `serialized_engine` = 2), one per cached
engine; `export_engines` writes their TensorRT plans for `trtexec --loadEngine` or TREx.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from workbench.conversion.conversion_report import ConversionReport, shape_list
from workbench.conversion.params import RecordedParams
from workbench.conversion.result import ConversionResult, EngineInfo, Shape, UnconvertedNode
from workbench.conversion.segmenter import NOOP_OPS
from workbench.conversion.summary import summary_lines
from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import decode_attr, numpy_dtype_name
from workbench.lazy import tf

if TYPE_CHECKING:
    from tensorflow.core.framework.function_pb2 import FunctionDef
    from tensorflow.core.framework.node_def_pb2 import NodeDef

ENGINE_OP = "TRTEngineOp"
ASSET_PREFIX = "trt-serialized-engine."
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
# The converted graph does not record why a node stayed outside: say so instead of guessing.
OUTSIDE_REASON = "left outside the engines by TF-TRT (a converted model does not record why)"


class TftrtModelError(WorkbenchError):
    """A TF-TRT converted model that is missing, damaged, or not converted at all."""


@dataclass(frozen=True)
class TftrtEngineAttrs:
    """A TRTEngineOp's attributes that EngineInfo has no field for
    (docs/tftrt-behaviour.md#saved-model)."""

    name: str
    segment_func: str
    precision_mode: str
    max_cached_engines_count: int | None
    workspace_size_bytes: int | None
    max_batch_size: int | None
    use_implicit_batch: bool | None  # None: attribute absent (older TF-TRT)
    profile_strategy: str  # "" in implicit batch mode, where TF-TRT does not set it
    allow_build_at_runtime: bool | None
    use_calibration: bool | None
    has_calibration_data: bool
    static_engine: bool | None
    has_serialized_segment: bool


@dataclass(frozen=True)
class SavedEngine:
    """One cached engine from `trt-serialized-engine.<engine>`: its TensorRT plan and the input
    shapes it was built for."""

    engine: str
    index: int
    input_shapes: tuple[Shape, ...]
    plan: bytes

    @property
    def file_name(self) -> str:
        return f"{self.engine}.{self.index}.plan"


@dataclass
class TftrtModel:
    """What `inspect_tftrt` read: the conversion as our data, plus TF-TRT's own attributes."""

    path: str
    result: ConversionResult
    attrs: dict[str, TftrtEngineAttrs]
    saved_engines: dict[str, list[SavedEngine]] = field(default_factory=dict)

    @property
    def engines(self) -> pd.DataFrame:
        """One row per TRTEngineOp, by name, with its TF-TRT settings and saved engines."""
        rows = []
        for engine in sorted(self.result.engines, key=lambda e: e.name):
            attrs = self.attrs[engine.name]
            rows.append({
                "name": engine.name,
                "precision": attrs.precision_mode,
                "nodes": engine.native_node_count,
                "input_shapes": [shape_list(s) for s in engine.input_shapes],
                "output_shapes": [shape_list(s) for s in engine.output_shapes],
                "implicit_batch": attrs.use_implicit_batch,
                "profile_strategy": attrs.profile_strategy,
                "max_cached_engines": attrs.max_cached_engines_count,
                "cached_engines_saved": len(self.saved_engines.get(engine.name, [])),
            })
        return pd.DataFrame(rows, columns=[
            "name", "precision", "nodes", "input_shapes", "output_shapes", "implicit_batch",
            "profile_strategy", "max_cached_engines", "cached_engines_saved"])

    def summary(self, line_length: int = 160, detailed: bool = True,
                print_fn: Callable[[str], Any] | None = None) -> None:
        """Prints TF-TRT's `summary()` of the converted model, in TF-TRT's layout."""
        print_fn = print_fn or print
        for line in summary_lines(self.result, line_length, detailed):
            print_fn(line)

    def export_engines(self, directory: str | Path) -> pd.DataFrame:
        """Writes each saved engine's plan as `<engine>.<n>.plan`; one row per file with the
        input shapes it was built for (what `trtexec --loadEngine` must be fed)."""
        out = Path(directory)
        try:
            out.mkdir(parents=True, exist_ok=True)
            rows = []
            for saved in self._all_saved():
                file = out / saved.file_name
                file.write_bytes(saved.plan)
                rows.append({"engine": saved.engine, "index": saved.index, "file": str(file),
                             "input_shapes": [shape_list(s) for s in saved.input_shapes],
                             "bytes": len(saved.plan)})
        except OSError as exc:
            raise TftrtModelError(f"cannot write the engines to {out}: {first_line(exc)}"
                                  ) from None
        return pd.DataFrame(rows, columns=["engine", "index", "file", "input_shapes", "bytes"])

    def _repr_html_(self) -> str:
        """In a notebook: the engine table, then TF-TRT's summary() text."""
        import html

        lines: list[str] = []
        self.summary(print_fn=lines.append)
        return (f"<b>Converted by TF-TRT: {html.escape(self.path)}</b>"
                + self.engines.to_html(index=False)
                + f"<pre>{html.escape(chr(10).join(lines))}</pre>")

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON document (the convert document plus TF-TRT's engine attributes)."""
        document = ConversionReport(self.result).to_dict()
        document["engine_attrs"] = [asdict(self.attrs[n]) for n in sorted(self.attrs)]
        document["saved_engines"] = [
            {"engine": s.engine, "index": s.index, "bytes": len(s.plan),
             "input_shapes": [shape_list(x) for x in s.input_shapes]}
            for s in self._all_saved()]
        return document

    def _all_saved(self) -> Iterator[SavedEngine]:
        for name in sorted(self.saved_engines):
            yield from self.saved_engines[name]


def inspect_tftrt(path: str | Path, signature_key: str = "serving_default",
                  tags: Sequence[str] = ("serve",)) -> TftrtModel:
    """Reads a TF-TRT converted SavedModel directory (or frozen GraphDef `.pb`) without
    loading it into TensorFlow."""
    source = Path(path)
    if not source.exists():
        raise TftrtModelError(f"No such path: {source}. Give the directory TF-TRT's save() "
                              "wrote, or a converted GraphDef .pb.")
    if source.is_dir():
        from workbench.graph.loading import saved_by_workbench

        if saved_by_workbench(source):  # its engines are the workbench's, not TF-TRT's
            raise TftrtModelError(f"{source} was saved by the workbench, not by TF-TRT: "
                                  "reload it with workbench.load(path)")
        nodes, args, library = _saved_model_graph(source, signature_key, tuple(tags))
    else:
        nodes, args, library, signature_key = *_graph_def_file(source), ""
    engine_nodes = [n for n in nodes if n.op == ENGINE_OP]
    if not engine_nodes:
        raise TftrtModelError(_no_engine_message(source, signature_key))
    engines = [_engine_info(node, library, source) for node in engine_nodes]
    outside = [UnconvertedNode(n.name, n.op, OUTSIDE_REASON, False)
               for n in nodes if n.op != ENGINE_OP]
    outside += [UnconvertedNode(name, "Placeholder", OUTSIDE_REASON, False) for name in args]
    attrs = {node.name: _engine_attrs(node) for node in engine_nodes}
    result = ConversionResult(
        params=_params(list(attrs.values())), engines=engines, unconverted=outside,
        nonconversion={}, not_converted_top_level=len(outside), model=str(source),
        signature_key=signature_key, extra={"source": "tftrt"},
    )
    saved = _saved_engines(source / "assets", attrs) if source.is_dir() else {}
    return TftrtModel(str(source), result, attrs, saved)


# --- finding the converted graph ---------------------------------------------------------


def _saved_model_graph(path: Path, key: str, tags: tuple[str, ...]
                       ) -> tuple[list[NodeDef], list[str], dict[str, FunctionDef]]:
    """(nodes, argument names, library) of the function holding the signature's engines."""
    from workbench.graph.loading import read_saved_model_proto

    try:
        proto = read_saved_model_proto(path)
    except WorkbenchError as exc:
        raise TftrtModelError(str(exc)) from None
    meta = next((m for m in proto.meta_graphs if set(m.meta_info_def.tags) == set(tags)), None)
    if meta is None:
        found = "; ".join(",".join(m.meta_info_def.tags) for m in proto.meta_graphs)
        raise TftrtModelError(f"No MetaGraph with tags {','.join(tags)!r} in {path}; "
                              f"available tag sets: {found}.")
    if key not in meta.signature_def:
        keys = sorted(k for k in meta.signature_def if not k.startswith("__"))
        raise TftrtModelError(f"Signature key {key!r} not found in {path}; it has: "
                              f"{', '.join(keys) or 'no signatures'}.")
    graph = meta.graph_def
    library = {f.signature.name: f for f in graph.library.function}
    top = list(graph.node)
    if any(n.op == ENGINE_OP for n in top):  # a TF1-style graph: engines at the top level
        return top, [], library
    outputs = {t.name.split(":")[0] for t in meta.signature_def[key].outputs.values()}
    by_name = {n.name: n for n in top}
    calls = [_called(by_name[name]) for name in sorted(outputs) if name in by_name]
    function = _function_with_engines([c for c in calls if c], library)
    if function is None:
        return top, [], library
    return list(function.node_def), [a.name for a in function.signature.input_arg], library


def _called(node: NodeDef) -> str:
    return node.attr["f"].func.name if node.op in CALL_OPS and "f" in node.attr else ""


def _function_with_engines(start: list[str], library: dict[str, FunctionDef]
                           ) -> FunctionDef | None:
    """The first function down the signature's call chain that has TRTEngineOp nodes."""
    stack, seen = list(reversed(start)), set()
    while stack:
        name = stack.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        function = library[name]
        if any(n.op == ENGINE_OP for n in function.node_def):
            return function
        stack.extend(reversed([c for c in map(_called, function.node_def) if c]))
    return None


def _graph_def_file(path: Path) -> tuple[list[NodeDef], list[str], dict[str, FunctionDef]]:
    from workbench.graph.loading import read_graph_def

    try:
        graph = read_graph_def(path)
    except WorkbenchError as exc:
        what = str(exc).split(";")[0].rstrip(".")  # the problem, without the frozen-graph hint
        raise TftrtModelError(f"{what}; give the directory TF-TRT's save() wrote or a "
                              "converted GraphDef .pb.") from None
    return list(graph.node), [], {f.signature.name: f for f in graph.library.function}


def _no_engine_message(path: Path, key: str) -> str:
    where = f"signature {key!r} of {path}" if key else str(path)
    hint = "convert it with `workbench convert` or workbench.trt_convert"
    return f"{where} has no TRTEngineOp: it is not converted by TF-TRT; {hint}."


# --- engines ------------------------------------------------------------------------------


def _attr(node: NodeDef, key: str, default: Any = None) -> Any:
    return decode_attr(node.attr[key]) if key in node.attr else default


def _shapes(node: NodeDef, *keys: str) -> tuple[Shape, ...]:
    for key in keys:
        value = _attr(node, key)
        if value:
            return tuple(value)
    return ()


def _dtypes(node: NodeDef, key: str) -> tuple[str, ...]:
    return tuple(numpy_dtype_name(t) for t in _attr(node, key) or [])


def _engine_info(node: NodeDef, library: dict[str, FunctionDef], path: Path) -> EngineInfo:
    func = _attr(node, "segment_func", "") or _attr(node, "segment_funcdef_name", "")
    if not func or func not in library:
        missing = (f"its segment function {func!r} is not" if func
                   else "it names no segment function")
        raise TftrtModelError(
            f"{path}: engine {node.name}: {missing} in the graph library, so its nodes cannot "
            "be counted (saved with TF_TRT_EXPERIMENTAL_FEATURES=remove_native_segments?); "
            "re-save the model from TF-TRT without it.")
    native = library[func]
    ops = Counter(n.op for n in native.node_def)
    outputs = tuple(native.ret[a.name] for a in native.signature.output_arg
                    if a.name in native.ret)
    return EngineInfo(
        name=node.name,
        nodes=tuple(sorted(n.name for n in native.node_def)),
        native_ops=dict(sorted(ops.items())),
        native_node_count=len(native.node_def),
        effective_size=sum(n for op, n in ops.items() if op not in NOOP_OPS),
        input_dtypes=_dtypes(node, "InT"),
        output_dtypes=_dtypes(node, "OutT"),
        input_shapes=_shapes(node, "input_shapes"),
        # summary() printed `_output_shapes` (as_graph_def(add_shapes=True)).
        output_shapes=_shapes(node, "_output_shapes", "output_shapes"),
        inputs=tuple(i for i in node.input if not i.startswith("^")),
        outputs=outputs,
        device=node.device,
    )


def _engine_attrs(node: NodeDef) -> TftrtEngineAttrs:
    return TftrtEngineAttrs(
        name=node.name,
        segment_func=_attr(node, "segment_func", ""),
        precision_mode=_attr(node, "precision_mode", ""),
        max_cached_engines_count=_attr(node, "max_cached_engines_count"),
        workspace_size_bytes=_attr(node, "workspace_size_bytes"),
        max_batch_size=_attr(node, "max_batch_size"),
        use_implicit_batch=_attr(node, "_use_implicit_batch"),
        profile_strategy=_attr(node, "profile_strategy", ""),
        allow_build_at_runtime=_attr(node, "_allow_build_at_runtime"),
        use_calibration=_attr(node, "use_calibration"),
        has_calibration_data=bool(_attr(node, "calibration_data", "")),
        static_engine=_attr(node, "static_engine"),
        has_serialized_segment=bool(_attr(node, "serialized_segment", "")),
    )


def _params(attrs: list[TftrtEngineAttrs]) -> RecordedParams:
    """What the engines' attributes tell of the conversion parameters; None where they do not
    (the threshold, denylist and engine limit leave no trace in a converted model)."""
    def common(values: list[Any]) -> Any:
        return values[0] if len(set(values)) == 1 else None

    implicit = common([a.use_implicit_batch for a in attrs])
    return RecordedParams(
        precision_mode=common([a.precision_mode for a in attrs]),
        use_dynamic_shape=None if implicit is None else not implicit,
        dynamic_shape_profile_strategy=common([a.profile_strategy or None for a in attrs]),
        maximum_cached_engines=common([a.max_cached_engines_count for a in attrs]),
        max_workspace_size_bytes=common([a.workspace_size_bytes for a in attrs]),
        allow_build_at_runtime=common([a.allow_build_at_runtime for a in attrs]),
    )


# --- saved engine assets ------------------------------------------------------------------


def _saved_engines(assets: Path, attrs: dict[str, TftrtEngineAttrs]
                   ) -> dict[str, list[SavedEngine]]:
    saved = {}
    for name in sorted(attrs):
        file = assets / f"{ASSET_PREFIX}{name.rsplit('/', 1)[-1]}"
        if file.is_file():
            saved[name] = read_engine_asset(file, name)
    return saved


def read_engine_asset(file: str | Path, engine: str) -> list[SavedEngine]:
    """The cached engines in one `trt-serialized-engine.<engine>` file (TFRecord framing with
    its CRCs checked by TensorFlow's reader, then TRTEngineInstance protos)."""
    from google.protobuf.message import DecodeError

    instance_class = _engine_instance_class()
    engines = []
    try:
        for index, record in enumerate(tf.data.TFRecordDataset(str(file))):
            instance = instance_class()
            instance.ParseFromString(record.numpy())
            shapes = tuple(None if s.unknown_rank else tuple(int(d.size) for d in s.dim)
                           for s in instance.input_shapes)
            engines.append(SavedEngine(engine, index, shapes, instance.serialized_engine))
    except (tf.errors.OpError, DecodeError) as exc:
        raise TftrtModelError(
            f"{file} is corrupt ({first_line(exc)}); copy the model again, or re-save it "
            "from TF-TRT (the engines are rebuilt at run time without it).") from None
    return engines


_INSTANCE_CLASS: list[Any] = []


def _engine_instance_class() -> Any:
    """TF-TRT's TRTEngineInstance message, declared here (TF >= 2.18 no longer ships it), in
    a private descriptor pool so a TF-TRT build that registers it too does not clash."""
    if _INSTANCE_CLASS:
        return _INSTANCE_CLASS[0]
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorflow.core.framework import tensor_shape_pb2

    pool = descriptor_pool.DescriptorPool()
    shape_file = descriptor_pb2.FileDescriptorProto()
    tensor_shape_pb2.DESCRIPTOR.CopyToProto(shape_file)
    pool.Add(shape_file)
    proto = descriptor_pb2.FileDescriptorProto(
        name="workbench/trt_engine_instance.proto", package="tensorflow.tensorrt",
        syntax="proto3", dependency=[shape_file.name])
    message = proto.message_type.add(name="TRTEngineInstance")
    repeated, optional = (descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                          descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="input_shapes", number=1, label=repeated,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      type_name=".tensorflow.TensorShapeProto")
    message.field.add(name="serialized_engine", number=2, label=optional,
                      type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES)
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("tensorflow.tensorrt.TRTEngineInstance")
    _INSTANCE_CLASS.append(message_factory.GetMessageClass(descriptor))
    return _INSTANCE_CLASS[0]
