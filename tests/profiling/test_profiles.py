"""TF-TRT's profile strategies reproduce the user guide's table exactly."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.engines.profiles import (
    Profile,
    optimization_profiles,
    profile_table,
    shapes_from_input_fn,
)
from workbench.errors import ConversionParamsError, WorkbenchError

GUIDE_SHAPES = [[(8, 128)], [(4, 384)]]


def test_user_guide_profile_table() -> None:
    table = profile_table(GUIDE_SHAPES)
    assert table.to_dict("records") == [
        {"input shapes": "[8, 128], [4, 384]", "strategy": "Range",
         "profiles": "[4-8, 128-384]"},
        {"input shapes": "[8, 128], [4, 384]", "strategy": "Optimal",
         "profiles": "[8, 128], [4, 384]"},
        {"input shapes": "[8, 128], [4, 384]", "strategy": "Range+Optimal",
         "profiles": "[8, 128], [4, 384], [4-8, 128-384]"},
        {"input shapes": "[8, 128], [4, 384]", "strategy": "ImplicitBatchModeCompatible",
         "profiles": "[1-8, 128], [1-4, 384]"},
    ]


def test_range_uses_max_as_opt_and_strategies_are_case_insensitive() -> None:
    (profile,) = optimization_profiles(GUIDE_SHAPES, "range")
    assert profile == Profile(((4, 128),), ((8, 384),), ((8, 384),))
    assert profile.accepts(((5, 200),)) and not profile.accepts(((9, 128),))


def test_repeated_shapes_collapse_and_multi_input_sets() -> None:
    sets = [[(1, 128)] * 3, [(1, 128)] * 3, [(1, 384)] * 3]
    profiles = optimization_profiles(sets, "Optimal")
    assert [p.describe() for p in profiles] == ["[1, 128]; [1, 128]; [1, 128]",
                                                "[1, 384]; [1, 384]; [1, 384]"]


def test_shapes_from_input_fn() -> None:
    def input_fn():
        yield [np.zeros((2, 16), np.int32), np.zeros((2, 16), np.int32)]
        yield {"a": np.zeros((4, 32)), "b": np.zeros((4, 32))}

    assert shapes_from_input_fn(input_fn) == [((2, 16), (2, 16)), ((4, 32), (4, 32))]


def test_errors() -> None:
    with pytest.raises(WorkbenchError, match="input_fn yielded nothing"):
        shapes_from_input_fn(lambda: iter([]))
    with pytest.raises(WorkbenchError, match="disagree on the number of inputs or their ranks"):
        optimization_profiles([[(8, 128)], [(8, 128, 3)]], "Range")
    with pytest.raises(ConversionParamsError, match="profile_strategy 'Fast' is not supported"):
        optimization_profiles(GUIDE_SHAPES, "Fast")
