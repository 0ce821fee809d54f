"""The heavy libraries, each one lazy handle said once: `from workbench.lazy import tf`.

Importing TensorFlow or ONNX Runtime takes seconds; `import workbench` and the CLI's `--help`
must not pay it. Modules name the library at the top through its handle; the import happens
at the handle's first attribute (inside `quiet`'s filter, which keeps TensorFlow's import-time
chatter off stderr).

`before_tensorflow_import()` sets what TensorFlow must find in the environment when it starts;
it runs just before TensorFlow is first imported, by this handle or by any other route
(`quiet`'s import finder calls it), so importing the package itself changes no setting.
`after_tensorflow_import(callback)` runs a callback just after that import, by either route.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

# A graph prepared for a GPU holds NCHW convolutions and pools, which TensorFlow's x86 CPU
# kernels run only through oneDNN; TensorFlow turns oneDNN on by itself only on CPUs with
# AVX-512 (VNNI/BF16) or AMX, so on an AVX2 CPU (many AMD EPYCs) native segments failed with
# "Default MaxPoolingOp only supports NHWC". oneDNN runs on any x86-64 CPU with AVX2.
# With oneDNN on, TensorFlow's CPU tensors come from a pool that never gives memory back: the
# checkpoint read and Grappler's constants of a conversion stayed resident (figures in
# docs/memory.md). The system allocator returns it, at the same speed. TensorFlow reads both
# variables at its start; a value the user set is kept.
TENSORFLOW_ENVIRONMENT = {"TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1"}
if platform.machine().lower() in ("x86_64", "amd64"):
    TENSORFLOW_ENVIRONMENT["TF_ENABLE_ONEDNN_OPTS"] = "1"


def before_tensorflow_import() -> None:
    """The workbench's settings for TensorFlow, into the environment it reads them from."""
    for name, value in TENSORFLOW_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


_after_import: list[Callable[[], None]] = []


def tensorflow_imported() -> bool:
    return hasattr(sys.modules.get("tensorflow"), "__version__")  # set once its import ends


def after_tensorflow_import(callback: Callable[[], None]) -> None:
    """Runs `callback` once TensorFlow is imported, by whichever route (now, if it is)."""
    if tensorflow_imported():
        callback()
    else:
        _after_import.append(callback)


def run_after_import_callbacks() -> None:
    """What `after_tensorflow_import` deferred: `quiet`'s finder calls it once TensorFlow is
    imported, the lazy handle too (for an import the finder did not see)."""
    while _after_import:
        _after_import.pop(0)()


class LazyModule(ModuleType):
    """A module imported at its first attribute access."""

    def __init__(self, name: str, before_import: Callable[[], None] | None = None):
        super().__init__(name)
        self._module: ModuleType | None = None
        self._before_import = before_import

    def _load(self) -> ModuleType:
        if self._module is None:
            if self._before_import is not None:
                self._before_import()
            self._module = importlib.import_module(self.__name__)
            if self.__name__ == "tensorflow":
                run_after_import_callbacks()
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._load())


tf: Any = LazyModule("tensorflow", before_tensorflow_import)
ort: Any = LazyModule("onnxruntime")
