"""TensorFlow's own TF-TRT, where TensorFlow (<= 2.17) has it: the real converter the
`tftrt` backend runs and checks against, and the saved-model `save` module its `save()`
wrote through (`workbench.trt_convert.save` gives it, as TF-TRT's module did). TF-TRT was
only ever importable from `tensorflow.python`."""

from __future__ import annotations

import importlib
from typing import Any

TRT_CONVERT = "tensorflow.python.compiler.tensorrt.trt_convert"
PY_UTILS = "tensorflow.compiler.tf2tensorrt._pywrap_py_utils"


def trt_convert() -> Any:
    """TF-TRT's `trt_convert` module; raises ImportError where TensorFlow has none."""
    return importlib.import_module(TRT_CONVERT)


def tensorrt_enabled() -> bool:
    """Whether this TensorFlow was built with TensorRT; raises ImportError without TF-TRT."""
    return bool(importlib.import_module(PY_UTILS).is_tensorrt_enabled())


def saved_model_save() -> Any:
    """TensorFlow's `saved_model.save` module."""
    from tensorflow.python.saved_model import save

    return save
