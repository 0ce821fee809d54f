"""Checking one conversion end to end: build its engines, compare its outputs with native
TensorFlow (Polygraphy's rules, `checks/validation.py`) and time both, per batch size.

The figures become a run's metrics in the workbench (`ConversionCheck.metrics`), each timing
labelled with the backend and device that produced it. Inputs are generated (the model's input
specs, fixed seeds), so a check needs nothing but the model; INT8 calibrates on generated
batches too, which says how the engines behave, not how accurate INT8 is on real data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from workbench.checks.inputs import generated_input_notes, random_inputs
from workbench.checks.validation import ValidationReport, generated_inputs, validate
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.engines.backends.base import Backend, Engine
from workbench.engines.onnx.segment_export import export_notes
from workbench.engines.runtime.converted_model import ConvertedModel, converted_model
from workbench.errors import WorkbenchError
from workbench.hardware import cpu_device_name
from workbench.lazy import tf
from workbench.profiling.estimate.conversion import (
    conversion_estimate,
    estimate_line,
    target_gpu_name,
)
from workbench.profiling.latency import measure_latency
from workbench.profiling.tensorflow import native_callable
from workbench.words import counted

Step = tuple[float, str]  # (fraction done, what is happening): the workbench's progress
NATIVE = "native TF"
CONVERTED = "converted"
WHOLE = "whole model"
CALIBRATION_SEED = 1000  # calibration batches differ from the validation batches
# INT8 calibration sees at least this many generated samples, whatever the batch size: two
# samples at batch size 1 gave digits_cnn ranges that failed INT8's own tolerances.
CALIBRATION_SAMPLES = 64


def calibration_batch_count(batch_size: int, batches: int | None = None) -> int:
    """How many calibration batches of `batch_size`: `batches` when given, else enough for
    `CALIBRATION_SAMPLES` samples."""
    if batches is not None:
        return batches
    return max(1, -(-CALIBRATION_SAMPLES // batch_size))
LATENCY_SEED = 2000


@dataclass(frozen=True)
class ConversionCheck:
    """What one conversion's check found."""

    params: ConversionParams  # the conversion parameters checked
    engines: int  # engines the conversion made (0: the "converted" model is native TF)
    validation: ValidationReport | None  # None when asked not to compare (compare=False)
    latency: pd.DataFrame  # one row per (model, batch): `model` plus LatencyStats' columns
    notes: tuple[str, ...] = ()  # how string inputs were generated; what was not measured
    backend: str = ""  # the engine backend and device the engines were built on
    device: str = ""
    # With a target GPU: per batch size, the latency estimated for it (never measured here;
    # `profiling.estimate.conversion`), kept apart from `latency` and `metrics()`.
    estimates: tuple[dict, ...] = ()

    def metrics(self) -> dict[str, Any]:
        """Plain numbers for a kept run (plus the backend and device that produced them)."""
        metrics: dict[str, Any] = {}
        if self.validation is not None:
            metrics["validation_passed"] = self.validation.passed
            metrics["max_abs_error"] = self.max_abs_error
            if self.top1_agreement is not None:
                metrics["top1_agreement_pct"] = 100.0 * self.top1_agreement
        # Native TF's latency is the baseline every run shares: the speed-up carries it.
        for batch, mean in self._means():
            metrics[f"converted_ms_b{batch}"] = float(mean[CONVERTED])
            metrics[f"speedup_b{batch}"] = float(mean[NATIVE] / mean[CONVERTED])
            if WHOLE in mean:
                metrics[f"whole_model_ms_b{batch}"] = float(mean[WHOLE])
        if self.validation is not None and self.validation.native_runs:  # a column of zeros
            metrics["native_segment_calls"] = sum(self.validation.native_runs.values())
        metrics["engines_backend"] = self.backend
        metrics["engines_device"] = self.device
        return metrics

    def to_json(self) -> dict[str, Any]:
        """The check as one JSON-ready object; the estimates (per batch size) apart from the
        measured latency, without their per-engine detail."""
        validation = self.validation
        document = {"passed": None if validation is None else validation.passed,
                    "params": self.params.as_dict(),
                    "tolerances": None if validation is None else validation.tolerances,
                    "engines": self.engines, "metrics": self.metrics(),
                    "notes": list(self.notes),
                    "latency": json.loads(self.latency.to_json(orient="records"))}
        if self.estimates:
            document["estimates"] = [{k: v for k, v in e.items()
                                      if k not in ("engines", "engine_basis")}
                                     for e in self.estimates]
        return document

    @property
    def max_abs_error(self) -> float | None:
        """The largest absolute error over every output (None: not compared)."""
        if self.validation is None:
            return None
        return max(o.max_abs for o in self.validation.outputs)

    @property
    def top1_agreement(self) -> float | None:
        """The lowest top-1 agreement (0-1) over classifier outputs, None if none."""
        top1 = [o.top1_agreement for o in self.validation.outputs
                if o.top1_agreement is not None] if self.validation is not None else []
        return min(top1) if top1 else None

    def _means(self) -> list[tuple[int, pd.Series]]:
        """Per batch size, the mean latency of each model measured (native TF, ...)."""
        if self.latency.empty:  # not timed
            return []
        return [(int(batch), rows.set_index("model")["mean_ms"])
                for batch, rows in self.latency.groupby("batch_size")]

    def summary(self, outputs: bool = False) -> str:
        """One line per finding: the validation verdict (with `outputs`, one line per output
        after it), then latency per batch size."""
        verdict, *per_output = (str(self.validation).splitlines() if self.validation
                                else ["outputs not compared"])
        lines = [verdict, *(per_output if outputs else [])]
        if not self.engines:
            lines.append("no engines at these settings: the converted model is native TF")
        for batch, mean in self._means():
            line = (f"batch {batch}: native TF {mean[NATIVE]:.2f} ms, converted "
                    f"{mean[CONVERTED]:.2f} ms ({mean[NATIVE] / mean[CONVERTED]:.2f}x)")
            if WHOLE in mean:
                line += f", whole model {mean[WHOLE]:.2f} ms"
            lines.append(line)
        lines += [estimate_line(e, label=False) for e in self.estimates]
        if self.estimates:
            lines.append(f"  ({self.estimates[0]['label']})")
        return "\n".join([*lines, *self.notes])


def check_conversion(session: ConversionSession, params: ConversionParams,
                     progress: Callable[[float, str], None] | None = None,
                     **options: Any) -> ConversionCheck:
    """`conversion_check_steps` run to the end, `progress(fraction, message)` told of each step
    (`print_progress` prints them; the workbench draws them as its progress bar)."""
    steps = conversion_check_steps(session, params, **options)
    while True:
        try:
            step = next(steps)
        except StopIteration as stop:
            return stop.value
        if progress is not None:
            progress(*step)


def print_progress(fraction: float, message: str) -> None:
    """A `progress` for `check_conversion` in scripts and notebooks: one line per step."""
    print(f"[{fraction:4.0%}] {message}", flush=True)


def conversion_check_steps(
    session: ConversionSession, params: ConversionParams, *,
    batch_sizes: Sequence[int] = (1,), batches: int = 2, warmup: int = 3,
    iterations: int = 20, calibration_batches: int | None = None, whole_model: bool = False,
    compare: bool = True, time_latency: bool = True, target_gpu: str | None = None,
    **tolerances: Any,
) -> Generator[Step, None, ConversionCheck]:
    """Builds the conversion's engines for `batch_sizes`, validates on `batches` generated
    batches of the largest size (`tolerances`: `validate`'s atol, rtol, ...), then times native
    TF and the converted model (and with `whole_model`, the whole model as one engine on the
    backend: what the converted model could reach) at each batch size. Yields progress.
    `compare=False` skips the validation, `time_latency=False` the timing (the tuner's
    cheaper trials). With `target_gpu`, the latency estimated for that GPU at each batch size
    is added (`ConversionCheck.estimates`), apart from what was measured."""
    sizes = check_batch_sizes(batch_sizes)
    if target_gpu:  # an unknown GPU fails before the engines are built
        target_gpu_name(target_gpu)
    largest = sizes[-1]
    calibration_batches = calibration_batch_count(largest, calibration_batches)
    if batches < 1 or warmup < 0 or iterations < 1 or calibration_batches < 1:
        raise WorkbenchError("batches, iterations and calibration_batches must be >= 1 and "
                             "warmup >= 0")
    result = session.convert(params)
    model = converted_model(session, result, params)
    calibration = list(generated_inputs(session, calibration_batches, largest,
                                        seed=CALIBRATION_SEED)) if params.needs_calibration else []
    if calibration:
        yield 0.05, f"Calibrating INT8 on generated data ({_batches(calibration_batches)})"
        model.calibrate(lambda: iter(calibration))
    engines = len(result.engines)
    yield 0.1, f"Building {counted(engines, 'engine')} on {model.backend.name}"
    feeds = {b: random_inputs(session, b, seed=LATENCY_SEED + b) for b in sizes}
    # Largest first: in implicit batch mode its engine then serves every smaller batch.
    model.build(lambda: iter([feeds[b] for b in reversed(sizes)]))
    report = None
    if compare:
        yield 0.35, f"Comparing outputs with native TensorFlow on {_batches(batches)}"
        report = validate(model, session.loaded, generated_inputs(session, batches, largest),
                          **tolerances)
    whole, notes = None, generated_input_notes(session) + export_notes(result.engines)
    if whole_model:
        yield 0.4, f"Building the whole model as one engine on {model.backend.name}"
        whole, note = _whole_model(session, params, model.backend, calibration)
        notes += [note] if note else []
    rows = []
    for index, batch in enumerate(sizes if time_latency else []):
        yield 0.45 + 0.5 * index / len(sizes), f"Timing native TF and converted, batch {batch}"
        rows.append(_timed(NATIVE, native_callable(session, feeds[batch]), "tensorflow",
                           cpu_device_name(), batch, warmup, iterations))
        engines = _converted_label(model)
        rows.append(_timed(CONVERTED, converted_callable(model, feeds[batch]), engines,
                           model.backend.device, batch, warmup, iterations))
        if whole is not None:
            arrays = list(feeds[batch].values())
            rows.append(_timed(WHOLE, lambda a=arrays: whole.run(a), f"{whole.backend} engine",
                               whole.device, batch, warmup, iterations))
    estimates = tuple(conversion_estimate(session, params, target_gpu, b, result)
                      for b in sizes) if target_gpu else ()
    return ConversionCheck(params=params, engines=len(result.engines),
                           validation=report, latency=pd.DataFrame(rows), notes=tuple(notes),
                           backend=model.backend.name, device=model.backend.device,
                           estimates=estimates)


def _whole_model(session: ConversionSession, params: ConversionParams, backend: Backend,
                 calibration: list[dict[str, np.ndarray]]) -> tuple[Engine | None, str]:
    """The whole-model engine, or None and why not (an op the exporter cannot express)."""
    from workbench.engines.onnx.segment_export import ExportError
    from workbench.engines.runtime.whole_model import whole_model_engine

    try:
        engine = whole_model_engine(session, params, backend, calibration_data=[
            list(batch.values()) for batch in calibration])
    except ExportError as exc:
        return None, f"whole model not measured: {exc}"
    return engine, ""


def _converted_label(model: ConvertedModel) -> str:
    """What ran the converted model: its engines, unless segments fell back to TF."""
    if not model.graph.segments:
        return "tensorflow only (no engines)"
    fallbacks = sorted(model.native_runs)
    if fallbacks:
        return f"tensorflow (segments {', '.join(fallbacks)} ran natively)"
    return f"{model.backend.name} engines + tensorflow"


def parse_batch_sizes(text: str) -> list[int]:
    """Batch sizes typed as `1, 8, 32` (commas or spaces), checked like the check's own."""
    try:
        sizes = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise WorkbenchError(f"batch sizes must be whole numbers >= 1 separated by commas, "
                             f"got {text!r}") from None
    return check_batch_sizes(sizes)


def parse_tolerance(text: str, name: str) -> float | None:
    """A tolerance typed in a field: a number >= 0, or empty for the precision's default."""
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise WorkbenchError(f"{name} must be a number >= 0 (or empty for the precision's "
                             f"default), got {text!r}")
    return value


def check_batch_sizes(batch_sizes: Sequence[int]) -> list[int]:
    """The batch sizes sorted and deduplicated; a WorkbenchError for anything but ints >= 1."""
    sizes = sorted(set(batch_sizes))
    if not sizes or any(not isinstance(b, (int, np.integer)) or b < 1 for b in sizes):
        raise WorkbenchError(f"batch sizes must be integers >= 1, got {list(batch_sizes)}")
    return [int(b) for b in sizes]


def _timed(model: str, fn: Callable[[], Any], backend: str, device: str, batch: int,
           warmup: int, iterations: int) -> dict[str, Any]:
    stats = measure_latency(fn, backend=backend, device=device, batch_size=batch,
                            warmup=warmup, iterations=iterations)
    return {"model": model, **stats.as_row()}


def converted_callable(model: Callable[..., Mapping[str, Any]], inputs: dict[str, np.ndarray]
                       ) -> Callable[[], list[np.ndarray]]:
    """A blocking call of a converted model on fixed inputs, for `measure_latency` (inputs
    become tensors once, outside the timed call; `np.asarray` waits for the results)."""
    tensors = {name: tf.convert_to_tensor(value) for name, value in inputs.items()}
    return lambda: [np.asarray(v) for v in model(**tensors).values()]


def _batches(count: int) -> str:
    return f"{count} batch{'es' * (count != 1)}"
