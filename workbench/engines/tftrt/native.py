"""A real TF-TRT: a TensorFlow <= 2.17 built with TensorRT; detection and delegation.

TensorFlow removed TF-TRT in 2.18, so it exists only in older builds with TensorRT linked in.
`status()` says whether it is present and, if not, why. `convert_with_tftrt` hands a whole
conversion to its `TrtGraphConverterV2` (written against TF 2.17's trt_convert.py; it cannot
run on our machines, only its parameter mapping and its refusal are tested) and reads the
saved result back with `inspect_tftrt`, the same reader as for any TF-TRT converted model.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.tf_compat import LAST_TFTRT_RELEASE, tensorflow_release, tensorflow_version
from workbench.tf_private import tftrt

if TYPE_CHECKING:
    from workbench.conversion.params import ConversionParams
    from workbench.engines.tftrt.saved_model import TftrtModel

NAME = "tftrt"


def status() -> tuple[bool, str]:
    """(True, "") when TF-TRT can convert here, else (False, "not available here: <why>")."""
    try:
        import tensorflow  # noqa: F401  (importable: then its version is the one we read)
    except ImportError:
        return False, "not available here: TensorFlow is not installed"
    version = tensorflow_version()
    if tensorflow_release(version) > LAST_TFTRT_RELEASE:
        return False, (f"not available here: TensorFlow {version} has no TF-TRT "
                       f"(removed in 2.18; it needs TensorFlow <= 2.17 built with TensorRT)")
    try:
        tftrt.trt_convert()
        enabled = tftrt.tensorrt_enabled()
    except ImportError as error:
        return False, f"not available here: TF-TRT does not import ({error})"
    if not enabled:
        return False, f"not available here: TensorFlow {version} was built without TensorRT"
    return True, ""


def available() -> bool:
    """Whether TF-TRT itself can run here."""
    return status()[0]


class TftrtUnavailableError(WorkbenchError):
    """TF-TRT itself cannot run here (the reason says why)."""


def tftrt_arguments(params: ConversionParams) -> dict[str, Any]:
    """TrtGraphConverterV2's keyword arguments for `params` (TF 2.17 names, same as ours)."""
    return {
        "use_dynamic_shape": params.use_dynamic_shape,
        "dynamic_shape_profile_strategy": params.dynamic_shape_profile_strategy,
        "max_workspace_size_bytes": params.max_workspace_size_bytes,
        "precision_mode": params.precision_mode,
        "minimum_segment_size": params.minimum_segment_size,
        "maximum_cached_engines": params.maximum_cached_engines,
        "use_calibration": params.use_calibration,
        "allow_build_at_runtime": params.allow_build_at_runtime,
    }


def tftrt_environment(params: ConversionParams) -> dict[str, str]:
    """The knobs TF-TRT reads from its environment at each conversion (segment.cc)."""
    return {"TF_TRT_OP_DENYLIST": ",".join(params.denylist),
            "TF_TRT_MAX_ALLOWED_ENGINES": str(params.max_engines)}


def convert_with_tftrt(
    input_saved_model_dir: str | Path,
    params: ConversionParams,
    output_dir: str | Path,
    calibration_input_fn: Callable[[], Any] | None = None,
    input_fn: Callable[[], Any] | None = None,
    signature_key: str = "serving_default",
) -> TftrtModel:
    """Converts with TF-TRT itself (convert, build when `input_fn` is given, save) and reads
    the saved model back; raises TftrtUnavailableError where TF-TRT is not present."""
    ok, reason = status()
    if not ok:
        raise TftrtUnavailableError(f"TF-TRT is {reason}; use workbench.trt_convert (the "
                                    "workbench's own conversion) instead")
    trt_convert = tftrt.trt_convert()

    from workbench.engines.tftrt.saved_model import inspect_tftrt

    with _environment(tftrt_environment(params)):
        converter = trt_convert.TrtGraphConverterV2(
            input_saved_model_dir=str(input_saved_model_dir),
            input_saved_model_signature_key=signature_key, **tftrt_arguments(params))
        converter.convert(calibration_input_fn=calibration_input_fn)
    if input_fn is not None:
        converter.build(input_fn=input_fn)
    converter.save(str(output_dir))
    return inspect_tftrt(output_dir, signature_key)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
