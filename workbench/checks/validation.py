"""Validating a converted model: its outputs against native TensorFlow's, Polygraphy's way.

The rules follow Polygraphy's `CompareFunc.simple` (what `polygraphy run --atol --rtol
--check-error-stat` does), so a tolerance means here what it means there:

- errors per element: `abs = |actual - expected|`, `rel = abs / |expected|`, the expected
  (native) output being the reference; zeros in it count as machine epsilon (2.2e-16) so the
  relative error stays finite.
- `elemwise` (default): an element fails when it exceeds *both* tolerances (`abs > atol` and
  `rel > rtol`), NaN counting as exceeding; the output fails when any element does.
- `max` | `mean` | `median` | `quantile`: the statistic of the absolute errors and of the
  relative errors; the output fails when both exceed their tolerance (or are NaN).
- shapes must match exactly unless `check_shapes=False` (then equal sizes are compared in the
  expected shape); matching infinities count as errors unless `infinities_compare_equal`.

Tolerances are one value for every output or a dict per output name, with "" as the default
for names not listed. Not given, they follow the engines' precision (`PRECISION_TOLERANCES`,
TF-TRT's own integration tests' values), and the report says so: FP16 and INT8 engines are not
wrong for missing 1e-5. Over several batches an output passes only when every batch passes (each
batch is one Polygraphy iteration); the statistics reported pool all batches. Classifier outputs
(rank 2, float, more than one column) also get top-1 agreement.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.checks.inputs import random_inputs
from workbench.errors import WorkbenchError
from workbench.words import counted

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession

ERROR_STATS = ("elemwise", "max", "mean", "median", "quantile")
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5
DEFAULT_QUANTILE = 0.99
# Tolerances per precision where the caller gives none: TF-TRT's trt_test.py compares FP32
# at 1e-5 and FP16 at 1e-2, its INT8 calibration tests at 1e-1. INT8 compares the mean error
# (Polygraphy's --check-error-stat mean): quantized activations put a few elements of a right
# result far off (digits_cnn: max 0.5, mean 0.045, top-1 agreement 100%).
PRECISION_TOLERANCES: dict[str, dict[str, Any]] = {
    "FP32": {"atol": 1e-5, "rtol": 1e-5},
    "FP16": {"atol": 1e-2, "rtol": 1e-2},
    "INT8": {"atol": 1e-1, "rtol": 1e-1, "check_error_stat": "mean"},
}
# Polygraphy adds this to zero reference values before dividing.
EPSILON = float(np.finfo(np.float64).eps)

Tolerance = float | Mapping[str, float]


class ValidationError(WorkbenchError):
    """Bad validation arguments: an unknown error statistic, a tolerance for no output, ..."""


@dataclass(frozen=True)
class OutputComparison:
    """How one output of the converted model compares with the native one."""

    name: str
    passed: bool
    shape: tuple[int, ...]  # the converted output's; dims that vary across batches are -1
    expected_shape: tuple[int, ...]
    max_abs: float
    mean_abs: float
    median_abs: float
    quantile_abs: float
    max_rel: float
    mean_rel: float
    median_rel: float
    quantile_rel: float
    atol: float
    rtol: float
    check_error_stat: str = "elemwise"
    error_quantile: float = DEFAULT_QUANTILE
    elements: int = 0
    mismatches: int = 0  # elements exceeding both tolerances (NaN included)
    nan: int = 0  # in the converted output
    inf: int = 0
    expected_nan: int = 0
    expected_inf: int = 0
    top1_agreement: float | None = None
    failed_batches: int = 0
    reason: str = ""  # why it failed, "" when it passed

    def __str__(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        text = f"{status} {self.name} [{shape}]: "
        if self.reason and np.isnan(self.max_abs):
            return text + self.reason
        text += (f"max abs {self.max_abs:.3g} rel {self.max_rel:.3g}, "
                 f"mean abs {self.mean_abs:.3g} rel {self.mean_rel:.3g}, "
                 f"p{self.error_quantile * 100:g} abs {self.quantile_abs:.3g} "
                 f"rel {self.quantile_rel:.3g} "
                 f"(atol {self.atol:g}, rtol {self.rtol:g}, {self.check_error_stat})")
        if self.top1_agreement is not None:
            text += f", top-1 agreement {self.top1_agreement:.2%}"
        if self.nan or self.inf:
            text += f", {self.nan} NaN, {self.inf} Inf"
        return text + (f"; {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class ValidationReport:
    """Every output compared over every batch, labelled with what ran the engines."""

    passed: bool
    outputs: list[OutputComparison]
    backend: str
    device: str
    precision: str
    batches: int
    native_runs: dict[str, int] = field(default_factory=dict)  # engine -> native calls
    tolerances: str = ""  # where the tolerances came from, e.g. "FP16 defaults"

    def table(self) -> pd.DataFrame:
        """One row per output, with the backend, device and precision on each."""
        rows = [{"backend": self.backend, "device": self.device, "precision": self.precision,
                 **vars(o)} for o in self.outputs]
        return pd.DataFrame(rows)

    def to_json(self) -> dict[str, Any]:
        """The verdict as one JSON-ready object: `table()`'s rows under `outputs`."""
        return {"passed": self.passed, "backend": self.backend, "device": self.device,
                "precision": self.precision, "batches": self.batches,
                "native_runs": self.native_runs, "tolerances": self.tolerances,
                "outputs": json.loads(self.table().to_json(orient="records"))}

    def __str__(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        head = (f"{status}: {self.precision} converted vs native TensorFlow on {self.batches} "
                f"batch{'es' * (self.batches != 1)}, engines on {self.backend} ({self.device})")
        if self.tolerances:
            head += f"; tolerances: {self.tolerances}"
        if self.native_runs:
            runs = ", ".join(f"{name} {n}x" for name, n in self.native_runs.items())
            head += f"; segments run natively: {runs}"
        return "\n".join([head, *(f"  {o}" for o in self.outputs)])


# --- one output ---------------------------------------------------------------------------


def _per_output(value: Any, name: str, default: Any) -> Any:
    """Polygraphy's value-or-dict: a dict maps output names ("" = every other output)."""
    if isinstance(value, Mapping):
        return value.get(name, value.get("", default))
    return value


def _errors(actual: np.ndarray, expected: np.ndarray, infinities_compare_equal: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """Absolute and relative errors per element, as float64."""
    if actual.dtype.kind in "bOSU" or expected.dtype.kind in "bOSU":
        absdiff = (actual != expected).astype(np.float64)
    else:
        a, b = actual.astype(np.float64), expected.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            absdiff = np.abs(a - b)
        if infinities_compare_equal:
            absdiff = np.where(np.isinf(a) & (a == b), 0.0, absdiff)
    if expected.dtype.kind in "OSU":  # strings: an unequal element is a relative error of 1
        reference = np.ones(expected.shape)
    else:
        reference = np.abs(expected.astype(np.float64))
        reference = np.where(reference == 0, EPSILON, reference)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return absdiff, absdiff / reference


def _exceeds(value: Any, tolerance: float) -> Any:
    """Polygraphy's test, elementwise or on a statistic: NaN always exceeds."""
    return np.isnan(value) | (value > tolerance)


def _statistics(errors: np.ndarray, quantile: float) -> dict[str, float]:
    if errors.size == 0:  # Polygraphy reports 0 for empty outputs
        return dict.fromkeys(("max", "mean", "median", "quantile"), 0.0)
    with np.errstate(invalid="ignore"):  # NaN errors give NaN statistics, which fail
        return {"max": float(np.max(errors)), "mean": float(np.mean(errors)),
                "median": float(np.median(errors)),
                "quantile": float(np.quantile(errors, quantile))}


def _batch_passes(absdiff: np.ndarray, reldiff: np.ndarray, atol: float, rtol: float,
                  stat: str, quantile: float) -> tuple[bool, int]:
    """(passed, elements exceeding both tolerances) for one batch of one output."""
    mismatches = int(np.count_nonzero(_exceeds(absdiff, atol) & _exceeds(reldiff, rtol)))
    if stat == "elemwise":
        return mismatches == 0, mismatches
    abs_stat = _statistics(absdiff, quantile)[stat]
    rel_stat = _statistics(reldiff, quantile)[stat]
    return not (_exceeds(abs_stat, atol) and _exceeds(rel_stat, rtol)), mismatches


def _top1(actual: np.ndarray, expected: np.ndarray) -> tuple[int, int] | None:
    """(rows whose argmax agrees, rows) for a classifier output, else None."""
    if (actual.ndim != 2 or actual.shape != expected.shape or actual.shape[1] < 2
            or actual.dtype.kind != "f" or expected.dtype.kind != "f"):
        return None
    return int(np.count_nonzero(actual.argmax(1) == expected.argmax(1))), actual.shape[0]


@dataclass
class _Accumulator:
    """One output's errors over the batches seen so far."""

    name: str
    atol: float
    rtol: float
    stat: str
    quantile: float
    absdiffs: list[np.ndarray] = field(default_factory=list)
    reldiffs: list[np.ndarray] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    expected_shapes: list[tuple[int, ...]] = field(default_factory=list)
    failed_batches: int = 0
    mismatches: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("nan", "inf", "expected_nan", "expected_inf", "top1", "rows"), 0))
    classifier: bool = True
    reasons: list[str] = field(default_factory=list)

    def add(self, actual: Any, expected: Any, check_shapes: bool,
            infinities_compare_equal: bool) -> None:
        if actual is None or expected is None:
            side = "converted" if actual is None else "native"
            self._fail(f"missing from the {side} outputs")
            return
        actual, expected = np.asarray(actual), np.asarray(expected)
        self.shapes.append(actual.shape)
        self.expected_shapes.append(expected.shape)
        self._count_nonfinite(actual, expected)
        if actual.shape != expected.shape:
            if check_shapes or actual.size != expected.size:
                self._fail(f"shape {list(actual.shape)} differs from native "
                           f"{list(expected.shape)}")
                return
            actual = actual.reshape(expected.shape)
        absdiff, reldiff = _errors(actual, expected, infinities_compare_equal)
        passed, mismatches = _batch_passes(absdiff, reldiff, self.atol, self.rtol, self.stat,
                                           self.quantile)
        self.absdiffs.append(absdiff.ravel())
        self.reldiffs.append(reldiff.ravel())
        self.mismatches += mismatches
        if not passed:
            self._fail(f"errors exceed the tolerances ({self.stat})")
        self._count_top1(actual, expected)

    def _fail(self, reason: str) -> None:
        self.failed_batches += 1
        if reason not in self.reasons:
            self.reasons.append(reason)

    def _count_nonfinite(self, actual: np.ndarray, expected: np.ndarray) -> None:
        for prefix, array in (("", actual), ("expected_", expected)):
            if array.dtype.kind in "fc":
                self.counts[prefix + "nan"] += int(np.count_nonzero(np.isnan(array)))
                self.counts[prefix + "inf"] += int(np.count_nonzero(np.isinf(array)))

    def _count_top1(self, actual: np.ndarray, expected: np.ndarray) -> None:
        top1 = _top1(actual, expected)
        if top1 is None:
            self.classifier = False
        else:
            self.counts["top1"] += top1[0]
            self.counts["rows"] += top1[1]

    def result(self) -> OutputComparison:
        absdiff = np.concatenate(self.absdiffs) if self.absdiffs else np.full(1, np.nan)
        reldiff = np.concatenate(self.reldiffs) if self.reldiffs else np.full(1, np.nan)
        abs_stats, rel_stats = (_statistics(absdiff, self.quantile),
                                _statistics(reldiff, self.quantile))
        reasons = list(self.reasons)
        if self.failed_batches and (self.counts["nan"] or self.counts["inf"]):
            reasons.append(f"{self.counts['nan']} NaN and {self.counts['inf']} Inf "
                           "in the converted output")
        counts = self.counts
        return OutputComparison(
            name=self.name, passed=self.failed_batches == 0,
            shape=_common_shape(self.shapes), expected_shape=_common_shape(self.expected_shapes),
            **{f"{k}_abs": v for k, v in abs_stats.items()},
            **{f"{k}_rel": v for k, v in rel_stats.items()},
            atol=self.atol, rtol=self.rtol, check_error_stat=self.stat,
            error_quantile=self.quantile, elements=int(sum(a.size for a in self.absdiffs)),
            mismatches=self.mismatches, nan=counts["nan"], inf=counts["inf"],
            expected_nan=counts["expected_nan"], expected_inf=counts["expected_inf"],
            top1_agreement=(counts["top1"] / counts["rows"]
                            if self.classifier and counts["rows"] else None),
            failed_batches=self.failed_batches, reason="; ".join(reasons),
        )


def _common_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape every batch had; dims that differ between batches become -1."""
    if not shapes:
        return ()
    if len({len(s) for s in shapes}) > 1:
        return shapes[0]
    return tuple(dims[0] if len(set(dims)) == 1 else -1 for dims in zip(*shapes, strict=True))


# --- several outputs, several batches -------------------------------------------------------


@dataclass
class Comparer:
    """The tolerances, checked once, and an accumulator per output."""

    atol: Tolerance = DEFAULT_ATOL
    rtol: Tolerance = DEFAULT_RTOL
    check_error_stat: str | Mapping[str, str] = "elemwise"
    error_quantile: float | Mapping[str, float] = DEFAULT_QUANTILE
    check_shapes: bool = True
    infinities_compare_equal: bool = False
    outputs: dict[str, _Accumulator] = field(default_factory=dict)

    def add(self, expected: Mapping[str, Any], actual: Mapping[str, Any]) -> None:
        names = list(dict.fromkeys([*expected, *actual]))
        if not self.outputs:
            self._check_arguments(names)
        for name in names:
            if name not in self.outputs:
                self.outputs[name] = self._accumulator(name)
            self.outputs[name].add(actual.get(name), expected.get(name), self.check_shapes,
                                   self.infinities_compare_equal)

    def _accumulator(self, name: str) -> _Accumulator:
        return _Accumulator(
            name, float(_per_output(self.atol, name, DEFAULT_ATOL)),
            float(_per_output(self.rtol, name, DEFAULT_RTOL)),
            _per_output(self.check_error_stat, name, "elemwise"),
            float(_per_output(self.error_quantile, name, DEFAULT_QUANTILE)))

    def _check_arguments(self, names: list[str]) -> None:
        for what in ("atol", "rtol", "check_error_stat", "error_quantile"):
            value = getattr(self, what)
            unknown = sorted(set(value) - {*names, ""}) if isinstance(value, Mapping) else []
            if unknown:
                raise ValidationError(
                    f"{what} names {counted(len(unknown), 'output')} the model does not have "
                    f"({', '.join(unknown)}); its outputs: {', '.join(names)}")
        for name in names:
            stat = _per_output(self.check_error_stat, name, "elemwise")
            if stat not in ERROR_STATS:
                raise ValidationError(f"check_error_stat {stat!r} is not one of "
                                      f"{', '.join(ERROR_STATS)}")
            quantile = float(_per_output(self.error_quantile, name, DEFAULT_QUANTILE))
            if not 0.0 <= quantile <= 1.0:
                raise ValidationError(f"error_quantile {quantile} must be in [0, 1]")
            for what in ("atol", "rtol"):
                if float(_per_output(getattr(self, what), name, 0.0)) < 0:
                    raise ValidationError(f"{what} for {name!r} must be >= 0")

    def results(self) -> list[OutputComparison]:
        return [acc.result() for acc in self.outputs.values()]


def compare_outputs(expected: Mapping[str, Any], actual: Mapping[str, Any],
                    atol: Tolerance = DEFAULT_ATOL, rtol: Tolerance = DEFAULT_RTOL,
                    check_error_stat: str | Mapping[str, str] = "elemwise",
                    error_quantile: float | Mapping[str, float] = DEFAULT_QUANTILE,
                    check_shapes: bool = True, infinities_compare_equal: bool = False,
                    ) -> list[OutputComparison]:
    """Compares one set of outputs (name -> array) with the expected ones, Polygraphy's way."""
    comparer = Comparer(atol, rtol, check_error_stat, error_quantile, check_shapes,
                         infinities_compare_equal)
    comparer.add(as_numpy(expected), as_numpy(actual))
    return comparer.results()


def validate(converted: Any, native: Any, inputs: Iterable[Mapping[str, Any]],
             **tolerances: Any) -> ValidationReport:
    """Runs `converted` (a ConvertedModel) and `native` (a LoadedModel) on every input set
    (input name -> array) and compares their outputs; `tolerances` are compare_outputs'
    keyword arguments. The report names the backend, device and precision of the engines and
    counts the calls any segment served natively, since those compare native with native."""
    settings = getattr(converted, "settings", None)
    precision = str(getattr(settings, "precision_mode", "unknown")).upper()
    tolerances, source = with_default_tolerances(precision, tolerances)
    comparer = Comparer(**tolerances)
    before = _native_calls(converted)
    batches = 0
    for batch in inputs:
        feeds = dict(batch)
        comparer.add(as_numpy(native(**feeds)), as_numpy(converted(**feeds)))
        batches += 1
    if not batches:
        raise ValidationError("validate() got no inputs: give at least one input set")
    after = _native_calls(converted)
    outputs = comparer.results()
    backend = getattr(converted, "backend", None)
    return ValidationReport(
        passed=all(o.passed for o in outputs), outputs=outputs,
        backend=str(getattr(backend, "name", "unknown")),
        device=str(getattr(backend, "device", "unknown")),
        precision=str(getattr(settings, "precision_mode", "unknown")), batches=batches,
        native_runs={name: n - before.get(name, 0) for name, n in after.items()
                     if n > before.get(name, 0)},
        tolerances=source,
    )


def with_default_tolerances(precision: str, tolerances: Mapping[str, Any]
                            ) -> tuple[dict[str, Any], str]:
    """`tolerances` with the precision's defaults (`PRECISION_TOLERANCES`) where not given
    (None counts as not given), and a line saying which are defaults."""
    given = {k: v for k, v in tolerances.items() if v is not None}
    precision = precision.upper()
    own = PRECISION_TOLERANCES.get(precision, PRECISION_TOLERANCES["FP32"])
    defaults = {k: v for k, v in own.items() if k not in given}
    if not defaults:
        return given, "given"
    shown = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in defaults.items())
    return {**given, **defaults}, f"{precision} defaults ({shown}; TF-TRT's tests' values)"


def generated_inputs(session: ConversionSession, batches: int = 4, batch_size: int = 8,
                     seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Random input sets for a conversion session (profiling's `random_inputs`), one seed
    per batch, for models without data of their own."""
    for i in range(batches):
        yield random_inputs(session, batch_size=batch_size, seed=seed + i)


def _native_calls(converted: Any) -> dict[str, int]:
    ops = getattr(converted, "ops", None) or {}
    return {name: op.stats.native_calls for name, op in ops.items()}


def as_numpy(outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Named outputs (TensorFlow tensors or arrays) as numpy arrays."""
    return {name: value.numpy() if hasattr(value, "numpy") else np.asarray(value)
            for name, value in outputs.items()}
