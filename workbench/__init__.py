"""TF-TRT Workbench: TF-TRT's conversion, engines and reports on any machine.

`workbench.load(dir)` reloads a converted model saved by `TrtGraphConverterV2.save()` with its
engines; it is imported on first use so `import workbench` stays light.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "load":
        from workbench.engines.saving import load_converted

        return load_converted
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
