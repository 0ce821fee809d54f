"""Which engine costs accuracy: Polygraphy's layer-wise comparison at the level of engines.

Native TensorFlow runs the converted graph once with every segment native, capturing each
engine's input batches. Then, per engine:

- its local error: the engine against its native segment on the same captured inputs;
- its output error: the model's outputs with this engine on the backend and every other segment
  native, against native TensorFlow (Polygraphy's rules, `validation.py`).

Engines are ranked worst first by output error. For the worst that fail, the remedies TF-TRT
can express (a higher precision, denylisting an op type of the engine, a `minimum_segment_size`
or engine limit that drops it) are each measured: converted again, built and validated (the
session caches the preparation). "Keep this engine native" is the workbench's own what-if (no
TF-TRT setting does that for one engine), measured on the same model without a rebuild.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.checks.conversion_check import (
    CALIBRATION_SEED,
    calibration_batch_count,
    check_conversion,
)
from workbench.checks.validation import (
    Comparer,
    as_numpy,
    generated_inputs,
    with_default_tolerances,
)
from workbench.conversion.params import ConversionParams
from workbench.engines.onnx.precision import FP16_MAX
from workbench.engines.runtime.converted_model import ConvertedModel, converted_model
from workbench.errors import WorkbenchError
from workbench.graph.channels_last import cpu_runnable
from workbench.lazy import tf
from workbench.words import counted

if TYPE_CHECKING:
    from workbench.conversion.result import ConversionResult, EngineInfo
    from workbench.conversion.session import ConversionSession
    from workbench.engines.segment import SegmentGraph

# A precision one step more accurate than each: the precision remedy.
HIGHER_PRECISION = {"INT8": "FP16", "FP16": "FP32"}
# Ops whose outputs say nothing about an engine's arithmetic: never the op type to denylist.
_NOT_ARITHMETIC = frozenset({"Const", "Identity", "Placeholder", "NoOp", "Shape", "Reshape",
                             "Squeeze", "ExpandDims", "Transpose", "Pack", "ConcatV2"})
KEEP_NATIVE = "keep_native"


@dataclass(frozen=True)
class Remedy:
    """One change and its measured effect on the model's outputs."""

    setting: str  # a ConversionParams field, or "keep_native" (the workbench what-if)
    value: Any
    why: str
    output_max_abs_error: float
    passed: bool
    engines: int
    percent_converted: float
    tftrt_setting: bool = True  # False: the workbench-only "keep this engine native"


@dataclass(frozen=True)
class EngineAccuracy:
    """One engine's errors; remedies are measured only for the worst engines that fail."""

    engine: str
    nodes: int  # as summary() counts them (the native segment's nodes)
    ops: dict[str, int]
    local_max_abs_error: float  # engine vs its native segment, same inputs
    output_max_abs_error: float  # the model with only this engine on the backend
    output_passed: bool
    nan: int = 0  # NaN and Inf in the engine's own outputs
    inf: int = 0
    remedies: list[Remedy] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "remedies": [asdict(r) for r in self.remedies]}


@dataclass(frozen=True)
class PerEngineAccuracy:
    """Every engine of one conversion, worst first, and the whole model's error."""

    params: ConversionParams
    engines: list[EngineAccuracy]
    model_max_abs_error: float  # every engine on the backend
    model_passed: bool
    backend: str
    device: str
    batches: int
    seconds: float

    def table(self) -> pd.DataFrame:
        """One row per engine, worst first (`app.per_engine`)."""
        columns = ["engine", "nodes", "local_max_abs_error", "output_max_abs_error",
                   "output_passed", "nan", "inf", "remedies"]
        rows = [{**{k: getattr(e, k) for k in columns[:-1]},
                 "remedies": "; ".join(describe_remedy(r) for r in e.remedies)}
                for e in self.engines]
        return pd.DataFrame(rows, columns=columns)

    def to_json(self) -> list[dict[str, Any]]:
        """The `per_engine` list of `workbench check --per-engine --json`."""
        return [e.to_dict() for e in self.engines]

    def __str__(self) -> str:
        batches = f"{self.batches} batch{'es' * (self.batches != 1)}"
        head = (f"Per-engine accuracy, {self.params.precision_mode} on {self.backend} "
                f"({self.device}), {batches}, {self.seconds:.1f} s: whole model "
                f"max abs error {self.model_max_abs_error:.3g} "
                f"({'PASSED' if self.model_passed else 'FAILED'})")
        lines = [head]
        for e in self.engines:
            lines.append(f"  {e.engine} ({e.nodes} nodes): output error "
                         f"{e.output_max_abs_error:.3g}"
                         f"{'' if e.output_passed else ' FAILED'}, local error "
                         f"{e.local_max_abs_error:.3g}"
                         + (f", {e.nan} NaN, {e.inf} Inf in its outputs" if e.nan or e.inf
                            else ""))
            lines += [f"    - {describe_remedy(r)}" for r in e.remedies]
        return "\n".join(lines)


def describe_remedy(remedy: Remedy) -> str:
    what = ("keep this engine native (workbench what-if, not a TF-TRT setting)"
            if not remedy.tftrt_setting else f"{remedy.setting}={remedy.value}")
    verdict = "passes" if remedy.passed else "still fails"
    return (f"{what}: max abs error {remedy.output_max_abs_error:.3g}, {verdict}, "
            f"{counted(remedy.engines, 'engine')}, {remedy.percent_converted:.1f}% converted "
            f"({remedy.why})")


def per_engine_accuracy(session: ConversionSession, params: ConversionParams, *,
                        batches: int = 2, batch_size: int = 8, remedies_for: int = 2,
                        calibration_batches: int | None = None,
                        progress: Callable[[float, str], None] | None = None,
                        **tolerances: Any) -> PerEngineAccuracy:
    """Each engine's local and output error on `batches` generated batches (the check's),
    worst first; remedies measured for the `remedies_for` worst engines that fail.
    `tolerances` are validate's (atol, rtol, check_error_stat, ...)."""
    if batches < 1 or batch_size < 1 or remedies_for < 0:
        raise WorkbenchError("batches and batch_size must be >= 1, remedies_for >= 0")
    started = time.perf_counter()
    tell = progress or (lambda fraction, message: None)
    tolerances, _ = with_default_tolerances(params.precision_mode, tolerances)
    result = session.convert(params)
    model = converted_model(session, result, params)
    inputs = list(generated_inputs(session, batches, batch_size))
    if params.needs_calibration:
        tell(0.05, "Calibrating INT8")
        count = calibration_batch_count(batch_size, calibration_batches)
        calibration = list(generated_inputs(session, count, batch_size, seed=CALIBRATION_SEED))
        model.calibrate(lambda: iter(calibration))
    tell(0.1, f"Building {counted(len(result.engines), 'engine')} on {model.backend.name}")
    model.build(lambda: iter(inputs[:1]))
    run = _Run(session, params, result, model, inputs,
               [as_numpy(session.loaded(**feeds)) for feeds in inputs], batch_size,
               tolerances)
    whole = run.compare({e.name for e in result.engines})
    tell(0.2, "Running native TensorFlow, capturing each engine's inputs")
    run.captured = model.engine_inputs(inputs)
    rows = []
    for index, info in enumerate(result.engines):
        tell(0.2 + 0.3 * index / len(result.engines), f"Comparing {info.name}")
        # A single engine on the backend is the whole converted model: the same run.
        rows.append(run.engine_accuracy(info, whole if len(result.engines) == 1 else None))
    rows.sort(key=lambda e: _rank(e.output_max_abs_error), reverse=True)
    failing = [e for e in rows if not e.output_passed][:remedies_for]
    for index, engine in enumerate(failing):
        tell(0.5 + 0.5 * index / len(failing), f"Measuring remedies for {engine.engine}")
        rows[rows.index(engine)] = replace(engine, remedies=run.remedies(engine.engine))
    backend = model.backend
    return PerEngineAccuracy(params, rows, _max_abs(whole), all(o.passed for o in whole),
                             backend.name, backend.device, batches,
                             time.perf_counter() - started)


def _rank(error: float) -> float:
    return math.inf if math.isnan(error) else error


def _max_abs(outputs: list[Any]) -> float:
    """The largest absolute error over outputs (NaN when any output has NaN errors)."""
    values = [o.max_abs for o in outputs]
    return math.nan if any(math.isnan(v) for v in values) else max(values, default=0.0)


@dataclass
class _Run:
    """One conversion's built model, the batches, native TF's outputs on them and the
    captured engine inputs: what every comparison and remedy uses."""

    session: ConversionSession
    params: ConversionParams
    result: ConversionResult
    model: ConvertedModel
    inputs: list[dict[str, np.ndarray]]
    native: list[dict[str, np.ndarray]]
    batch_size: int
    tolerances: Mapping[str, Any]
    captured: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def compare(self, engines: set[str]) -> list[Any]:
        """The outputs with `engines` on the backend (the rest native) vs native TF."""
        comparer = Comparer(**self.tolerances)
        for feeds, want in zip(self.inputs, self.native, strict=True):
            comparer.add(want, as_numpy(self.model.call_with_engines(engines, **feeds)))
        return comparer.results()

    def engine_accuracy(self, info: EngineInfo, alone: list[Any] | None) -> EngineAccuracy:
        op = self.model.ops[info.name]
        local, nan, inf = 0.0, 0, 0
        for batch in self.captured[info.name]:
            produced = op.try_engine(*batch)
            if produced is None:  # no engine ran (a failed build): its segment ran natively
                local = math.nan
                continue
            for got, want in zip(produced, op.native(list(batch)), strict=True):
                local = max(local, _local_error(np.asarray(got), np.asarray(want)))
                if got.dtype.kind == "f":
                    nan += int(np.count_nonzero(np.isnan(got)))
                    inf += int(np.count_nonzero(np.isinf(got)))
        alone = alone if alone is not None else self.compare({info.name})
        return EngineAccuracy(info.name, info.native_node_count, dict(info.native_ops), local,
                              _max_abs(alone), all(o.passed for o in alone), nan, inf)

    def remedies(self, engine: str) -> list[Remedy]:
        """Each change TF-TRT can express that may help `engine`, measured, and the
        workbench-only keep-it-native what-if; those that pass first, then by error."""
        info = next(e for e in self.result.engines if e.name == engine)
        remedies = [self.measured(setting, value, why)
                    for setting, value, why in self.changes(info)]
        others = {e.name for e in self.result.engines} - {engine}
        kept = self.compare(others)
        result = self.result
        converted = result.converted_nodes - info.native_node_count
        remedies.append(Remedy(
            KEEP_NATIVE, engine, "TensorFlow runs this segment; no TF-TRT setting does",
            _max_abs(kept), all(o.passed for o in kept), len(others),
            round(100.0 * converted / result.total_nodes, 2) if result.total_nodes else 0.0,
            tftrt_setting=False))
        return sorted(remedies, key=lambda r: (not r.passed, _rank(r.output_max_abs_error)))

    def changes(self, info: EngineInfo) -> list[tuple[str, Any, str]]:
        """(setting, value, why) of each TF-TRT remedy for engine `info`."""
        params, engines = self.params, self.result.engines
        changes = []
        higher = HIGHER_PRECISION.get(params.precision_mode)
        if higher:
            changes.append(("precision_mode", higher, f"every engine in {higher}"))
        denied = _op_to_denylist(self.model.segments[info.name].segment,
                                 self.captured[info.name][0])
        if denied is not None:
            op_type, largest = denied
            changes.append(("denylist", tuple(sorted({*params.denylist, op_type})),
                            f"{op_type} makes the engine's largest values (|x| up to "
                            f"{largest:.3g}{', past float16' if largest > FP16_MAX else ''})"))
        size = info.effective_size
        changes.append(("minimum_segment_size", size + 1,
                        f"drops segments under {size + 1} nodes; this one counts {size} for "
                        "the threshold"))
        larger = sum(e.effective_size > size for e in engines)
        if larger:
            changes.append(("max_engines", larger,
                            f"keeps the {counted(larger, 'larger engine')} only"))
        return changes

    def measured(self, setting: str, value: Any, why: str) -> Remedy:
        """Converts with the change, builds and validates: the remedy's measured effect."""
        params = replace(self.params, **{setting: value})
        check = check_conversion(self.session, params, batch_sizes=(self.batch_size,),
                                 time_latency=False, **self.tolerances)
        assert check.validation is not None
        return Remedy(setting, list(value) if isinstance(value, tuple) else value, why,
                      _max_abs(check.validation.outputs), check.validation.passed,
                      check.engines, self.session.convert(params).percent_converted)


def _local_error(got: np.ndarray, want: np.ndarray) -> float:
    if got.dtype.kind not in "fiub" or got.shape != want.shape:
        return 0.0 if np.array_equal(got, want) else math.inf
    if got.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return math.nan if np.isnan(diff).any() else float(diff.max())


def _op_to_denylist(segment: SegmentGraph, batch: tuple[Any, ...]) -> tuple[str, float] | None:
    """The op type of the engine's node with the largest output values on `batch` (where
    float16 overflows first and INT8's step is coarsest), and those values' largest |x|."""
    graph_def = segment.graph_def
    members = set(segment.engine.nodes)
    ops = {n.name: n.op for n in graph_def.node if n.name in members
           and n.op not in _NOT_ARITHMETIC}

    def _import() -> None:  # a GPU-prepared segment's NCHW pools run on this CPU too
        tf.compat.v1.import_graph_def(cpu_runnable(graph_def), name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    graph = wrapped.graph
    outputs = {name: graph.get_operation_by_name(name).outputs for name in ops}
    fetched = {name: found[0] for name, found in outputs.items()
               if found and found[0].dtype.is_floating}
    if not fetched:
        return None
    run = wrapped.prune([graph.get_tensor_by_name(f"{n}:0") for n in segment.input_names],
                        list(fetched.values()))
    values = run(*[tf.convert_to_tensor(x) for x in batch])
    largest = {name: float(np.max(np.abs(v.numpy()), initial=0.0))
               for name, v in zip(fetched, values, strict=True)}
    node = max(largest, key=lambda n: _rank(largest[n]))
    return ops[node], largest[node]
