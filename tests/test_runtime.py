"""The converted model at run time: engine cache, engine selection, native fallback, build,
save and load (TF-TRT's TRTEngineOp kernel and TrtGraphConverterV2.build/save)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from workbench.engines.engine_op import (
    EngineOp,
    EngineOpConfig,
    NativeExecutionDisallowedError,
    compatible_key,
)
from workbench.engines.profiles import optimization_profiles

# --- a tiny segment, y = 2x + 1, with an honest numpy engine ---------------------------------


class AffineEngine:
    """Implements the Engine protocol for the segment y = 2x + 1 and checks its own limits."""

    backend, device = "numpy", "cpu"

    def __init__(self, name: str, spec: dict[str, Any]):
        self.name, self.spec, self.precision = name, spec, spec["precision"]

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        (x,) = inputs
        batch = self.spec["max_batch_size"]
        if batch is not None and x.shape[0] > batch:
            raise RuntimeError(f"batch {x.shape[0]} exceeds the engine's {batch}")
        return [2 * x + 1]

    def serialize(self) -> bytes:
        return repr(self.spec).encode()


def native_affine(inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [inputs[0] * 2.0 + 1.0]


def make_op(fail: bool = False, **config: Any) -> tuple[EngineOp, list[dict[str, Any]]]:
    builds: list[dict[str, Any]] = []

    def build_engine(**spec: Any) -> AffineEngine:
        builds.append(spec)
        if fail:
            raise RuntimeError("forced build failure (like TF_TRT_ABORT_CUDA_ENGINE_BUILD)")
        return AffineEngine("TRTEngineOp_000_000", spec)

    op = EngineOp("TRTEngineOp_000_000", build_engine, native_affine, ["float32"],
                  EngineOpConfig(**config))
    return op, builds


def ones(*shape: int) -> np.ndarray:
    return np.ones(shape, np.float32)


def test_implicit_batch_engine_serves_smaller_batches_with_equal_other_dims() -> None:
    op, builds = make_op(maximum_cached_engines=3)
    np.testing.assert_array_equal(op(ones(8, 4))[0], 3 * ones(8, 4))
    op(ones(4, 4))
    op(ones(1, 4))
    assert [b["max_batch_size"] for b in builds] == [8]
    op(ones(16, 4))  # larger batch: a new engine
    op(ones(8, 5))  # other dim differs: a new engine
    assert [b["max_batch_size"] for b in builds] == [8, 16, 8]
    assert op.stats.engine_calls == 5 and op.stats.native_calls == 0


def test_compatible_engine_is_the_smallest_batch_that_fits() -> None:
    keys = [((16, 4),), ((8, 4),), ((32, 4),)]
    assert compatible_key(keys, ((5, 4),)) == ((8, 4),)
    assert compatible_key(keys, ((9, 4),)) == ((16, 4),)
    assert compatible_key(keys, ((33, 4),)) is None
    assert compatible_key(keys, ((2, 5),)) is None


def test_engine_cache_is_lru_bounded_by_maximum_cached_engines() -> None:
    op, builds = make_op(maximum_cached_engines=2)
    op(ones(1, 4))
    op(ones(1, 5))
    op(ones(1, 4))  # touch [1,4]: [1,5] becomes least recently used
    op(ones(1, 6))  # evicts [1,5]
    assert op.cache.keys() == [((1, 4),), ((1, 6),)]
    op(ones(1, 5))  # rebuilt, evicting [1,4]
    assert len(builds) == 4
    assert op.cache.keys() == [((1, 6),), ((1, 5),)]
    assert op.stats.native_calls == 0


@pytest.mark.parametrize("strategy, engine_shapes, native_shapes", [
    ("Range", [(8, 128), (4, 384), (6, 200)], [(9, 128), (8, 385)]),
    ("Optimal", [(8, 128), (4, 384)], [(4, 128), (8, 384)]),
    ("Range+Optimal", [(8, 128), (4, 384), (6, 200)], [(2, 100)]),
    ("ImplicitBatchModeCompatible", [(1, 128), (8, 128), (3, 384)], [(6, 384), (4, 200)]),
])
def test_profile_selection_per_strategy(strategy: str, engine_shapes: list, native_shapes: list
                                        ) -> None:
    op, builds = make_op(use_implicit_batch=False)
    op.profiles = tuple(optimization_profiles([[(8, 128)], [(4, 384)]], strategy))
    for shape in engine_shapes:
        np.testing.assert_array_equal(op(ones(*shape))[0], 3 * ones(*shape))
    assert op.stats.engine_calls == len(engine_shapes)
    for shape in native_shapes:
        np.testing.assert_array_equal(op(ones(*shape))[0], 3 * ones(*shape))
    assert op.stats.native_calls == len(native_shapes)
    assert all("no optimization profile" in run.reason for run in op.native_runs)
    assert len(builds) == 1 and builds[0]["profiles"] == op.profiles  # one engine, all profiles


def test_first_accepting_profile_is_chosen() -> None:
    op, _ = make_op(use_implicit_batch=False)
    op.profiles = tuple(optimization_profiles([[(8, 128)], [(4, 384)]], "Range+Optimal"))
    assert op.profile_index(((8, 128),)) == 0
    assert op.profile_index(((4, 384),)) == 1
    assert op.profile_index(((5, 300),)) == 2
    assert op.profile_index(((9, 300),)) is None


def test_without_build_the_first_input_makes_a_min_equals_max_profile() -> None:
    op, builds = make_op(use_implicit_batch=False)
    op(ones(2, 7))
    assert op.profiles[0].describe() == "[2, 7]"
    op(ones(3, 7))
    assert op.stats.native_calls == 1 and len(builds) == 1


def test_failed_build_falls_back_to_native_with_its_reason_and_is_not_retried() -> None:
    op, builds = make_op(fail=True)
    for _ in range(3):
        np.testing.assert_array_equal(op(ones(2, 4))[0], 3 * ones(2, 4))
    assert len(builds) == 1 and op.stats.failed_builds == 1
    assert op.stats.native_calls == 3
    (reason,) = op.fallback_reasons
    assert "engine creation for TRTEngineOp_000_000 failed: forced build failure" in reason


def test_engine_that_fails_to_run_falls_back_to_native() -> None:
    op, _ = make_op()
    op.add_engine(((2, 4),), AffineEngine("e", {"precision": "FP32", "max_batch_size": 1}))
    np.testing.assert_array_equal(op(ones(2, 4))[0], 3 * ones(2, 4))
    assert "failed to run: batch 2 exceeds" in op.native_runs[0].reason


def test_native_execution_can_be_disallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION", "false")
    op, _ = make_op(fail=True)
    with pytest.raises(NativeExecutionDisallowedError,
                       match="User disallowed engine native segment execution.*forced build"):
        op(ones(2, 4))


def test_allow_build_at_runtime_false_runs_natively_without_building() -> None:
    op, builds = make_op(allow_build_at_runtime=False)
    op(ones(2, 4))
    op(ones(2, 4))
    assert builds == [] and op.stats.native_calls == 2
    assert "allow_build_at_runtime=False" in op.native_runs[0].reason
    op.add_engine(((4, 4),), AffineEngine("e", {"precision": "FP32", "max_batch_size": 4}))
    op(ones(3, 4))  # a loaded engine still serves what it can
    assert op.stats.engine_calls == 1


def test_collecting_shapes_and_calibration_batches_runs_natively() -> None:
    op, builds = make_op()
    op.collected_shapes, op.collected_batches = [], []
    op(ones(2, 4))
    op(ones(3, 4))
    assert op.collected_shapes == [((2, 4),), ((3, 4),)]
    assert [b[0].shape for b in op.collected_batches] == [(2, 4), (3, 4)]
    assert builds == [] and op.stats.native_calls == 2
