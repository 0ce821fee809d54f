"""Per-TF-op timings of the native model, keyed by the prepared graph's node names.

The prepared GraphDef (the graph TF-TRT segments) is imported into a `tf.compat.v1` graph and
run in a Session with a full trace; `RunMetadata.step_stats` gives each node's start and end
times under its own name, so every timing maps to exactly one node the segmenter saw. The
Session's own graph rewrites are switched off: Grappler's remapper would fuse Conv2D + BiasAdd
+ Relu into one node renamed after the Relu and constant folding would invent nodes, and then
the timings would no longer line up with the nodes that become engines. The graph already went
through TF-TRT's Grappler configuration when it was prepared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError, first_line
from workbench.graph.channels_last import cpu_runnable, original_node
from workbench.graph.nodes import Graph, Node, TensorRef, numpy_dtype_name
from workbench.hardware import cpu_device_name
from workbench.lazy import tf
from workbench.profiling.layers import layer_table
from workbench.words import counted

SOURCE = "tensorflow"

def profile_tensorflow(
    session: ConversionSession,
    inputs: Mapping[str, np.ndarray],
    *,
    runs: int = 20,
    warmup: int = 3,
    run: str = "native TF",
    nodes: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Average per-op time of the native model over `runs` traced runs after `warmup` runs.

    One row per executed node of the prepared FP32 graph (fed Placeholders do not execute):
    layer = node name, layer_type = op, precision from the node's output dtype,
    tf_nodes = [name]. `nodes` keeps only those nodes (for example the unconverted ones);
    `pct` is then each node's share of the kept nodes' total. Independent ops run in parallel,
    so the summed op time can exceed the model's wall-clock latency.
    """
    if runs < 1 or warmup < 0:
        raise WorkbenchError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    prepared = session.prepared("FP32")
    graph = prepared.graph
    keep = _checked_nodes(graph, nodes)
    feeds = _feeds(session, inputs)
    fetches = session.optimized.fetches[len(session.loaded.input_names):]
    per_run, devices = trace_runs(prepared.graph_def, feeds, fetches, runs, warmup)
    rows = [
        _row(graph[name], times, runs)
        for name, times in per_run.items()
        if name in graph.by_name and (keep is None or name in keep)
    ]
    rows.sort(key=lambda row: -row["avg_ms"])
    return layer_table(rows, run=run, source=SOURCE, device=device_label(devices))


def trace_runs(
    graph_def: Any, feeds: dict[str, np.ndarray], fetches: list[str], runs: int, warmup: int
) -> tuple[dict[str, list[float]], set[str]]:
    """Runs `graph_def` untraced `warmup` times, then traced `runs` times.

    Returns node name -> op time in ms per traced run it executed in, and the TF devices
    the ops ran on.
    """
    from tensorflow.core.protobuf import config_pb2

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(cpu_runnable(graph_def), name="")
    options = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
    per_run: dict[str, list[float]] = defaultdict(list)
    devices: set[str] = set()
    try:
        with tf.compat.v1.Session(graph=graph, config=_session_config()) as sess:
            for _ in range(warmup):
                sess.run(fetches, feeds)
            for _ in range(runs):
                metadata = config_pb2.RunMetadata()
                sess.run(fetches, feeds, options=options, run_metadata=metadata)
                for name, ms in _op_times(metadata.step_stats, devices).items():
                    per_run[name].append(ms)
    except (tf.errors.OpError, ValueError, TypeError) as exc:  # ValueError: bad feed shape
        message = exc.message if isinstance(exc, tf.errors.OpError) else str(exc)
        first = (message.strip().splitlines() or [type(exc).__name__])[0][:300]
        raise WorkbenchError(f"TensorFlow could not run the model: {first}") from None
    return dict(per_run), devices


def native_callable(session: ConversionSession, inputs: Mapping[str, np.ndarray]
                    ) -> Callable[[], dict[str, np.ndarray]]:
    """A blocking call of the native model on fixed inputs, for `measure_latency`.

    Inputs become tensors once, outside the timed call; `.numpy()` waits for the results.
    """
    _check_input_names(session, inputs)
    tensors = {name: tf.convert_to_tensor(value) for name, value in inputs.items()}

    def call() -> dict[str, np.ndarray]:
        return {name: value.numpy() for name, value in session.loaded(**tensors).items()}

    return call


def tensor_values(session: ConversionSession, inputs: Mapping[str, np.ndarray],
                  tensors: Sequence[str], precision_mode: str = "FP32") -> list[np.ndarray]:
    """The values of prepared-graph tensors (`node:port`) for these model inputs, e.g. the
    inputs an engine sees."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(cpu_runnable(session.prepared(precision_mode).graph_def),
                                      name="")
    try:
        with tf.compat.v1.Session(graph=graph, config=_session_config()) as sess:
            return list(sess.run(list(tensors), _feeds(session, inputs)))
    except (tf.errors.OpError, ValueError, TypeError) as exc:
        raise WorkbenchError(f"TensorFlow could not run the model: {first_line(exc)}") from None


def function_tensor_values(session: ConversionSession, inputs: Mapping[str, np.ndarray],
                           conversion: Any, tensors: Sequence[str],
                           precision_mode: str = "FP32") -> list[np.ndarray]:
    """The values of tensors inside the body of a converted function (`FunctionConversion`)
    at its first top-level call, for these model inputs."""
    graph_def = session.prepared(precision_mode).graph_def
    call = next((n for n in graph_def.node if "f" in n.attr
                 and n.attr["f"].func.name == conversion.function), None)
    if call is None:
        raise WorkbenchError(f"function {conversion.function} has no top-level call to take "
                             "its arguments from")
    args = tensor_values(session, inputs, [str(TensorRef.parse(t)) for t in call.input
                                           if not t.startswith("^")], precision_mode)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(cpu_runnable(conversion.body.graph_def), name="")
    feeds = {f"{name}:0": value for name, value in zip(conversion.body.args, args, strict=True)}
    try:
        with tf.compat.v1.Session(graph=graph, config=_session_config()) as sess:
            return list(sess.run(list(tensors), feeds))
    except (tf.errors.OpError, ValueError, TypeError) as exc:
        raise WorkbenchError(f"TensorFlow could not run function {conversion.function}: "
                             f"{first_line(exc)}") from None


def device_label(devices: set[str]) -> str:
    """The hardware behind TF device names: the GPU's name or `cpu_device_name()`."""
    labels = sorted({_hardware_name(device) for device in devices}) or [cpu_device_name()]
    return " + ".join(labels)


# --- tracing -------------------------------------------------------------------------------


def _session_config() -> Any:
    from tensorflow.core.protobuf import config_pb2

    config = config_pb2.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    optimizer = config.graph_options.optimizer_options
    optimizer.opt_level = config_pb2.OptimizerOptions.L0
    optimizer.do_constant_folding = False
    optimizer.do_common_subexpression_elimination = False
    optimizer.do_function_inlining = False
    return config


def _op_times(step_stats: Any, devices: set[str]) -> dict[str, float]:
    """node name -> op time (ms) in one run, summed when a node has several entries."""
    times: dict[str, float] = defaultdict(float)
    for device_stats in step_stats.dev_stats:
        # GPU traces add pseudo-devices (`.../stream:all`, `memcpy`) that repeat the kernels.
        if "/stream" in device_stats.device or "memcpy" in device_stats.device:
            continue
        devices.add(device_stats.device)
        for stats in device_stats.node_stats:  # a rewritten NCHW node's parts count as it
            times[original_node(stats.node_name)] += _op_ms(stats)
    return times


def _op_ms(stats: Any) -> float:
    if stats.all_start_nanos:
        return max(stats.op_end_rel_nanos - stats.op_start_rel_nanos, 0) / 1e6
    return max(stats.op_end_rel_micros - stats.op_start_rel_micros, 0) / 1e3


def _row(node: Node, times: list[float], runs: int) -> dict:
    # A node absent from a traced run spent no time in it: zeros keep sum(avg) = mean total.
    padded = np.zeros(runs)
    padded[: len(times)] = times
    dtype = node.output_specs[0].dtype if node.output_specs else None
    return {
        "layer": node.name,
        "layer_type": node.op,
        "precision": numpy_dtype_name(dtype) if dtype else None,
        "avg_ms": float(padded.mean()),
        "median_ms": float(np.median(padded)),
        "tf_nodes": [node.name],
    }


def _hardware_name(device: str) -> str:
    kind = device.rsplit("device:", 1)[-1].split(":")[0].upper()
    if kind == "GPU":
        return _gpu_name(device)
    return cpu_device_name()


def _gpu_name(device: str) -> str:
    index = int(device.rsplit(":", 1)[-1])
    gpus = tf.config.list_physical_devices("GPU")
    if index < len(gpus):
        details = tf.config.experimental.get_device_details(gpus[index])
        return str(details.get("device_name", f"GPU:{index}"))
    return f"GPU:{index}"


# --- inputs --------------------------------------------------------------------------------


def _checked_nodes(graph: Graph, nodes: Iterable[str] | None) -> set[str] | None:
    if nodes is None:
        return None
    keep = set(nodes)
    unknown = sorted(name for name in keep if name not in graph.by_name)
    if unknown:
        raise WorkbenchError(f"no node named {', '.join(unknown[:5])} in the prepared graph")
    return keep


def _feeds(session: ConversionSession, inputs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Signature input name -> array becomes tensor name -> array."""
    _check_input_names(session, inputs)
    names = session.loaded.input_names
    tensor_names = session.optimized.fetches[: len(names)]
    return {tensor: np.asarray(inputs[name])
            for name, tensor in zip(names, tensor_names, strict=True)}


def _check_input_names(session: ConversionSession, inputs: Mapping[str, Any]) -> None:
    names = session.loaded.input_names
    missing = [name for name in names if name not in inputs]
    extra = sorted(set(inputs) - set(names))
    if missing or extra:
        raise WorkbenchError(
            f"the model takes {counted(len(names), 'input')} ({', '.join(names)}); "
            + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}")
        )
