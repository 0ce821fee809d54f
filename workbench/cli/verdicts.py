"""What `--tensorrt` and `--target-gpu` add to a conversion, for the commands that offer them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession


def tensorrt_verdicts(session: ConversionSession, result: Any, params: ConversionParams
                      ) -> dict[str, dict]:
    """engine -> TensorRT's verdict (the JSON object) on generated inputs."""
    from workbench.checks.tensorrt_verdicts import conversion_verdicts
    from workbench.engines.runtime.converted_model import converted_model

    converted = converted_model(session, result, params)
    verdicts = conversion_verdicts(session, converted)
    return {name: verdict.to_json() for name, verdict in verdicts.items()}


def gpu_estimate(session: ConversionSession, result: Any, params: ConversionParams,
                 args: argparse.Namespace, tensorrt: dict[str, dict] | None = None) -> dict:
    """The estimate for --target-gpu: engines TensorRT built (--tensorrt) from their kernels."""
    from workbench.profiling.conversion_estimate import conversion_estimate

    return conversion_estimate(session, params, args.target_gpu, args.target_batch_size, result,
                               tensorrt=tensorrt)
