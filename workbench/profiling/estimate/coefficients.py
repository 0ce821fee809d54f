"""The estimate's fitted coefficients (`coefficients.json` beside this module) and the label
every estimated figure carries, with the model's measured error."""

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


def error_note(gpu: GpuFacts, coefficients: dict | None = None) -> str:
    """The label every estimated figure carries, with the model's measured error."""
    errors = (coefficients or load_coefficients()).get("errors", {})
    measured = errors.get("median_abs_model_error")
    text = f"estimated for {gpu.name}"
    if measured is None:
        return text + " (model error not measured)"
    text += (f"; leave-one-out model-level error on real TensorRT profiles: median "
             f"{100 * measured:.0f}%, worst {100 * errors['max_abs_model_error']:.0f}% "
             f"({errors.get('sets', '?')} sets)")
    held_out = errors.get("h100_held_out")
    if held_out:  # architectures measured on an H100 and never fitted on
        median, worst = held_out["median_abs_layers_error"], held_out["max_abs_layers_error"]
        text += f"; out of sample on an H100: median {100 * median:.0f}%, worst {100 * worst:.0f}%"
    return text
