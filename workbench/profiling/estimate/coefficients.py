"""The estimate's fitted coefficients (`coefficients.json` beside this module), the range every
estimate carries and the label that quotes the error measured on data the fit never saw.

The range is the 10th-90th percentile of measured / estimated over configurations judged out
of sample (`benchmarks/estimate.py`: one GPU left out, one model family left out); after a
calibration on one measurement of the same GPU, the narrower range of the other
configurations' measured / calibrated estimate.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.graph.gpu_facts import GpuFacts

COEFFICIENTS_FILE = Path(__file__).with_name("coefficients.json")


def load_coefficients(path: Path = COEFFICIENTS_FILE) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot read the estimate's fitted coefficients ({exc}); "
                             "run `python benchmarks/estimate.py --fit`") from None


def estimate_range(ms: float, coefficients: dict | None = None,
                   calibrated: bool = False) -> tuple[float, float]:
    """(low_ms, high_ms) around an estimate: the out-of-sample 10th-90th percentile."""
    span = (coefficients or load_coefficients()).get("range") or {}
    prefix = "calibrated_" if calibrated else ""
    return ms * span.get(f"{prefix}low", 1.0), ms * span.get(f"{prefix}high", 1.0)


def with_ranges(document: dict, coefficients: dict | None = None,
                calibrated: bool = False) -> dict:
    """The document with `<name>_low_ms` and `<name>_high_ms` beside every `<name>_ms`
    (`low_ms`/`high_ms` beside a plain `ms`), nested dictionaries and lists included."""
    coefficients = coefficients or load_coefficients()
    found: dict = {}
    for key, value in document.items():
        if key.endswith(("low_ms", "high_ms")):
            continue  # made again beside their estimate
        if isinstance(value, dict):
            value = with_ranges(value, coefficients, calibrated)
        elif isinstance(value, list):
            value = [with_ranges(v, coefficients, calibrated) if isinstance(v, dict) else v
                     for v in value]
        found[key] = value
        if key.endswith("ms") and isinstance(value, int | float) \
                and not isinstance(value, bool):
            stem = key[:-2]
            low, high = estimate_range(float(value), coefficients, calibrated)
            found[f"{stem}low_ms"], found[f"{stem}high_ms"] = low, high
    return found


def error_note(gpu: GpuFacts, coefficients: dict | None = None,
               calibration: str = "") -> str:
    """The label every estimated figure carries: the error measured out of sample, the
    range, and the calibration when there is one (`calibration` says on what)."""
    coefficients = coefficients or load_coefficients()
    errors = coefficients.get("errors", {}).get("out_of_sample")
    span = coefficients.get("range") or {}
    text = f"estimated for {gpu.name}"
    if not errors:
        return text + " (model error not measured)"
    if calibration:
        return (f"{text}, calibrated on {calibration}; other configurations on that GPU, "
                f"out of sample: median error "
                f"{100 * span['calibrated_median_abs_error']:.0f}%, range "
                f"x{span['calibrated_low']:.2f}-x{span['calibrated_high']:.2f}")
    return (f"{text}; out of sample (GPUs and model families the fit never saw, "
            f"{errors['references']} configurations): median error "
            f"{100 * errors['median_abs_error']:.0f}%, worst "
            f"{100 * errors['max_abs_error']:.0f}%; range x{span['low']:.2f}-x{span['high']:.2f}")
