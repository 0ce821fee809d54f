"""Column names in words, with their units: what every table the app shows reads as headers."""

import ast
import re
from pathlib import Path

import pytest

from workbench.words import column_label, counted, has_snake_case


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


@pytest.mark.parametrize(("count", "noun", "text"), [
    (1, "engine", "1 engine"), (3, "engine", "3 engines"), (0, "kernel", "0 kernels"),
    (2, "box", "2 boxes"),
])
def test_counts_agree_in_number(count: int, noun: str, text: str) -> None:
    assert counted(count, noun, "boxes" if noun == "box" else "") == text


def test_no_message_says_noun_s() -> None:
    """Every text the package writes counts with `counted` ("1 engine", "3 engines"), never
    "engine(s)": a scan of its string literals, f-strings' text included."""
    package = Path(__file__).resolve().parent.parent / "workbench"
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        found += [f"{path.relative_to(package)}:{node.lineno}: {node.value!r}"
                  for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and id(node) not in docstrings
                  and re.search(r"[A-Za-z]\((?:s|es)\)", node.value)]
    assert not found, found
