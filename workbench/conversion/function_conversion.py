"""Converting inside functions marked `_tftrt_convert_function` (TF-TRT's function items).

TF-TRT's TensorRTOptimizer (`trt_optimization_pass.cc`) converts the main graph and, among the
functions Grappler keeps in the library, only those whose FunctionDef carries
`_tftrt_convert_function=true` (`ShouldConvertFunction`). For such a function the `_tftrt_*`
attributes override the conversion parameters (`UpdateFunctionSpecificConversionParams`), each
only when present and of the right AttrValue kind. Every conversion is one `ConvertGraph` call
with its own engine-name sequence number: the main graph is `TRTEngineOp_000_*`, the converted
functions follow as `TRTEngineOp_001_*`, `TRTEngineOp_002_*`, ... in library order.

TF-TRT's summary() reads only the top-level graph, so these engines stay out of it (and out
of the main result's counts); the workbench reports them separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from workbench.conversion.candidates import SegmenterOptions
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import EngineInfo, UnconvertedNode
from workbench.conversion.segmenter import segment_graph
from workbench.conversion.validator import ValidatorSettings, validate_node
from workbench.errors import ConversionParamsError
from workbench.graph.build import graph_from_graph_def
from workbench.graph.nodes import Graph, TensorRef

if TYPE_CHECKING:
    from tensorflow.core.framework.graph_pb2 import GraphDef

CONVERT_ATTR = "_tftrt_convert_function"
# The attributes UpdateFunctionSpecificConversionParams reads: AttrValue kind and the
# ConversionParams field each sets. TF2 has no counterpart for the logger name, the TF1
# max_batch_size and is_dynamic_op (always true): they are read, checked and reported only.
PARAM_ATTRS: dict[str, tuple[str, str | None]] = {
    "_tftrt_trt_logger_name": ("s", None),
    "_tftrt_max_batch_size": ("i", None),
    "_tftrt_max_workspace_size_bytes": ("i", "max_workspace_size_bytes"),
    "_tftrt_precision_mode": ("s", "precision_mode"),
    "_tftrt_minimum_segment_size": ("i", "minimum_segment_size"),
    "_tftrt_is_dyn_op": ("b", None),
    "_tftrt_max_cached_engines": ("i", "maximum_cached_engines"),
    "_tftrt_use_calibration": ("b", "use_calibration"),
    "_tftrt_use_implicit_batch": ("b", "use_dynamic_shape"),  # negated
    "_tftrt_profile_strategy": ("s", "dynamic_shape_profile_strategy"),
    "_tftrt_allow_build_at_runtime": ("b", "allow_build_at_runtime"),
}
RETVAL_SUFFIX = "_RetVal"


@dataclass
class FunctionBody:
    """A function body as the segmenter saw it: the GraphDef of `function_graph_def` (its
    arguments Placeholders, its results `<result>_RetVal` Identities) and its Graph. It has
    what `extract_segment` reads of a prepared graph, so engines are cut from it the same way."""

    graph: Graph
    graph_def: GraphDef
    args: list[str]  # the Placeholders standing for the arguments, in signature order
    results: list[str]  # the `_RetVal` Identities, in signature order


@dataclass
class FunctionConversion:
    """The conversion of one library function: its parameters and engines."""

    function: str
    params: ConversionParams
    attrs: dict[str, Any]  # the `_tftrt_*` attributes as read
    engines: list[EngineInfo]
    unconverted: list[UnconvertedNode]
    nonconversion: dict[str, dict[str, int]]
    # What the converted model rewrites the function from (in process only).
    body: FunctionBody | None = field(default=None, repr=False, compare=False)


def marked_for_conversion(function: Any) -> bool:
    """ShouldConvertFunction: the `_tftrt_convert_function` attribute, a bool when present."""
    if CONVERT_ATTR not in function.attr:
        return False
    return bool(_attr(function, CONVERT_ATTR, "b"))


def function_params(function: Any, params: ConversionParams) -> tuple[ConversionParams,
                                                                        dict[str, Any]]:
    """The parameters a marked function converts with, and the attributes that set them."""
    attrs: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    for name, (kind, field_name) in PARAM_ATTRS.items():
        if name not in function.attr:
            continue
        value = _attr(function, name, kind)
        attrs[name] = value
        if field_name == "use_dynamic_shape":
            changes[field_name] = not value
        elif field_name is not None:
            changes[field_name] = value
    try:
        return replace(params, **changes), attrs
    except ConversionParamsError as exc:
        raise ConversionParamsError(
            f"function {function.signature.name}: {exc} (from its _tftrt_* attributes)") from None


def _attr(function: Any, name: str, kind: str) -> Any:
    value = function.attr[name]
    if value.WhichOneof("value") != kind:
        raise ConversionParamsError(
            f"function {function.signature.name}: attribute {name} holds a "
            f"{value.WhichOneof('value') or 'empty'} value where TF-TRT expects "
            f"{ {'b': 'a bool', 'i': 'an int', 's': 'a string'}[kind]}")
    raw = getattr(value, kind)
    return raw.decode() if kind == "s" else raw


def convert_functions(graph_def: Any, input_specs: dict[str, list[Any]],
                      params: ConversionParams,
                      settings_for: Any) -> list[FunctionConversion]:
    """Every marked function of `graph_def`'s library converted, in library order.

    `input_specs` maps a function name to its argument specs at a call site (Grappler knew
    them there); `settings_for(params)` gives the validator settings of a parameter set."""
    conversions = []
    for function in graph_def.library.function:
        if not marked_for_conversion(function):
            continue
        fparams, attrs = function_params(function, params)
        sequence = len(conversions) + 1
        conversions.append(_convert_function(
            function, graph_def.library, input_specs.get(function.signature.name), fparams,
            attrs, settings_for(fparams), f"TRTEngineOp_{sequence:03d}_"))
    return conversions


def _convert_function(function: Any, library: Any, specs: list[Any] | None,
                      params: ConversionParams, attrs: dict[str, Any],
                      settings: ValidatorSettings, prefix: str) -> FunctionConversion:
    from workbench.graph.prepare import infer_shapes

    body, fetches, args = function_graph_def(function, library, specs)
    graph = graph_from_graph_def(body, infer_shapes(body, fetches))
    results = [TensorRef.parse(t).node for t in fetches[len(args):]]
    # The function item preserves its arguments and results (TF-TRT's _Arg and _Retval).
    exclude = frozenset(args) | frozenset(results)
    options = SegmenterOptions(use_implicit_batch=params.use_implicit_batch,
                               exclude_nodes=exclude, denylist=frozenset(params.denylist))
    segmentation = segment_graph(graph, options, lambda node: validate_node(graph, node,
                                                                             settings))
    partition = segmentation.result(params, prefix=prefix)
    return FunctionConversion(function.signature.name, params, attrs, list(partition.engines),
                              list(partition.unconverted), partition.nonconversion,
                              FunctionBody(graph, body, args, results))


def function_graph_def(function: Any, library: Any, specs: list[Any] | None
                       ) -> tuple[Any, list[str], list[str]]:
    """A function body as a GraphDef: each argument a Placeholder of its call-site shape,
    each result an Identity `<result>_RetVal`; returns it, the fetches and the arguments."""
    from tensorflow.core.framework import tensor_shape_pb2

    from workbench.tf_private.function_defs import function_def_to_graph_def

    shapes = None
    if specs is not None and len(specs) == len(function.signature.input_arg):
        shapes = [_shape_proto(tensor_shape_pb2, s) for s in specs]
    body, flat = function_def_to_graph_def(function, input_shapes=shapes)
    body.library.CopyFrom(library)
    args = [arg.name for arg in function.signature.input_arg]
    fetches = [f"{a}:0" for a in args]
    for arg in function.signature.output_arg:
        node = body.node.add(name=f"{arg.name}{RETVAL_SUFFIX}", op="Identity")
        node.input.append(flat[function.ret[arg.name]])
        node.attr["T"].type = arg.type
        fetches.append(f"{node.name}:0")
    return body, fetches, args


def _shape_proto(tensor_shape_pb2: Any, spec: Any) -> Any:
    proto = tensor_shape_pb2.TensorShapeProto()
    if spec is None or spec.shape is None:
        proto.unknown_rank = True
        return proto
    for dim in spec.shape:
        proto.dim.add(size=max(int(dim), -1))
    return proto


def call_site_specs(graph: Any, graph_def: Any) -> dict[str, list[Any]]:
    """function name -> its argument specs at the first top-level node calling it."""
    specs: dict[str, list[Any]] = {}
    for node_def in graph_def.node:
        if "f" not in node_def.attr or not node_def.attr["f"].func.name:
            continue
        name = node_def.attr["f"].func.name
        if name in specs:
            continue
        inputs = [t for t in node_def.input if not t.startswith("^")]
        specs[name] = [graph.output_spec(TensorRef.parse(t)) for t in inputs]
    return specs
