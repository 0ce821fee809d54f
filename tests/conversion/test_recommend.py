"""minimum_segment_size recommendations: hand-made sweeps and a real model's sweep."""

from __future__ import annotations

import math

import pytest
from sweeps import result, tftrt_sweep

import sample_models
from workbench.conversion.params import ConversionParams
from workbench.conversion.recommend import Recommendation, recommend_minimum_segment_size
from workbench.conversion.session import ConversionSession


def test_three_segments_follow_torch_tensorrt_rules() -> None:
    sweep = tftrt_sweep([2, 5, 9], range(1, 13))
    rec = recommend_minimum_segment_size(sweep, current=3)
    # At 3 the engines are 5 and 9 nodes: mean 7. One engine from 6 to 9; 6 is nearest to 3.
    assert rec == Recommendation(6, 7, 3, rec.notes)
    assert set(rec.notes) == {"fewest_engines", "moderate", "current"}
    assert "1 engine, 22.50% of nodes converted [9/40]" in rec.notes["fewest_engines"]
    assert "(7.00)" in rec.notes["moderate"] and "1 engine," in rec.notes["moderate"]
    assert "2 engines, 35.00% of nodes converted [14/40]" in rec.notes["current"]
    assert "any value from 3 to 5 gives the same engines" in rec.notes["current"]
    lines = str(rec).splitlines()  # what a notebook's print shows: sentences, not a repr
    assert [line.split(":")[0] for line in lines] == ["fewest engines", "moderate", "current"]
    assert lines[1].startswith("moderate: 7. minimum_segment_size=7 is the mean")


def test_fewest_engines_plateau_takes_the_current_value_when_it_is_on_it() -> None:
    sweep = tftrt_sweep([30], range(1, 11))
    rec = recommend_minimum_segment_size(sweep, current=4)
    assert rec.fewest_engines == 4
    # The mean engine size (30) is the engine's own size, the cliff edge (31 drops it): the
    # moderate value moves down the plateau 1..30 to the current value.
    assert rec.moderate == 4
    assert "every value from 1 to 30 gives the same engines" in rec.notes["moderate"]


def test_moderate_is_never_the_cliff_edge() -> None:
    # ResNet-50: one engine of 503 effective nodes; 504 leaves nothing converted.
    sweep = tftrt_sweep([503], range(1, 505))
    rec = recommend_minimum_segment_size(sweep, current=3)
    assert (rec.fewest_engines, rec.moderate, rec.current) == (3, 3, 3)
    assert "which 504 would drop" in rec.notes["moderate"]
    assert "1 engine, " in rec.notes["moderate"]
    # Several engines: the mean (10) is the largest engine's size; 6..10 keep it alone.
    rec = recommend_minimum_segment_size(tftrt_sweep([5, 10, 15], range(1, 17)), current=2)
    assert rec.moderate == 6  # (5 + 10 + 15) / 3 = 10, an engine's size: 6..10 keep it


def test_fewest_engines_prefers_more_converted_nodes_then_the_smaller_value() -> None:
    sweep = [result(2, [4, 6]), result(4, [10]), result(6, [7]), result(8, [10]), result(9, [])]
    assert recommend_minimum_segment_size(sweep, current=6).fewest_engines == 4
    assert recommend_minimum_segment_size(sweep, current=9).fewest_engines == 8


def test_moderate_is_the_ceiling_of_the_mean_rounded_to_two_places() -> None:
    sweep = tftrt_sweep([3, 3, 4], range(1, 6))
    assert recommend_minimum_segment_size(sweep, current=3).moderate == math.ceil(10 / 3)
    # 1000 nodes over 3 engines: mean 333.33 -> 334.
    assert recommend_minimum_segment_size(tftrt_sweep([333, 333, 334], range(1, 4)), 1).moderate \
        == 334


def test_engine_limit_is_respected_in_the_sweep() -> None:
    # Max 2 engines: thresholds 1..3 keep the two 3-node segments, so they give 2 engines.
    sweep = tftrt_sweep([1, 3, 1, 3, 2], range(1, 5), max_engines=2)
    rec = recommend_minimum_segment_size(sweep, current=1)
    assert [len(r.engines) for r in sweep] == [2, 2, 2, 0]
    # The two engines are 3 nodes each (mean 3, the cliff edge): 1 to 3 give them.
    assert rec.fewest_engines == 1 and rec.moderate == 1


def test_without_engines_everything_stays_at_the_current_value() -> None:
    sweep = tftrt_sweep([0, 1], range(2, 6))
    rec = recommend_minimum_segment_size(sweep, current=3)
    assert (rec.fewest_engines, rec.moderate, rec.current) == (3, 3, 3)
    assert "no minimum_segment_size in the sweep creates an engine" in rec.notes["current"]
    assert recommend_minimum_segment_size([], current=5).moderate == 5


def test_disabled_main_graph_still_gets_recommendations() -> None:
    sweep = tftrt_sweep([2, 6], range(1, 8))
    rec = recommend_minimum_segment_size([result(-1, []), *sweep], current=-1)
    assert rec.current == -1 and rec.fewest_engines == 3
    assert rec.moderate == 4  # mean of the engines at the smallest threshold (2 and 6)
    assert "leaves the main graph unconverted" in rec.notes["current"]


def test_current_value_outside_the_sweep() -> None:
    rec = recommend_minimum_segment_size(tftrt_sweep([5, 8], range(1, 5)), current=7)
    assert "not in the sweep" in rec.notes["current"]
    assert rec.moderate == 7  # from the smallest threshold's engines: (5 + 8) / 2 -> 7


@pytest.mark.slow
@pytest.mark.newest_stack(reason="TF <= 2.17 writes tiny_bert's GELU with Erf, which converts "
                          "(2.21 with Erfc, rejected): other engines than these "
                          "(47% converted at 3, not 43%)")
def test_tiny_bert_sweep() -> None:
    session = ConversionSession.open(sample_models.build("tiny_bert"))
    sweep = session.sweep(ConversionParams(), range(1, 65))
    rec = recommend_minimum_segment_size(sweep, current=3)
    at = {r.params.minimum_segment_size: r for r in sweep}
    sizes = sorted(e.effective_size for e in at[3].engines)
    # Implicit batch cuts the encoder into small pieces: 13 engines, five of them 3 nodes.
    assert sizes == [3, 3, 3, 3, 3, 4, 4, 5, 13, 13, 13, 13, 13]
    assert rec.moderate == math.ceil(sum(sizes) / len(sizes)) == 8
    # The five 13-node engines alone survive from 6 to 13; 6 is the value nearest to 3.
    assert [len(at[t].engines) for t in (5, 6, 13, 14)] == [6, 5, 5, 0]
    assert rec.fewest_engines == 6 and rec.current == 3
    moderate = at[8]
    assert f"{len(moderate.engines)} engines, {moderate.percent_converted:.2f}%" in (
        rec.notes["moderate"]
    )
    assert f"{at[3].percent_converted:.2f}%" in rec.notes["current"]
