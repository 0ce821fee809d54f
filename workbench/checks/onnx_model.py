"""The whole model as ONNX through tf2onnx, checked against native TensorFlow before it is kept.

tf2onnx (the field's TensorFlow -> ONNX converter) converts the graph TF-TRT would have seen:
the frozen signature after TF-TRT's Grappler pass, prepared for the CPU (channels-last:
`session.optimized_for("cpu")`), so the ONNX node names
are the TensorFlow node names (tf2onnx appends `__N` to the nodes it adds). The exported model
runs on ONNX Runtime on generated inputs and its outputs are compared with native TensorFlow's,
Polygraphy's way (`checks.validation`); only a model that passes is written, through a temporary
file renamed into place.

A model whose weights pass `EXTERNAL_WEIGHTS_BYTES` goes around protobuf's 2 GB limit, which both
TensorFlow's GraphDef (tf2onnx imports it) and ONNX's model share: tf2onnx converts the graph
with its weights as Placeholders (`engines.weights.lift_weights`), the ONNX inputs they become
are made initializers again, and their bytes go into a data file beside the model (ONNX's
external data, `model.onnx.data`), one weight at a time from the TensorFlow graph.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.checks.validation import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    OutputComparison,
    compare_outputs,
    generated_inputs,
)
from workbench.engines.onnx.context import raw_bytes
from workbench.engines.onnx.external_data import append_external, data_file
from workbench.engines.runtime.atomic_save import check_free_space
from workbench.engines.runtime.saved_graphs import weight_bytes
from workbench.engines.weights import lift_weights, stored_weight
from workbench.errors import WorkbenchError, first_line
from workbench.lazy import ort

if TYPE_CHECKING:
    import onnx
    from tensorflow.core.framework.graph_pb2 import GraphDef
    from tensorflow.core.framework.tensor_pb2 import TensorProto

    from workbench.conversion.session import ConversionSession

DEFAULT_OPSET = 17
# Weights past this go into a data file: under protobuf's 2 GB with room for what tf2onnx adds
# (a transposed copy of a convolution's weights, folded constants).
EXTERNAL_WEIGHTS_BYTES = 1 << 30
_ADDED_SUFFIX = re.compile(r"__\d+$")


class OnnxExportError(WorkbenchError):
    """tf2onnx cannot express the model, or its ONNX disagrees with native TensorFlow."""


@dataclass
class OnnxExport:
    """An exported model with the names that tie it to the TensorFlow signature."""

    model: onnx.ModelProto
    input_names: list[str]  # the signature's names, which the ONNX inputs and outputs take
    output_names: list[str]
    unsupported_ops: dict[str, int]  # TF ops tf2onnx left as they are (the model will not run)
    # Initializers whose bytes are not in `model` but written beside it from these TensorFlow
    # values (`write_model_files`): a model past protobuf's 2 GB.
    external_weights: dict[str, TensorProto] = field(default_factory=dict)

    def tf_nodes(self, tf_names: set[str]) -> list[str | None]:
        """The TensorFlow node each ONNX node (in graph order) came from, or None.

        tf2onnx names a node after its TF node, adds `__N` to nodes it makes and
        `_Suffix` to the pieces of an op it expands (CombinedNonMaxSuppression_GatherND), so
        the longest TF name the ONNX name starts with wins. A node named after nothing (an
        `EyeLike__138` inside an expansion) takes the TF node of its nearest consumer."""
        found = [_longest_prefix(_ADDED_SUFFIX.sub("", n.name), tf_names)
                 for n in self.model.graph.node]
        consumers: dict[str, list[int]] = {}
        for index, node in enumerate(self.model.graph.node):
            for tensor in node.input:
                consumers.setdefault(tensor, []).append(index)
        for index, node in enumerate(self.model.graph.node):
            frontier = [c for t in node.output for c in consumers.get(t, [])]
            for _ in range(8 if found[index] is None else 0):
                hit = next((found[c] for c in frontier if found[c]), None)
                if hit:
                    found[index] = hit
                    break
                frontier = [c2 for c in frontier for t in self.model.graph.node[c].output
                            for c2 in consumers.get(t, [])]
        return found


def _longest_prefix(name: str, tf_names: set[str]) -> str | None:
    if name in tf_names:
        return name
    cuts = [i for i, ch in enumerate(name) if ch in "_/:"]
    return next((name[:i] for i in reversed(cuts) if name[:i] in tf_names), None)


def tf2onnx_version() -> str | None:
    try:
        import tf2onnx
    except ImportError:
        return None
    return str(tf2onnx.__version__)


def export_whole_model(session: ConversionSession, opset: int = DEFAULT_OPSET,
                       external_weights: bool | None = None) -> OnnxExport:
    """The whole signature as one ONNX model; ops tf2onnx cannot express are listed in
    `unsupported_ops` (tf2onnx leaves them as TensorFlow ops), not raised. With
    `external_weights` (default: when the weights pass EXTERNAL_WEIGHTS_BYTES) the model holds
    none of its large weights (`OnnxExport.external_weights`)."""
    if tf2onnx_version() is None:
        raise OnnxExportError("tf2onnx is not installed: pip install tf2onnx "
                              "(the workbench's [export] extra)")
    import tf2onnx

    # tf2onnx exports channels-last graphs best: the CPU's preparation, whatever GPU the
    # conversion is prepared for (the layout optimizer's DataFormatVecPermute has no ONNX op).
    optimized = session.optimized_for("cpu")
    count = len(optimized.input_nodes)
    names = list(session.loaded.input_names) + list(session.loaded.output_names)
    graph_def, weights = optimized.graph_def, {}
    if external_weights or (external_weights is None
                            and _weight_bytes(graph_def) > EXTERNAL_WEIGHTS_BYTES):
        lifted = lift_weights(graph_def)
        graph_def, weights = lifted.graph_def, lifted.weights
    log = io.StringIO()
    try:
        with _quiet_tf2onnx(log):
            model, _ = tf2onnx.convert.from_graph_def(
                graph_def, input_names=optimized.fetches[:count],
                output_names=optimized.fetches[count:], opset=opset,
                custom_op_handlers={"Erfc": (_erfc, [])},
                tensors_to_rename=dict(zip(optimized.fetches, names, strict=True)))
    except Exception as exc:  # tf2onnx raises bare Exceptions and asserts
        raise OnnxExportError(f"tf2onnx cannot export the model: {first_line(exc)}") from None
    return OnnxExport(model, names[:count], names[count:], _unsupported(model),
                      _initializers_of(model, weights))


def _weight_bytes(graph_def: GraphDef) -> int:
    return weight_bytes([t for t in map(stored_weight, graph_def.node) if t is not None])


def _initializers_of(model: onnx.ModelProto, weights: dict[str, TensorProto]
                     ) -> dict[str, TensorProto]:
    """The ONNX inputs tf2onnx made of the lifted weights (`<node>:0`) as initializers without
    their bytes; initializer name -> the TensorFlow value that holds them."""
    external = {}
    inputs = list(model.graph.input)
    del model.graph.input[:]
    for value in inputs:
        tensor = weights.get(value.name.removesuffix(":0"))
        if tensor is None:
            model.graph.input.append(value)
            continue
        initializer = model.graph.initializer.add(
            name=value.name, data_type=value.type.tensor_type.elem_type)
        initializer.dims.extend(d.size for d in tensor.tensor_shape.dim)
        external[value.name] = tensor
    return external


def write_model_files(export: OnnxExport, path: Path) -> None:
    """The model into the file `path`; its external weights, if any, into the data file beside
    it (`external_data.data_file`), each read from its TensorFlow value when written."""
    if not export.external_weights:
        write_atomically(path, export.model.SerializeToString())
        return
    with data_file(path).open("wb") as data:
        for initializer in export.model.graph.initializer:
            tensor = export.external_weights.get(initializer.name)
            if tensor is not None:
                append_external(initializer, raw_bytes(tensor), data)
    with path.open("wb") as model:
        model.write(export.model.SerializeToString())


def check_against_tensorflow(session: ConversionSession, export: OnnxExport, batches: int = 2,
                             batch_size: int = 2, atol: float = DEFAULT_ATOL,
                             rtol: float = DEFAULT_RTOL, model_file: Path | None = None
                             ) -> list[OutputComparison]:
    """Runs the ONNX model on ONNX Runtime and native TensorFlow on `batches` generated input
    sets and compares every output (Polygraphy's elementwise rule); raises OnnxExportError
    when the model does not run or an output differs. `model_file`: where `write_model_files`
    wrote the export (else a model with external weights is written to a temporary one)."""
    if export.unsupported_ops:
        ops = ", ".join(f"{op} ({n})" for op, n in sorted(export.unsupported_ops.items()))
        raise OnnxExportError(f"tf2onnx cannot express these TensorFlow ops in ONNX: {ops}")
    with _runnable(export, model_file) as model:
        try:
            run = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise OnnxExportError(f"ONNX Runtime rejects the exported model: "
                                  f"{first_line(exc)}") from None
    results: list[OutputComparison] = []
    for feeds in generated_inputs(session, batches, batch_size, seed=2000):
        expected = session.loaded(**feeds)
        try:
            outputs = run.run(export.output_names, feeds)
        except Exception as exc:  # onnxruntime's errors share no base class worth naming
            raise OnnxExportError("ONNX Runtime cannot run the exported model on inputs of "
                                  f"shapes {_shapes(feeds)}: {first_line(exc)}") from None
        actual = dict(zip(export.output_names, outputs, strict=True))
        results = compare_outputs(expected, actual, atol=atol, rtol=rtol)
        failed = [r for r in results if not r.passed]
        if failed:
            raise OnnxExportError(
                f"the ONNX model disagrees with native TensorFlow on output {failed[0].name}: "
                f"{failed[0].reason or 'max abs error ' + f'{failed[0].max_abs:.3g}'} "
                f"(atol {atol}, rtol {rtol})")
    return results


@contextlib.contextmanager
def _runnable(export: OnnxExport, model_file: Path | None) -> Iterator[bytes | str]:
    """What ONNX Runtime opens: the model's bytes, or a file when its weights are external."""
    if not export.external_weights:
        yield export.model.SerializeToString()
    elif model_file is not None:
        yield str(model_file)
    else:
        with tempfile.TemporaryDirectory(prefix="workbench-onnx-") as directory:
            path = Path(directory) / "model.onnx"
            write_model_files(export, path)
            yield str(path)


def write_onnx(session: ConversionSession, path: str | os.PathLike, *,
               opset: int = DEFAULT_OPSET, atol: float = DEFAULT_ATOL,
               rtol: float = DEFAULT_RTOL) -> Path:
    """Exports, checks against native TensorFlow, then writes `path` (nothing on failure); a
    model with external weights as `path` and `path`.data, both written and checked in a
    hidden directory beside them, then renamed into place, the model last."""
    target = checked_output_path(path)
    export = export_whole_model(session, opset)
    if not export.external_weights:
        check_against_tensorflow(session, export, atol=atol, rtol=rtol)
        write_atomically(target, export.model.SerializeToString())
        return target
    check_free_space(target, weight_bytes(export.external_weights.values()))
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as staging:
        staged = Path(staging) / target.name
        write_model_files(export, staged)
        check_against_tensorflow(session, export, atol=atol, rtol=rtol, model_file=staged)
        os.replace(data_file(staged), data_file(target))
        os.replace(staged, target)
    return target


def checked_output_path(path: str | os.PathLike) -> Path:
    """`path` if its directory exists and it is not a directory itself; else one clear error."""
    target = Path(path)
    if target.is_dir():
        raise WorkbenchError(f"{target} is a directory: give a file name to write")
    if not target.parent.is_dir():
        raise WorkbenchError(f"the output directory {target.parent} does not exist: create it "
                             "first")
    return target


def write_atomically(target: Path, data: bytes) -> None:
    """Writes through a temporary file in the same directory, renamed into place."""
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _shapes(feeds: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{name} {list(array.shape)}" for name, array in feeds.items())


def _unsupported(model: onnx.ModelProto) -> dict[str, int]:
    """Ops tf2onnx kept as TensorFlow ops: not in any ONNX domain's schema."""
    from onnx import defs

    found: dict[str, int] = {}
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx") and not defs.has(node.op_type):
            found[node.op_type] = found.get(node.op_type, 0) + 1
    return found


def _erfc(ctx: Any, node: Any, name: str, args: Any) -> None:
    """Erfc(x) = 1 - Erf(x): Keras 3's exact GELU lowers to Erfc, which tf2onnx lacks."""
    from tf2onnx import utils

    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    erf = ctx.make_node("Erf", [node.input[0]], op_name_scope=node.name)
    one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, dtype=dtype))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


@contextlib.contextmanager
def _quiet_tf2onnx(log: io.StringIO) -> Any:
    """tf2onnx logs every step at INFO and prints its own warnings: keep them out of the way."""
    logger = logging.getLogger("tf2onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(log):
            yield
    finally:
        logger.setLevel(level)
