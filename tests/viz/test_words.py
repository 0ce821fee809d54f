"""Column names in words, with their units: what every table the app shows reads as headers."""

import pytest

from workbench.viz.words import column_label, has_snake_case


@pytest.mark.parametrize(("name", "label"), [
    ("converted_ms_b1", "converted (ms, batch 1)"),
    ("tensorrt_plan_bytes", "TensorRT plan size (bytes)"),
    ("speedup", "speed-up (×)"),  # a ratio says so, as a time says ms
    ("speedup_b1", "speed-up (×, batch 1)"),
    ("percent_converted", "% converted"),
    ("Conv2D", "Conv2D"),  # an op's or an engine's own name stays
])
def test_column_names_read_as_words_with_their_unit(name: str, label: str) -> None:
    assert column_label(name) == label
    assert not has_snake_case(column_label(name))
