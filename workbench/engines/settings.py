"""What engines are built and run with: one conversion's settings, and one build's request.

`EngineSettings` is the engine part of `ConversionParams` (TF-TRT's TrtConversionParams at run
time), made once with `from_params` and handed to the engine ops, the backends and the saved
model's manifest (its field names are ConversionParams', so the manifest keeps its keys).
`BuildRequest` holds only what differs between two builds of one conversion: the implicit
batch size or the optimization profiles, and the INT8 calibration batches.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from workbench.conversion.params import ConversionParams, check_precision_mode
from workbench.engines.profiles import Profile
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class EngineSettings:
    """The settings every engine of a conversion shares."""

    precision_mode: str = "FP32"
    use_dynamic_shape: bool = False
    dynamic_shape_profile_strategy: str | None = None
    maximum_cached_engines: int = 1
    allow_build_at_runtime: bool = True
    max_workspace_size_bytes: int | None = None
    use_calibration: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision_mode", check_precision_mode(self.precision_mode))

    @classmethod
    def from_params(cls, params: ConversionParams) -> EngineSettings:
        """The engine settings of a conversion's parameters."""
        return cls(**{f.name: getattr(params, f.name) for f in fields(cls)})

    @property
    def use_implicit_batch(self) -> bool:
        return not self.use_dynamic_shape

    def at_run_time(self, in_process: bool) -> EngineSettings:
        """The settings an engine op runs with. TF-TRT wrote `_allow_build_at_runtime` into
        the engine nodes only when saving: the converter's own function (build() included)
        always builds missing engines."""
        if self.allow_build_at_runtime or not in_process:
            return self
        return replace(self, allow_build_at_runtime=True)


@dataclass(frozen=True)
class BuildRequest:
    """What one engine is built for: an implicit batch size or optimization profiles (explicit
    batch), and INT8 calibration batches of the engine's inputs."""

    max_batch_size: int | None = None
    profiles: tuple[Profile, ...] = ()
    calibration_data: tuple[tuple[np.ndarray, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise WorkbenchError(f"max_batch_size must be >= 1, got {self.max_batch_size}")


NO_REQUEST = BuildRequest()  # a build for whatever shapes come (ONNX Runtime, the whole model)
