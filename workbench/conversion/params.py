"""Conversion parameters: TF-TRT's knobs plus its environment variables, valid once built.

Error texts follow TF-TRT's `trt_convert.py` where it had one; the checks it lacked (negative
workspace, zero cached engines, a non-integer engine limit) get messages in the same style.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from workbench import environment
from workbench.errors import ConversionParamsError

PRECISION_MODES = ("FP32", "FP16", "INT8")
PROFILE_STRATEGIES = ("Range", "Optimal", "Range+Optimal", "ImplicitBatchModeCompatible")
# TF 2.16/2.17 linked TensorRT 8.6, where TF-TRT's default workspace is sys.maxsize - 512.
DEFAULT_MAX_WORKSPACE_SIZE_BYTES = sys.maxsize - 512
DEFAULT_MAX_ENGINES = 20  # TF_TRT_MAX_ALLOWED_ENGINES's default


@dataclass(frozen=True)
class ConversionParams:
    """Everything that decides a conversion's outcome, TF-TRT's defaults included."""

    precision_mode: str = "FP32"
    minimum_segment_size: int = 3
    use_dynamic_shape: bool = False
    dynamic_shape_profile_strategy: str | None = None
    denylist: tuple[str, ...] = ()
    max_engines: int = DEFAULT_MAX_ENGINES
    maximum_cached_engines: int = 1
    max_workspace_size_bytes: int = DEFAULT_MAX_WORKSPACE_SIZE_BYTES
    use_calibration: bool = True
    allow_build_at_runtime: bool = True

    def __post_init__(self) -> None:
        """Checks every value and keeps its canonical form (upper-case precision, sorted
        denylist, ...): a `ConversionParams` is valid once built, so nothing checks it again."""
        canonical = {
            "precision_mode": check_precision_mode(self.precision_mode),
            "minimum_segment_size": check_minimum_segment_size(self.minimum_segment_size),
            "dynamic_shape_profile_strategy": _strategy_for(self),
            "denylist": tuple(sorted({op.strip() for op in self.denylist if op.strip()})),
            "max_engines": _check_int("max_engines", self.max_engines),
            "maximum_cached_engines": _check_at_least(
                "maximum_cached_engines", self.maximum_cached_engines, 1),
            "max_workspace_size_bytes": _check_at_least(
                "max_workspace_size_bytes", self.max_workspace_size_bytes, 0),
        }
        for name, value in canonical.items():
            object.__setattr__(self, name, value)  # frozen: set once, while being built

    @property
    def use_implicit_batch(self) -> bool:
        return not self.use_dynamic_shape

    @property
    def needs_calibration(self) -> bool:
        return self.precision_mode.upper() == "INT8" and self.use_calibration

    def to_json(self) -> dict[str, Any]:
        """The `params` object of the CLI's JSON (DESIGN.md)."""
        return _params_json(self)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RecordedParams:
    """The parameters a TF-TRT converted model records in its engine ops' attributes, with the
    names of `ConversionParams`. None where the model does not tell: the threshold, denylist and
    engine limit leave no trace, and a value the engines disagree on is unknown."""

    precision_mode: str | None = None
    minimum_segment_size: int | None = None
    use_dynamic_shape: bool | None = None
    dynamic_shape_profile_strategy: str | None = None
    denylist: tuple[str, ...] | None = None
    max_engines: int | None = None
    maximum_cached_engines: int | None = None
    max_workspace_size_bytes: int | None = None
    allow_build_at_runtime: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The `params` object of the CLI's JSON, unknown values as null."""
        return _params_json(self)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _params_json(params: ConversionParams | RecordedParams) -> dict[str, Any]:
    """DESIGN.md's `params` keys in their order; both parameter types share the names."""
    denylist = params.denylist
    return {
        "precision_mode": params.precision_mode,
        "minimum_segment_size": params.minimum_segment_size,
        "use_dynamic_shape": params.use_dynamic_shape,
        "dynamic_shape_profile_strategy": params.dynamic_shape_profile_strategy,
        "denylist": None if denylist is None else list(denylist),
        "max_engines": params.max_engines,
    }


def params_from_environment(**overrides: Any) -> ConversionParams:
    """Parameters with TF-TRT's environment variables applied, then `overrides` (non-None)."""
    values: dict[str, Any] = {
        "denylist": environment.OP_DENYLIST.read(),
        "max_engines": environment.MAX_ALLOWED_ENGINES.read(),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return ConversionParams(**values)


def with_environment(params: ConversionParams) -> ConversionParams:
    """`params` with the knobs TF-TRT read from its environment at every conversion."""
    return replace(params, denylist=environment.OP_DENYLIST.read(),
                   max_engines=environment.MAX_ALLOWED_ENGINES.read())



def check_precision_mode(value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in PRECISION_MODES:
        raise ConversionParamsError(
            f"precision mode '{value}' is not supported. It should be one of "
            f"{list(PRECISION_MODES)}"
        )
    return value.upper()


def check_minimum_segment_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (value <= 0 and value != -1):
        raise ConversionParamsError(
            "minimum segment size should be positive or -1 (to disable main graph "
            f"conversion), got {value!r}"
        )
    return value


def check_profile_strategy(value: Any) -> str:
    by_lower = {s.lower(): s for s in PROFILE_STRATEGIES}
    if not isinstance(value, str) or value.lower() not in by_lower:
        raise ConversionParamsError(
            f"profile_strategy '{value}' is not supported. It should be one of "
            f"{list(PROFILE_STRATEGIES)}"
        )
    return by_lower[value.lower()]


def _strategy_for(params: ConversionParams) -> str | None:
    """TF-TRT ignores the strategy in implicit-batch mode and defaults it to Range otherwise."""
    if params.dynamic_shape_profile_strategy is not None:
        strategy = check_profile_strategy(params.dynamic_shape_profile_strategy)
    else:
        strategy = "Range"
    return strategy if params.use_dynamic_shape else None


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversionParamsError(f"{name} must be an integer, got {value!r}")
    return value


def _check_at_least(name: str, value: Any, minimum: int) -> int:
    value = _check_int(name, value)
    if value < minimum:
        raise ConversionParamsError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_denylist(denylist: Sequence[str], model_ops: Collection[str],
                   known_ops: Collection[str]) -> None:
    """Raises `ConversionParamsError` for a denylisted op type the model does not hold (op
    types are case-sensitive: `Conv2d` denies nothing), naming the closest type it holds, and
    for one TF-TRT has no converter for (it is never converted anyway). TF-TRT itself took any
    name without a word, so a typo silently did nothing."""
    for op in denylist:
        if op in model_ops and op not in known_ops:
            raise ConversionParamsError(
                f"the denylist names op type {op!r}, which TF-TRT has no converter for: it "
                "is never converted anyway; leave it out")
    missing = [op for op in denylist if op not in model_ops]
    if not missing:
        return
    op = missing[0]
    close = [name for name in sorted(model_ops) if name.lower() == op.lower()] or \
        difflib.get_close_matches(op, sorted(model_ops), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    known = "" if op in known_ops else " (nor has TF-TRT a converter for it)"
    raise ConversionParamsError(
        f"the denylist names op type {op!r}, which the model does not hold{known}; {hint}"
        "op types are case-sensitive: give types the model holds (the report's op counts "
        "list them), or leave it out")
