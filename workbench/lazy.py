"""The heavy libraries, each one lazy handle said once: `from workbench.lazy import tf`.

Importing TensorFlow or ONNX Runtime takes seconds; `import workbench` and the CLI's `--help`
must not pay it. Modules name the library at the top through its handle; the import happens
at the handle's first attribute (inside `quiet`'s filter, which keeps TensorFlow's import-time
chatter off stderr).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """A module imported at its first attribute access."""

    def __init__(self, name: str):
        super().__init__(name)
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self.__name__)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._load())


tf: Any = LazyModule("tensorflow")
ort: Any = LazyModule("onnxruntime")
