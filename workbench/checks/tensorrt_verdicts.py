"""TensorRT's verdicts on a conversion as a service: every engine parsed and built by
TensorRT-RTX's builder (no GPU needed), on given input sets or generated ones.

The CLI's `--tensorrt`, the tuning trials, the app and the facade's `tensorrt_verdicts()` call
`conversion_verdicts`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from workbench.checks.inputs import generated_input_sets
from workbench.conversion.session import ConversionSession


def conversion_verdicts(session: ConversionSession, converted: Any,
                        input_sets: Sequence[Sequence[Any]] | None = None,
                        progress: Callable[[int, int, str], Any] | None = None
                        ) -> dict[str, Any]:
    """engine -> TensorRTVerdict for every engine of `converted` (TensorRT-RTX's builder on each
    engine's ONNX);
    TensorRTMissingError (saying how to install it) without TensorRT-RTX."""
    from workbench.engines.inspection.tensorrt_verdict import engine_verdicts, require_tensorrt

    require_tensorrt()
    if input_sets is None:
        input_sets = generated_input_sets(session, converted.input_names)
    return engine_verdicts(converted, input_sets, progress)
