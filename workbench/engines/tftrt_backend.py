"""Detection of a real TF-TRT: a TensorFlow <= 2.17 built with TensorRT.

TensorFlow removed TF-TRT in 2.18, so it exists only in older builds with TensorRT linked in.
This module only says whether it is present and, if not, why. Delegating a whole conversion to
its `TrtGraphConverterV2` and reading the converted graph back into our data model is a later
step (issue 4); until then the workbench's own reimplementation does the conversion.
"""

from __future__ import annotations

import importlib

NAME = "tftrt"
LAST_VERSION = (2, 17)  # the last TensorFlow minor release that shipped TF-TRT


def _version(text: str) -> tuple[int, int]:
    parts = (text.split(".") + ["0", "0"])[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)  # type: ignore


def status() -> tuple[bool, str]:
    """(True, "") when TF-TRT can convert here, else (False, "not available here: <why>")."""
    try:
        import tensorflow as tf
    except ImportError:
        return False, "not available here: TensorFlow is not installed"
    version = tf.__version__
    if _version(version) > LAST_VERSION:
        return False, (f"not available here: TensorFlow {version} has no TF-TRT "
                       f"(removed in 2.18; it needs TensorFlow <= 2.17 built with TensorRT)")
    try:
        importlib.import_module("tensorflow.python.compiler.tensorrt.trt_convert")
        utils = importlib.import_module("tensorflow.compiler.tf2tensorrt._pywrap_py_utils")
    except ImportError as error:
        return False, f"not available here: TF-TRT does not import ({error})"
    if not utils.is_tensorrt_enabled():
        return False, f"not available here: TensorFlow {version} was built without TensorRT"
    return True, ""


def available() -> bool:
    """Whether TF-TRT itself can run here."""
    return status()[0]
