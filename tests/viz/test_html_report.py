"""The static HTML report: one offline page with TF-TRT's numbers, graphs and charts; its CLI."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

import pytest

import sample_models
from workbench.conversion.conversion_report import nonconversion_report
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.viz.html_report import html_report, write_html_report

SECTIONS = (
    "parameters", "result", "tf-trt-summary", "tf-trt-non-conversion-report", "charts",
    "converted-graph", "full-graph-by-engine", "nodes-outside-engines",
)


class _Page(HTMLParser):
    """Collects what the tests look at: elements with their attributes, and text by element."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []
        self.text: dict[str, list[str]] = {}
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag not in ("meta", "br", "img", "link", "input", "path", "polygon", "ellipse"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if self.open:
            self.text.setdefault(self.open[-1], []).append(data)
            if self.open[-1] == "script":
                self.scripts.append(data)

    def ids(self) -> set[str]:
        return {attrs["id"] for _tag, attrs in self.elements if attrs.get("id")}


@pytest.fixture(scope="module")
def tiny_session(tiny_saved_model: Path) -> ConversionSession:
    return ConversionSession.open(str(tiny_saved_model))


@pytest.fixture(scope="module")
def tiny_page(tiny_session: ConversionSession) -> tuple[str, _Page]:
    text = html_report(tiny_session, ConversionParams(minimum_segment_size=2))
    page = _Page()
    page.feed(text)
    return text, page


def test_the_page_is_self_contained(tiny_page) -> None:
    text, page = tiny_page
    assert text.startswith("<!DOCTYPE html>")
    for tag, attrs in page.elements:
        assert "src" not in attrs or tag not in ("script", "img", "iframe"), (tag, attrs)
        assert not (tag == "link" and attrs.get("href")), attrs
    # plotly.js is inlined exactly once, before the charts that call it.
    from plotly.offline import get_plotlyjs

    library = get_plotlyjs()
    assert text.count(library[:300]) == 1
    assert text.index(library[:300]) < text.index("Plotly.newPlot")
    assert "cdn." not in text.replace(library, "")


def test_the_page_has_every_section_graph_and_chart(tiny_page) -> None:
    text, page = tiny_page
    ids = page.ids()
    assert set(SECTIONS) <= ids
    assert {"graph-converted", "graph-full", "chart-sweep", "chart-engine-sizes"} <= ids
    svgs = [attrs for tag, attrs in page.elements if tag == "svg"]
    assert len(svgs) >= 2
    assert "<?xml" not in text and "<!DOCTYPE svg" not in text  # dot's prologue stripped
    assert text.count("Plotly.newPlot") >= 2


def test_the_page_shows_tftrt_numbers(tiny_session, tiny_page) -> None:
    text, page = tiny_page
    result = tiny_session.convert(ConversionParams(minimum_segment_size=2))
    pre = "".join(page.text["pre"])
    footer = f"[*] % of OPs Converted: {result.percent_converted:.2f}%"
    assert f"[*] Total number of TensorRT engines: {len(result.engines)}" in pre
    assert f"{footer} [{result.converted_nodes}/{result.total_nodes}]" in pre
    # The detailed non-conversion report, byte for byte (up to its surrounding new lines).
    assert nonconversion_report(result.nonconversion, True).strip("\n") in pre
    cells = page.text["td"]
    for op, reasons in result.nonconversion.items():
        assert op in cells
        assert all(reason in cells for reason in reasons)
    assert "minimum_segment_size" in cells and "2" in cells
    assert f"{result.percent_converted:.2f}%" in page.text["div"]
    title = page.text["title"][0]  # the page's; SVG nodes have titles too
    assert title == f"TF-TRT Workbench report: {Path(result.model).name}"


def test_the_header_names_the_tensorflow_that_prepared_the_graph(tiny_page) -> None:
    import tensorflow as tf

    _text, page = tiny_page
    line = next(p for p in page.text["p"] if "traced and optimized" in p)
    assert f"TensorFlow {tf.__version__}" in line
    # Only TensorFlow <= 2.17 made the graphs TF-TRT saw; newer ones may differ.
    tftrt_era = tuple(int(x) for x in tf.__version__.split(".")[:2]) <= (2, 17)
    assert ("a release TF-TRT ran on" in line) == tftrt_era


def test_table_cells_are_escaped() -> None:
    from workbench.viz.html_report import _table

    html = _table(["op"], [["<script>x</script>"]])
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html


def test_write_html_report_writes_the_page(tiny_session, tmp_path: Path) -> None:
    target = write_html_report(tiny_session, ConversionParams(), tmp_path / "r.html")
    assert target == tmp_path / "r.html"
    assert target.read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temp file left


def test_write_html_report_refuses_a_missing_directory(tiny_session, tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match="no directory"):
        write_html_report(tiny_session, ConversionParams(), tmp_path / "missing" / "r.html")


@pytest.mark.slow
def test_detector_report_has_recommendations_and_blocking_ops(tmp_path: Path) -> None:

    session = ConversionSession.open(sample_models.build("detector"))
    text = html_report(session, ConversionParams())
    page = _Page()
    page.feed(text)
    assert "chart-blocking-ops" in page.ids()
    items = " ".join(page.text["li"])
    assert "minimum_segment_size=" in items and "Fewest engines" in "".join(page.text["b"])
    cells = page.text["td"]
    assert "CombinedNonMaxSuppression" in cells and "ResizeBilinear" in cells


def test_the_page_says_which_knobs_change_nothing_here(tiny_session) -> None:
    from workbench.viz.view import build_view

    view = build_view(tiny_session, ConversionParams(precision_mode="INT8"))
    page = html_report(tiny_session, ConversionParams(precision_mode="INT8"))
    assert view.knob_notes and "INT8 needs calibration data" in " ".join(view.knob_notes)
    for note in view.knob_notes:
        assert f"<li>{html.escape(note)}</li>" in page
